"""Execution modes (one module each) and their registry ``MODES``."""
from . import config  # noqa: F401  (registers the ahasd/operator_sync/baseline config sections)
from .base import MODES, Mode, RunContext, TaskCost, get_mode, register_mode
from . import autoregressive, gpu_only, operator_sync, async_, ahasd  # noqa: F401,E401  (register modes)
from . import cloud_autoregressive, device_draft_cloud_verify, hybrid, device_only  # noqa: F401,E401  (mobile-cloud)
from . import moe_offload  # noqa: F401,E402  (MoE expert offload, issue 15)

__all__ = ["MODES", "Mode", "RunContext", "TaskCost", "get_mode", "register_mode"]
