"""PIM unit microarchitecture (hw/pim_unit.py) and the physics options of the PIM model:
k input-vector slots with their lanes, the all-bank ACT within tRRD/tFAW, protocol I/O
energy, die lockstep in placement.

Hand derivations use the lpddr5_pim preset (tests/test_pim_sequence.py's header): per ISR,
mode switches apart, WR_GB(n) = 1 + (n - 1) x 4 + 1, WR_BIAS = 14, MAC_ABK(n) = 15 + 60 +
56 + (n - 1) x 4 + 1, RD_MAC = 18, TMOD = 32; a MAC_ABK right after a MAC_ABK (same batch)
+3 (tRTP 4 instead of 1 cycle before its PREA).
"""
from __future__ import annotations

import dataclasses
import math

import pytest

from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw import Lpddr5Memory, PimMemory, pim_spec, pim_unit
from ahasd_sim.hw.area import AreaConfig
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import forward_ops
from test_hw_helpers import make_cfg

TCK = 1.25e-9
STRETCH = 3125 / (3125 - 224 - 15 - 56)


def _pim(**pim) -> PimMemory:
    cfg = make_cfg({"pim": pim})
    return PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))


def _q_proj(n: int = 1):
    return next(o for o in forward_ops(get_model("llama2-7b"), n, 128) if o.name == "q_proj")


# ------------------------------------------------------------------ k slots: command counts and time
def test_k1_and_k4_command_counts_and_time_by_hand():
    """4096 x 4096 INT8 on 2 dies, 4 input vectors (4 verified tokens); 4 chunks of opsize 64,
    128 output groups per die.

    k = 1 (aim unit, 32 registers): 4 passes; per pass and chunk WR_GB 254, 4 batches of 32
    groups (8 mode switches, 4 x 31 x 3 = 372 for back-to-back MAC_ABK), 128 x (14 + 384 + 18):
    54,130; cycles 32 + 4 x 4 x 54,130 = 866,112. Counts: WR_GB 16, WR_BIAS = RD_MAC =
    4 x 4 x 128 = 2,048, MAC_ABK 2,048, TMOD 1 + 2 x 4 x 4 x 4 = 129.

    k = 4 (lanes sized 4 x 4 = 16 per bank, 4 x 32 = 128 registers -> 32 groups per batch):
    one pass; per chunk 4 x WR_GB 254 = 1,016, 8 mode switches = 256, per group 4 x 14 + 384
    (MAC spacing max(4, 4 x 16 / (16 x 0.8 GHz) / 1.25 ns) = 4) + 4 x 18 = 512: 1,016 + 256 +
    65,536 + 372 = 67,180; cycles 32 + 4 x 67,180 = 268,752. Counts: WR_GB 16, WR_BIAS = RD_MAC
    2,048, MAC_ABK 512, TMOD 1 + 2 x 4 x 4 = 33."""
    op = _q_proj(4)
    assert op.pim_gemv == (4096, 4096, 4, 1.0)
    p1, p4 = _pim(), _pim(vectors_per_weight_read=4)
    assert p1.vectors_per_weight_read == 1 and p4.vectors_per_weight_read == 4
    assert p4.spec.mac_lanes == 16 and p4.spec.result_registers == 128
    c1 = pim_spec.gemv_counts(p1._sequence_spec(1.0), 4096, 4096, 4, dies=2)
    c4 = pim_spec.gemv_counts(p4._sequence_spec(1.0), 4096, 4096, 4, dies=2)
    assert {k: c1[k] for k in ("WR_GB", "WR_BIAS", "MAC_ABK", "RD_MAC", "TMOD")} == \
        {"WR_GB": 16, "WR_BIAS": 2048, "MAC_ABK": 2048, "RD_MAC": 2048, "TMOD": 129}
    assert {k: c4[k] for k in ("WR_GB", "WR_BIAS", "MAC_ABK", "RD_MAC", "TMOD")} == \
        {"WR_GB": 16, "WR_BIAS": 2048, "MAC_ABK": 512, "RD_MAC": 2048, "TMOD": 33}
    assert p1.gemv_cost(op, 2).duration_s == pytest.approx(866_112 * TCK * STRETCH, rel=1e-12, abs=0)
    assert p4.gemv_cost(op, 2).duration_s == pytest.approx(268_752 * TCK * STRETCH, rel=1e-12, abs=0)
    # the weights are read once per k vectors
    assert p1.bytes_read(op) == 4 * 4096 * 4096 and p4.bytes_read(op) == 4096 * 4096


