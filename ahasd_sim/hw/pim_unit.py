"""PIM unit microarchitecture: the bank-side compute of a PIM die as one declarative spec.

A unit (one per die in :class:`ahasd_sim.hw.pim.PimMemory`) is: ``input_slots`` k (input
vectors the global buffer holds per DRAM-row chunk: every weight row read is multiplied
with k vectors), MAC lanes per bank and their precision (INT8; INT4 weights with INT8 or
FP16 inputs; BF16 as AiM), a global buffer of k row chunks, and result registers per bank
(partial sums the driver batches before reading them back: CENT's reuse order). From it
and a device (:class:`ahasd_sim.hw.pim_spec.PimSpec`) are derived:

* **lanes needed** for k vectors at the device's column rate: k x elements per column /
  (all-bank MAC spacing x MAC clock); ``mac_lanes_per_bank`` null sizes the unit to that;
  a typed smaller number is refused unless ``mac_bound`` (then the MAC spacing stretches:
  :func:`ahasd_sim.hw.pim_spec.mac_spacing_cycles`);
* **area** per die at 28 nm x the DRAM-process penalty (``area`` section): lanes x the
  lane's datapath (Horowitz, ISSCC 2014, 45 nm table scaled by (28/45)^2), global-buffer
  and result-register bits as small-table storage (``area.storage``);
* **capacity displaced**: that area x the DRAM cell density of a D1z LPDDR5 die
  (0.241 Gb/mm^2, references.md#pim-unit-area), the bits a die of the same size loses;
* **leakage**: proportional to the unit's logic area, anchored at ``pim.static_mw_per_rank``
  for the AiM-like k = 1 unit of the same device;
* **MAC energy** per precision (Horowitz 45 nm: INT8 multiply 0.2 + 32-bit add 0.1 pJ).

Presets (:data:`UNIT_PRESETS`) carry their sources. HBM-PIM's published figure (the PIM
die holds 4 Gb of an 8 Gb die's cells) is printed beside our estimate by
``python -m ahasd_sim area``: our bottom-up area counts datapath and storage only.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..config.errors import ConfigError

_HOROWITZ = ("Horowitz, 'Computing's energy problem', ISSCC 2014, doi:10.1109/ISSCC.2014.6757323 (45 nm): "
             "8b add 36 um^2 / 0.03 pJ, 32b add 137 um^2 / 0.1 pJ, 8b mult 282 um^2 / 0.2 pJ, "
             "FP16 add 1360 um^2 / 0.4 pJ, FP16 mult 1640 um^2 / 1.1 pJ")
_SCALE_45_TO_28 = (28.0 / 45.0) ** 2
#: lane datapath (multiplier + accumulator adder) per precision at 45 nm: (um^2, pJ per MAC)
LANE_45NM = {
    "int8": (282.0 + 137.0, 0.2 + 0.1),              # 8x8 mult + 32-bit accumulate
    "int4w_int8a": (282.0 / 2 + 137.0, 0.1 + 0.1),   # 4x8 mult (half the partial products) + 32-bit add
    "int4w_fp16a": (1640.0 + 1360.0, 1.1 + 0.4),     # FP16 FMA (INT4 weight widened)
    "bf16": (1640.0 + 1360.0, 1.1 + 0.4),            # BF16 ~ FP16 FMA
}
#: bits per weight element and per input element of each precision
PRECISION_BITS = {"int8": (8, 8), "int4w_int8a": (4, 8), "int4w_fp16a": (4, 16), "bf16": (16, 16)}
#: D1z LPDDR5: 12 Gb in 43.98 mm^2 (references.md#pim-unit-area)
DRAM_GB_PER_MM2 = 0.241


@dataclass(frozen=True)
class PimUnitSpec:
    """One PIM unit's microarchitecture (per die)."""

    name: str
    input_slots: int                         # k: input vectors held per chunk
    precision: str | None = None             # key of PRECISION_BITS; None: the device's element type
    mac_lanes_per_bank: int | None = None    # None: sized for k at the device's column rate
    result_registers_per_bank: int = 32
    result_bits: int | None = None           # None: the device's result register (PimSpec.result_bytes)
    mac_bound: bool = False                  # k without the lanes is allowed (MAC-bound) only if True
    sources: dict = field(default_factory=dict)

    def validate(self, key: str = "pim.unit") -> "PimUnitSpec":
        if self.precision is not None and self.precision not in PRECISION_BITS:
            raise ConfigError("", f"{key}.precision", f"unknown precision {self.precision!r} "
                              f"(known: {', '.join(PRECISION_BITS)})")
        if int(self.input_slots) < 1:
            raise ConfigError("", "pim.vectors_per_weight_read", f"must be >= 1, got {self.input_slots}")
        if self.result_registers_per_bank < self.input_slots:
            raise ConfigError("", "pim.result_registers_per_bank",
                              f"{self.result_registers_per_bank} result registers per bank cannot hold the partial "
                              f"sums of {self.input_slots} input vectors (need >= vectors_per_weight_read)")
        return self

    @property
    def vectors_per_weight_read(self) -> int:
        """k under its historical name (weights are read once per k input vectors)."""
        return int(self.input_slots)


