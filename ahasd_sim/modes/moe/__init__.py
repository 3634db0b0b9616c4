"""MoE expert offload on a GPU server (mode ``moe_offload``)."""
from . import offload  # noqa: F401
