"""LPDDR5-PIM: ranks with bank-level PIM units, the AAU and the GTS (section ``pim``).

Reading of the AHASD paper's PIM row (Table 2: 16 PIM units, 102.4 GOPS INT8,
4 GB/rank x 16, 256 GB/s on-chip, 51.2 GB/s off-chip); modeling.md decisions 7-8:

* ``gops_scope`` / ``bw_scope`` say whether 102.4 GOPS and 256 GB/s are **per unit**
  (default, "reproduction" reading: 16 units x 102.4 = 1.64 TOPS in total) or the
  **total** of the device. Compute and internal bandwidth are independent parameters
  (102.4 GOPS cannot consume 256 GB/s of INT8 weights; it needs >= 512 GOPS).
* 16 units on 16 ranks -> ``units_per_rank = 1``; capacities and rates are spread
  evenly over ranks, and a model striped over ``r`` ranks gets ``r`` ranks' worth.
* Models live in distinct ranks (paper): :meth:`PimMemory.partition` gives each model
  the ranks its bytes (+ KV reserve) need (``min_fit``, the split of references.md#ahasd-aau-gts:
  OPT 1+2, LLaMA2 2+4, PaLM-like 3+8) or spreads every rank pro rata
  (``proportional``).

GEMV on PIM (:meth:`PimMemory.gemv_cost`): by default (``gemv_timing:
command_sequence``) the ISR sequence a PIM driver issues on ``pim.preset``'s timings,
validated against the AiM simulator (hw/pim_spec.py; docs/validation.md); ``roofline``
keeps the v0.1 model, max(bytes / internal bandwidth, 2 x MACs / PIM op rate) of the
ranks used + a fixed per-op overhead. A multi-token op (pre-verification of L tokens)
reads its weights and KV once per ``vectors_per_weight_read`` input vectors and does
L x the MACs (the workload op's ``macs`` already counts the L tokens). Energy (device "pim"):
bank-local access pJ/bit + row activations + PIM MAC energy.

AAU (one per rank, ``pim.aau``): cycle formulas of references.md#ahasd-aau-gts at the PIM
clock. GTS (``pim.gts``): rank-level gated task switch.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..config.errors import ConfigError
from ..config.fields import param
from ..config.registry import config_section
from .cost import ELEMENTWISE_KINDS, MATRIX_KINDS, OpCost, op_kind
from .npu import OPS_PER_MAC, nonlinear_class_of
from . import pim_spec as _spec
from . import pim_unit as _unit

_AHASD = "AHASD paper Table 2"
_AAU_SRC = "AHASD artifact AAU model (references.md#ahasd-aau-gts)"
GIB = 2**30


# ============================================================== config sections
@dataclass
class AauConfig:
    """Attention Algorithm Unit: one per LPDDR5-PIM rank, runs GELU/Softmax/LayerNorm/reductions."""

    enabled: bool = param(True, doc="AAUs present; if false nonlinear ops of PIM models are offloaded to the "
                          "host (NPU vector unit / GPU) and their operands cross the external bus")
    clock_ghz: float = param(0.8, doc="AAU clock", unit="GHz", gt=0, le=5.0,
                             bound_reason="logic in a DRAM process runs below ~1 GHz; 5 GHz is past any", source=_AAU_SRC + ": 800 MHz PIM clock")
    lanes: int = param(16, doc="SIMD lanes", ge=1, le=4096,
                       bound_reason="4096 lanes per AAU is 256x the paper's 16", source=_AAU_SRC + ": 16 lanes, single issue")
    pipeline_cycles: int = param(8, doc="fixed pipeline latency per op", unit="cycle", ge=0, source=_AAU_SRC)
    gelu_cycles_per_vector: int = param(2, doc="cycles per 16-element vector, GELU (SiLU/SwiGLU)", ge=1,
                                        source=_AAU_SRC + ": 8 + 2 ceil(N/16)")
    softmax_cycles_per_vector: int = param(3, doc="cycles per vector, Softmax", ge=1,
                                           source=_AAU_SRC + ": 8 + 3 ceil(N/16)")
    layernorm_cycles_per_vector: int = param(3, doc="cycles per vector, LayerNorm/RMSNorm", ge=1,
                                             source=_AAU_SRC + ": 8 + 3 ceil(N/16)")
    attention_score_cycles_per_vector: int = param(4, doc="cycles per vector, attention score", ge=1,
                                                   source=_AAU_SRC + ": 8 + 4 ceil(N/16)")
    reduction_cycles_per_vector: int = param(0, doc="streaming cycles per vector of a reduction on top of the "
                                             "log tree; 0 = the artifact formula 8 + floor(log2 N) + 1, "
                                             "1 = also read the N elements through the 16 lanes", ge=0,
                                             source=_AAU_SRC + " (0); physical streaming (1) is our option")
    gelu_pj_per_element: float = param(0.8, doc="GELU energy per element", unit="pJ", gt=0, source=_AAU_SRC)
    softmax_pj_per_element: float = param(1.2, doc="Softmax energy per element", unit="pJ", gt=0, source=_AAU_SRC)
    layernorm_pj_per_element: float = param(1.0, doc="LayerNorm energy per element", unit="pJ", gt=0,
                                            source=_AAU_SRC)
    attention_score_pj_per_element: float = param(1.5, doc="attention-score energy per element", unit="pJ", gt=0,
                                                  source=_AAU_SRC)
    reduction_pj_per_element: float = param(0.3, doc="reduction energy per element", unit="pJ", gt=0,
                                            source=_AAU_SRC)
    static_power_mw: float = param(5.0, doc="static power of one AAU", unit="mW", ge=0,
                                   source=_AAU_SRC + ": 18.5 mW = 5.0 static + 13.5 dynamic")
    offload_bytes_per_element: float = param(1.0, doc="bytes per element shipped each way when an op is offloaded "
                                             "and the op does not state its activation bytes", unit="B", gt=0,
                                             source="INT8 activations (AHASD runs everything in INT8)")
    offload_roundtrip_us: float = param(5.0, doc="host synchronisation per offloaded op with the AAU disabled "
                                        "(PIM completion -> host notified -> result written back)", unit="us",
                                        ge=0, source="assumption (grade C): interrupt/poll + DMA setup on a mobile "
                                        "SoC is a few us (cf. 5-10 us per async copy [nvbw]); sweep it")


@dataclass
class GtsConfig:
    """Gated Task Scheduling: rank-level switch between drafting and pre-verification."""

    enabled: bool = param(True, doc="GTS present (sub-microsecond rank-level gating); if false a coarse, "
                          "software-managed switch is charged")
    switch_cycles: int = param(1, doc="switch latency with GTS", unit="PIM cycle", ge=0,
                               source="AHASD artifact: 1 PIM cycle (1.25 ns at 800 MHz), references.md#ahasd-aau-gts")
    switch_pj: float = param(50.0, doc="switch energy with GTS", unit="pJ", ge=0,
                             source="AHASD artifact: 50 pJ (references.md#ahasd-aau-gts)")
    queue_depth: int = param(8, doc="task queue depth", ge=1, source="AHASD artifact (references.md#ahasd-aau-gts)")
    static_power_mw: float = param(0.5, doc="GTS static power", unit="mW", ge=0,
                                   source="AHASD artifact: 0.5 mW")
    coarse_switch_us: float = param(10.0, doc="switch time without GTS: the host CPU drains the PIM command "
                                    "queue, reprograms the ranks' PIM mode and restarts (driver path)", unit="us",
                                    ge=0, source="assumption (grade C): an OS/driver round trip on a mobile CPU "
                                    "is ~5-20 us; the paper only says GTS makes it sub-microsecond")
    coarse_switch_uj: float = param(5.0, doc="energy of one coarse switch (CPU core active for the switch)",
                                    unit="uJ", ge=0, source="assumption (grade C): ~0.5 W CPU core x 10 us")


@config_section("pim")
@dataclass
class PimConfig:
    """LPDDR5-PIM ranks (bank-level PIM units) with nested ``aau`` and ``gts`` sub-sections."""

    enabled: bool = param(True, doc="main memory is LPDDR5-PIM")
    ranks: int = param(16, doc="PIM ranks", ge=1, le=256,
                       bound_reason="a phone memory has 4-16 ranks; 256 ranks is a server's worth", source=_AHASD + ": 4 GB/rank x 16")
    rank_capacity_gib: float = param(4.0, doc="capacity of one rank", unit="GiB", gt=0,
                                     source=_AHASD + ": 4 GB/rank")
    units_per_rank: int = param(1, doc="PIM compute units per rank (16 units / 16 ranks)", ge=1, le=256,
                                bound_reason="HBM-PIM puts one unit per 2 banks (16 per channel); 256 per rank is past it",
                                source=_AHASD + ": 16 PIM units")
    preset: str = param("lpddr5_pim", doc="PIM device spec (hw/pim_spec.py) whose derived rates are used when "
                        "unit_gops_int8 / internal_bw_gb_s are null; derived per unit (a die of the preset): "
                        + "; ".join(f"{n}: {d['gops_per_die']:.1f} GOPS, {d['internal_gb_s_per_die']:.1f} GB/s"
                                    for n, d in ((n, _spec.describe(_spec.PRESETS[n])) for n in _spec.PRESETS)),
                        choices=tuple(_spec.PRESETS), source="docs/modeling.md 'PIM rates derived from the memory'; "
                        "lpddr5_pim = AHASD Table 2 on JESD209-5B (4 ch x 2 ranks x 2 x8 dies)")
    unit_gops_int8: float | None = param(None, doc="typed override of the INT8 PIM compute per unit (2 ops/MAC), "
                                         "scope set by gops_scope; null = derived from pim.preset (MAC units x "
                                         "lanes x clock)", unit="GOPS", gt=0,
                                         source=_AHASD + ": 102.4 GOPS INT8 (the paper preset types it)")
    gops_scope: str = param("per_unit", doc="a typed unit_gops_int8 is per unit or the device total (derived "
                            "rates are per unit)",
                            choices=("per_unit", "total"), source="modeling.md decision 7: per_unit reproduces "
                            "the many-drafts-per-verification regime")
    internal_bw_gb_s: float | None = param(None, doc="typed override of the on-chip (bank-side) bandwidth, scope "
                                           "set by bw_scope; null = derived from pim.preset (MAC-parallel banks x "
                                           "column bytes / all-bank column-to-column time)", unit="GB/s", gt=0,
                                           source=_AHASD + ": 256 GB/s on-chip (the paper preset types it)")
    bw_scope: str = param("per_unit", doc="a typed internal_bw_gb_s is per unit or the device total (derived "
                          "rates are per unit)",
                          choices=("per_unit", "total"), source="modeling.md decision 8")
    clock_ghz: float = param(0.8, doc="PIM clock (AAU/GTS cycles)", unit="GHz", gt=0, le=5.0,
                             bound_reason="logic in a DRAM process runs below ~1 GHz; 5 GHz is past any",
                             source="AHASD artifact: 800 MHz, 1.25 ns cycle")
    dram_power_limit_w: float | None = param(None, doc="power limit of the memory package (DRAM background + "
                                             "PIM, AAU and GTS leakage + PIM GEMVs + the host's I/O), enforced on "
                                             "the power a run actually draws: every PIM GEMV runs no faster than "
                                             "its own energy over its ranks' share of the PIM budget, and the "
                                             "host's streams no faster than their I/O budget (docs/modeling.md "
                                             "'DRAM power budget'); null = no limit",
                                             unit="W", gt=0,
                                             source="no sourced limit for a phone LPDDR5(-PIM) package was found "
                                             "(JEDEC JESD209-5 specifies currents, not a package limit): null by "
                                             "default; sweep it (a whole phone sustains 3-5 W, docs/references.md "
                                             "'Phone memory and power envelope')")
    power_limit_kind: str = param("instantaneous", doc="what dram_power_limit_w bounds: instantaneous = the "
                                  "package power at every moment, at the grain of one PIM operator (the "
                                  "concurrent host stream keeps a share of the budget only in modes where it "
                                  "overlaps PIM compute); mean = the package's mean power over the run (a rate "
                                  "limiter over a window longer than a token: the run is slowed uniformly until "
                                  "its energy over its makespan meets the limit)",
                                  choices=("instantaneous", "mean"),
                                  source="instantaneous: a package's current limit (power delivery, arXiv "
                                  "2604.04773); mean: a sustained (thermal) budget, RAPL-style")
    dvfs_rate_fraction: float = param(1.0, doc="DVFS state of the PIM units: their command and MAC rate as a "
                                      "fraction of the full rate (GEMVs take 1/this as long, same energy); set "
                                      "by a thermal governor's state (thermal.pim_rate_fractions)", gt=0, le=1,
                                      source="1 = full rate; the governor's ladder: thermal.pim_rate_fractions")
    gemv_timing: str = param("command_sequence", doc="how a PIM GEMV is timed: command_sequence = the ISR "
                             "sequence a PIM driver issues on pim.preset's timings (WR_GB per input chunk; "
                             "WR_BIAS, MAC_ABK with its mode switch/PREA/ACT, blocking RD_MAC per output group; "
                             "all-bank refresh), validated against the AiM simulator (docs/validation.md; a "
                             "typed rate replaces the MAC-command spacing or MAC clock in it); roofline = "
                             "max(bytes / internal bandwidth, 2 x MACs / op rate) + op_overhead_ns (the v0.1 model)",
                             choices=("command_sequence", "roofline"),
                             source="SK hynix AiM command protocol (ISSCC 2022; CENT, ASPLOS 2025, "
                             "github arkhadem/aim_simulator)")
    op_overhead_ns: float = param(100.0, doc="fixed per-op PIM overhead (command issue, input broadcast to "
                                  "units, result collection); used by gemv_timing: roofline only (the command "
                                  "sequence has its own overheads)", unit="ns", ge=0, source="assumption (grade C)")
    bank_pj_per_bit: float = param(0.8, doc="bank-local access energy", unit="pJ/bit", ge=0,
                                   source="0.55 pJ/bit HBM2 bank-level [AttAccCfg]; 0.6-1.0 for LPDDR5 "
                                   "(references.md#lpddr5, grade A/C)")
    pj_per_mac: float = param(0.3, doc="PIM INT8 MAC energy (DRAM-process logic)", unit="pJ/MAC", gt=0,
                              source="references.md#derived-defaults (grade C): ~2x logic-process 0.17 pJ/MAC")
    static_mw_per_rank: float = param(5.0, doc="PIM-unit leakage per rank (AAU and GTS counted separately)",
                                      unit="mW", ge=0, source="assumption (grade C), same order as the AAU's 5 mW")
    partition_policy: str = param("auto", doc="rank allocation of the draft and target model: auto = each mode "
                                  "chooses its best allocation among the four below, measured on the tuning data "
                                  "(section tuning; data the reported run does not use) and recorded in "
                                  "summary.json's pim_placement; all_ranks = both models striped over every rank "
                                  "(each rank holds a slice of both; what a mode that never runs the two models at "
                                  "the same time, such as operator_sync, can use); striped = each "
                                  "model is striped over every rank the other model does not need for itself "
                                  "(ranks in the middle hold slices of both; their PIM units are time-multiplexed "
                                  "by GTS and the host's reads of them contend with PIM compute, see "
                                  "host_share_of_active_rank); min_fit = distinct ranks, each model gets "
                                  "ceil(bytes / rank capacity) ranks and the rest stay idle; proportional = "
                                  "distinct ranks, every rank given out pro rata to the bytes (at least min_fit each)",
                                  choices=("auto", "all_ranks", "striped", "min_fit", "proportional"),
                                  source="auto: fair baselines (each competitor's best placement on the same hardware); "
                                  "striped: what a designer builds to use every PIM unit; "
                                  "min_fit/proportional: references.md#ahasd-aau-gts (distinct ranks)")
    unit: str = param("aim", doc="PIM unit microarchitecture (hw/pim_unit.py): input-vector slots, MAC lanes and "
                      "precision, global buffer, result registers; area, leakage and capacity derived from it "
                      "(python -m ahasd_sim area)", choices=tuple(_unit.UNIT_PRESETS),
                      source="aim: GDDR6-AiM as CENT drives it (ISSCC 2022; ASPLOS 2025); gemm_k8: LP-Spec "
                      "(arXiv 2508.07227) / CD-PIM (arXiv 2601.12298)-like GEMM-capable unit; hbm_pim: Samsung "
                      "HBM-PIM (ISSCC 2021)")
    vectors_per_weight_read: int | None = param(None, doc="input-vector slots k of the PIM unit: vectors its global "
                                                "buffer holds and multiplies per weight row it reads (a multi-token "
                                                "GEMM reads its weights ceil(tokens / k) times); null = pim.unit's "
                                                "k; the lanes follow (pim.mac_lanes_per_bank)", ge=1, le=64,
                                                bound_reason="64 vectors per weight read is 8x the widest "
                                                "published GEMM-capable PIM verification width",
                                                source="SK hynix GDDR6-AiM: one 2 KB global buffer per channel holds "
                                                "one input vector (ISSCC 2022, doi:10.1109/ISSCC42614.2022.9731711); "
                                                "Samsung HBM-PIM's GRF likewise (ISCA 2021, "
                                                "doi:10.1109/ISCA52012.2021.00013)")
    mac_lanes_per_bank: int | None = param(None, doc="MAC lanes per bank of the PIM unit; null = sized for k vectors "
                                           "at the preset's column rate (k x the one-vector lanes); fewer than k "
                                           "needs is refused unless pim.mac_bound", ge=1, le=1024,
                                           bound_reason="1024 lanes per bank is 64x AiM's 16",
                                           source="derived (hw/pim_unit.py lanes_needed)")
    result_registers_per_bank: int | None = param(None, doc="MAC result registers per bank (output groups one "
                                                  "global-buffer chunk serves between mode switches, x k); null = "
                                                  "pim.unit's (aim: 32 per vector slot)", ge=1, le=4096,
                                                  bound_reason="4096 registers per bank is 128x CENT's 32",
                                                  source="CENT driver --reuse_size 32 'depending on register number'")
    mac_bound: bool = param(False, doc="accept a unit with fewer MAC lanes than k vectors need (its MAC spacing "
                            "stretches: MAC-bound); false = such a config is an error")
    driver_order: str = param("reuse_gb", doc="PIM driver's GEMV command order: reuse_gb = CENT's global-buffer "
                              "reuse (the input chunk in the global buffer serves a batch of output groups, mode "
                              "switches batched per result-register batch); per_group = two mode switches per "
                              "output group (CENT's no-reuse order)", choices=_spec.DRIVER_ORDERS,
                              source="CENT (ASPLOS 2025) trace generator, GEMV orders reuse-GB / no-reuse; both "
                              "validated against the AiM simulator (docs/validation.md)")
    all_bank_act: str = param("preset", doc="all-bank activation of a PIM MAC command: jedec = the banks activate "
                              "one by one within tRRD/tFAW (4 ACTs per tFAW); power_delivery = one all-bank ACT, "
                              "assuming a PIM die whose power grid carries it (AiM's ACT16, HBM-PIM's all-bank mode); "
                              "preset = the device preset's (lpddr5_pim: jedec; AiM and HBM-PIM presets: "
                              "power_delivery)", choices=("preset", "jedec", "power_delivery"),
                              source="JESD209-5B tRRD/tFAW; GDDR6-AiM ACT16 (ISSCC 2022)")
    die_lockstep: bool = param(True, doc="the dies of one JEDEC rank take one command stream in lockstep, so a "
                               "placement gives a model whole ranks: the draft/target split of pim.ranks (one PIM "
                               "unit per die) moves in steps of the preset's dies_per_rank (lpddr5_pim: 2 x8 dies); "
                               "false = single dies (each die its own command stream, which JEDEC LPDDR5 byte mode "
                               "does not give)", source="JESD209-5B byte mode: two x8 dies of a rank share the "
                               "channel's command/address bus")
    protocol_io: str = param("charge", doc="PIM protocol I/O (WR_GB input chunks, WR_BIAS and RD_MAC result "
                             "registers) on the dies' data buses: charge = its bytes x the memory's write/read "
                             "pJ/bit as PIM energy; free = not charged (the AiM simulator's accounting)",
                             choices=("charge", "free"),
                             source="the command sequence's ISRs (validation/peers/README.md)")
    host_share_of_active_rank: float = param(0.5, doc="arbitration weight of the host's (NPU's) command stream to a "
                                             "rank whose PIM units compute, PIM's being (1 - share): the ranks' bank "
                                             "time is shared by weighted max-min fairness among the tasks that "
                                             "really overlap (hw/sharing.py; work-conserving: a lone task runs at "
                                             "full rate)", gt=0,
                                             source="PIM modes are exclusive per bank in HBM-PIM (ISCA 2021, "
                                             "doi:10.1109/ISCA52012.2021.00013) and AiM; 0.5 = round-robin "
                                             "arbitration between the two command streams (assumption, grade C; "
                                             "sweep it)", lt=1)
    shared_rank_contention: bool = param(True, doc="model the host/PIM contention on shared ranks (false = the "
                                         "paper's premise that PIM compute never slows the host's reads)")
    kv_reserve_tokens: int = param(2048, doc="KV-cache tokens reserved next to each model in its ranks when "
                                   "partitioning (prompt + generated tokens, with margin)", unit="tokens", ge=0,
                                   source="AHASD paper section 8: 1024 generated tokens + prompt; 2x margin")
    aau: AauConfig = dataclasses.field(default_factory=AauConfig,
                                       metadata={"doc": "Attention Algorithm Unit (one per rank)"})
    gts: GtsConfig = dataclasses.field(default_factory=GtsConfig,
                                       metadata={"doc": "Gated Task Scheduling"})


# ============================================================== rank partition
@dataclass(frozen=True)
class RankPartition:
    """Ranks given to the draft (DLM) and target (TLM) model. The draft model holds ranks
    0..draft_ranks-1, the target the last ``target_ranks`` ranks; with ``shared_ranks`` > 0
    (striped allocation) the two ranges overlap in the middle."""

    draft_ranks: int
    target_ranks: int
    spare_ranks: int
    draft_bytes: float         # weights + KV reserve placed in the draft ranks
    target_bytes: float
    rank_capacity_bytes: float
    shared_ranks: int = 0

    @property
    def total_ranks(self) -> int:
        return self.draft_ranks + self.target_ranks - self.shared_ranks + self.spare_ranks

    @property
    def draft_rank_ids(self) -> tuple[int, ...]:
        return tuple(range(self.draft_ranks))

    @property
    def target_rank_ids(self) -> tuple[int, ...]:
        start = self.draft_ranks - self.shared_ranks
        return tuple(range(start, start + self.target_ranks))

    @property
    def target_shared_fraction(self) -> float:
        """Share of the target's bytes in ranks that also hold the drafter (striped)."""
        return self.shared_ranks / self.target_ranks

    @property
    def draft_shared_fraction(self) -> float:
        return self.shared_ranks / self.draft_ranks if self.draft_ranks else 0.0

    @property
    def draft_fill(self) -> float:
        return self.draft_bytes / (self.draft_ranks * self.rank_capacity_bytes) if self.draft_ranks else 0.0

    @property
    def target_fill(self) -> float:
        return self.target_bytes / (self.target_ranks * self.rank_capacity_bytes)

    @property
    def max_rank_fill(self) -> float:
        """Fill of the fullest rank (a shared rank holds a slice of each model)."""
        d = self.draft_bytes / self.draft_ranks if self.draft_ranks else 0.0
        t = self.target_bytes / self.target_ranks
        return (d + t if self.shared_ranks else max(d, t)) / self.rank_capacity_bytes


