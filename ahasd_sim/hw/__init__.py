"""Hardware models: declarative config sections + analytic timing/energy/area models.

Importing this package registers the config sections ``memory`` (LPDDR5/5X), ``npu``,
``pim`` (with ``pim.aau`` and ``pim.gts``), ``h2d``, ``network``, ``gpu`` and ``area``.
"""
from .area import AreaConfig, area_table
from .cost import OpCost, op_kind, par, seq
from .energy import EnergyLedger
from .gpu import Gpu, GpuConfig
from .link import H2dConfig, Link, NetworkConfig, NetworkLink
from .lpddr5 import Lpddr5Memory, MemoryConfig
from .npu import OPS_PER_MAC, Npu, NpuConfig
from .pim import Aau, AauConfig, Gts, GtsConfig, PimConfig, PimMemory, RankPartition
from .platform import Platform

__all__ = [
    "Aau", "AauConfig", "AreaConfig", "EnergyLedger", "Gpu", "GpuConfig", "Gts", "GtsConfig", "H2dConfig",
    "Link", "Lpddr5Memory", "MemoryConfig", "NetworkConfig", "NetworkLink", "Npu", "NpuConfig", "OPS_PER_MAC",
    "OpCost", "PimConfig", "PimMemory", "Platform", "RankPartition", "area_table", "op_kind", "par", "seq",
]
