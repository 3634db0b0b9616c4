"""Hardware models: declarative config sections + analytic timing/energy/area models.

Importing this package registers the config sections ``memory`` (LPDDR5/5X), ``npu``,
``pim`` (with ``pim.aau`` and ``pim.gts``), ``h2d``, ``network``, ``cloud``, ``gpu``, ``area`` and ``thermal``.
"""
from .area import AreaConfig, area_table
from .cloud import CloudConfig, CloudServer
from .cost import OpCost, op_kind, par, seq
from .energy import EnergyLedger
from .gpu import Gpu, GpuConfig
from .link import H2dConfig, Link
from .network import NetworkConfig, NetworkLink, PacketTrace
from .lpddr5 import Lpddr5Memory, MemoryConfig
from .npu import OPS_PER_MAC, Npu, NpuConfig
from .pim import Aau, AauConfig, Gts, GtsConfig, PimConfig, PimMemory, RankPartition
from .platform import Platform
from .thermal import Governor, RcNetwork, ThermalConfig

__all__ = [
    "Aau", "AauConfig", "CloudConfig", "CloudServer", "AreaConfig", "EnergyLedger", "Gpu", "GpuConfig", "Gts", "GtsConfig", "H2dConfig",
    "Link", "Lpddr5Memory", "MemoryConfig", "NetworkConfig", "NetworkLink", "Npu", "PacketTrace", "NpuConfig", "OPS_PER_MAC",
    "OpCost", "PimConfig", "PimMemory", "Platform", "RankPartition", "Governor", "RcNetwork", "ThermalConfig", "area_table", "op_kind", "par", "seq",
]
