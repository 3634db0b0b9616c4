"""Execution modes by platform family (``soc``, ``mobile_cloud``, ``moe``) and their registry
``MODES``. Each family's ``__init__`` imports its modes, one line each (importing registers them)."""
from . import config  # noqa: F401  (registers the ahasd/operator_sync/baseline config sections)
from .base import MODES, Mode, RunContext, TaskCost, get_mode, register_mode
from . import soc  # noqa: F401,E402  (the mobile SoC modes: NPU, GPU, LPDDR5-PIM)
from . import mobile_cloud  # noqa: F401,E402  (phone + cellular link + cloud verifier)
from . import moe  # noqa: F401,E402  (MoE expert offload on a GPU server)

__all__ = ["MODES", "Mode", "RunContext", "TaskCost", "get_mode", "register_mode"]