def test_k_vectors_without_the_lanes_are_refused_or_explicitly_mac_bound():
    """k = 4 needs 16 lanes per bank on lpddr5_pim; 4 typed lanes are a one-line ConfigError
    naming pim.mac_lanes_per_bank; with pim.mac_bound the MAC spacing is 4 x 16 / (4 x 0.8 GHz)
    = 20 ns = 16 nCK, so MAC_ABK(64) = 131 + 63 x 16 + 1 = 1,140 instead of 384."""
    with pytest.raises(ConfigError) as e:
        _pim(vectors_per_weight_read=4, mac_lanes_per_bank=4)
    assert e.value.key_path == "pim.mac_lanes_per_bank"
    assert "\n" not in str(e.value) and "needs 16" in str(e.value)
    slow = _pim(vectors_per_weight_read=4, mac_lanes_per_bank=4, mac_bound=True)
    assert pim_spec.mac_spacing_cycles(slow.spec) == pytest.approx(16.0)
    assert pim_spec.isr_cycles(slow.spec)["MAC_ABK"](64, 4) == pytest.approx(1140)
    # a typed MAC rate short of k vectors is refused the same way
    with pytest.raises(ConfigError) as e:
        _pim(vectors_per_weight_read=8, unit_gops_int8=102.4)
    assert e.value.key_path == "pim.unit_gops_int8"
    _pim(vectors_per_weight_read=8, unit_gops_int8=819.2)        # 8 x 102.4: accepted


def test_unit_area_grows_with_k_and_capacity_follows_the_cell_density():
    """Area per die: lanes x lane area + buffer + registers (28 nm x 2.5 DRAM penalty);
    k = 8 has 8x the lanes, buffer and registers of k = 1, so 8x the area; capacity lost =
    area x 0.241 Gb/mm^2."""
    spec, a = pim_spec.preset("lpddr5_pim"), AreaConfig()
    k1 = pim_unit.area_breakdown_mm2(pim_unit.UNIT_PRESETS["aim"], spec, a)
    k8 = pim_unit.area_breakdown_mm2(dataclasses.replace(pim_unit.UNIT_PRESETS["aim"], input_slots=8,
                                                         result_registers_per_bank=256), spec, a)
    assert k1["lanes_per_die"] == 64 and k8["lanes_per_die"] == 512
    lane_um2 = (282 + 137) * (28 / 45) ** 2 * 2.5
    assert k1["lanes"] == pytest.approx(64 * lane_um2 * 1e-6)
    assert k1["global_buffer_bytes"] == 1024 and k8["global_buffer_bytes"] == 8192
    assert k8["total"] == pytest.approx(8 * k1["total"], rel=0.05)
    assert pim_unit.capacity_lost_gib(1.0) == pytest.approx(0.241 / 8)   # a DRAM Gb is 2^30 bits
    # leakage follows the area (anchored at static_mw_per_rank for the k = 1 unit)
    assert _pim(vectors_per_weight_read=8).static_power_w == pytest.approx(
        _pim().static_power_w * k8["total"] / k1["total"], rel=1e-9)


# ------------------------------------------------------------------ all-bank ACT within tFAW
def test_tfaw_on_off_changes_the_all_bank_act_spacing_exactly():
    """16 banks within tRRD 4 / tFAW 16 nCK: bank i activates at max(4i, 16 (i div 4) + 4 (i mod 4)),
    the last (i = 15) at 60 nCK; lifted: 0. Every MAC_ABK grows by exactly 60 nCK, so a GEMV
    by 60 x its MAC_ABK count (refresh off)."""
    spec = pim_spec.preset("lpddr5_pim")
    assert pim_spec.act_spread_cycles(spec, True) == 60 and pim_spec.act_spread_cycles(spec, False) == 0
    assert pim_spec.isr_cycles(spec, True)["MAC_ABK"](64) - pim_spec.isr_cycles(spec, False)["MAC_ABK"](64) == 60
    on = pim_spec.gemv_cycles(spec, 4096, 4096, 1, refresh=False, dies=2, tfaw=True)
    off = pim_spec.gemv_cycles(spec, 4096, 4096, 1, refresh=False, dies=2, tfaw=False)
    n_mac = pim_spec.gemv_counts(spec, 4096, 4096, 1, dies=2)["MAC_ABK"]
    assert on - off == 60 * n_mac == 60 * 512
    # the config key picks it: jedec = on, power_delivery = off; preset = lpddr5_pim's (on)
    assert _pim().spec.all_bank_act_tfaw and _pim(all_bank_act="jedec").spec.all_bank_act_tfaw
    assert not _pim(all_bank_act="power_delivery").spec.all_bank_act_tfaw
    op = _q_proj()
    assert (_pim().gemv_cost(op, 2).duration_s - _pim(all_bank_act="power_delivery").gemv_cost(op, 2).duration_s
            == pytest.approx(60 * 512 * TCK * STRETCH, rel=1e-9))


