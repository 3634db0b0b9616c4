"""Area estimate of the AHASD additions (section ``area``) at 28 nm.

Storage: ``bits x (flip-flop area + read-mux periphery)`` (small tables are flop/latch
arrays), or with ``storage: sram`` ``bits x bit-cell / CACTI small-macro array
efficiency``. Logic: gate count x NAND2 area. The AAU and the GTS sit on the
LPDDR5-PIM die, so their logic is multiplied by a DRAM-process penalty; EDC, TVC and the
async queues are host-side (XiangShan CPU) logic at 28 nm. Percentages are of one
LPDDR5-PIM die (``die_area_mm2``), like the paper's Table 3.

Paper (latest draft, 28 nm, % of LPDDR5-PIM die): EDC 0.05 mm^2, TVC 0.03, queues 0.01,
AAU 1.25 (2.50%), total 1.34 (2.68%).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section

_C = "assumption (grade C)"
PAPER_MM2 = {"EDC": 0.05, "TVC": 0.03, "async_queues": 0.01, "GTS": float("nan"), "AAU": 1.25, "total": 1.34}

# CACTI small-macro array efficiency vs macro size (KB) [LLMCompass]
_CACTI_EFF = ((4, 0.076), (8, 0.14), (16, 0.25), (32, 0.39), (64, 0.56), (128, 0.70))


@config_section("area")
@dataclass
class AreaConfig:
    """Area model inputs (28 nm)."""

    die_area_mm2: float = param(50.0, doc="LPDDR5-PIM die area (denominator of pct_of_die)", unit="mm^2", gt=0,
                                source="AHASD Table 3: AAU 1.25 mm^2 = 2.50% -> 50 mm^2; teardowns 40-66 mm^2 "
                                "for 12-16 Gb dies (modeling.md decision 10)")
    storage: str = param("flop", doc="how small tables are built", choices=("flop", "sram"))
    flop_bit_um2: float = param(2.5, doc="one flip-flop bit at 28 nm (~5 NAND2 equivalents)", unit="um^2", gt=0,
                                source="NAND2 ~0.5 um^2 at 28 nm [WikiChip]/[LLMCompass]; DFF ~5 NAND2-eq, grade C")
    periphery_nand2_per_bit: float = param(2.3, doc="read-mux/write-enable gates per stored bit (one 2:1 mux "
                                           "leaf per bit of the read tree)", unit="NAND2", ge=0, source=_C)
    nand2_um2: float = param(0.5, doc="NAND2 area at 28 nm", unit="um^2", gt=0,
                             source="0.4-0.6 um^2 (references.md#area-energy)")
    sram_bitcell_um2: float = param(0.127, doc="HD 6T SRAM bit cell at 28 nm (storage: sram)", unit="um^2", gt=0,
                                    source="TSMC 28 nm HD bit cell [WikiChip]")
    edc_control_nand2: int = param(3000, doc="EDC logic: two 4-way 3-bit averagers, 9-bit index, PHT counter "
                                   "update, LLR saturating counter, rollback copy", unit="NAND2", ge=0, source=_C)
    tvc_control_nand2: int = param(20000, doc="TVC logic: 64-bit adders, iterative 64/32 divider, 64x32 "
                                   "multiplier (sequential), comparators", unit="NAND2", ge=0, source=_C)
    tvc_extra_register_bits: int = param(200, doc="TVC registers beyond the 3 tables and NCR (pointers, L_KV, "
                                         "results) so the total matches the artifact's 1416 bits", unit="bit", ge=0,
                                         source="AHASD artifact: 1416 bits (references.md#ahasd-controls)")
    draft_entry_bits: int = param(48, doc="draft-queue entry: batch id 8, start position 16, length 4, entropy "
                                  "bucket 3, flags 1, token-buffer offset 16 (tokens and entropies stay in memory)",
                                  unit="bit", ge=1, source=_C)
    feedback_entry_bits: int = param(32, doc="feedback entry: batch id 8, accepted length 4, fully-accepted 1, "
                                     "correction token id 17, spare 2", unit="bit", ge=1, source=_C)
    preverify_entry_bits: int = param(32, doc="pre-verification entry: batch id 8, token offset 16, length 8",
                                      unit="bit", ge=1, source=_C)
    queue_control_nand2: int = param(600, doc="per queue: head/tail pointers, full/empty, handshake",
                                     unit="NAND2", ge=0, source=_C)
    gts_entry_bits: int = param(32, doc="GTS task-queue entry: task id 8, rank mask 16, type 2, spare 6",
                                unit="bit", ge=1, source=_C)
    gts_control_nand2: int = param(1500, doc="GTS rank-gating FSM and queue control", unit="NAND2", ge=0, source=_C)
    aau_lane_um2: float = param(1660.0, doc="one AAU lane datapath (FP16 FMA) at 28 nm", unit="um^2", gt=0,
                                source="FP16 FPU ~1660 um^2 at 28 nm [LLMCompass]")
    aau_register_bits: int = param(1024, doc="AAU operand/accumulator registers (16 lanes x 4 x 16 bit)",
                                   unit="bit", ge=0, source=_C)
    aau_control_nand2: int = param(5000, doc="AAU sequencer, exp/erf polynomial control, reduction tree control",
                                   unit="NAND2", ge=0, source=_C)
    dram_process_penalty: float = param(2.5, doc="area of logic in a DRAM process relative to 28 nm logic",
                                        ge=1, source="2-3x, assumption (references.md#area-energy)")


def _sram_efficiency(nbytes: float) -> float:
    kb = nbytes / 1024.0
    if kb <= _CACTI_EFF[0][0]:
        return _CACTI_EFF[0][1]
    for (k0, e0), (k1, e1) in zip(_CACTI_EFF, _CACTI_EFF[1:]):
        if kb <= k1:
            t = (math.log2(kb) - math.log2(k0)) / (math.log2(k1) - math.log2(k0))
            return e0 + t * (e1 - e0)
    return _CACTI_EFF[-1][1]


def storage_um2(a: AreaConfig, bits: int) -> float:
    """Area of ``bits`` of small-table storage including its periphery."""
    if a.storage == "sram":
        return bits * a.sram_bitcell_um2 / _sram_efficiency(bits / 8.0)
    return bits * (a.flop_bit_um2 + a.periphery_nand2_per_bit * a.nand2_um2)


def edc_bits() -> int:
    """LEHT 8x3 + LCEHT 8x3 + LLR 3 + PHT 512x2 = 1075 bits."""
    return 8 * 3 + 8 * 3 + 3 + 512 * 2


def tvc_bits(a: AreaConfig) -> int:
    """NVCT/PDCT/PVCT: 3 tables x 4 entries x (64 + 32) bits, NCR 64 bits, + extra registers."""
    return 3 * 4 * (64 + 32) + 64 + a.tvc_extra_register_bits


DEFAULT_QUEUE_DEPTHS = (64, 32, 16)  # unverified-draft, feedback, pre-verification [artifact]


def queue_bits(a: AreaConfig, depths: tuple[int, int, int] = DEFAULT_QUEUE_DEPTHS) -> int:
    d, f, p = depths
    return d * a.draft_entry_bits + f * a.feedback_entry_bits + p * a.preverify_entry_bits


def area_rows(a: AreaConfig, ranks: int, aau_lanes: int, gts_depth: int,
              queue_depths: tuple[int, int, int] = DEFAULT_QUEUE_DEPTHS) -> list[dict]:
    nand = a.nand2_um2
    rows = []

    def row(unit: str, um2: float, basis: str) -> None:
        rows.append({"unit": unit, "area_mm2": um2 * 1e-6, "basis": basis})

    b = edc_bits()
    row("EDC", storage_um2(a, b) + a.edc_control_nand2 * nand,
        f"{b} bits {a.storage} (LEHT 8x3, LCEHT 8x3, LLR 3, PHT 512x2) + {a.edc_control_nand2} NAND2 logic; host CPU")
    b = tvc_bits(a)
    row("TVC", storage_um2(a, b) + a.tvc_control_nand2 * nand,
        f"{b} bits {a.storage} (3 tables x 4 x (64+32) + NCR 64 + {a.tvc_extra_register_bits}) "
        f"+ {a.tvc_control_nand2} NAND2 logic; host CPU")
    b = queue_bits(a, queue_depths)
    qd, qf, qp = queue_depths
    row("async_queues", storage_um2(a, b) + 3 * a.queue_control_nand2 * nand,
        f"{b} bits {a.storage} ({qd}x{a.draft_entry_bits} + {qf}x"
        f"{a.feedback_entry_bits} + {qp}x{a.preverify_entry_bits}) "
        f"+ 3 x {a.queue_control_nand2} NAND2; host CPU")
    b = gts_depth * a.gts_entry_bits
    row("GTS", (storage_um2(a, b) + a.gts_control_nand2 * nand) * a.dram_process_penalty,
        f"{b} bits ({gts_depth}x{a.gts_entry_bits}) + {a.gts_control_nand2} NAND2, x{a.dram_process_penalty:g} "
        "DRAM process; PIM die")
    per_aau = (aau_lanes * a.aau_lane_um2 + storage_um2(a, a.aau_register_bits)
               + a.aau_control_nand2 * nand) * a.dram_process_penalty
    row("AAU", ranks * per_aau,
        f"{ranks} AAUs (one per rank) x [{aau_lanes} lanes x {a.aau_lane_um2:g} um^2 + {a.aau_register_bits} "
        f"register bits + {a.aau_control_nand2} NAND2] x{a.dram_process_penalty:g} DRAM process "
        f"= {per_aau * 1e-6:.4f} mm^2 each")
    total = sum(r["area_mm2"] for r in rows)
    rows.append({"unit": "total", "area_mm2": total, "basis": "sum of the rows above"})
    for r in rows:
        r["pct_of_die"] = 100.0 * r["area_mm2"] / a.die_area_mm2
        r["paper_mm2"] = PAPER_MM2[r["unit"]]
    return rows


def area_table(cfg):
    """``pandas.DataFrame`` with columns unit, area_mm2, pct_of_die, basis, paper_mm2.

    ``cfg`` is a resolved SimConfig: ``cfg.area``, ``cfg.pim`` (ranks, AAU lanes, GTS
    queue depth) and, when present, the async queue depths of ``cfg.ahasd``."""
    import pandas as pd

    a = cfg.area
    p = cfg.pim
    depths = DEFAULT_QUEUE_DEPTHS
    try:
        ah = cfg.ahasd
        depths = (int(ah.unverified_queue_batches), int(ah.feedback_queue_entries), int(ah.preverify_queue_entries))
    except AttributeError:
        pass
    rows = area_rows(a, p.ranks, p.aau.lanes, p.gts.queue_depth, depths)
    return pd.DataFrame(rows, columns=["unit", "area_mm2", "pct_of_die", "basis", "paper_mm2"])


def pim_unit_rows(cfg) -> list[dict]:
    """PIM logic per die and the DRAM capacity it displaces, per PIM unit preset
    (hw/pim_unit.py) on its device: the configured unit (``pim.unit`` with its typed keys) on
    ``pim.preset``, every unit preset on ``pim.preset`` (hbm_pim on its own device), with the
    published capacity a PIM die gives up where one exists."""
    from . import pim_spec, pim_unit
    a = cfg.area
    device = pim_spec.preset(cfg.pim.preset)
    cases = [("configured", pim_unit.from_config(cfg.pim), device)]
    for name, unit in pim_unit.UNIT_PRESETS.items():
        dev = pim_spec.preset("hbm_pim") if name == "hbm_pim" else device
        cases.append((name, unit, dev))
    rows = []
    for label, unit, dev in cases:
        try:
            ar = pim_unit.area_breakdown_mm2(unit, dev, a)
        except Exception as exc:   # a unit that does not fit this device (lanes): say so in the row
            rows.append({"unit": label, "device": dev.name, "k": unit.input_slots, "basis": str(exc)})
            continue
        lost = pim_unit.capacity_lost_gib(ar["total"])
        pub = pim_unit.PUBLISHED_CAPACITY_LOST.get(unit.name if label != "configured" else "")
        # HBM-PIM: half of an 8 Gb (1 GiB) die over its 4 pseudo channels (one modelled unit each)
        pub_gib = pub[0] * 1.0 / 4 if pub else float("nan")
        rows.append({"unit": label, "device": dev.name, "k": unit.input_slots,
                     "precision": pim_unit.precision_of(unit, dev), "lanes_per_die": ar["lanes_per_die"],
                     "buffer_bytes": ar["global_buffer_bytes"], "registers_per_bank": unit.result_registers_per_bank,
                     "lanes_mm2": ar["lanes"], "buffer_mm2": ar["global_buffer"],
                     "registers_mm2": ar["result_registers"], "pim_logic_mm2": ar["total"],
                     "pct_of_die": 100.0 * ar["total"] / a.die_area_mm2, "capacity_lost_gib": lost,
                     "pct_of_capacity": 100.0 * lost / dev.capacity_gib_per_die,
                     "published_lost_gib": pub_gib,
                     "basis": (f"lanes x {pim_unit.LANE_45NM[pim_unit.precision_of(unit, dev)][0]:g} um^2 (45 nm) "
                               f"x (28/45)^2 x{a.dram_process_penalty:g}; buffer and registers {a.storage} "
                               f"x{a.dram_process_penalty:g}; capacity at {pim_unit.DRAM_GB_PER_MM2} Gb/mm^2"
                               + (f"; published: {pub[1]}" if pub else ""))})
    return rows


def pim_unit_table(cfg):
    import pandas as pd
    cols = ["unit", "device", "k", "precision", "lanes_per_die", "buffer_bytes", "registers_per_bank", "lanes_mm2",
            "buffer_mm2", "registers_mm2", "pim_logic_mm2", "pct_of_die", "capacity_lost_gib", "pct_of_capacity",
            "published_lost_gib", "basis"]
    return pd.DataFrame(pim_unit_rows(cfg), columns=cols)
