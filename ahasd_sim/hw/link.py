"""Host link: PCIe host-to-device (section ``h2d``). The mobile-cloud network is :mod:`.network`.

:class:`Link` is a SimPy component. Concurrent transfers share the link bandwidth
equally (processor-sharing fluid model): whenever a transfer starts or ends the bytes
left of every active transfer are brought up to date and the next completion is
rescheduled. Each transfer takes at least ``latency_us`` (launch + completion of a
small copy); the copy engine overlaps ``overlapped_us`` of that with the data, so a
transfer first pays a setup of ``latency_us - overlapped_us`` (no bandwidth used), then
moves its bytes. An isolated transfer therefore takes ``max(latency, setup + bytes /
bandwidth)``
(:meth:`Link.isolated_transfer_time_s`): the copy engine overlaps the rest of its fixed
cost with the transfer (measured on an H200 host, docs/validation.md: 4-256 KiB copies take 12 us
flat, 1-64 MiB copies take bytes / bandwidth + ~6 us).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section
from .cost import OpCost

# Theoretical x16 unidirectional bandwidth per PCIe generation (GB/s) [PCIe]
PCIE_X16_GB_S = {3: 15.75, 4: 31.5, 5: 63.0}


@config_section("h2d")
@dataclass
class H2dConfig:
    """Host-to-device PCIe link (GPU platforms streaming weights that do not fit)."""

    enabled: bool = param(False, doc="the platform has a host-to-device PCIe link")
    generation: int = param(4, doc="PCIe generation", choices=(3, 4, 5),
                            source="[PCIe] https://hpc-notes.pages.dev/reference/pcie")
    lanes: int = param(16, doc="PCIe lanes", choices=(1, 2, 4, 8, 16))
    effective_gb_s: float = param(25.0, doc="achieved H2D bandwidth (pinned memory)", unit="GB/s", gt=0,
                                  source="PCIe 4.0 x16 measured 25.1 GB/s pinned (A100), RTX 4090 22.5-23.9 "
                                  "[nvbw] NVIDIA/nvbandwidth#42, #24")
    latency_us: float = param(8.0, doc="minimum time of one transfer (async copy launch + completion)", unit="us",
                              ge=0, source="5-10 us per async copy (pinned) [nvbw]")
    overlapped_us: float = param(0.0, doc="part of latency_us that the copy engine overlaps with the data "
                                 "(0: none; a copy takes max(latency, latency - overlapped + bytes/bandwidth))",
                                 unit="us", ge=0, source="assumption: no overlap")
    back_to_back_setup_us: float | None = param(None, doc="fixed cost of a copy queued right behind another "
                                                "on the same stream (the copy engine pipelines the setup "
                                                "with the previous copy's data); null: the isolated setup "
                                                "latency_us - overlapped_us", unit="us", ge=0,
                                                source="assumption: no pipelining unless measured")
    dma_pj_per_byte: float = param(40.0, doc="link energy per byte (both PHYs + DMA)", unit="pJ/B", ge=0,
                                   source="assumption (grade C): ~5 pJ/bit PCIe Gen4/5 SerDes")
    static_power_w: float = param(0.0, doc="link idle power charged while the platform runs", unit="W", ge=0,
                                  source="assumption: idle link in low-power state, folded into host power")

    def validate(self) -> None:
        if self.overlapped_us > self.latency_us:
            raise ValueError(f"overlapped_us ({self.overlapped_us}) must be <= latency_us ({self.latency_us})")
        peak = PCIE_X16_GB_S[self.generation] * self.lanes / 16
        if self.effective_gb_s > peak:
            raise ValueError(f"effective_gb_s {self.effective_gb_s} exceeds PCIe Gen{self.generation} "
                             f"x{self.lanes} theoretical {peak:g} GB/s")


class _FluidPool:
    """Processor-sharing state of one link in one SimPy environment."""

    def __init__(self, env, bandwidth_bytes_s: float):
        self.env = env
        self.bw = bandwidth_bytes_s
        self.active: dict[int, list] = {}   # id -> [remaining bytes, event, total bytes]
        self.last = env.now
        self.version = 0
        self.next_id = 0

    def _advance(self) -> None:
        now = self.env.now
        if self.active:
            done = (now - self.last) * self.bw / len(self.active)
            for rec in self.active.values():
                rec[0] -= done
        self.last = now

    def join(self, nbytes: float):
        self._advance()
        ev = self.env.event()
        self.active[self.next_id] = [float(nbytes), ev, float(nbytes)]
        self.next_id += 1
        self._reschedule()
        return ev

    def _reschedule(self) -> None:
        self.version += 1
        if not self.active:
            return
        share = self.bw / len(self.active)
        delay = max(0.0, min(r[0] for r in self.active.values()) / share)
        self.env.process(self._timer(delay, self.version))

    def _timer(self, delay: float, version: int):
        yield self.env.timeout(delay)
        if version != self.version:
            return  # superseded by a later start/finish
        self._advance()
        first = min(self.active, key=lambda k: self.active[k][0])
        done = [k for k, r in self.active.items() if k == first or r[0] <= 1e-9 * r[2] + 1e-6]
        for k in done:
            self.active.pop(k)[1].succeed()
        self._reschedule()


class Link:
    """A bandwidth-shared link (PCIe H2D). Stateless across environments: the sharing
    state lives per SimPy environment."""

    def __init__(self, cfg: H2dConfig, name: str = "h2d"):
        self.cfg = cfg
        self.device = name
        self._pools: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.cfg.effective_gb_s * 1e9

    @property
    def latency_s(self) -> float:
        return self.cfg.latency_us * 1e-6

    @property
    def setup_s(self) -> float:
        """The non-overlapped part of the per-transfer latency."""
        return (self.cfg.latency_us - self.cfg.overlapped_us) * 1e-6

    @property
    def static_power_w(self) -> float:
        return self.cfg.static_power_w

    def isolated_transfer_time_s(self, nbytes: float) -> float:
        """max(latency, setup + bytes / bandwidth) (no other transfer in flight)."""
        return max(self.latency_s, self.setup_s + float(nbytes) / self.bandwidth_bytes_s)

    @property
    def back_to_back_setup_s(self) -> float:
        v = self.cfg.back_to_back_setup_us
        return self.setup_s if v is None else v * 1e-6

    def back_to_back_transfer_time_s(self, nbytes: float) -> float:
        """A copy that starts as the previous one on the stream ends: its setup overlaps that copy,
        so it adds max(latency, back_to_back_setup + bytes / bandwidth) -- the copy engine still
        takes at least ``latency`` per transfer (H200: 0.32 MB copies back to back 11.3 us each,
        4-256 KiB copies 12 us flat)."""
        return max(self.latency_s, self.back_to_back_setup_s + float(nbytes) / self.bandwidth_bytes_s)

    def burst_transfer_time_s(self, nbytes: float, n: int) -> float:
        """n copies of ``nbytes`` issued at once on one idle stream: the first isolated, the rest
        back to back (the analytic form the tests and the H200 validation check)."""
        if n <= 0:
            return 0.0
        return self.isolated_transfer_time_s(nbytes) + (n - 1) * self.back_to_back_transfer_time_s(nbytes)

    def transfer_energy_j(self, nbytes: float) -> float:
        return float(nbytes) * self.cfg.dma_pj_per_byte * 1e-12

    def isolated_transfer_cost(self, nbytes: float) -> OpCost:
        return OpCost(self.isolated_transfer_time_s(nbytes), {self.device: self.transfer_energy_j(nbytes)})

    def active_transfers(self, env) -> int:
        pool = self._pools.get(env)
        return len(pool.active) if pool else 0

    def transfer(self, env, nbytes: float):
        """SimPy process body: pay the setup, move ``nbytes`` sharing the bandwidth with every
        other transfer in flight, and end no earlier than ``latency`` after the start.
        Returns the :class:`OpCost` (use ``cost = yield env.process(link.transfer(env, n))``)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        start = env.now
        if self.setup_s > 0:
            yield env.timeout(self.setup_s)
        if nbytes > 0:
            pool = self._pools.get(env)
            if pool is None:
                pool = self._pools[env] = _FluidPool(env, self.bandwidth_bytes_s)
            yield pool.join(nbytes)
        left = start + self.latency_s - env.now
        if left > 0:
            yield env.timeout(left)
        return OpCost(env.now - start, {self.device: self.transfer_energy_j(nbytes)})
