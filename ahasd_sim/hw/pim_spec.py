"""Declarative bank-level PIM device specs and the rates and GEMV times derived from them.

Written in the style of Ramulator 2's Python DRAM specs and our :mod:`ahasd_sim.hw.lpddr5`:
a preset is a topology (channels x ranks per channel x dies per rank, bank groups x banks,
the bytes one column access moves per bank, the row (page) bytes of one bank), timings in
cycles of a stated clock (``tck_ns``) with the table they come from, and a MAC unit (lanes,
clock, banks sharing one unit). Nothing here is fitted to a peer: the AiM presets carry the
cycle counts of the AiM simulator's own preset tables (github arkhadem/aim_simulator
``src/dram/impl/GDDR6.cpp`` ``GDDR6_AiM_timing`` and ``src/dram/impl/LPDDR5.cpp``
``LPDDR5_AiM_timing``, commit 0f28a07bdb83e42b9305ad3d45410ebd3aa2c091).

Derived rates (:class:`PimRates`, :func:`derive`):

* internal read rate of one die = banks working in parallel (banks / banks per MAC unit)
  x column bytes / (column-to-column time of the all-bank MAC command, ``n_ccd_mac`` x
  tCK); per rank = dies per rank x that (the dies of a rank take the same commands in
  lockstep); per channel = ranks x per rank (ranks interleave their MAC commands on the
  channel's command bus, at most ``n_ccd_mac`` ranks per column slot, checked); device =
  channels x per channel;
* MAC rate of one die = MAC units x lanes x MAC clock; INT8 ops = 2 x that.

GEMV time (:func:`gemv_cycles`, :func:`gemv_time_s`): the command sequence a PIM driver
issues (the AiM/CENT order, validation/peers/README.md): per input vector, per DRAM-row
chunk of the input (``row_bytes / element_bytes`` elements), one WR_GB (the chunk into the
global buffer: a mode switch into register mode + ``opsize`` buffer writes), then per
output group (``rows / (parallel banks x lockstep units)`` outputs per bank) WR_BIAS (the
partial sum back into the MAC registers), MAC_ABK (mode switch out of register mode, PREA,
tRP, ACT, the ACT-to-MAC delay, ``opsize`` MAC commands ``n_ccd_mac`` apart) and RD_MAC
(mode switch, register read latency, blocking: the next ISR waits for the data). All-bank
refresh (every ``n_refi``, for ``n_rfc``, plus re-opening the interrupted row) stretches
the total. The input vector is held once (``vectors_per_weight_read`` = 1 for AiM: a 2 KB
global buffer per channel), so every further vector re-reads the weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from ..config.errors import ConfigError

_AIM_REPO = "github arkhadem/aim_simulator @0f28a07 (CENT, ASPLOS 2025)"
_AIM_G6 = _AIM_REPO + " src/dram/impl/GDDR6.cpp GDDR6_AiM_org / GDDR6_AiM_timing"
_AIM_L5 = _AIM_REPO + " src/dram/impl/LPDDR5.cpp LPDDR5_AiM_org / LPDDR5_AiM_timing"
_AIM_PROTO = _AIM_REPO + " src/dram_controller/impl/AiM_dram_controller.cpp, src/memory_system/impl/aim_DRAM_system.cpp"
_RAM2_L5 = "Ramulator 2 LPDDR5_6400 preset (JESD209-5B), as validation/peers/ramulator2"
_AHASD = "AHASD paper Table 2 (16 PIM units, 102.4 GOPS INT8, 4 GB/rank x 16, 51.2 GB/s off-chip)"
_HBMPIM = ("Samsung HBM-PIM (Aquabolt-XL): Kwon et al., ISSCC 2021, doi:10.1109/ISSCC42613.2021.9365862; "
           "Lee et al., ISCA 2021, doi:10.1109/ISCA52012.2021.00013")

_CENT_REUSE = ("CENT driver (github Morteza1814/CENT cent_simulation, GEMV order reuse-GB, --reuse_size default 32: "
               "'GB reuse size, depending on register number')")

#: JEDEC LPDDR5 (JESD209-5B): one or two ranks per channel; x16 channel, or two x8 dies
#: (byte mode) sharing it. GDDR6 (JESD250) has no ranks (clamshell aside); HBM2 (JESD235)
#: counts pseudo channels and has one "rank" (stack ID) per channel in the PIM parts.
MAX_RANKS_PER_CHANNEL = {"LPDDR5": 2, "GDDR6": 1, "HBM2": 1}
MAX_DIES_PER_RANK = {"LPDDR5": 2, "GDDR6": 1, "HBM2": 1}
MAX_CHANNELS = {"LPDDR5": 32, "GDDR6": 32, "HBM2": 32}


@dataclass(frozen=True)
class PimTimings:
    """Timings of the commands a PIM GEMV uses, in cycles of ``tck_ns`` (nCK)."""

    tck_ns: float            # command clock period the cycle counts are in
    n_ccd_mac: int           # all-bank MAC (MAC16) to MAC16
    n_ccd_wr: int            # global-buffer write (WRGB) to WRGB: max(data bus nBL, nCCD)
    n_rp_ab: int             # all-bank precharge PREA -> ACT
    n_rcd_mac: int           # ACT -> MAC16 (nRCDRDMAC)
    n_modch: int             # PIM mode switch (TMOD) -> any command
    n_cas: int               # CAS (WCK2CK sync) before a register read/write (LPDDR5: 1, GDDR6: 0)
    n_bl: int                # burst length in nCK
    n_cl_reg: int            # register read latency (nCLREG)
    n_rfc: int               # all-bank refresh time
    n_refi: int              # all-bank refresh interval
    n_rrd: int = 0           # ACT -> ACT, different banks (JEDEC tRRD)
    n_faw: int = 0           # at most four ACTs in any window this long (JEDEC tFAW)
    n_rtp: int = 1           # column read (MAC16) -> PREA: a MAC_ABK right after a MAC_ABK waits this
    source: str = ""


@dataclass(frozen=True)
class PimSpec:
    """One bank-level PIM device."""

    name: str
    standard: str            # LPDDR5 / GDDR6 / HBM2 (topology limits)
    channels: int
    ranks_per_channel: int
    dies_per_rank: int
    bankgroups: int
    banks_per_bankgroup: int
    banks_per_mac_unit: int  # banks sharing one MAC unit (HBM-PIM: a bank pair per PCU)
    column_bytes: int        # bytes one column access moves per bank (die width x burst length / 8)
    row_bytes: int           # row (page) bytes of one bank of one die
    element_bytes: int       # bytes per weight element as the device stores it
    mac_lanes: int           # lanes of one MAC unit (elements per MAC command)
    mac_clock_ghz: float     # MAC unit clock
    capacity_gib_per_die: float
    timings: PimTimings
    isr_issue_cycles: int = 1   # cycles the PIM DMA needs to decode an ISR after a blocking one returns
    result_bytes: int = 2       # bytes of one MAC result register as WR_BIAS / RD_MAC move it (AiM: BF16)
    input_slots: int = 1        # input vectors the global buffer holds per chunk (k; hw/pim_unit.py)
    result_registers: int = 32  # MAC result registers per bank (outputs one global-buffer chunk serves per batch)
    all_bank_act_tfaw: bool = False  # all-bank ACT obeys tRRD/tFAW (False: a PIM power grid lifts it, as ACT16)
    sources: dict = field(default_factory=dict)

    def validate(self) -> "PimSpec":
        key = f"pim_spec.{self.name}"
        std = self.standard
        if std not in MAX_RANKS_PER_CHANNEL:
            raise ConfigError("", f"{key}.standard", f"unknown standard {std!r} "
                              f"(known: {', '.join(MAX_RANKS_PER_CHANNEL)})")
        for k in ("channels", "ranks_per_channel", "dies_per_rank", "bankgroups", "banks_per_bankgroup",
                  "banks_per_mac_unit", "column_bytes", "row_bytes", "element_bytes", "mac_lanes",
                  "input_slots", "result_registers"):
            if int(getattr(self, k)) < 1:
                raise ConfigError("", f"{key}.{k}", f"must be >= 1, got {getattr(self, k)}")
        if self.channels > MAX_CHANNELS[std]:
            raise ConfigError("", f"{key}.channels", f"{self.channels} channels > {MAX_CHANNELS[std]} "
                              f"({std} device limit of this model)")
        if self.ranks_per_channel > MAX_RANKS_PER_CHANNEL[std]:
            raise ConfigError("", f"{key}.ranks_per_channel",
                              f"{self.ranks_per_channel} ranks per channel; {std} allows at most "
                              f"{MAX_RANKS_PER_CHANNEL[std]} (JESD209-5B / JESD250 / JESD235)")
        if self.dies_per_rank > MAX_DIES_PER_RANK[std]:
            raise ConfigError("", f"{key}.dies_per_rank",
                              f"{self.dies_per_rank} dies per rank; {std} allows at most "
                              f"{MAX_DIES_PER_RANK[std]} (LPDDR5: two x8 dies in byte mode)")
        if self.banks_per_die % self.banks_per_mac_unit:
            raise ConfigError("", f"{key}.banks_per_mac_unit",
                              f"{self.banks_per_die} banks do not split into units of {self.banks_per_mac_unit}")
        if self.row_bytes % self.column_bytes or self.column_bytes % self.element_bytes:
            raise ConfigError("", f"{key}.column_bytes", "row_bytes must be a multiple of column_bytes and "
                              "column_bytes a multiple of element_bytes")
        if self.ranks_per_channel > self.timings.n_ccd_mac:
            raise ConfigError("", f"{key}.ranks_per_channel",
                              f"{self.ranks_per_channel} ranks cannot interleave MAC commands on one command bus "
                              f"every {self.timings.n_ccd_mac} nCK")
        if self.all_bank_act_tfaw and not (self.timings.n_faw > 0 and self.timings.n_rrd > 0):
            raise ConfigError("", f"{key}.all_bank_act_tfaw", "the preset has no tRRD/tFAW timings to obey")
        if self.result_registers < self.input_slots:
            raise ConfigError("", f"{key}.result_registers",
                              f"{self.result_registers} result registers per bank cannot hold the partial sums of "
                              f"{self.input_slots} input vectors (need >= input_slots)")
        t = self.timings
        if not (t.tck_ns > 0 and t.n_ccd_mac >= 1 and t.n_refi > t.n_rfc >= 0):
            raise ConfigError("", f"{key}.timings", "need tck_ns > 0, n_ccd_mac >= 1, n_refi > n_rfc >= 0")
        return self

    # ------------------------------------------------------------ topology
    @property
    def banks_per_die(self) -> int:
        return self.bankgroups * self.banks_per_bankgroup

    @property
    def mac_units_per_die(self) -> int:
        return self.banks_per_die // self.banks_per_mac_unit

    @property
    def dies(self) -> int:
        return self.channels * self.ranks_per_channel * self.dies_per_rank

    @property
    def capacity_gib(self) -> float:
        return self.dies * self.capacity_gib_per_die

    @property
    def elements_per_row(self) -> int:
        return int(self.row_bytes // self.element_bytes)

    @property
    def elements_per_column(self) -> int:
        return int(self.column_bytes // self.element_bytes)


@dataclass(frozen=True)
class PimRates:
    """Rates derived from a :class:`PimSpec` (bytes/s, MAC/s)."""

    internal_bytes_s_per_die: float
    internal_bytes_s_per_rank: float
    internal_bytes_s_per_channel: float
    internal_bytes_s: float
    macs_s_per_die: float
    macs_s: float

    @property
    def ops_s(self) -> float:
        return 2.0 * self.macs_s

    @property
    def ops_s_per_die(self) -> float:
        return 2.0 * self.macs_s_per_die


def derive(spec: PimSpec) -> PimRates:
    """Internal read rate and MAC rate of ``spec`` (see the module docstring)."""
    spec.validate()
    t = spec.timings
    per_die = spec.mac_units_per_die * spec.column_bytes / (t.n_ccd_mac * t.tck_ns * 1e-9)
    # (the rate at which the banks deliver bytes; a MAC unit slower than that shows in
    # mac_spacing_cycles / the GEMV time, not here)
    per_rank = per_die * spec.dies_per_rank
    per_channel = per_rank * spec.ranks_per_channel
    macs_die = spec.mac_units_per_die * spec.mac_lanes * spec.mac_clock_ghz * 1e9
    return PimRates(per_die, per_rank, per_channel, per_channel * spec.channels, macs_die, macs_die * spec.dies)


# ================================================================= GEMV (driver sequence)
def _check_gemv(spec: PimSpec, rows: int, cols: int, vectors: int, channels: int | None) -> int:
    if int(rows) < 1 or int(cols) < 1 or int(vectors) < 1:
        raise ValueError(f"rows, cols and vectors must be >= 1, got {rows}, {cols}, {vectors}")
    ch = spec.channels if channels is None else int(channels)
    if not 1 <= ch <= spec.channels:
        raise ValueError(f"channels must be in 1..{spec.channels} for {spec.name}, got {channels}")
    return ch


DRIVER_ORDERS = ("reuse_gb", "per_group")


def _check_order(order: str) -> str:
    if order not in DRIVER_ORDERS:
        raise ValueError(f"driver order must be one of {', '.join(DRIVER_ORDERS)}, got {order!r}")
    return order


def act_spread_cycles(spec: PimSpec, tfaw: bool | None = None) -> int:
    """Cycles from the first to the last bank's ACT of one all-bank activation of a die.

    0 when the all-bank ACT is one command (AiM's ACT16; ``tfaw`` False: the PIM die's
    power grid is built for it, a named power-delivery assumption). With JEDEC tRRD/tFAW
    obeyed (``tfaw`` True) the B banks activate one by one, at most four in any tFAW
    window: bank i (0-based) at max(i x tRRD, (i div 4) x tFAW + (i mod 4) x tRRD), so the
    last one at that value for i = B - 1 (16 banks, LPDDR5-6400 tRRD 4 / tFAW 16 nCK:
    3 x 16 + 3 x 4 = 60 nCK). ``tfaw`` None: the spec's ``all_bank_act_tfaw``."""
    on = spec.all_bank_act_tfaw if tfaw is None else bool(tfaw)
    if not on:
        return 0
    t = spec.timings
    i = spec.banks_per_die - 1
    return int(max(i * t.n_rrd, (i // 4) * t.n_faw + (i % 4) * t.n_rrd))


def register_bursts(spec: PimSpec) -> int:
    """Data bursts one MAC-register ISR (WR_BIAS, RD_MAC) moves on a die: one result of
    ``result_bytes`` per MAC unit over a ``column_bytes`` burst (AiM: 16 x 2 B = one 32 B burst)."""
    return max(1, math.ceil(spec.mac_units_per_die * spec.result_bytes / spec.column_bytes))


def isr_cycles(spec: PimSpec, tfaw: bool | None = None) -> dict:
    """Cycles from the first command of each ISR of the GEMV sequence to the first command
    of the next ISR, on one lockstep unit (opsize-dependent ones as functions of opsize),
    mode switches (TMOD) not included: they are counted per :func:`gemv_counts`.

    Timing constraints are issue-to-issue (Ramulator's convention: a command at cycle t with
    latency L to the next allows it at t + L); a mode switch is issued when the ISR's first
    command would be ready, and every command waits nMODCH (``TMOD``) after it:

    * MAC_ABK(n, h) = nRPab (PREA -> ACT) + the all-bank ACT spread (:func:`act_spread_cycles`)
      + nRCDRDMAC (ACT -> first MAC16; LPDDR5's second ACT step fits inside it)
      + (n - 1) x MAC spacing for h held vectors + 1;
    * RD_MAC = CAS + nCLREG + bursts x nBL (register data back; blocking)
      + ``isr_issue_cycles`` (the PIM DMA decodes the next ISR on its next cycle);
    * WR_BIAS = CAS + (bursts - 1) x n_ccd_wr + 1 (WRMAC16; not blocking);
    * WR_GB(n) = CAS + (n - 1) x n_ccd_wr + 1 (in register mode, after an RD_MAC).

    ISRs of one kind back to back (the reuse order's batches, k > 1 vectors) keep the
    command-to-command rules of the device (the AiM simulator's tables): a register or buffer
    write ISR follows the previous one by at least ``n_ccd_wr`` (``WR_run``), and a MAC_ABK
    right after a MAC_ABK waits nRTP instead of one cycle before its PREA (``MAC_after_MAC``).
    """
    t = spec.timings
    spread = act_spread_cycles(spec, tfaw)
    bursts = register_bursts(spec)
    return {
        "WR_GB": lambda n: t.n_cas + (n - 1) * t.n_ccd_wr + 1,
        "WR_BIAS": t.n_cas + (bursts - 1) * t.n_ccd_wr + 1,
        "MAC_ABK": lambda n, h=1: t.n_rp_ab + spread + t.n_rcd_mac + (n - 1) * mac_spacing_cycles(spec, h) + 1,
        "RD_MAC": t.n_cas + t.n_cl_reg + bursts * t.n_bl + spec.isr_issue_cycles,
        "TMOD": t.n_modch,
        "MAC_after_MAC": max(0, t.n_rtp - 1),
        "WR_run": lambda cost, m: m * cost + (m - 1) * max(0, t.n_ccd_wr - cost) if m > 0 else 0,
    }


def mac_spacing_cycles(spec: PimSpec, held: int | None = None) -> float:
    """Cycles between two all-bank MAC commands: the column-to-column time n_ccd_mac, or
    longer when the MAC unit needs more time for one column's elements times the ``held``
    input vectors (held x elements per column / (lanes x MAC clock); default the spec's
    ``input_slots``) -- a MAC-bound device."""
    t = spec.timings
    h = spec.input_slots if held is None else int(held)
    compute_ns = h * spec.elements_per_column / (spec.mac_lanes * spec.mac_clock_ghz)
    return max(float(t.n_ccd_mac), compute_ns / t.tck_ns)


def refresh_stretch(spec: PimSpec, refresh: bool = True) -> float:
    """Factor all-bank refresh stretches a busy PIM sequence by: every n_refi the rank is
    blocked n_rfc and the interrupted row is re-opened (nRPab + nRCDRDMAC). 1 with
    ``refresh`` False (what the AiM simulator does for GDDR6, validation/peers/README.md)."""
    t = spec.timings
    if not refresh:
        return 1.0
    lost = t.n_rfc + t.n_rp_ab + t.n_rcd_mac
    return 1.0 / (1.0 - lost / t.n_refi)


def _passes(spec: PimSpec, vectors: int) -> list[tuple[int, int]]:
    """[(vectors held in the pass, number of such passes)]: the global buffer holds
    ``input_slots`` vectors, so ``vectors`` take ceil(vectors / k) passes over the matrix."""
    k = spec.input_slots
    full, last = divmod(int(vectors), k)
    out = [(k, full)] if full else []
    if last:
        out.append((last, 1))
    return out


def _batches(spec: PimSpec, groups: int, held: int, order: str) -> int:
    """Batches of output groups one global-buffer chunk serves between mode switches:
    per_group = one group per batch; reuse_gb = as many groups as the result registers hold
    partial sums for (registers // held vectors; CENT's ``reuse-GB`` order,
    ``num_reuse_groups`` = ceil(groups / that))."""
    if _check_order(order) == "per_group":
        return groups
    per_batch = max(1, spec.result_registers // held)
    return math.ceil(groups / per_batch)


def _batch_sizes(groups: int, batches: int) -> list[tuple[int, int]]:
    """[(groups in a batch, batches of that size)]: CENT balances them, ceil(groups / batches)
    each and the rest in the last."""
    size = math.ceil(groups / batches)
    last = groups - size * (batches - 1)
    return [(size, batches - 1), (last, 1)] if batches > 1 else [(groups, 1)]


def gemv_counts(spec: PimSpec, rows: int, cols: int, vectors: int = 1, channels: int | None = None,
                *, dies: int | None = None, order: str = "reuse_gb") -> dict:
    """ISR and mode-switch counts (per lockstep unit) and the layout of a GEMV W[rows x cols] . x.

    ``dies`` (instead of ``channels``): the GEMV runs on that many dies of the preset, all
    working in parallel (the simulator's PIM units, :class:`ahasd_sim.hw.pim.PimMemory`:
    one unit = one die); rows are spread over every MAC unit of those dies.

    Per pass (``h`` <= input_slots vectors held), per chunk: h WR_GB; per output group
    h WR_BIAS, one MAC_ABK, h RD_MAC; two mode switches per batch (into MAC mode before the
    batch's MAC_ABKs, back into register mode before its RD_MACs), plus the first one."""
    if dies is None:
        ch = _check_gemv(spec, rows, cols, vectors, channels)
        units = ch * spec.ranks_per_channel                   # ranks work concurrently; dies of a rank in lockstep
        banks = spec.mac_units_per_die * spec.dies_per_rank  # output elements per MAC_ABK per unit
    else:
        _check_gemv(spec, rows, cols, vectors, None)
        if int(dies) < 1:
            raise ValueError(f"dies must be >= 1, got {dies}")
        ch, units, banks = None, int(dies), spec.mac_units_per_die
    chunks = math.ceil(cols / spec.elements_per_row)
    groups = math.ceil(rows / (banks * units))
    passes = _passes(spec, vectors)
    n_pass = sum(n for _, n in passes)
    tmod = 1 + 2 * chunks * sum(n * _batches(spec, groups, h, order) for h, n in passes)
    return {"channels": ch, "units": units, "banks_per_unit": banks, "chunks": chunks, "groups": groups,
            "passes": n_pass, "order": order,
            "WR_GB": vectors * chunks, "WR_BIAS": vectors * chunks * groups,
            "MAC_ABK": n_pass * chunks * groups, "RD_MAC": vectors * chunks * groups, "TMOD": tmod}


def gemv_cycles(spec: PimSpec, rows: int, cols: int, vectors: int = 1, channels: int | None = None,
                refresh: bool = True, *, dies: int | None = None, order: str = "reuse_gb",
                tfaw: bool | None = None) -> float:
    """Cycles (of ``spec.timings.tck_ns``) of ``vectors`` GEMVs y = W[rows x cols] . x on
    ``channels`` channels (None = all) or on ``dies`` dies, refresh included unless
    ``refresh`` is False, in driver ``order`` (``reuse_gb``: CENT's global-buffer reuse,
    mode switches batched over as many output groups as the result registers hold;
    ``per_group``: two mode switches per output group). ``tfaw``: override the spec's
    all-bank ACT rule (:func:`act_spread_cycles`)."""
    c = gemv_counts(spec, rows, cols, vectors, channels, dies=dies, order=order)
    isr = isr_cycles(spec, tfaw)
    total = float(isr["TMOD"])                       # the sequence's first mode switch
    for held, n_pass in _passes(spec, vectors):
        per_pass = 0.0
        batches = _batches(spec, c["groups"], held, order)
        for k in range(c["chunks"]):
            n_elem = min(spec.elements_per_row, cols - k * spec.elements_per_row)
            opsize = math.ceil(n_elem / spec.elements_per_column)
            wr_gb = isr["WR_run"](isr["WR_GB"](opsize), held)
            per_pass += wr_gb + 2 * batches * isr["TMOD"] + c["groups"] * (isr["MAC_ABK"](opsize, held)
                                                                            + held * isr["RD_MAC"])
            # per batch: its WR_BIAS back to back, its MAC_ABK back to back (nRTP between them)
            for size, n_b in _batch_sizes(c["groups"], batches):
                per_pass += n_b * (isr["WR_run"](isr["WR_BIAS"], size * held)
                                   + (size - 1) * isr["MAC_after_MAC"])
        total += n_pass * per_pass
    return total * refresh_stretch(spec, refresh)


def gemv_time_s(spec: PimSpec, rows: int, cols: int, vectors: int = 1, channels: int | None = None,
                refresh: bool = True, *, dies: int | None = None, order: str = "reuse_gb",
                tfaw: bool | None = None) -> float:
    return gemv_cycles(spec, rows, cols, vectors, channels, refresh, dies=dies, order=order,
                       tfaw=tfaw) * spec.timings.tck_ns * 1e-9


def gemv_io_bytes(spec: PimSpec, rows: int, cols: int, vectors: int = 1, *, dies: int,
                  input_bytes: float | None = None) -> dict:
    """Protocol bytes a GEMV moves on the dies' data buses (host <-> PIM), by ISR, summed
    over the ``dies``: WR_GB writes each vector's input chunks into every die's global
    buffer (a broadcast, paid on every die's bus: ``input_bytes`` per element, default the
    weight element size); WR_BIAS and RD_MAC move one result register per MAC unit
    (``result_bytes``) per output group, chunk and vector."""
    c = gemv_counts(spec, rows, cols, vectors, dies=dies)
    ib = spec.element_bytes if input_bytes is None else float(input_bytes)
    reg = spec.mac_units_per_die * spec.result_bytes
    per_die = {"WR_GB": vectors * cols * ib, "WR_BIAS": c["WR_BIAS"] * reg, "RD_MAC": c["RD_MAC"] * reg}
    return {k: v * int(dies) for k, v in per_die.items()}


def with_rates(spec: PimSpec, *, element_bytes: float | None = None, internal_bytes_s_per_die: float | None = None,
               macs_s_per_die: float | None = None) -> PimSpec:
    """``spec`` re-expressed for a GEMV of ``element_bytes`` elements (INT4 = 0.5) and, where
    a rate is typed (``pim.internal_bw_gb_s`` / ``pim.unit_gops_int8``), with that rate
    instead of the derived one: a typed internal bandwidth sets the all-bank MAC command
    spacing (``n_ccd_mac`` = MAC units x column bytes / (rate x tCK), fractional cycles
    allowed: a typed rate is a hypothetical device), a typed MAC rate sets the MAC clock
    (rate / (MAC units x lanes)). The command overheads (mode switches, ACT, RD_MAC) stay
    the preset's. Not validated again: a typed rate may exceed what the timings allow."""
    changes: dict = {}
    if element_bytes is not None and element_bytes != spec.element_bytes:
        if not element_bytes > 0:
            raise ValueError(f"element_bytes must be > 0, got {element_bytes}")
        changes["element_bytes"] = element_bytes
    if internal_bytes_s_per_die is not None:
        ccd = spec.mac_units_per_die * spec.column_bytes / (internal_bytes_s_per_die * spec.timings.tck_ns * 1e-9)
        changes["timings"] = replace(spec.timings, n_ccd_mac=ccd)
    if macs_s_per_die is not None:
        changes["mac_clock_ghz"] = macs_s_per_die / (spec.mac_units_per_die * spec.mac_lanes) / 1e9
    return replace(spec, **changes) if changes else spec


def gemv_stream_time_s(spec: PimSpec, rows: int, cols: int, vectors: int = 1, channels: int | None = None) -> float:
    """Lower bound: the weight bytes at the derived internal rate of the used channels,
    vectors x (no overheads). The ratio gemv_time_s / this is the driver's efficiency."""
    ch = _check_gemv(spec, rows, cols, vectors, channels)
    r = derive(spec)
    return vectors * rows * cols * spec.element_bytes / (r.internal_bytes_s_per_channel * ch)


# ================================================================= presets
_AIM_L5_TIMINGS = PimTimings(
    # LPDDR5_AiM_timing: nBL 4, nRCDRDMAC 56, nRPab 17, nCCD 4, nMODCH 32, nCLREG 0; CAS sync
    # before every register read/write (PREQ_RANK_SYNC_DEF); ACT16 in two steps (ACT16-1/-2).
    # Refresh in cycles as the simulator computes them: JEDEC_rounding(280 ns / 3906 ns,
    # tCK_ps = 1e6 / (6400 / 2) = 312 ps) = 898 / 12520 (the simulator derives its refresh
    # cycles from a 312 ps clock while its other timings are in 1.25 ns cycles; we copy its
    # cycle counts, configured identically).
    tck_ns=1.25, n_ccd_mac=4, n_ccd_wr=4, n_rp_ab=17, n_rcd_mac=56, n_modch=32, n_cas=1,
    n_bl=4, n_cl_reg=0, n_rfc=898, n_refi=12520, n_rrd=4, n_faw=16, n_rtp=4, source=_AIM_L5)
_AIM_G6_TIMINGS = PimTimings(
    # GDDR6_AiM_timing: nBL 2, nCCDS 2 = nCCDL 2, nRCDRDMAC 56, nRP 32, nMODCH 32, nCLREG 0,
    # nRFC 210, nREFI 3333, tCK_ps 500 (2 GHz command clock of a 16 Gb/s GDDR6-AiM, ISSCC 2022)
    tck_ns=0.5, n_ccd_mac=2, n_ccd_wr=2, n_rp_ab=32, n_rcd_mac=56, n_modch=32, n_cas=0,
    n_bl=2, n_cl_reg=0, n_rfc=210, n_refi=3333, n_rrd=11, n_faw=42, n_rtp=12, source=_AIM_G6)

PRESETS: dict[str, PimSpec] = {
    "lpddr5_aim": PimSpec(
        name="lpddr5_aim", standard="LPDDR5", channels=32, ranks_per_channel=1, dies_per_rank=1, bankgroups=4,
        banks_per_bankgroup=4, banks_per_mac_unit=1, column_bytes=32, row_bytes=2048, element_bytes=2,
        mac_lanes=16, mac_clock_ghz=0.2, capacity_gib_per_die=4.0, timings=_AIM_L5_TIMINGS,
        result_registers=32, result_bytes=2, all_bank_act_tfaw=False,
        sources={"driver": _CENT_REUSE, "act": "ACT16: one all-bank activation command (the simulator's LPDDR5 AiM "
                 "preset; a PIM die built for it, tFAW lifted)","topology": _AIM_L5 + ": 32 ch x 1 rank x 4 BG x 4 banks x 128K rows x 1K col x16 (32 Gb)",
                 "column_bytes": "x16 x BL16 = 32 B (the AiM 256-bit MAC operand)",
                 "mac": "16 BF16 lanes per bank (GDDR6-AiM, ISSCC 2022); clock = one MAC16 per nCCD = 4 x 1.25 ns "
                        "(200 MHz): the simulator issues MAC16 every nCCD", "timings": _AIM_L5,
                 "protocol": _AIM_PROTO}),
    "gddr6_aim": PimSpec(
        name="gddr6_aim", standard="GDDR6", channels=32, ranks_per_channel=1, dies_per_rank=1, bankgroups=4,
        banks_per_bankgroup=4, banks_per_mac_unit=1, column_bytes=32, row_bytes=2048, element_bytes=2,
        mac_lanes=16, mac_clock_ghz=1.0, capacity_gib_per_die=0.5, timings=_AIM_G6_TIMINGS,
        result_registers=32, result_bytes=2, all_bank_act_tfaw=False,
        sources={"driver": _CENT_REUSE, "act": "ACT16 all-bank activation of GDDR6-AiM (ISSCC 2022; the simulator "
                 "marks nFAW 'not used')","topology": _AIM_G6 + ": 32 ch x 4 BG x 4 banks x 16K rows x 1K col x16",
                 "mac": "16 BF16 MACs per bank at 1 GHz, 1 TFLOPS per 2-channel chip (Lee et al., ISSCC 2022, "
                        "doi:10.1109/ISSCC42614.2022.9731711)", "timings": _AIM_G6, "protocol": _AIM_PROTO}),
    # AHASD Table 2 mapped onto LPDDR5: 51.2 GB/s off-chip = x64 at 6400 MT/s = 4 x16 channels;
    # 16 ranks x 4 GB cannot be 16 JEDEC ranks on 4 channels (<= 2 per channel), so the
    # paper's 16 "ranks" are 4 channels x 2 ranks x 2 x8 dies (byte mode), one PIM unit and
    # 4 GB (32 Gb) per die. A x8 die moves 8 bit x BL16 = 16 B per column access, its row is
    # 1 KB. Timings: LPDDR5-6400 (Ramulator 2 preset, as our memory validation) with the
    # AiM PIM command timings (nRCDRDMAC, nMODCH) of the LPDDR5-AiM preset; all-bank MAC
    # spacing tCCD_L = 4 nCK (same bank group: every bank gets one column per tCCD_L).
    # MAC: 102.4 GOPS INT8 per unit (paper) = 51.2 GMAC/s = 16 banks x 4 lanes x 0.8 GHz
    # (the AHASD 800 MHz PIM clock); weights stored as 16-bit here only when called through
    # pim_gemv_time_s (AiM's layout); PimMemory uses INT8 (element_bytes 1).
    "lpddr5_pim": PimSpec(
        name="lpddr5_pim", standard="LPDDR5", channels=4, ranks_per_channel=2, dies_per_rank=2, bankgroups=4,
        banks_per_bankgroup=4, banks_per_mac_unit=1, column_bytes=16, row_bytes=1024, element_bytes=1,
        mac_lanes=4, mac_clock_ghz=0.8, capacity_gib_per_die=4.0,
        result_registers=32, result_bytes=4, all_bank_act_tfaw=True,
        timings=replace(_AIM_L5_TIMINGS, n_rp_ab=15, n_refi=3125, n_rfc=224, n_rrd=4, n_faw=16,
                        source=_RAM2_L5 + " (tRPab 18 ns -> 15 nCK; tRFCab 280 ns / tREFI 3906 ns at 1.25 ns = "
                        "224 / 3125 nCK; tRRD 4, tFAW 16, tRTP 4 nCK) + LPDDR5_AiM_timing PIM commands (nRCDRDMAC 56, "
                        "nMODCH 32)"),
        sources={"topology": _AHASD + " on JESD209-5B: 4 x16 channels x 2 ranks x 2 x8 dies (byte mode)",
                 "mac": _AHASD + ": 102.4 GOPS INT8 per unit / (16 banks x 2 ops x 0.8 GHz) = 4 lanes per bank; "
                        "800 MHz PIM clock (AHASD artifact)", "timings": _RAM2_L5,
                 "act": "a JEDEC LPDDR5 die: all-bank ACT obeys tRRD/tFAW (JESD209-5B); pim.all_bank_act lifts it",
                 "result_bytes": "INT8 x INT8 products summed over a 1 KB row chunk need 8 + 8 + 10 = 26 bits: a "
                                 "32-bit register", "driver": _CENT_REUSE}),
    # Samsung HBM-PIM: HBM2 at 2.4 Gb/s (tCK 0.833 ns), 16 PIM pseudo channels per cube
    # (4 PIM dies x 4 pseudo-channel pairs... counted as 16 pseudo channels of 16 banks),
    # one PCU (16-lane FP16 SIMD, 300 MHz) per bank pair, all-bank mode: 8 PCUs per pseudo
    # channel read 32 B every tCCD_L = 4 nCK -> 76.8 GB/s per pseudo channel, 1.23 TB/s and
    # 1.2 TFLOPS per cube (the papers' figures, which this derivation reproduces).
    "hbm_pim": PimSpec(
        name="hbm_pim", standard="HBM2", channels=16, ranks_per_channel=1, dies_per_rank=1, bankgroups=4,
        banks_per_bankgroup=4, banks_per_mac_unit=2, column_bytes=32, row_bytes=1024, element_bytes=2,
        mac_lanes=16, mac_clock_ghz=0.3, capacity_gib_per_die=0.1875,
        result_registers=8, result_bytes=2, all_bank_act_tfaw=False,
        timings=PimTimings(tck_ns=1 / 1.2, n_ccd_mac=4, n_ccd_wr=2, n_rp_ab=17, n_rcd_mac=17,
                           n_modch=32, n_cas=0, n_bl=2, n_cl_reg=0, n_rfc=420, n_refi=4680, n_rrd=0, n_faw=0, n_rtp=4,
                           source="JESD235 HBM2 at 2.4 Gb/s (tCK 0.833 ns): tRP/tRCD 14 ns = 17 nCK, tCCD_L 4 nCK, "
                           "tRFC 350 ns = 420 nCK, tREFI 3.9 us = 4680 nCK (grade B: datasheet class values); ACT -> MAC = tRCD (no PIM offset published, assumption grade C); "
                           "mode switch as AiM's nMODCH (assumption, grade C)"),
        sources={"topology": _HBMPIM + ": PIM pseudo channels of 16 banks, a PCU per bank pair",
                 "mac": _HBMPIM + ": 16-lane FP16 SIMD per PCU at 300 MHz, 1.2 TFLOPS per cube",
                 "timings": "JESD235 (grade B)",
                 "result_registers": _HBMPIM + ": 8 GRF_B vector registers per PCU hold partial sums",
                 "act": "HBM-PIM all-bank mode activates every bank with one command (tFAW lifted)"}),
}


def preset(name: str) -> PimSpec:
    if name not in PRESETS:
        from ..config.errors import did_you_mean
        raise ConfigError("", "pim.preset", f"unknown PIM preset {name!r}{did_you_mean(name, PRESETS)} "
                          f"(known: {', '.join(PRESETS)})")
    return PRESETS[name].validate()


def with_topology(name: str, **changes) -> PimSpec:
    """``preset(name)`` with topology fields changed, validated (a bad value is a ConfigError
    naming the key)."""
    base = preset(name)
    known = {f.name for f in fields(PimSpec)}
    for k in changes:
        if k not in known:
            raise ConfigError("", f"pim_spec.{name}.{k}", f"unknown field (known: {', '.join(sorted(known))})")
    return replace(base, **changes).validate()


def describe(spec: PimSpec) -> dict:
    """The derived values of a spec, for printing (config-reference, describe_platform)."""
    r = derive(spec)
    return {"preset": spec.name, "topology": f"{spec.channels} ch x {spec.ranks_per_channel} rank x "
            f"{spec.dies_per_rank} die x {spec.banks_per_die} banks ({spec.mac_units_per_die} MAC units/die)",
            "internal_gb_s_per_die": r.internal_bytes_s_per_die / 1e9,
            "internal_gb_s_per_channel": r.internal_bytes_s_per_channel / 1e9,
            "internal_gb_s": r.internal_bytes_s / 1e9, "gmacs_per_die": r.macs_s_per_die / 1e9,
            "gops_per_die": r.ops_s_per_die / 1e9, "tops": r.ops_s / 1e12,
            "refresh_stretch": refresh_stretch(spec)}
