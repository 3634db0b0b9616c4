"""LPDDR5 / LPDDR5X main memory: declarative spec (section ``memory``) and analytic model.

Every constant carries its unit (in the name) and its source. Timings that JEDEC
(JESD209-5B) specifies in nanoseconds (tRCD, tRP, tRAS, tRRD, tFAW, tWR, tRFC, tREFI) are
stored in ns; timings it specifies in clock cycles (tCCD_S/L, RL, WL, tWTR) are stored in
nCK of CK and scale with the clock: ``tck_ns = 8000 / data_rate_mts`` (CK = data rate / 8:
WCK:CK 4:1, data on both WCK edges; 1.25 ns at 6400 MT/s, 0.94 ns at 8533). The AHASD
paper (Table 2) gives its timings in cycles of 0.625 ns (references.md#ahasd-platform:
tRCD = tRP = 32 = 20 ns, tRAS 64 = 40 ns, tRRD 8 = 5 ns, tFAW 64 = 40 ns, tCCD_S 4 =
2.5 ns = 2 nCK of CK, tCCD_L 6 = 3.75 ns = 3 nCK, tWR 24 = 15 ns, tRFC 560 = 350 ns,
tREFI 6240 = 3.9 us).

Effective bandwidth is derived per **traffic class** (:data:`TRAFFIC_CLASSES`,
:meth:`Lpddr5Memory.class_breakdown`); ``traffic_class`` picks the one the simulator's
bulk transfers (weight and KV streams) use:

* ``sequential_read`` -- a pure read stream interleaved over banks:

  - column efficiency: a BL16 burst of ``burst_bytes`` occupies the data bus for
    ``t_burst = burst_bytes / (width/8 x data_rate)`` (2.5 ns at 6400, x16); consecutive
    bursts are spaced by tCCD_S when the address mapping alternates bank groups
    (``bank_group_interleaved``), else by tCCD_L -- except that a controller with a
    reorder window of ``controller_queue_depth`` requests interleaves the tail of one row
    with the head of the next (another bank group) once that row is open: of a row's
    ``P`` bursts, ``2k`` go tCCD_S apart with ``k = min(depth - 1, P/2) - ceil(tRCD /
    tCCD_L)``, the rest tCCD_L apart; efficiency = data time / that row time;
  - row efficiency: a row yields ``page_bytes / burst_bytes`` bursts (``t_row_data``); a
    bank is busy ``max(tRAS, tRCD + t_row_data) + tRP`` per row, so with
    ``interleaved_banks`` banks in rotation a new row can start every
    ``max(t_row_data, bank_cycle / banks, tFAW / 4, tRRD)``: efficiency ``t_row_data`` over that;
* ``mixed`` -- reads and writes (``mixed_read_fraction``) drained in batches of
  ``rw_batch_bursts`` writes; each read->write and write->read switch idles the bus
  (RL + BL/n + 2 - WL) and (WL + BL/n + tWTR_S) nCK (JESD209-5B; Ramulator 2's LPDDR5
  constraints); row efficiency as ``sequential_read``;
* ``random`` -- independent ``burst_bytes`` reads to random rows: every access opens a row
  (a row conflict). Accesses start at most every ``max(t_burst, tRRD, tFAW/4,
  tRC / busy banks)`` with tRC = tRAS + tRP and ``busy banks`` the expected number of
  distinct banks among ``controller_queue_depth`` queued requests spread over
  ``interleaved_banks`` banks (``banks x (1 - (1 - 1/banks)^depth)``); efficiency
  ``t_burst`` over that.

Every class is then multiplied by the refresh efficiency -- all-bank refresh blocks the
channel tRFCab every tREFI (``1 - tRFCab / tREFI``); per-bank refresh
(``refresh_mode: per_bank``) takes one bank out for tRFCpb every tREFI / banks, which a
stream over ``interleaved_banks`` banks sees as ``1 - tRFCpb / (tREFI / banks) / banks``
-- and by the class's controller efficiency (what the timing analysis leaves out:
command-bus conflicts, scheduling), a stated, sourced input. The product is always <= 1,
so effective <= peak (tested).

Access latency (:meth:`Lpddr5Memory.read_latency_ns`): a row hit costs CAS + RL + BL/n
(nCK); a miss (bank closed) adds tRCD; a conflict (another row open) adds tRP as well.
Unloaded random reads (one in flight, open-page policy, :meth:`random_read_latency_ns`)
find another row open unless an all-bank refresh closed the bank since its last access:
with accesses every ``t`` spread over ``banks`` banks, the miss fraction is
``min(1, banks x t / tREFI)`` and ``t`` = that mix of miss and conflict latencies (a
fixed point, solved by iteration).
""" 
from __future__ import annotations

