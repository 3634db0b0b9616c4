"""LPDDR5 / LPDDR5X main memory: declarative spec (section ``memory``) and analytic model.

Every constant carries its unit (in the name) and its source. Timings are stored in
nanoseconds. The AHASD paper (Table 2) gives LPDDR5 timings in clock cycles without the
clock; following references.md#ahasd-platform we read them at **tCK = 0.625 ns**
(1.6 GHz = 6400 MT/s / 4): tRCD = tRP = 32 nCK = 20 ns, tRAS 64 nCK = 40 ns,
tRRD_L 8 nCK = 5 ns, tFAW 64 nCK = 40 ns, tRFC 560 nCK = 350 ns, tREFI 6240 nCK = 3.9 us,
tCCD_S 4 nCK = 2.5 ns, tCCD_L 6 nCK = 3.75 ns, tWR 24 nCK = 15 ns.

Effective bandwidth (:meth:`Lpddr5Memory.effective_bandwidth_bytes_s`) is derived for a
sequential read stream (weights, KV) interleaved over bank groups and banks:

* column efficiency: a BL16 burst of ``burst_bytes`` occupies the data bus for
  ``burst_bytes / (width/8 * data_rate)`` (2.5 ns at 6400 MT/s, x16); back-to-back bursts
  to different bank groups are spaced by tCCD_S, so the bus is busy
  ``t_burst / max(t_burst, tCCD_S)`` of the time;
* row efficiency: one row (page) yields ``page_bytes / burst_bytes`` bursts
  (``t_row_data``); a bank is busy ``max(tRAS, tRCD + t_row_data) + tRP`` per row, so with
  ``interleaved_banks`` banks in rotation a new row can start every
  ``max(t_row_data, bank_cycle / banks, tFAW / 4, tRRD)``; the row efficiency is
  ``t_row_data`` over that;
* refresh: all-bank refresh blocks the channel tRFC every tREFI: ``1 - tRFC / tREFI``;
* controller efficiency: everything a streaming analysis leaves out (scheduling, command
  bus, read/write turnarounds, row conflicts of interleaved streams, address mapping);
  a stated, sourced factor.

The product is always <= 1, so effective <= peak (tested).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section

_LP5_DS = "Micron LPDDR5 datasheet MT62F (Rev A 05/2021); JESD209-5"
_AHASD_T = "AHASD paper Table 2 (cycles) read at tCK = 0.625 ns, references.md#ahasd-platform"


@config_section("memory")
@dataclass
class MemoryConfig:
    """LPDDR5/5X main memory (the LPDDR5-PIM device's external interface)."""

    standard: str = param("LPDDR5", doc="JEDEC standard (label and data-rate range check)",
                          choices=("LPDDR5", "LPDDR5X"), source=_LP5_DS)
    data_rate_mts: float = param(6400.0, doc="pin data rate", unit="MT/s", gt=0, le=10667,
                                 source="LPDDR5 6400 Mb/s; LPDDR5X 8533/9600/10667 [MicronLP5], [LP5X]")
    channels: int = param(4, doc="independent x16 channels (a phone x64 package = 4)", ge=1,
                          source="references.md#lpddr5: 51.2 GB/s per x64 at 6400; AHASD off-chip 51.2 GB/s")
    channel_width_bits: int = param(16, doc="data width of one channel", unit="bit", choices=(8, 16, 32),
                                    source=_LP5_DS)
    banks_per_channel: int = param(16, doc="banks per channel (4 bank groups x 4 above 3200 MT/s)", ge=1,
                                   source=_LP5_DS)
    page_bytes: int = param(2048, doc="row (page) size of one x16 channel", unit="B", gt=0, source=_LP5_DS)
    burst_bytes: int = param(32, doc="bytes of one BL16 column access on x16", unit="B", gt=0, source=_LP5_DS)
    interleaved_banks: int = param(16, doc="banks a sequential stream rotates over (address interleaving)",
                                   ge=1, source="assumption: bank/bank-group interleaved address mapping")
    capacity_gib: float = param(64.0, doc="total DRAM capacity (GiB = 2^30 B)", unit="GiB", gt=0,
                                source="AHASD Table 2: 4 GB/rank x 16 ranks")
    trcd_ns: float = param(20.0, doc="ACT to column command", unit="ns", gt=0, source=_AHASD_T + ": 32 nCK")
    trp_ns: float = param(20.0, doc="precharge period", unit="ns", gt=0, source=_AHASD_T + ": 32 nCK")
    tras_ns: float = param(40.0, doc="ACT to PRE minimum", unit="ns", gt=0, source=_AHASD_T + ": 64 nCK")
    trrd_ns: float = param(5.0, doc="ACT to ACT, different banks (tRRD_L)", unit="ns", ge=0,
                           source=_AHASD_T + ": 8 nCK")
    tfaw_ns: float = param(40.0, doc="four-activate window", unit="ns", ge=0, source=_AHASD_T + ": 64 nCK")
    tccd_s_ns: float = param(2.5, doc="column to column, different bank groups", unit="ns", gt=0,
                             source=_AHASD_T + ": 4 nCK")
    tccd_l_ns: float = param(3.75, doc="column to column, same bank group (informational)", unit="ns", gt=0,
                             source=_AHASD_T + ": 6 nCK")
    twr_ns: float = param(15.0, doc="write recovery (informational; read streams only)", unit="ns", ge=0,
                          source=_AHASD_T + ": 24 nCK")
    trfc_ns: float = param(350.0, doc="all-bank refresh cycle time", unit="ns", ge=0,
                           source=_AHASD_T + ": 560 nCK (JEDEC 16 Gb tRFCab = 280 ns [Ram2])")
    trefi_ns: float = param(3900.0, doc="average refresh interval", unit="ns", gt=0,
                            source=_AHASD_T + ": 6240 nCK = 3.9 us (JEDEC 3906 ns)")
    controller_efficiency: float = param(0.80, doc="memory-controller / traffic efficiency applied on top of "
                                         "the timing-derived streaming efficiency", gt=0, le=1,
                                         source="assumption (grade C) chosen so that the total lands at 0.73 of peak, "
                                         "inside the measured 0.6-0.8 band [LP5real] arXiv 2209.14756, [MLC319]")
    read_pj_per_bit: float = param(4.5, doc="external read energy (array column access + I/O), per bit",
                                   unit="pJ/bit", ge=0,
                                   source="references.md#lpddr5: 4.5 (3.5-6) pJ/bit, derived from "
                                   "Accelergy LPDDR4 8 / HBM2 3.9 pJ/bit (grade C)")
    write_pj_per_bit: float = param(4.5, doc="external write energy per bit", unit="pJ/bit", ge=0,
                                    source="as read_pj_per_bit (grade C)")
    act_pre_nj_per_row: float = param(1.8, doc="activate + precharge energy of one row (page)", unit="nJ", ge=0,
                                      source="0.11 pJ/bit [FGDRAM] x 16 Kbit row (references.md#lpddr5, our derivation)")
    background_mw_per_channel: float = param(20.0, doc="background (standby + refresh) power per active channel",
                                             unit="mW", ge=0,
                                             source="15-30 mW per active x16 channel, assumption (grade C; "
                                             "calibrate with DRAMPower)")

    def validate(self) -> None:
        if self.standard == "LPDDR5" and self.data_rate_mts > 6400:
            raise ValueError(f"LPDDR5 tops out at 6400 MT/s, got data_rate_mts={self.data_rate_mts} "
                             "(set standard: LPDDR5X)")
        if self.page_bytes % self.burst_bytes:
            raise ValueError(f"page_bytes ({self.page_bytes}) must be a multiple of burst_bytes ({self.burst_bytes})")
        if self.interleaved_banks > self.banks_per_channel:
            raise ValueError(f"interleaved_banks ({self.interleaved_banks}) > banks_per_channel "
                             f"({self.banks_per_channel})")
        if self.trfc_ns >= self.trefi_ns:
            raise ValueError(f"trfc_ns ({self.trfc_ns}) must be < trefi_ns ({self.trefi_ns})")


@dataclass(frozen=True)
class BandwidthBreakdown:
    """The factors of the effective-bandwidth derivation (all in (0, 1])."""

    peak_bytes_s: float
    column_efficiency: float
    row_efficiency: float
    refresh_efficiency: float
    controller_efficiency: float

    @property
    def total_efficiency(self) -> float:
        return (self.column_efficiency * self.row_efficiency * self.refresh_efficiency
                * self.controller_efficiency)

    @property
    def effective_bytes_s(self) -> float:
        return self.peak_bytes_s * self.total_efficiency


class Lpddr5Memory:
    """Analytic LPDDR5/5X model: bandwidth from timings, per-access energy, background power."""

    device = "lpddr5"

    def __init__(self, cfg: MemoryConfig):
        self.cfg = cfg
        self._bw = self._derive()

    # ---------------------------------------------------------------- bandwidth
    @property
    def channel_peak_bytes_s(self) -> float:
        return self.cfg.channel_width_bits / 8.0 * self.cfg.data_rate_mts * 1e6

    @property
    def peak_bandwidth_bytes_s(self) -> float:
        """channels x width/8 x data rate (51.2e9 B/s for 4 x16 channels at 6400 MT/s)."""
        return self.cfg.channels * self.channel_peak_bytes_s

    @property
    def burst_time_ns(self) -> float:
        return self.cfg.burst_bytes / self.channel_peak_bytes_s * 1e9

    def _derive(self) -> BandwidthBreakdown:
        c = self.cfg
        t_burst = self.burst_time_ns
        t_col = max(t_burst, c.tccd_s_ns)
        col_eff = t_burst / t_col
        bursts_per_row = c.page_bytes // c.burst_bytes
        t_row_data = bursts_per_row * t_col
        bank_cycle = max(c.tras_ns, c.trcd_ns + t_row_data) + c.trp_ns
        t_row = max(t_row_data, bank_cycle / c.interleaved_banks, c.tfaw_ns / 4.0, c.trrd_ns)
        row_eff = t_row_data / t_row
        refresh_eff = 1.0 - c.trfc_ns / c.trefi_ns
        return BandwidthBreakdown(self.peak_bandwidth_bytes_s, col_eff, row_eff, refresh_eff,
                                  c.controller_efficiency)

    @property
    def bandwidth_breakdown(self) -> BandwidthBreakdown:
        return self._bw

    @property
    def effective_bandwidth_bytes_s(self) -> float:
        """Sustained streaming-read bandwidth (B/s); always <= peak."""
        return self._bw.effective_bytes_s

    def stream_time_s(self, nbytes: float) -> float:
        """Time to stream ``nbytes`` at the effective bandwidth (no first-access latency)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        return nbytes / self.effective_bandwidth_bytes_s

    # ---------------------------------------------------------------- energy
    def _act_energy_j(self, nbytes: float) -> float:
        return nbytes / self.cfg.page_bytes * self.cfg.act_pre_nj_per_row * 1e-9

    def read_energy_j(self, nbytes: float) -> float:
        """I/O + column energy (pJ/bit) plus the activation energy of the rows touched
        (one activate/precharge per ``page_bytes`` streamed)."""
        return nbytes * 8.0 * self.cfg.read_pj_per_bit * 1e-12 + self._act_energy_j(nbytes)

    def write_energy_j(self, nbytes: float) -> float:
        return nbytes * 8.0 * self.cfg.write_pj_per_bit * 1e-12 + self._act_energy_j(nbytes)

    @property
    def background_power_w(self) -> float:
        return self.cfg.channels * self.cfg.background_mw_per_channel * 1e-3

    @property
    def static_power_w(self) -> float:
        return self.background_power_w

    @property
    def capacity_bytes(self) -> int:
        return int(round(self.cfg.capacity_gib * 2**30))