# ------------------------------------------------------------------ derived
def lanes_needed(unit: PimUnitSpec, spec) -> int:
    """MAC lanes per bank that keep k vectors at the device's all-bank column rate: a MAC
    unit needs ceil(k x elements per column / (n_ccd_mac x tCK x MAC clock)) lanes, shared
    by its ``banks_per_mac_unit`` banks (lpddr5_pim, k = 1: 16 / (4 x 1.25 ns x 0.8 GHz) = 4)."""
    t = spec.timings
    macs_per_lane = t.n_ccd_mac * t.tck_ns * spec.mac_clock_ghz     # MACs one lane does per column slot
    per_unit = math.ceil(unit.input_slots * spec.elements_per_column / macs_per_lane - 1e-9)
    return int(math.ceil(per_unit / spec.banks_per_mac_unit))


def resolved_lanes(unit: PimUnitSpec, spec) -> int:
    """The unit's lanes per bank: typed, or sized for k. A typed number below what k needs is
    a ConfigError unless the unit is ``mac_bound``."""
    need = lanes_needed(unit, spec)
    if unit.mac_lanes_per_bank is None:
        return need
    lanes = int(unit.mac_lanes_per_bank)
    if lanes < 1:
        raise ConfigError("", "pim.mac_lanes_per_bank", f"must be >= 1, got {lanes}")
    if lanes < need and not unit.mac_bound:
        raise ConfigError("", "pim.mac_lanes_per_bank",
                          f"{lanes} MAC lanes per bank cannot multiply {unit.input_slots} input vectors at the "
                          f"{spec.name} column rate (needs {need}); add lanes, lower pim.vectors_per_weight_read, "
                          f"or set pim.mac_bound: true to accept a MAC-bound unit")
    return lanes


def precision_of(unit: PimUnitSpec, spec) -> str:
    """The unit's precision, or the device's element type (2 B: bf16, 1 B: int8, 0.5 B: int4w_int8a)."""
    if unit.precision is not None:
        return unit.precision
    return {2: "bf16", 1: "int8", 0.5: "int4w_int8a"}.get(spec.element_bytes, "int8")


def result_bits_of(unit: PimUnitSpec, spec) -> int:
    return int(unit.result_bits) if unit.result_bits is not None else int(8 * spec.result_bytes)