import math
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
    data_rate_mts: float = param(6400.0, doc="pin data rate", unit="MT/s", ge=400, le=10667,
                                 source="LPDDR5 6400 Mb/s; LPDDR5X 8533/9600/10667 [MicronLP5], [LP5X]; "
                                 "400 MT/s: the first LPDDR generation's rate [LPDDRgen]",
                                 bound_reason="LPDDR5X tops out at 10667 MT/s",
                                 low_reason="400 MT/s is the first LPDDR generation's pin rate (references.md"
                                 "#lpddr5); a slower one makes one trace window take simulated hours")
    channels: int = param(4, doc="independent x16 channels (a phone x64 package = 4)", ge=1, le=64,
                          bound_reason="phones have 2-8 x16 channels; 64 would be a x1024 interface",
                          source="references.md#lpddr5: 51.2 GB/s per x64 at 6400; AHASD off-chip 51.2 GB/s")
    channel_width_bits: int = param(16, doc="data width of one channel", unit="bit", choices=(8, 16, 32),
                                    source=_LP5_DS)
    banks_per_channel: int = param(16, doc="banks per channel (4 bank groups x 4 above 3200 MT/s)", ge=1, le=256,
                                   bound_reason="LPDDR5 has 16 banks per channel; 256 is past any DRAM standard",
                                   source=_LP5_DS)
    page_bytes: int = param(2048, doc="row (page) size of one x16 channel", unit="B", gt=0, source=_LP5_DS)
    burst_bytes: int = param(32, doc="bytes of one BL16 column access on x16", unit="B", gt=0, source=_LP5_DS)
    interleaved_banks: int = param(16, doc="banks the traffic spreads over: a sequential stream's rotation, "
                                   "random reads' footprint (address interleaving)",
                                   ge=1, source="assumption: bank/bank-group interleaved address mapping")
    capacity_gib: float = param(64.0, doc="total DRAM capacity (GiB = 2^30 B)", unit="GiB", gt=0,
                                source="AHASD Table 2: 4 GB/rank x 16 ranks")
    reserved_gib: float = param(0.0, doc="memory the OS and other apps hold (kernel, system services, GPU/modem "
                                "carve-outs), taken off the top before any model is placed; on a PIM platform it "
                                "is spread over the ranks (the address map interleaves pages over channels and "
                                "ranks)", unit="GiB", ge=0,
                                source="0 = the AHASD paper's platform, which holds the models alone; a phone "
                                "keeps 4-6 GB in use by the system (docs/references.md, 'Phone memory and "
                                "power envelope'): the phone presets set 4 GiB")
    trcd_ns: float = param(20.0, doc="ACT to column command", unit="ns", gt=0, source=_AHASD_T + ": 32 nCK")
    trp_ns: float = param(20.0, doc="precharge period", unit="ns", gt=0, source=_AHASD_T + ": 32 nCK")
    tras_ns: float = param(40.0, doc="ACT to PRE minimum", unit="ns", gt=0, source=_AHASD_T + ": 64 nCK")
    trrd_ns: float = param(5.0, doc="ACT to ACT, different banks (tRRD_L)", unit="ns", ge=0,
                           source=_AHASD_T + ": 8 nCK")
    tfaw_ns: float = param(40.0, doc="four-activate window", unit="ns", ge=0, source=_AHASD_T + ": 64 nCK")
    tccd_s_nck: int = param(2, doc="column to column, different bank groups (BG mode, BL16)", unit="nCK", ge=1,
                            source=_AHASD_T + ": 4 x 0.625 ns = 2 nCK; JESD209-5B Table 330 BL/n_min = 2 [Ram2]")
    tccd_l_nck: int = param(3, doc="column to column, same bank group", unit="nCK", ge=1,
                            source=_AHASD_T + ": 6 x 0.625 ns = 3 nCK (JESD209-5B BL/n_max = 4 [Ram2])")
    read_latency_nck: int = param(17, doc="read latency RL (column command to first data)", unit="nCK", ge=1,
                                  source="JESD209-5B LPDDR5-6400 RL 17 nCK (Ramulator 2 preset LPDDR5_6400 nCL); "
                                  "set per speed bin")
    write_latency_nck: int = param(9, doc="write latency WL", unit="nCK", ge=1,
                                   source="JESD209-5B LPDDR5-6400 WL 9 nCK (Ramulator 2 preset nCWL)")
    cas_nck: int = param(1, doc="CAS (WCK2CK sync) command cycle that precedes each read/write command",
                         unit="nCK", ge=0, source="JESD209-5B Tables 352-353: CAS immediately precedes RD/WR "
                         "(Ramulator 2 LPDDR5 nCAS = 0 -> next cycle)")
    twtr_s_nck: int = param(5, doc="write to read turnaround, different bank groups", unit="nCK", ge=0,
                            source="JESD209-5B LPDDR5-6400 tWTR_S (Ramulator 2 preset nWTRS)")
    bank_group_interleaved: bool = param(True, doc="the address mapping puts consecutive bursts of a stream in "
                                         "different bank groups (tCCD_S spacing; else tCCD_L)",
                                         source="assumption: bank-group interleaved mapping (validation/peers/"
                                         "ramulator2 runs both kinds)")
    twr_ns: float = param(15.0, doc="write recovery (informational; read streams only)", unit="ns", ge=0,
                          source=_AHASD_T + ": 24 nCK")
    trfc_ns: float = param(350.0, doc="all-bank refresh cycle time tRFCab", unit="ns", ge=0,
                           source=_AHASD_T + ": 560 nCK (JEDEC 16 Gb tRFCab = 280 ns [Ram2])")
    trfc_pb_ns: float = param(140.0, doc="per-bank refresh cycle time tRFCpb", unit="ns", ge=0,
                              source="JESD209-5B Table 235, 16 Gb: 140 ns [Ram2]")
    trefi_ns: float = param(3900.0, doc="average all-bank refresh interval tREFI", unit="ns", gt=0,
                            source=_AHASD_T + ": 6240 nCK = 3.9 us (JEDEC 3906 ns)")
    dram_temperature_c: float = param(45.0, doc="DRAM case temperature: above 85 C the refresh rate doubles "
                                      "(tREFI halved) in the bandwidth and the PIM command sequence (runs of a "
                                      "duration set it from the thermal model's package node)", unit="C",
                                      ge=-40.0, le=125.0, bound_reason="LPDDR5 is specified to 105 C (extended "
                                      "grade 125 C)",
                                      source="JESD209-5 temperature derating: 2x refresh rate above 85 C "
                                      "(docs/references.md 'Phone memory and power envelope'); 45 C: a cool phone's "
                                      "package (grade C)")
    refresh_mode: str = param("all_bank", doc="all-bank refresh (REFab) or per-bank refresh (REFpb)",
                              choices=("all_bank", "per_bank"), source="JESD209-5B section 7.4 (REFab / REFpb)")
    traffic_class: str = param("sequential_read", doc="traffic class whose bandwidth the simulator's bulk "
                               "transfers (weight / KV streams) get", choices=("sequential_read", "mixed", "random"),
                               source="decode streams weights and KV: sequential reads")
    seq_read_controller_efficiency: float = param(
        1.0, doc="controller efficiency of a pure read stream, beyond the timing terms", gt=0, le=1,
        source="a read stream under FR-FCFS with bank interleaving loses nothing the timing terms miss: "
        "Ramulator 2 (validation/peers/ramulator2, validate --peers) is within a few % of the timing terms")
    mixed_controller_efficiency: float = param(
        1.0, doc="controller efficiency of mixed read/write traffic beyond the modelled turnarounds", gt=0, le=1,
        source="assumption (grade C): turnarounds are modelled; not yet checked against a peer")
    random_controller_efficiency: float = param(
        1.0, doc="controller efficiency of random reads beyond the modelled bank/tRRD/tFAW limits", gt=0, le=1,
        source="validation/peers/ramulator2 random-read runs (validate --peers)")
    mixed_read_fraction: float = param(0.67, doc="fraction of reads in the mixed class", ge=0, le=1,
                                       source="assumption (grade C): 2:1 read:write")
    rw_batch_bursts: int = param(16, doc="writes drained per read/write switch in the mixed class", ge=1,
                                 source="assumption (grade C): half of a 32-entry write buffer (Ramulator 2 "
                                 "LPDDR5 controller write_buffer_size 32)")
    controller_queue_depth: int = param(32, doc="read requests the controller can reorder (random class)", ge=1,
                                        source="Ramulator 2 LPDDR5 controller read_buffer_size 32")
    read_pj_per_bit: float = param(4.5, doc="external read energy (array column access + I/O), per bit",
                                   unit="pJ/bit", ge=0,
                                   source="references.md#lpddr5: 4.5 (3.5-6) pJ/bit, derived from "
                                   "Accelergy LPDDR4 8 / HBM2 3.9 pJ/bit (grade C)")
    write_pj_per_bit: float = param(4.5, doc="external write energy per bit", unit="pJ/bit", ge=0,
                                    source="as read_pj_per_bit (grade C)")
    act_pre_nj_per_row: float = param(1.8, doc="activate + precharge energy of one row (page)", unit="nJ", ge=0,
                                      source="0.11 pJ/bit [FGDRAM] x 16 Kbit row (references.md#lpddr5, our derivation)")
    background_mw_per_channel: float = param(20.0, doc="background (standby + refresh) power per active channel",
                                             unit="mW", ge=0, le=1000.0,
                                             bound_reason="1 W per channel is 50x LPDDR5 standby + refresh",
                                             source="15-30 mW per active x16 channel, assumption (grade C; "
                                             "calibrate with DRAMPower)")

    refresh_mw_per_channel: float = param(0.0, doc="the part of background_mw_per_channel that refresh draws at "
                                          "the normal rate; it doubles above 85 C with the refresh rate "
                                          "(memory.dram_temperature_c)", unit="mW", ge=0, le=1000.0,
                                          bound_reason="as background_mw_per_channel",
                                          source="0 = not split (the AHASD platform's 20 mW assumption); the phone "
                                          "presets: 2 active dies x ~6 mW (IDD5 over tRFC / tREFI, Micron LPDDR4 "
                                          "memspec in DRAMSys; docs/references.md 'Phone memory and power envelope')")

    def validate(self) -> None:
        if self.refresh_mw_per_channel > self.background_mw_per_channel:
            raise ValueError(f"refresh_mw_per_channel ({self.refresh_mw_per_channel:g}) is part of "
                             f"background_mw_per_channel ({self.background_mw_per_channel:g}) and cannot exceed it")
        if self.standard == "LPDDR5" and self.data_rate_mts > 6400:
            raise ValueError(f"LPDDR5 tops out at 6400 MT/s, got data_rate_mts={self.data_rate_mts} "
                             "(set standard: LPDDR5X)")
        if self.page_bytes % self.burst_bytes:
            raise ValueError(f"page_bytes ({self.page_bytes}) must be a multiple of burst_bytes ({self.burst_bytes})")
        if self.interleaved_banks > self.banks_per_channel:
            raise ValueError(f"interleaved_banks ({self.interleaved_banks}) > banks_per_channel "
                             f"({self.banks_per_channel})")
        if self.reserved_gib >= self.capacity_gib:
            raise ValueError(f"reserved_gib ({self.reserved_gib:g}) must be < capacity_gib ({self.capacity_gib:g}): "
                             "nothing would be left for the models")
        if self.trfc_ns >= self.trefi_ns:
            raise ValueError(f"trfc_ns ({self.trfc_ns}) must be < trefi_ns ({self.trefi_ns})")
        if self.trfc_pb_ns >= self.trefi_ns / self.banks_per_channel:
            raise ValueError(f"trfc_pb_ns ({self.trfc_pb_ns}) must be < trefi_ns / banks_per_channel "
                             f"({self.trefi_ns / self.banks_per_channel:g})")
        if self.dram_temperature_c > REFRESH_DERATING_ABOVE_C:
            hot = self.trefi_ns / 2.0   # JEDEC's doubled refresh rate must still leave the bank time
            per_bank = self.refresh_mode == "per_bank"
            busy, interval = ((self.trfc_pb_ns, hot / self.banks_per_channel) if per_bank else (self.trfc_ns, hot))
            if busy >= interval:
                raise ValueError(f"dram_temperature_c {self.dram_temperature_c:g} C halves tREFI: "
                                 f"{'trfc_pb_ns' if per_bank else 'trfc_ns'} ({busy:g}) must be < {interval:g} ns")