# ============================================================== models
#: devices whose energy is spent inside the memory package (DRAM background and I/O, PIM, AAU, GTS)
PACKAGE_DEVICES = ("lpddr5", "pim", "aau", "gts")


@dataclass(frozen=True)
class _ReferenceGemv:
    """The INT8 4096 x 4096 single-vector GEMV on which :attr:`PimMemory.achieved_power_w` is measured."""

    name: str = "reference_gemv"
    kind: str = "gemv"
    macs: float = 4096.0 * 4096.0
    weight_bytes: float = 4096.0 * 4096.0
    kv_bytes: float = 0.0
    kv_write_bytes: float = 0.0
    n_tokens: int = 1
    pim_gemv: tuple = (4096, 4096, 1, 1.0)


class PimMemory:
    """Analytic LPDDR5-PIM model (bank-level GEMV engines in every rank)."""

    device = "pim"

    def __init__(self, cfg: PimConfig, memory=None):
        self.cfg = cfg
        self.memory = memory  # Lpddr5Memory: page size and activation energy
        #: the AAUs (check ``aau.enabled``) and the GTS of this device
        self.aau = Aau(cfg.aau, n_units=cfg.ranks)
        self.gts = Gts(cfg.gts, cfg.clock_ghz)
        #: the PIM unit microarchitecture (pim.unit + its typed keys) and the device spec it runs on
        self.unit = _unit.from_config(cfg)
        base = _spec.preset(cfg.preset)
        if cfg.all_bank_act != "preset":
            base = dataclasses.replace(base, all_bank_act_tfaw=cfg.all_bank_act == "jedec").validate()
        self._unit_spec = _unit.apply(self.unit, base)
        self._check_typed_rates()
        #: command-sequence specs per element bytes, built on first use
        self._seq_specs: dict[tuple, "_spec.PimSpec"] = {}
        #: the dynamic power PIM GEMVs may draw on all ranks together under an instantaneous
        #: ``pim.dram_power_limit_w`` (None = no limit); set by :meth:`apply_power_cap`
        self.pim_budget_w: float | None = None
        self._budget: dict = {}
        # an impossible limit is a ConfigError here, when the device is built, before any run;
        # until a mode says otherwise the host is taken to stream while PIM computes (the safe side)
        self.apply_power_cap(host_overlaps_pim=True)

    # ------------------------------------------------- offload (AAU disabled)
    def offload_transfer_bytes(self, op: object) -> float:
        """Bytes crossing the external bus when a nonlinear op of a PIM model runs on the host."""
        return self.aau.offload_transfer_bytes(op)

    @property
    def offload_roundtrip_s(self) -> float:
        """Host synchronisation per offloaded op (``pim.aau.offload_roundtrip_us``)."""
        return self.aau.offload_roundtrip_s

    @property
    def total_units(self) -> int:
        return self.cfg.ranks * self.cfg.units_per_rank

    @property
    def spec(self) -> "_spec.PimSpec":
        """The device spec of ``pim.preset`` (hw/pim_spec.py) with the unit's slots, lanes and
        registers (hw/pim_unit.py) and the ``pim.all_bank_act`` rule."""
        return self._unit_spec

    @property
    def vectors_per_weight_read(self) -> int:
        """k: input vectors the unit multiplies per weight row it reads (``pim.vectors_per_weight_read``
        or the unit preset's)."""
        return self.unit.vectors_per_weight_read

    def _check_typed_rates(self) -> None:
        """A typed MAC rate that cannot serve k > 1 vectors at the column rate is refused
        unless ``pim.mac_bound`` (k = 1 keeps the typed overrides as they are)."""
        k = self.unit.input_slots
        if k <= 1 or self.cfg.unit_gops_int8 is None or self.cfg.mac_bound:
            return
        macs_die = self.total_ops_s / OPS_PER_MAC / self.total_units
        need = k * self.total_internal_bw_bytes_s / self.total_units / self.spec.element_bytes
        if macs_die < need * (1 - 1e-9):
            raise ConfigError("", "pim.unit_gops_int8",
                              f"{2 * macs_die / 1e9:.1f} GOPS per unit cannot multiply {k} input vectors at the "
                              f"column rate (needs {2 * need / 1e9:.1f}); raise it, lower "
                              f"pim.vectors_per_weight_read, or set pim.mac_bound: true")

    @property
    def derived_rates(self) -> "_spec.PimRates":
        return _spec.derive(self.spec)

    @property
    def rates_source(self) -> dict:
        """"derived" (from pim.preset) or "typed" (an explicit override), per rate."""
        return {"ops": "typed" if self.cfg.unit_gops_int8 is not None else "derived",
                "internal_bw": "typed" if self.cfg.internal_bw_gb_s is not None else "derived"}

    @property
    def total_ops_s(self) -> float:
        if self.cfg.unit_gops_int8 is None:               # derived: per unit = one die of the preset
            return self.derived_rates.ops_s_per_die * self.total_units
        mult = self.total_units if self.cfg.gops_scope == "per_unit" else 1
        return self.cfg.unit_gops_int8 * 1e9 * mult

    @property
    def total_internal_bw_bytes_s(self) -> float:
        if self.cfg.internal_bw_gb_s is None:
            return self.derived_rates.internal_bytes_s_per_die * self.total_units
        mult = self.total_units if self.cfg.bw_scope == "per_unit" else 1
        return self.cfg.internal_bw_gb_s * 1e9 * mult

    @property
    def rank_ops_s(self) -> float:
        return self.total_ops_s / self.cfg.ranks

    @property
    def rank_internal_bw_bytes_s(self) -> float:
        return self.total_internal_bw_bytes_s / self.cfg.ranks

    @property
    def rank_capacity_bytes(self) -> int:
        return int(round(self.cfg.rank_capacity_gib * GIB))

    @property
    def capacity_bytes(self) -> int:
        return self.cfg.ranks * self.rank_capacity_bytes

    @property
    def static_power_w(self) -> float:
        """PIM-unit leakage: ``static_mw_per_rank`` for the AiM-like one-vector unit of this
        device, scaled by the unit's logic area over that unit's (leakage grows with the
        lanes, buffer and registers it adds)."""
        return self.cfg.ranks * self.cfg.static_mw_per_rank * 1e-3 * self.leakage_area_ratio

    @property
    def leakage_area_ratio(self) -> float:
        from .area import AreaConfig
        a = AreaConfig()
        base = _spec.preset(self.cfg.preset)
        ref = _unit.area_breakdown_mm2(_unit.UNIT_PRESETS["aim"], base, a)["total"]
        return _unit.area_breakdown_mm2(self.unit, base, a)["total"] / ref

    @property
    def model_rank_capacity_bytes(self) -> float:
        """A rank's bytes left for the models: its capacity less its share of the OS/app reserve
        (``memory.reserved_gib``) that the plain, non-PIM part of the memory cannot hold (the
        address map interleaves the system's pages over every rank)."""
        cap = float(self.rank_capacity_bytes)
        if self.memory is None:
            return cap
        plain = max(0, self.memory.capacity_bytes - self.capacity_bytes)
        spill = max(0, self.memory.reserved_bytes - plain)
        return cap - spill / self.cfg.ranks

    def place_target(self, target_bytes: float, kv_reserve_bytes: float = 0.0) -> RankPartition:
        """The target model alone (a mode that loads no drafter) striped over every rank, with its
        KV reserve; a :class:`ConfigError` (file left empty) if it does not fit."""
        need = float(target_bytes) + float(kv_reserve_bytes)
        cap, ranks = self.model_rank_capacity_bytes, self.cfg.ranks
        if need > ranks * cap * (1.0 + 1e-12):
            raise ConfigError(
                "", "pim.ranks",
                f"target model {target_bytes / 1e9:.2f} GB (+ KV reserve {kv_reserve_bytes / 1e9:.2f} GB) needs "
                f"{math.ceil(need / cap)} ranks of {cap / 1e9:.2f} GB free{self._reserve_note()}, but the device "
                f"has {ranks} ranks")
        return RankPartition(0, ranks, 0, 0.0, need, cap)

    def _reserve_note(self) -> str:
        r = self.memory.cfg.reserved_gib if self.memory is not None else 0.0
        return f" (after the {r:g} GiB memory.reserved_gib)" if r else ""

    # ---------------------------------------------------------------- partition
    @property
    def placement_step(self) -> int:
        """Units (dies) a placement hands out together: the preset's dies per rank under
        ``pim.die_lockstep`` when the units are dies (one per ``pim.ranks`` entry) and they
        divide evenly, else 1."""
        g = int(self.spec.dies_per_rank)
        if not self.cfg.die_lockstep or self.cfg.units_per_rank != 1 or g <= 1 or self.cfg.ranks % g:
            return 1
        return g

    def partition(self, draft_bytes: float, target_bytes: float, kv_reserve_bytes: float = 0.0, *,
                  target_kv_reserve_bytes: float | None = None, policy: str | None = None) -> RankPartition:
        """Place the draft and target model in ranks by ``policy`` (default ``pim.partition_policy``;
        ``auto`` is resolved by the caller, :mod:`ahasd_sim.modes.placement`).

        ``kv_reserve_bytes`` is reserved next to each model for its KV cache (pass
        ``target_kv_reserve_bytes`` to give the target a different reserve). Raises
        :class:`ConfigError` (file left empty for the caller) if they do not fit.
        """
        policy = self.cfg.partition_policy if policy is None else policy
        if policy == "auto":
            raise ValueError("partition policy 'auto' is resolved per mode (ahasd_sim.modes.placement)")
        t_kv = kv_reserve_bytes if target_kv_reserve_bytes is None else target_kv_reserve_bytes
        need_d = float(draft_bytes) + float(kv_reserve_bytes)
        need_t = float(target_bytes) + float(t_kv)
        if need_d <= 0 or need_t <= 0:
            raise ValueError("partition needs positive draft and target sizes")
        cap = float(self.model_rank_capacity_bytes)
        step = self.placement_step
        rd, rt = step * math.ceil(need_d / cap / step), step * math.ceil(need_t / cap / step)
        ranks = self.cfg.ranks
        if policy == "all_ranks":
            part = RankPartition(ranks, ranks, 0, need_d, need_t, cap, shared_ranks=ranks)
            if part.max_rank_fill > 1.0 + 1e-12:
                raise ConfigError(
                    "", "pim.partition_policy",
                    f"all_ranks allocation: a rank would hold {part.max_rank_fill * cap / 1e9:.2f} GB "
                    f"(draft + target slices + KV reserve) but a rank holds {cap / 1e9:.2f} GB")
            return part
        if rd + rt > ranks:
            raise ConfigError(
                "", "pim.ranks",
                f"draft model {draft_bytes / 1e9:.2f} GB + target model {target_bytes / 1e9:.2f} GB "
                f"(+ KV reserve {(kv_reserve_bytes + t_kv) / 1e9:.2f} GB) need {rd} + {rt} ranks of "
                f"{cap / 1e9:.2f} GB free{self._reserve_note()} in distinct ranks, but the device has {ranks} "
                f"ranks ({self.capacity_bytes / 1e9:.1f} GB)")
        if policy == "striped":
            # each model over every rank the other does not need for itself; the middle is shared
            sd, st = ranks - rt, ranks - rd
            shared = sd + st - ranks
            part = RankPartition(sd, st, 0, need_d, need_t, cap, shared_ranks=shared)
            if part.max_rank_fill > 1.0 + 1e-12:
                raise ConfigError(
                    "", "pim.partition_policy",
                    f"striped allocation: a shared rank would hold {part.max_rank_fill * cap / 1e9:.2f} GB "
                    f"(draft + target slices + KV reserve) but a rank holds {cap / 1e9:.2f} GB; use min_fit")
            return part
        if policy == "proportional":
            spare = ranks - rd - rt
            # spare ranks go pro rata to the bytes (rounded share of all ranks, never below min_fit)
            share_d = ranks * need_d / (need_d + need_t)
            extra_d = min(spare, max(0, step * round(share_d / step) - rd))
            rd, rt = rd + extra_d, rt + (spare - extra_d)
        return RankPartition(rd, rt, ranks - rd - rt, need_d, need_t, cap)

    # ---------------------------------------------------------------- GEMV
    def _check_ranks(self, ranks: int) -> int:
        ranks = int(ranks)
        if not 1 <= ranks <= self.cfg.ranks:
            raise ValueError(f"ranks must be in 1..{self.cfg.ranks}, got {ranks}")
        return ranks

    # ------------------------------------------------------------- DRAM power budget
    @property
    def energy_per_byte_j(self) -> float:
        """Dynamic energy of one bank byte a PIM GEMV reads: column access + row activation."""
        e = 8.0 * self.cfg.bank_pj_per_bit * 1e-12
        if self.memory is not None:
            e += self.memory.cfg.act_pre_nj_per_row * 1e-9 / self.memory.cfg.page_bytes
        return e

    @property
    def full_rate_power_w(self) -> float:
        """Dynamic power of every PIM unit running an INT8 GEMV (one weight byte per MAC) unthrottled:
        bytes/s = min(internal bandwidth, MAC rate), each byte read and multiplied."""
        macs_s = min(self.total_internal_bw_bytes_s, self.total_ops_s / OPS_PER_MAC)
        return macs_s * (self.energy_per_byte_j + self.cfg.pj_per_mac * 1e-12)

    @property
    def package_static_w(self) -> float:
        """Power the memory package draws whatever it does: DRAM background + PIM, AAU, GTS leakage."""
        bg = self.memory.background_power_w if self.memory is not None else 0.0
        aau = self.aau.static_power_w if self.aau.enabled else 0.0
        return bg + self.static_power_w + aau + self.gts.static_power_w

    @property
    def host_io_w(self) -> float:
        """I/O power of the host's streams unthrottled: the memory's sustained rate (the bound on
        what the host can pull) x read energy per byte."""
        if self.memory is None:
            return 0.0
        return self.memory.uncapped_bandwidth_bytes_s * self.memory.read_energy_j(1.0)

    @property
    def achieved_power_w(self) -> float:
        """Dynamic power of every PIM unit on a large INT8 weight GEMV (4096 x 4096, one vector)
        at the rate the command sequence achieves: what PIM draws when it computes, unthrottled
        (below :attr:`full_rate_power_w`, the bank-rate bound)."""
        op = _ReferenceGemv()
        return self._gemv_energy_j(op, self.cfg.ranks) / self._unthrottled_time_s(op, self.cfg.ranks)

    def apply_power_cap(self, host_overlaps_pim: bool) -> dict:
        """Split ``pim.dram_power_limit_w`` between PIM and the host's streams, on the power a run
        draws. The dynamic budget is the limit less the package's static power. Where the host
        streams while PIM computes (``host_overlaps_pim``), the two share it in proportion to their
        unthrottled powers when both together would exceed it; otherwise each has all of it.
        PIM GEMVs then run no faster than their energy over their ranks' share of the PIM budget;
        the host's streams at the fraction of their rate their budget allows
        (``memory.host_rate_fraction``). A ``mean`` limit is applied to the whole run instead
        (:func:`mean_power_dilation`): no per-operator budget. Returns the budget (W)."""
        limit = self.cfg.dram_power_limit_w
        static = self.package_static_w
        host = self.host_io_w
        pim = self.achieved_power_w
        b = {"limit_w": limit, "kind": self.cfg.power_limit_kind, "static_w": static,
             "background_w": self.memory.background_power_w if self.memory is not None else 0.0,
             "host_io_w": host, "pim_achieved_w": pim, "pim_full_rate_w": self.full_rate_power_w,
             "host_overlaps_pim": bool(host_overlaps_pim), "pim_budget_w": None, "host_io_budget_w": None,
             "host_rate_fraction": 1.0}
        self.pim_budget_w = None
        if self.memory is not None:
            self.memory.host_rate_fraction = 1.0
        if limit is not None:
            room = limit - static
            if room <= 0:
                raise ConfigError("", "pim.dram_power_limit_w",
                                  f"{limit:g} W is at or below the package's static power {static:.3f} W (DRAM "
                                  f"background {b['background_w']:.3f} W + PIM/AAU/GTS leakage): nothing could run; "
                                  "raise it or set it to null")
            if self.cfg.power_limit_kind == "instantaneous":
                if host_overlaps_pim and host + pim > room:
                    host_b, pim_b = room * host / (host + pim), room * pim / (host + pim)
                else:
                    host_b, pim_b = min(host, room), room
                b["pim_budget_w"], b["host_io_budget_w"] = pim_b, host_b
                b["host_rate_fraction"] = min(1.0, host_b / host) if host > 0 else 1.0
                self.pim_budget_w = pim_b
                if self.memory is not None:
                    self.memory.host_rate_fraction = b["host_rate_fraction"]
        self._budget = b
        return dict(b)

    def power_budget(self) -> dict:
        """The budget :meth:`apply_power_cap` last set (all power in W)."""
        return dict(self._budget)

    def mean_power_dilation(self, dynamic_j_by_device: dict, makespan_s: float) -> float:
        """Under a ``mean`` ``pim.dram_power_limit_w``: the factor (>= 1) a run of ``makespan_s`` is
        slowed by so that the package's energy over its makespan meets the limit (its dynamic
        energy is the same work, its static power is drawn for longer):
        k = max(1, E_dyn / ((limit - static) x makespan)); 1 without such a limit."""
        limit = self.cfg.dram_power_limit_w
        if limit is None or self.cfg.power_limit_kind != "mean" or makespan_s <= 0:
            return 1.0
        e_dyn = sum(float(dynamic_j_by_device.get(d, 0.0)) for d in PACKAGE_DEVICES)
        return max(1.0, e_dyn / ((limit - self.package_static_w) * makespan_s))

    def cap_key(self) -> str:
        """Text that differs between two caps that cost an operator differently (for cost caches)."""
        b = self._budget
        return f"cap:{b.get('pim_budget_w')!r}:{b.get('host_rate_fraction')!r}"

    def gemv_cost(self, op: object, ranks: int) -> OpCost:
        """Cost of ONE occurrence of a GEMV/GEMM/attention ``op`` on ``ranks`` ranks' PIM units.

        ``pim.gemv_timing: command_sequence`` (default): the driver's ISR sequence on
        ``pim.preset`` (:func:`ahasd_sim.hw.pim_spec.gemv_time_s` on ``ranks x units_per_rank``
        dies, the op's :attr:`pim_gemv` layout), the weights (and KV) re-read for every
        ``vectors_per_weight_read`` input vectors, + the new K/V written at the internal rate.
        ``roofline``: max((weight + KV bytes) / internal bandwidth, 2 x MACs / op rate) + overhead.
        A power-capped device runs either at its throttled rate.
        """
        kind = op_kind(op)
        if kind not in MATRIX_KINDS:
            raise ValueError(f"PIM GEMV engines run gemm/gemv/attention ops, not {kind!r} "
                             f"({getattr(op, 'name', '')}); send it to the AAU or the host")
        ranks = self._check_ranks(ranks)
        busy = self._unthrottled_time_s(op, ranks)
        energy = self._gemv_energy_j(op, ranks)
        duration = busy
        if self.pim_budget_w is not None:
            # under an instantaneous cap a GEMV on r ranks runs no faster than its energy over the
            # r ranks' share of the PIM budget (same work and energy, longer): GEMVs on disjoint
            # ranks running at once stay within the budget together
            duration = max(busy, energy / (self.pim_budget_w * ranks / self.cfg.ranks))
        return OpCost(duration, {self.device: energy}, bus_bytes=self._protocol_bus_bytes(op, ranks), macs=float(op.macs))

    def _unthrottled_time_s(self, op: object, ranks: int) -> float:
        """A GEMV's time at the DVFS state's rate (``pim.dvfs_rate_fraction``), before a power cap."""
        if self.cfg.gemv_timing == "roofline":
            nbytes = self.bytes_read(op)
            t_bw = nbytes / (ranks * self.rank_internal_bw_bytes_s)
            t_cmp = OPS_PER_MAC * float(op.macs) / (ranks * self.rank_ops_s)
            t = max(t_bw, t_cmp) + self.cfg.op_overhead_ns * 1e-9
        else:
            t = self._sequence_time_s(op, ranks)
        return t / self.cfg.dvfs_rate_fraction

    def _gemv_energy_j(self, op: object, ranks: int) -> float:
        """Dynamic energy of one GEMV: bank column accesses, row activations, MACs, and the PIM
        protocol I/O on the dies' buses (``pim.protocol_io: charge``)."""
        nbytes = self.bytes_read(op)
        energy = nbytes * 8.0 * self.cfg.bank_pj_per_bit * 1e-12 + float(op.macs) * self.cfg.pj_per_mac * 1e-12
        if self.memory is not None:
            energy += nbytes / self.memory.cfg.page_bytes * self.memory.cfg.act_pre_nj_per_row * 1e-9
            energy += self.protocol_io_energy_j_by_isr(op, ranks)
        return energy

    def _protocol_bus_bytes(self, op: object, ranks: int) -> float:
        """Protocol bytes one GEMV moves on the dies' data buses (their time is in the sequence)."""
        if self.memory is None or self.cfg.protocol_io != "charge" or self.cfg.gemv_timing != "command_sequence":
            return 0.0
        return self.protocol_io_bytes(op, ranks)

    def protocol_io_energy_j_by_isr(self, op: object, ranks: int) -> float:
        """Protocol I/O energy of one ``op``: WR_GB and WR_BIAS bytes x ``memory.write_pj_per_bit``,
        RD_MAC bytes x ``memory.read_pj_per_bit`` (0 without a memory, with ``protocol_io: free`` or
        with the roofline timing, which has no command sequence)."""
        if self.memory is None or self.cfg.protocol_io == "free" or self.cfg.gemv_timing != "command_sequence":
            return 0.0
        rows, cols, vectors, eb = self.gemv_layout(op)
        in_bytes = _unit.PRECISION_BITS[_unit.precision_of(self.unit, self.spec)][1] / 8
        io = _spec.gemv_io_bytes(self._sequence_spec(eb), rows, cols, vectors,
                                 dies=ranks * self.cfg.units_per_rank, input_bytes=in_bytes)
        m = self.memory.cfg
        return ((io["WR_GB"] + io["WR_BIAS"]) * m.write_pj_per_bit + io["RD_MAC"] * m.read_pj_per_bit) * 8e-12

    # ------------------------------------------------------------- command sequence
    def gemv_layout(self, op: object) -> tuple[int, int, int, float]:
        """(rows, cols, input vectors, bytes per element) of ``op`` as the PIM driver lays it
        out (:attr:`Operator.pim_gemv`); an op without one (a hand-made op) is taken as its
        weight + KV-read bytes in whole DRAM rows, one input vector per token."""
        shape = tuple(getattr(op, "pim_gemv", ()) or ())
        if shape:
            rows, cols, vectors, eb = shape
            return int(rows), int(cols), max(1, int(vectors)), float(eb)
        n = max(1, int(getattr(op, "n_tokens", 1) or 1))
        matrix = float(op.weight_bytes) + float(getattr(op, "kv_bytes", 0.0)) - float(getattr(op, "kv_write_bytes", 0.0))
        row = self.spec.row_bytes
        return max(1, math.ceil(matrix / row)), int(row // self.spec.element_bytes), n, float(self.spec.element_bytes)

    def _sequence_spec(self, element_bytes: float) -> "_spec.PimSpec":
        key = (element_bytes,)
        cache = self._seq_specs
        sp = cache.get(key)
        if sp is None:
            units = self.total_units
            typed_bw = self.total_internal_bw_bytes_s / units if self.cfg.internal_bw_gb_s is not None else None
            typed_macs = self.total_ops_s / OPS_PER_MAC / units if self.cfg.unit_gops_int8 is not None else None
            sp = _spec.with_rates(self.spec, element_bytes=element_bytes,
                                  internal_bytes_s_per_die=typed_bw, macs_s_per_die=typed_macs)
            if self.memory is not None and self.memory.refresh_derated:
                # above 85 C JEDEC doubles the refresh rate: the ranks are blocked twice as often
                sp = dataclasses.replace(sp, timings=dataclasses.replace(sp.timings, n_refi=sp.timings.n_refi // 2))
            cache[key] = sp
        return sp

    def _passes(self, vectors: int) -> tuple[int, int]:
        """(vectors a unit holds at once, passes over the matrix) for ``vectors`` input vectors."""
        held = min(self.vectors_per_weight_read, vectors)
        return held, math.ceil(vectors / held)

    def _sequence_time_s(self, op: object, ranks: int) -> float:
        rows, cols, vectors, eb = self.gemv_layout(op)
        dies = ranks * self.cfg.units_per_rank
        t = _spec.gemv_time_s(self._sequence_spec(eb), rows, cols, vectors, dies=dies, order=self.cfg.driver_order)
        kv_w = float(getattr(op, "kv_write_bytes", 0.0))
        return t + kv_w / (ranks * self.rank_internal_bw_bytes_s)

    def protocol_io_bytes(self, op: object, ranks: int) -> float:
        """Bytes of PIM protocol I/O (WR_GB input chunks, WR_BIAS / RD_MAC registers) one
        occurrence of ``op`` moves on the dies' data buses (:func:`ahasd_sim.hw.pim_spec.gemv_io_bytes`)."""
        rows, cols, vectors, eb = self.gemv_layout(op)
        sp = self._sequence_spec(eb)
        in_bytes = _unit.PRECISION_BITS[_unit.precision_of(self.unit, self.spec)][1] / 8
        return float(sum(_spec.gemv_io_bytes(sp, rows, cols, vectors, dies=ranks * self.cfg.units_per_rank,
                                             input_bytes=in_bytes).values()))

    def bytes_read(self, op: object) -> float:
        """Bank bytes one occurrence of ``op`` moves: weights and KV reads are repeated for every
        ``vectors_per_weight_read`` input vectors (a PIM unit holds that many); new K/V written once.
        With the command sequence the vectors and the matrix are the op's PIM layout (GQA query
        heads of one KV head are separate vectors)."""
        kv_w = float(getattr(op, "kv_write_bytes", 0.0))
        if self.cfg.gemv_timing == "command_sequence" and getattr(op, "pim_gemv", ()):
            rows, cols, vectors, eb = self.gemv_layout(op)
            return self._passes(vectors)[1] * rows * cols * eb + kv_w
        reads = math.ceil(max(1, int(getattr(op, "n_tokens", 1) or 1)) / self.vectors_per_weight_read)
        kv = float(getattr(op, "kv_bytes", 0.0))
        return float(op.weight_bytes) * reads + (kv - kv_w) * reads + kv_w

    def bound(self, op: object, ranks: int) -> str:
        """"bandwidth" or "compute": which side of the PIM roofline ``op`` sits on."""
        nbytes = self.bytes_read(op)
        t_bw = nbytes / (ranks * self.rank_internal_bw_bytes_s)
        t_cmp = OPS_PER_MAC * float(op.macs) / (ranks * self.rank_ops_s)
        return "bandwidth" if t_bw >= t_cmp else "compute"


class Aau:
    """The AAUs (one per rank). ``op_cost`` charges device "aau"."""

    device = "aau"

    def __init__(self, cfg: AauConfig, n_units: int = 1):
        self.cfg = cfg
        self.n_units = int(n_units)

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled

    @property
    def static_power_w(self) -> float:
        return self.n_units * self.cfg.static_power_mw * 1e-3 if self.cfg.enabled else 0.0

    def cycles(self, cls: str, n_elements: int) -> int:
        """Cycle formulas of references.md#ahasd-aau-gts (16 lanes, single issue)."""
        c = self.cfg
        n = int(n_elements)
        if n <= 0:
            return 0
        vectors = math.ceil(n / c.lanes)
        if cls == "reduction":
            return c.pipeline_cycles + int(math.floor(math.log2(n))) + 1 + c.reduction_cycles_per_vector * vectors
        per_vec = getattr(c, f"{cls}_cycles_per_vector")
        return c.pipeline_cycles + per_vec * vectors

    def op_cost(self, op: object, n_aau: int = 1) -> OpCost:
        """Cost of ONE occurrence of a nonlinear/reduction ``op`` split over ``n_aau`` AAUs
        (the AAUs of the ranks holding the model; default one)."""
        if not self.cfg.enabled:
            raise ValueError("AAU disabled (pim.aau.enabled: false): offload the op to the host instead")
        kind = op_kind(op)
        if kind not in ELEMENTWISE_KINDS:
            raise ValueError(f"AAU runs nonlinear/reduction ops, not {kind!r} ({getattr(op, 'name', '')})")
        cls = nonlinear_class_of(op)
        elems = int(getattr(op, "elements", 0) or 0)
        n_aau = max(1, int(n_aau))
        cyc = self.cycles(cls, math.ceil(elems / n_aau))
        energy = elems * getattr(self.cfg, f"{cls}_pj_per_element") * 1e-12
        return OpCost(cyc / (self.cfg.clock_ghz * 1e9), {self.device: energy})

    # ------------------------------------------------- offload (AAU disabled)
    def offload_transfer_bytes(self, op: object) -> float:
        """Bytes that cross the external bus when ``op`` is offloaded (operands in + results out)."""
        act = float(getattr(op, "act_bytes_in", 0.0)) + float(getattr(op, "act_bytes_out", 0.0))
        if act > 0:
            return act
        return 2.0 * float(getattr(op, "elements", 0) or 0) * self.cfg.offload_bytes_per_element

    @property
    def offload_roundtrip_s(self) -> float:
        return self.cfg.offload_roundtrip_us * 1e-6


class Gts:
    """Gated Task Scheduling; ``switch_cost`` charges device "gts"."""

    device = "gts"

    def __init__(self, cfg: GtsConfig, pim_clock_ghz: float):
        self.cfg = cfg
        self.pim_clock_ghz = pim_clock_ghz

    @property
    def enabled(self) -> bool:
        return self.cfg.enabled

    @property
    def static_power_w(self) -> float:
        return self.cfg.static_power_mw * 1e-3 if self.cfg.enabled else 0.0

    def switch_cost(self) -> OpCost:
        """One draft <-> pre-verification switch of the PIM ranks."""
        c = self.cfg
        if c.enabled:
            return OpCost(c.switch_cycles / (self.pim_clock_ghz * 1e9), {self.device: c.switch_pj * 1e-12})
        return OpCost(c.coarse_switch_us * 1e-6, {self.device: c.coarse_switch_uj * 1e-6})