def apply(unit: PimUnitSpec, spec):
    """``spec`` with this unit's slots, lanes and result registers (the GEMV command
    sequence of :mod:`ahasd_sim.hw.pim_spec` then times it)."""
    unit.validate()
    lanes = resolved_lanes(unit, spec)
    # the device's MAC clock is kept; its lanes count becomes the unit's lanes per MAC unit
    # (lanes are per bank; a MAC unit spanning b banks has b x lanes)
    return replace(spec, input_slots=int(unit.input_slots), mac_lanes=lanes * spec.banks_per_mac_unit,
                   result_registers=int(unit.result_registers_per_bank),
                   result_bytes=max(1, result_bits_of(unit, spec) // 8))


def global_buffer_bytes(unit: PimUnitSpec, spec) -> int:
    """k DRAM-row chunks of input elements (AiM: one 2 KB chunk of BF16)."""
    _, in_bits = PRECISION_BITS[precision_of(unit, spec)]
    return int(unit.input_slots * spec.elements_per_row * in_bits // 8)


def area_breakdown_mm2(unit: PimUnitSpec, spec, area_cfg) -> dict:
    """Area of one die's PIM unit (mm^2): lanes, global buffer, result registers, total."""
    from .area import storage_um2
    lanes = resolved_lanes(unit, spec) * spec.banks_per_die
    lane_um2 = LANE_45NM[precision_of(unit, spec)][0] * _SCALE_45_TO_28
    pen = area_cfg.dram_process_penalty
    gb_bits = 8 * global_buffer_bytes(unit, spec)
    reg_bits = spec.banks_per_die * unit.result_registers_per_bank * result_bits_of(unit, spec)
    out = {"lanes": lanes * lane_um2 * pen * 1e-6,
           "global_buffer": storage_um2(area_cfg, gb_bits) * pen * 1e-6,
           "result_registers": storage_um2(area_cfg, reg_bits) * pen * 1e-6}
    out["total"] = sum(out.values())
    out["lanes_per_die"] = lanes
    out["global_buffer_bytes"] = gb_bits // 8
    return out


def capacity_lost_gib(area_mm2: float) -> float:
    """DRAM capacity a die loses to ``area_mm2`` of logic (D1z cell density; a DRAM "Gb" is
    2^30 bits), GiB."""
    return area_mm2 * DRAM_GB_PER_MM2 / 8.0


def pj_per_mac(unit: PimUnitSpec, spec) -> float:
    """MAC energy of the unit's lane at 45 nm (Horowitz), for comparison with ``pim.pj_per_mac``."""
    return LANE_45NM[precision_of(unit, spec)][1]


# ------------------------------------------------------------------ presets
UNIT_PRESETS: dict[str, PimUnitSpec] = {
    # SK hynix GDDR6-AiM as CENT drives it: one input vector in the 2 KB global buffer per
    # channel; the lanes match the device's column rate (lpddr5_pim: 4 INT8 lanes per bank);
    # 32 result registers per bank (CENT's reuse size).
    "aim": PimUnitSpec(
        name="aim", input_slots=1, result_registers_per_bank=32,
        sources={"slots": "GDDR6-AiM: one 2 KB global buffer per channel holds one input vector (ISSCC 2022, "
                          "doi:10.1109/ISSCC42614.2022.9731711)",
                 "registers": "CENT (ASPLOS 2025) driver --reuse_size 32, 'depending on register number'",
                 "lane": _HOROWITZ}),
    # GEMM-capable LPDDR5-PIM for speculative decoding (LP-Spec, ICCAD 2025, arXiv 2508.07227:
    # hybrid DRAM/PIM banks running GEMM for draft-tree verification; CD-PIM, arXiv 2601.12298:
    # GEMV/GEMM interleaving, 4 pseudo-banks per bank). Neither publishes its lane count in
    # a form we can copy; k = 8 covers a typical verification width (draft length 4-8 tokens),
    # with the lanes to match and 32 result registers per vector slot (as the aim unit).
    "gemm_k8": PimUnitSpec(
        name="gemm_k8", input_slots=8, result_registers_per_bank=8 * 32,
        sources={"design": "LP-Spec (ICCAD 2025, arXiv 2508.07227); CD-PIM (arXiv 2601.12298): GEMM-capable "
                           "LPDDR5-PIM for low-batch / speculative decoding",
                 "slots": "k = 8: verification width of a draft length 4-8 (assumption, grade C; sweep "
                          "pim.vectors_per_weight_read)", "lane": _HOROWITZ}),
    # Samsung HBM-PIM (Aquabolt-XL): a PCU per bank pair, 16 FP16 lanes, GRF_B 8 registers.
    "hbm_pim": PimUnitSpec(
        name="hbm_pim", input_slots=1, precision="bf16", mac_lanes_per_bank=8, result_registers_per_bank=8,
        result_bits=16,
        sources={"design": "Kwon et al., ISSCC 2021, doi:10.1109/ISSCC42613.2021.9365862; Lee et al., ISCA 2021, "
                           "doi:10.1109/ISCA52012.2021.00013: 16-lane FP16 PCU per 2 banks (8 lanes per bank), "
                           "8 GRF_B registers; the PIM die holds 4 Gb of an 8 Gb die's cells",
                 "lane": _HOROWITZ}),
}
#: published capacity a PIM die gives up, for the area report: (fraction of the die's bits, source)
PUBLISHED_CAPACITY_LOST = {"hbm_pim": (0.5, "HBM-PIM: 4 Gb PIM die vs 8 Gb HBM2 die (ISSCC 2021)")}


def unit_preset(name: str) -> PimUnitSpec:
    if name not in UNIT_PRESETS:
        from ..config.errors import did_you_mean
        raise ConfigError("", "pim.unit", f"unknown PIM unit {name!r}{did_you_mean(name, UNIT_PRESETS)} "
                          f"(known: {', '.join(UNIT_PRESETS)})")
    return UNIT_PRESETS[name]


def from_config(pim_cfg) -> PimUnitSpec:
    """The unit a ``pim`` config section asks for: ``pim.unit`` with ``vectors_per_weight_read``
    (k), ``mac_lanes_per_bank``, ``result_registers_per_bank``, ``mac_bound`` where typed."""
    base = unit_preset(pim_cfg.unit)
    changes = {}
    k = getattr(pim_cfg, "vectors_per_weight_read", None)
    if k is not None:
        changes["input_slots"] = int(k)
    for key in ("mac_lanes_per_bank", "result_registers_per_bank"):
        v = getattr(pim_cfg, key, None)
        if v is not None:
            changes[key] = int(v)
    if getattr(pim_cfg, "mac_bound", False):
        changes["mac_bound"] = True
    if "input_slots" in changes and "result_registers_per_bank" not in changes:
        # a unit built for k vectors keeps the base's outputs per batch: registers scale with k
        changes["result_registers_per_bank"] = int(changes["input_slots"]) * max(
            1, base.result_registers_per_bank // base.input_slots)
    unit = replace(base, **changes) if changes else base
    return unit.validate()
