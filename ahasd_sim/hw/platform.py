"""Platform: the hardware units of one resolved config, built and cross-checked.

``Platform.build(cfg)`` constructs the enabled units from a :class:`~ahasd_sim.config.SimConfig`
(sections ``memory``, ``npu``, ``pim`` (+``aau``, ``gts``), ``h2d``, ``network``, ``gpu``)
and raises :class:`~ahasd_sim.config.ConfigError` for hardware that cannot exist.

Helpers route an operator to the unit that runs it:

* :meth:`Platform.npu_op_cost` -- NPU at the LPDDR5 effective bandwidth;
* :meth:`Platform.pim_op_cost` -- a PIM-resident model: matrix ops on the PIM GEMV
  engines of its ranks, nonlinear/reduction ops on the AAUs of those ranks, or, with the
  AAU disabled, offloaded to the host (NPU vector unit, else the GPU): operands cross the
  external bus both ways, plus a host synchronisation round trip;
* :meth:`Platform.forward_cost` -- a whole forward pass on one unit.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from ..config.errors import ConfigError
from .cost import ELEMENTWISE_KINDS, OpCost, op_kind, seq
from .gpu import Gpu
from .link import Link
from .network import NetworkLink, TraceFormatError
from .lpddr5 import Lpddr5Memory
from .npu import Npu
from .pim import Aau, Gts, PimMemory  # noqa: F401 (re-exported types)


class Platform:
    """The units of one platform (``None`` where the platform lacks the device).

    ``aau`` and ``gts`` exist whenever ``pim`` does; check ``aau.enabled`` / ``gts.enabled``."""

    def __init__(self, *, memory: Lpddr5Memory, npu: Npu | None = None, pim: PimMemory | None = None,
                 aau: Aau | None = None, gts: Gts | None = None, h2d: Link | None = None,
                 network: NetworkLink | None = None, gpu: Gpu | None = None, source_file: str = ""):
        self.memory = memory
        self.npu = npu
        self.pim = pim
        self.aau = aau
        self.gts = gts
        self.h2d = h2d
        self.network = network
        self.gpu = gpu
        self.source_file = source_file

    # ------------------------------------------------------------------ build
    @classmethod
    def build(cls, cfg) -> "Platform":
        src = getattr(cfg, "source_file", "") or ""
        memory = Lpddr5Memory(cfg.memory)
        npu = Npu(cfg.npu, memory) if cfg.npu.enabled else None
        gpu = Gpu(cfg.gpu, memory) if cfg.gpu.enabled else None
        if npu is None and gpu is None:
            raise ConfigError(src, "npu.enabled", "the platform has no host compute device: enable npu or gpu")
        pim = aau = gts = None
        if cfg.pim.enabled:
            pim = PimMemory(cfg.pim, memory)
            if pim.capacity_bytes > memory.capacity_bytes:
                raise ConfigError(src, "pim.ranks",
                                  f"{cfg.pim.ranks} ranks x {cfg.pim.rank_capacity_gib:g} GiB = "
                                  f"{pim.capacity_bytes / 2**30:g} GiB of PIM exceed memory.capacity_gib "
                                  f"{cfg.memory.capacity_gib:g} GiB (the PIM ranks are the main memory)")
            if pim.model_rank_capacity_bytes <= 0:
                raise ConfigError(src, "memory.reserved_gib",
                                  f"{cfg.memory.reserved_gib:g} GiB held by the OS and apps leave no room for "
                                  f"models in the {pim.capacity_bytes / 2**30:g} GiB of PIM ranks")
            aau = pim.aau            # present even when disabled: check aau.enabled
            gts = pim.gts
        h2d = Link(cfg.h2d, "h2d") if cfg.h2d.enabled else None
        network = None
        if cfg.network.enabled:
            try:
                network = NetworkLink(cfg.network, Path(src).parent if src else None)
            except TraceFormatError as exc:
                # blame where the trace key was set (--set or the file that set it)
                where = cfg.source_of(exc.key) if hasattr(cfg, "source_of") else src
                raise ConfigError(where, exc.key, str(exc)) from None
        return cls(memory=memory, npu=npu, pim=pim, aau=aau, gts=gts, h2d=h2d, network=network, gpu=gpu,
                   source_file=src)

    # ------------------------------------------------------------------ devices
    def devices(self) -> dict[str, float]:
        """Device name -> static power (W) of every unit present (for static-energy charging)."""
        out = {self.memory.device: self.memory.static_power_w}
        aau = self.aau if (self.aau is not None and self.aau.enabled) else None
        for unit in (self.npu, self.pim, aau, self.gts, self.gpu, self.h2d, self.network):
            if unit is not None:
                out[unit.device] = unit.static_power_w
        if self.npu is not None and self.npu.cfg.soc_rest_power_w > 0:
            out["soc"] = self.npu.cfg.soc_rest_power_w      # CPU runtime + fabric while decoding
        return out

    def device_names(self) -> list[str]:
        return list(self.devices())

    def static_power_w(self) -> dict[str, float]:
        """Alias of :meth:`devices`: device name -> static power (W)."""
        return self.devices()

    def has(self, device: str) -> bool:
        """Whether the platform has ``device`` ("npu", "pim", "aau", "gts", "gpu", "h2d", "network", "lpddr5")."""
        return device in self.devices()

    def busy_device_names(self) -> list[str]:
        """Devices that execute tasks (their busy time is reported)."""
        return [u.device for u in (self.npu, self.pim, self.gpu, self.h2d, self.network) if u is not None]

    def describe(self) -> dict:  # noqa: C901
        """Derived headline figures (JSON-serialisable) of the units present."""
        m = self.memory
        bw = m.bandwidth_breakdown
        out: dict = {"memory": {
            "standard": m.cfg.standard, "peak_bandwidth_gb_s": m.peak_bandwidth_bytes_s / 1e9,
            "effective_bandwidth_gb_s": m.effective_bandwidth_bytes_s / 1e9,
            "efficiency": {"column": bw.column_efficiency, "row": bw.row_efficiency,
                           "refresh": bw.refresh_efficiency, "controller": bw.controller_efficiency},
            "capacity_gib": m.cfg.capacity_gib, "background_power_w": m.background_power_w}}
        if self.npu is not None:
            out["npu"] = {"peak_tops": self.npu.peak_tops, "vector_tops": self.npu.vector_peak_ops_s / 1e12,
                          "static_power_w": self.npu.static_power_w}
        if self.pim is not None:
            p = self.pim
            out["pim"] = {"ranks": p.cfg.ranks, "capacity_gib": p.capacity_bytes / 2**30,
                          "total_tops": p.total_ops_s / 1e12, "rank_gops": p.rank_ops_s / 1e9,
                          "total_internal_bw_gb_s": p.total_internal_bw_bytes_s / 1e9,
                          "rank_internal_bw_gb_s": p.rank_internal_bw_bytes_s / 1e9,
                          "gops_scope": p.cfg.gops_scope, "bw_scope": p.cfg.bw_scope,
                          "preset": p.cfg.preset, "rates": p.rates_source,
                          "derived": {k: v for k, v in _pim_spec_describe(p.spec).items() if k != "preset"},
                          "partition_policy": p.cfg.partition_policy,
                          "aau": p.aau.enabled, "gts": p.gts.enabled,
                          "gts_switch_s": p.gts.switch_cost().duration_s}
        if self.gpu is not None:
            g = self.gpu
            out["gpu"] = {"name": g.cfg.name, "effective_tops": g.effective_ops_s / 1e12,
                          "effective_bandwidth_gb_s": g.effective_bandwidth_bytes_s / 1e9,
                          "usable_memory_gib": g.usable_memory_bytes / 2**30, "memory_source": g.cfg.memory_source}
        if self.h2d is not None:
            out["h2d"] = {"generation": self.h2d.cfg.generation, "effective_gb_s": self.h2d.cfg.effective_gb_s,
                          "latency_us": self.h2d.cfg.latency_us}
        if self.network is not None:
            n, link = self.network.cfg, self.network
            out["network"] = {"uplink_mbps": link.rate_bytes_s("up") * 8e-6, "downlink_mbps": link.rate_bytes_s("down") * 8e-6,
                              "uplink_trace": n.uplink_trace, "downlink_trace": n.downlink_trace, "rtt_ms": n.rtt_ms}
        return out

    @property
    def host(self):
        """The unit that runs host-side work (NPU if present, else the GPU)."""
        return self.npu if self.npu is not None else self.gpu

    # ------------------------------------------------------------------ routing
    def npu_op_cost(self, op: object, mem_bw_bytes_s: float | None = None) -> OpCost:
        if self.npu is None:
            raise ValueError("platform has no NPU")
        bw = self.memory.effective_bandwidth_bytes_s if mem_bw_bytes_s is None else mem_bw_bytes_s
        return self.npu.op_cost(op, bw)

    def host_op_cost(self, op: object) -> OpCost:
        if self.npu is not None:
            return self.npu_op_cost(op)
        return self.gpu.op_cost(op)

    def offload_cost(self, op: object) -> OpCost:
        """A PIM model's nonlinear op run on the host because the AAU is disabled:
        operands read out of PIM memory and results written back over the external bus
        (time at the LPDDR5 effective bandwidth, DRAM read+write energy), a host
        synchronisation round trip, and the host's own compute cost."""
        if self.pim is None:
            raise ValueError("platform has no PIM")
        nbytes = self.pim.offload_transfer_bytes(op)
        half = nbytes / 2.0
        mem = self.memory
        move = OpCost(self.pim.offload_roundtrip_s + mem.stream_time_s(nbytes),
                      {mem.device: mem.read_energy_j(half) + mem.write_energy_j(half)},
                      bus_bytes=nbytes)
        if self.npu is not None:
            move = move.with_energy(self.npu.device, nbytes * self.npu.cfg.dma_pj_per_byte * 1e-12)
        return seq(move, self.host_op_cost(op))

    def pim_op_cost(self, op: object, ranks: int) -> OpCost:
        """ONE occurrence of ``op`` of a model resident in ``ranks`` PIM ranks."""
        if self.pim is None:
            raise ValueError("platform has no PIM")
        if op_kind(op) in ELEMENTWISE_KINDS:
            if self.aau.enabled:
                return self.aau.op_cost(op, n_aau=ranks)
            return self.offload_cost(op)
        return self.pim.gemv_cost(op, ranks)

    def forward_cost(self, ops: Iterable[object], unit: str, ranks: int | None = None) -> OpCost:
        """Sequential cost of one forward pass (``layer_repeat`` applied) on ``unit``
        ("npu", "pim" with ``ranks``, or "gpu")."""
        ops = tuple(ops)
        if unit == "npu":
            return seq(*(self.npu_op_cost(op).repeat(int(op.layer_repeat)) for op in ops))
        if unit == "pim":
            if ranks is None:
                raise ValueError("forward_cost(unit='pim') needs ranks")
            return seq(*(self.pim_op_cost(op, ranks).repeat(int(op.layer_repeat)) for op in ops))
        if unit == "gpu":
            if self.gpu is None:
                raise ValueError("platform has no GPU")
            return self.gpu.forward_cost(ops)
        raise ValueError(f"unit must be npu, pim or gpu, got {unit!r}")


def _pim_spec_describe(spec) -> dict:
    from .pim_spec import describe
    return describe(spec)