def test_tfaw_spread_is_rrd_bound_when_tfaw_is_short():
    """With tFAW <= 4 tRRD the four-ACT window never binds: 15 x tRRD."""
    spec = pim_spec.preset("lpddr5_pim")
    s = dataclasses.replace(spec, timings=dataclasses.replace(spec.timings, n_rrd=4, n_faw=8))
    assert pim_spec.act_spread_cycles(s, True) == 15 * 4


# ------------------------------------------------------------------ protocol I/O
def test_protocol_io_energy_is_bytes_times_pj_per_bit():
    """q_proj on 2 dies: WR_GB 4,096 INT8 inputs per die, WR_BIAS and RD_MAC 512 each per die of
    16 banks x 4 B = 64 B: written 2 x (4,096 + 32,768) = 73,728 B, read 65,536 B; energy =
    (73,728 x 4.5 + 65,536 x 4.5) pJ/bit x 8 bit = 5.0135 uJ (memory.write/read_pj_per_bit 4.5)."""
    op = _q_proj()
    p, free = _pim(), _pim(protocol_io="free")
    assert p.protocol_io_bytes(op, 2) == 73_728 + 65_536
    e = (73_728 * 4.5 + 65_536 * 4.5) * 8 * 1e-12
    assert p.protocol_io_energy_j_by_isr(op, 2) == pytest.approx(e, rel=1e-12)
    assert p.gemv_cost(op, 2).energy_of("pim") - free.gemv_cost(op, 2).energy_of("pim") == pytest.approx(e, rel=1e-9)
    assert free.protocol_io_energy_j_by_isr(op, 2) == 0.0
    # and as bus traffic (offchip bytes in summary.json)
    assert p.gemv_cost(op, 2).bus_bytes == 73_728 + 65_536 and free.gemv_cost(op, 2).bus_bytes == 0
    # it scales with the memory's pJ/bit (causality)
    cfg = make_cfg({"memory": {"write_pj_per_bit": 9.0, "read_pj_per_bit": 9.0}})
    p2 = PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))
    assert p2.protocol_io_energy_j_by_isr(op, 2) == pytest.approx(2 * e, rel=1e-12)


# ------------------------------------------------------------------ die lockstep
@pytest.mark.parametrize("policy", ["min_fit", "proportional", "striped"])
@pytest.mark.parametrize("draft_gb,target_gb", [(0.5, 6.5), (1.3, 13.4), (4.4, 8.9), (0.2, 30.0)])
def test_a_placement_never_splits_a_ranks_dies(policy, draft_gb, target_gb):
    """lpddr5_pim: 16 dies = 8 ranks of 2 x8 dies in lockstep; every model's die count and the
    boundary between the models are even."""
    p = _pim()
    assert p.placement_step == 2
    part = p.partition(draft_gb * 1e9, target_gb * 1e9, 0.1e9, policy=policy)
    assert part.draft_ranks % 2 == 0 and part.target_ranks % 2 == 0 and part.shared_ranks % 2 == 0
    assert min(part.target_rank_ids) % 2 == 0
    # single dies when lockstep is off (a 0.5 GB drafter then takes one die)
    q = _pim(die_lockstep=False)
    assert q.placement_step == 1
    assert q.partition(0.5e9, 6.5e9, 0.1e9, policy="min_fit").draft_ranks == 1


def test_vectors_per_weight_read_override_maps_onto_k():
    """--set pim.vectors_per_weight_read=K sets the unit's k (its lanes and registers follow)."""
    p = _pim(vectors_per_weight_read=8)
    assert p.unit.input_slots == 8 and p.vectors_per_weight_read == 8
    assert p.spec.mac_lanes == 32 and p.spec.input_slots == 8
    g = _pim(unit="gemm_k8")
    assert g.vectors_per_weight_read == 8 and g.spec.mac_lanes == 32
    assert math.isclose(g.gemv_cost(_q_proj(8), 2).duration_s, p.gemv_cost(_q_proj(8), 2).duration_s)


def test_sequence_only_keys_warn_under_the_roofline():
    """pim.driver_order and friends do nothing when GEMVs are timed by the roofline: a one-line warning."""
    from ahasd_sim.checks import pim_unit_warnings
    cfg = make_cfg({"pim": {"gemv_timing": "roofline", "driver_order": "per_group"}})
    w = pim_unit_warnings(cfg)
    assert len(w) == 1 and "pim.driver_order" in w[0] and "\n" not in w[0]
    assert pim_unit_warnings(make_cfg({"pim": {"driver_order": "per_group"}})) == []