TRAFFIC_CLASSES = ("sequential_read", "mixed", "random")

#: above this DRAM temperature JEDEC doubles the refresh rate (JESD209-5 temperature derating)
REFRESH_DERATING_ABOVE_C = 85.0


@dataclass(frozen=True)
class BandwidthBreakdown:
    """The factors of the effective-bandwidth derivation of one traffic class (all in (0, 1])."""

    peak_bytes_s: float
    column_efficiency: float
    row_efficiency: float
    refresh_efficiency: float
    controller_efficiency: float
    traffic_class: str = "sequential_read"

    @property
    def total_efficiency(self) -> float:
        return (self.column_efficiency * self.row_efficiency * self.refresh_efficiency
                * self.controller_efficiency)

    @property
    def effective_bytes_s(self) -> float:
        return self.peak_bytes_s * self.total_efficiency


class Lpddr5Memory:
    """Analytic LPDDR5/5X model: bandwidth per traffic class from timings, access latency,
    per-access energy, background power."""

    device = "lpddr5"

    def __init__(self, cfg: MemoryConfig):
        self.cfg = cfg
        self._classes = {tc: self._derive(tc) for tc in TRAFFIC_CLASSES}
        self._bw = self._classes[cfg.traffic_class]

    # ---------------------------------------------------------------- clock
    @property
    def tck_ns(self) -> float:
        """CK period: data rate / 8 (WCK:CK 4:1, DDR on WCK); 1.25 ns at 6400 MT/s."""
        return 8000.0 / self.cfg.data_rate_mts

    def nck_ns(self, cycles: float) -> float:
        return cycles * self.tck_ns

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

    @property
    def refresh_derated(self) -> bool:
        """Whether the DRAM is above 85 C, where tREFI is halved (JESD209-5)."""
        return self.cfg.dram_temperature_c > REFRESH_DERATING_ABOVE_C

    @property
    def trefi_ns(self) -> float:
        """The refresh interval at ``memory.dram_temperature_c``: tREFI, halved above 85 C."""
        return self.cfg.trefi_ns / (2.0 if self.refresh_derated else 1.0)

    @property
    def trc_ns(self) -> float:
        """Row cycle tRC = tRAS + tRP (derived, JESD209-5B)."""
        return self.cfg.tras_ns + self.cfg.trp_ns

    @property
    def refresh_efficiency(self) -> float:
        c = self.cfg
        if c.refresh_mode == "per_bank":
            # one bank out for tRFCpb every tREFI / banks; the stream loses that bank's share
            return 1.0 - c.trfc_pb_ns / (self.trefi_ns / c.banks_per_channel) / c.banks_per_channel
        return 1.0 - c.trfc_ns / self.trefi_ns

    def _stream_terms(self) -> tuple[float, float, float]:
        """(row data time ns, column efficiency, row efficiency) of a read stream."""
        c = self.cfg
        t_burst = self.burst_time_ns
        bursts_per_row = c.page_bytes // c.burst_bytes
        t_s = max(t_burst, self.nck_ns(c.tccd_s_nck))
        t_l = max(t_burst, self.nck_ns(c.tccd_l_nck))
        if c.bank_group_interleaved:
            t_row_data = bursts_per_row * t_s
        elif c.interleaved_banks > 1:
            # A row's bursts share one bank group (tCCD_L apart), but the controller's reorder
            # window reaches into the next row (another bank group) once the row has fewer
            # than queue_depth requests left: it opens that row (tRCD, during which the old
            # row goes on alone) and then alternates the two rows, tCCD_S apart.
            lost = math.ceil(c.trcd_ns / t_l - 1e-9)
            pairs = max(0, min(c.controller_queue_depth - 1, bursts_per_row // 2) - lost)
            t_row_data = (bursts_per_row - 2 * pairs) * t_l + pairs * max(2 * t_s, t_l)
        else:
            t_row_data = bursts_per_row * t_l
        bank_cycle = max(c.tras_ns, c.trcd_ns + t_row_data) + c.trp_ns
        t_row = max(t_row_data, bank_cycle / c.interleaved_banks, c.tfaw_ns / 4.0, c.trrd_ns)
        return t_row_data, bursts_per_row * t_burst / t_row_data, t_row_data / t_row

    def random_access_interval_ns(self) -> float:
        """Mean time between random-row accesses on one channel (see module docstring)."""
        c = self.cfg
        banks = c.interleaved_banks  # the banks the traffic spreads over
        busy = banks * (1.0 - (1.0 - 1.0 / banks) ** c.controller_queue_depth)
        return max(self.burst_time_ns, c.trrd_ns, c.tfaw_ns / 4.0, self.trc_ns / busy)

    def _derive(self, traffic: str) -> BandwidthBreakdown:
        c = self.cfg
        t_row_data, col_eff, row_eff = self._stream_terms()
        if traffic == "sequential_read":
            ctrl = c.seq_read_controller_efficiency
        elif traffic == "mixed":
            ctrl = c.mixed_controller_efficiency
            if 0.0 < c.mixed_read_fraction < 1.0:
                writes = c.rw_batch_bursts
                reads = writes * c.mixed_read_fraction / (1.0 - c.mixed_read_fraction)
                bl_n = self.burst_time_ns / self.tck_ns          # burst length in nCK
                t_rtw = self.nck_ns(max(0.0, c.read_latency_nck + bl_n + 2 - c.write_latency_nck))
                t_wtr = self.nck_ns(c.write_latency_nck + bl_n + c.twtr_s_nck)
                data = (reads + writes) * t_row_data / (c.page_bytes // c.burst_bytes)
                col_eff *= data / (data + t_rtw + t_wtr)
        else:  # random
            ctrl = c.random_controller_efficiency
            col_eff = self.burst_time_ns / self.random_access_interval_ns()
            row_eff = 1.0  # every access opens its row: counted in the access interval
        return BandwidthBreakdown(self.peak_bandwidth_bytes_s, col_eff, row_eff, self.refresh_efficiency,
                                  ctrl, traffic)

    @property
    def bandwidth_breakdown(self) -> BandwidthBreakdown:
        """Breakdown of ``traffic_class`` (the class the simulator's transfers use)."""
        return self._bw

    def class_breakdown(self, traffic: str) -> BandwidthBreakdown:
        if traffic not in self._classes:
            raise ValueError(f"unknown traffic class {traffic!r}; expected one of {', '.join(TRAFFIC_CLASSES)}")
        return self._classes[traffic]

    def class_bandwidth_bytes_s(self, traffic: str) -> float:
        return self.class_breakdown(traffic).effective_bytes_s

    #: share of the sustained bandwidth the host's streams may use under a package power cap
    #: (``pim.dram_power_limit_w``; set by :meth:`ahasd_sim.hw.pim.PimMemory.apply_power_cap`)
    host_rate_fraction: float = 1.0

    @property
    def effective_bandwidth_bytes_s(self) -> float:
        """Sustained bandwidth (B/s) of ``traffic_class``, at the rate a package power cap allows;
        always <= peak."""
        return self._bw.effective_bytes_s * self.host_rate_fraction

    @property
    def uncapped_bandwidth_bytes_s(self) -> float:
        """Sustained bandwidth (B/s) of ``traffic_class`` without a power cap."""
        return self._bw.effective_bytes_s

    def stream_time_s(self, nbytes: float) -> float:
        """Time to stream ``nbytes`` at the effective bandwidth (no first-access latency)."""
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        return nbytes / self.effective_bandwidth_bytes_s

    # ---------------------------------------------------------------- latency
    def read_latency_ns(self, row: str = "hit") -> float:
        """Unloaded read latency, command to last data: RL + BL/n for a row hit; + tRCD for a
        miss (bank closed); + tRP + tRCD for a conflict (another row open)."""
        c = self.cfg
        base = self.nck_ns(c.cas_nck + c.read_latency_nck) + self.burst_time_ns
        if row == "hit":
            return base
        if row == "miss":
            return base + c.trcd_ns
        if row == "conflict":
            return base + c.trp_ns + c.trcd_ns
        raise ValueError(f"row must be 'hit', 'miss' or 'conflict', got {row!r}")

    def random_read_miss_fraction(self, interval_ns: float) -> float:
        """Fraction of unloaded random reads that find their bank closed (all-bank refresh
        since the bank's last access); per-bank refresh closes one bank at a time, same rate."""
        c = self.cfg
        return min(1.0, c.banks_per_channel * interval_ns / self.trefi_ns)

    def random_read_latency_ns(self) -> float:
        """Mean unloaded latency of dependent random reads (pointer chasing), open-page policy."""
        miss, conflict = self.read_latency_ns("miss"), self.read_latency_ns("conflict")
        t = conflict
        for _ in range(50):
            f = self.random_read_miss_fraction(t)
            t_new = f * miss + (1.0 - f) * conflict
            if abs(t_new - t) < 1e-9:
                break
            t = t_new
        return t

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
        """Standby + refresh power; above 85 C the refresh part doubles with the refresh rate."""
        c = self.cfg
        extra = c.refresh_mw_per_channel if self.refresh_derated else 0.0
        return c.channels * (c.background_mw_per_channel + extra) * 1e-3

    @property
    def static_power_w(self) -> float:
        return self.background_power_w

    @property
    def capacity_bytes(self) -> int:
        return int(round(self.cfg.capacity_gib * 2**30))

    @property
    def reserved_bytes(self) -> int:
        """What the OS and other apps hold (``memory.reserved_gib``)."""
        return int(round(self.cfg.reserved_gib * 2**30))

    @property
    def model_capacity_bytes(self) -> int:
        """Capacity left for the models: the total less the OS/app reserve."""
        return self.capacity_bytes - self.reserved_bytes
