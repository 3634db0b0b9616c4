"""PIM GEMV roofline, rank partition, AAU cycle formulas, GTS switch."""
from __future__ import annotations

import math

import pytest

from ahasd_sim.config import ConfigError
from ahasd_sim.hw import Aau, Gts, Lpddr5Memory, Platform, PimMemory
from test_hw_helpers import Op, elementwise, linear, make_cfg

GIB = 2**30


# The roofline tests below check the mechanics with the AHASD Table 2 figures typed in
# (102.4 GOPS, 256 GB/s per unit): since issue 25 these are explicit overrides and the
# default is derived from pim.preset (test_pim_default_rates_are_derived_from_the_preset), and
# they run the v0.1 roofline (gemv_timing: roofline); the default command sequence is tested
# in test_pim_sequence.py.
TYPED_TABLE2 = {"unit_gops_int8": 102.4, "internal_bw_gb_s": 256.0, "gemv_timing": "roofline"}


def pim_of(tree=None, typed=True) -> PimMemory:
    tree = dict(tree or {})
    if typed:
        tree["pim"] = {**TYPED_TABLE2, **tree.get("pim", {})}
    cfg = make_cfg(tree)
    return PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))


def test_pim_default_rates_are_derived_from_the_preset():
    from ahasd_sim.hw import pim_spec
    p = pim_of(typed=False)
    assert p.rates_source == {"ops": "derived", "internal_bw": "derived"}
    r = pim_spec.derive(pim_spec.preset("lpddr5_pim"))
    # per unit = one x8 LPDDR5-6400 die: 16 banks x 16 B / (4 x 1.25 ns), 16 banks x 4 lanes x 0.8 GHz x 2
    assert p.rank_internal_bw_bytes_s == pytest.approx(16 * 16 / 5e-9) == r.internal_bytes_s_per_die
    assert p.rank_ops_s == pytest.approx(16 * 4 * 0.8e9 * 2) == r.ops_s_per_die
    assert p.total_internal_bw_bytes_s == pytest.approx(819.2e9)
    # a typed value overrides only its own rate
    q = pim_of({"pim": {"internal_bw_gb_s": 256.0}}, typed=False)
    assert q.rates_source == {"ops": "derived", "internal_bw": "typed"}
    assert q.rank_internal_bw_bytes_s == pytest.approx(256e9) and q.rank_ops_s == pytest.approx(102.4e9)
    # another preset moves the derived rates
    g = pim_of({"pim": {"preset": "gddr6_aim"}}, typed=False)
    assert g.rank_internal_bw_bytes_s == pytest.approx(512e9)


def test_unknown_pim_preset_is_a_config_error():
    with pytest.raises(ConfigError) as e:
        pim_of({"pim": {"preset": "lpddr6_pim"}}, typed=False)
    assert "pim.preset" in str(e.value) and "\n" not in str(e.value)


def test_pim_rates_per_unit_and_total_scope():
    p = pim_of()
    assert p.total_ops_s == pytest.approx(16 * 102.4e9, rel=1e-12, abs=0)          # per-unit reading: 1.64 TOPS
    assert p.rank_ops_s == pytest.approx(102.4e9, rel=1e-12, abs=0)
    assert p.rank_internal_bw_bytes_s == pytest.approx(256e9, rel=1e-12, abs=0)
    t = pim_of({"pim": {"gops_scope": "total", "bw_scope": "total"}})
    assert t.total_ops_s == pytest.approx(102.4e9, rel=1e-12, abs=0)
    assert t.rank_ops_s == pytest.approx(102.4e9 / 16, rel=1e-12, abs=0)
    assert t.rank_internal_bw_bytes_s == pytest.approx(256e9 / 16, rel=1e-12, abs=0)


def test_pim_gemv_compute_bound_regime():
    p = pim_of()
    op = linear(1, 4096, 4096)
    c = p.gemv_cost(op, 2)
    t_cmp = 2 * op.macs / (2 * 102.4e9)
    t_bw = op.weight_bytes / (2 * 256e9)
    assert t_cmp > t_bw
    assert p.bound(op, 2) == "compute"
    assert c.duration_s == pytest.approx(t_cmp + 100e-9, rel=1e-12, abs=0)
    assert c.bus_bytes == 0  # bank-local


def test_pim_gemv_bandwidth_bound_regime():
    p = pim_of({"pim": {"unit_gops_int8": 4096.0}})
    op = linear(1, 4096, 4096)
    c = p.gemv_cost(op, 2)
    t_bw = op.weight_bytes / (2 * 256e9)
    assert 2 * op.macs / (2 * 4096e9) < t_bw
    assert p.bound(op, 2) == "bandwidth"
    assert c.duration_s == pytest.approx(t_bw + 100e-9, rel=1e-12, abs=0)


def test_pim_gemv_is_min_of_bandwidth_and_compute_rates():
    """time = bytes / min(internal bw, compute rate x bytes per op) for every rank count."""
    p = pim_of({"pim": {"op_overhead_ns": 0.0}})
    op = linear(1, 2048, 8192)
    for r in (1, 3, 7):
        rate = min(r * 256e9, r * 102.4e9 * op.weight_bytes / (2 * op.macs))  # bytes/s
        assert p.gemv_cost(op, r).duration_s == pytest.approx(op.weight_bytes / rate, rel=1e-12, abs=0)


def test_pim_multi_token_rereads_weights_per_held_vector():
    """A PIM unit multiplies vectors_per_weight_read input vectors per weight row it reads."""
    for v, reads in ((1, 8), (2, 4), (8, 1), (16, 1)):
        p = pim_of({"pim": {"unit_gops_int8": 1e6, "op_overhead_ns": 0.0, "vectors_per_weight_read": v}})
        one, eight = linear(1, 4096, 4096), linear(8, 4096, 4096)
        bw = 2 * 256e9
        t1, t8 = p.gemv_cost(one, 2).duration_s, p.gemv_cost(eight, 2).duration_s
        assert t1 == pytest.approx(4096 * 4096 / bw, rel=1e-12, abs=0)                        # bandwidth bound
        assert t8 == pytest.approx(reads * 4096 * 4096 / bw, rel=1e-12, abs=0)
    # default (AiM: one input vector in the global buffer): no free weight reuse
    p = pim_of({"pim": {"unit_gops_int8": 1e6, "op_overhead_ns": 0.0}})
    assert p.gemv_cost(linear(8, 4096, 4096), 2).duration_s == pytest.approx(8 * p.gemv_cost(linear(1, 4096, 4096), 2).duration_s, rel=1e-12, abs=0)


def test_pim_attention_reads_kv_in_ranks_and_energy():
    cfg = make_cfg({"pim": {"protocol_io": "free"}})
    mem = Lpddr5Memory(cfg.memory)
    p = PimMemory(cfg.pim, mem)
    op = Op(kind="attention", n_tokens=1, macs=32 * 128 * 1024, flops=2 * 32 * 128 * 1024,
            kv_bytes=4096 * 1024, act_bytes_in=4096, act_bytes_out=32 * 1024)
    c = p.gemv_cost(op, 2)
    e = (4096 * 1024 * 8 * 0.8e-12 + op.macs * 0.3e-12 + 4096 * 1024 / 2048 * 1.8e-9)
    assert c.energy_of("pim") == pytest.approx(e, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="AAU"):
        p.gemv_cost(elementwise("gelu", 100), 2)


def test_partition_min_fit_matches_reference_split():
    # the paper's split counts single PIM units (dies): die lockstep off reproduces it
    p = pim_of({"pim": {"partition_policy": "min_fit", "die_lockstep": False}})
    # LLaMA2-7B + 13B INT8 -> 2 + 4 ranks of 4 GiB
    part = p.partition(6.738e9, 13.016e9)
    assert (part.draft_ranks, part.target_ranks, part.spare_ranks) == (2, 4, 10)
    assert part.draft_rank_ids == (0, 1) and part.target_rank_ids == (2, 3, 4, 5)
    # OPT-1.3B + 6.7B -> 1 + 2
    part = p.partition(1.316e9, 6.658e9)
    assert (part.draft_ranks, part.target_ranks) == (1, 2)
    # PaLM-like 8B + 30B with 2 GB of KV each -> 3 + 8 (references.md#ahasd-aau-gts)
    part = p.partition(8.03e9, 29.88e9, 2e9)
    assert (part.draft_ranks, part.target_ranks) == (3, 8)
    # with the default die lockstep (two x8 dies of a rank take one command stream) the odd
    # counts round up to whole ranks: 2 + 4, 2 + 2, 4 + 8
    q = pim_of({"pim": {"partition_policy": "min_fit"}})
    assert [(x.draft_ranks, x.target_ranks) for x in (q.partition(6.738e9, 13.016e9), q.partition(1.316e9, 6.658e9),
                                                      q.partition(8.03e9, 29.88e9, 2e9))] == [(2, 4), (2, 2), (4, 8)]


def test_partition_proportional_spreads_spare_ranks():
    p = pim_of({"pim": {"partition_policy": "proportional", "die_lockstep": False}})
    part = p.partition(6.738e9, 13.016e9)
    assert part.draft_ranks == round(16 * 6.738 / (6.738 + 13.016)) == 5
    assert part.target_ranks == 11 and part.spare_ranks == 0
    # in whole ranks of 2 dies: 2 x round(5.46 / 2) = 6 and 10
    q = pim_of({"pim": {"partition_policy": "proportional"}})
    part = q.partition(6.738e9, 13.016e9)
    assert (part.draft_ranks, part.target_ranks, part.spare_ranks) == (6, 10, 0)


def test_partition_striped_uses_every_rank_and_respects_capacity():
    assert pim_of().cfg.partition_policy == "auto"     # default: each mode its own (test_fair_baselines.py)
    p = pim_of({"pim": {"partition_policy": "striped"}})
    # LLaMA2-7B + 13B: min_fit needs 2 + 4; striped gives the drafter 16-4 = 12 ranks and the
    # target 16-2 = 14; 10 ranks in the middle hold both.
    part = p.partition(6.738e9, 13.016e9)
    assert (part.draft_ranks, part.target_ranks, part.shared_ranks, part.spare_ranks) == (12, 14, 10, 0)
    assert part.draft_rank_ids == tuple(range(12)) and part.target_rank_ids == tuple(range(2, 16))
    assert set(part.draft_rank_ids) | set(part.target_rank_ids) == set(range(16))
    assert part.target_shared_fraction == pytest.approx(10 / 14, rel=1e-12, abs=0)
    # the fullest (shared) rank holds one slice of each model
    assert part.max_rank_fill == pytest.approx((6.738e9 / 12 + 13.016e9 / 14) / (4 * 2**30), rel=1e-12, abs=0)
    # capacity respected: a model pair that fits min_fit but whose slices overflow a shared rank
    # (4 ranks of 1 GiB: 0.9 + 1.8 GiB need 1 + 2 ranks; striped shares one rank that would hold
    # 0.45 + 0.6 GiB)
    tight = pim_of({"pim": {"ranks": 4, "rank_capacity_gib": 1.0, "partition_policy": "striped",
                            "die_lockstep": False}, "memory": {"capacity_gib": 4}})
    with pytest.raises(ConfigError) as exc:
        tight.partition(0.9 * 2**30, 1.8 * 2**30)
    assert exc.value.key_path == "pim.partition_policy"


def test_partition_too_big_raises_config_error():
    p = pim_of({"pim": {"ranks": 4, "partition_policy": "striped"}, "memory": {"capacity_gib": 16}})
    with pytest.raises(ConfigError) as exc:
        p.partition(6.738e9, 13.016e9)
    assert exc.value.key_path == "pim.ranks"
    assert "13.02 GB" in exc.value.message and "4 ranks" in exc.value.message


def test_aau_cycles_match_formulas():
    a = Aau(make_cfg().pim.aau)
    assert a.cycles("gelu", 4096) == 8 + 2 * 256
    assert a.cycles("softmax", 100) == 8 + 3 * math.ceil(100 / 16)
    assert a.cycles("layernorm", 17) == 8 + 3 * 2
    assert a.cycles("attention_score", 33) == 8 + 4 * 3
    assert a.cycles("reduction", 1000) == 8 + 9 + 1
    assert a.cycles("reduction", 1) == 8 + 0 + 1
    streaming = Aau(make_cfg({"pim": {"aau": {"reduction_cycles_per_vector": 1}}}).pim.aau)
    assert streaming.cycles("reduction", 1000) == 8 + 9 + 1 + 63


def test_aau_op_cost_time_energy_and_class_aliases():
    a = Aau(make_cfg().pim.aau)
    c = a.op_cost(elementwise("softmax", 4096))
    assert c.duration_s == pytest.approx((8 + 3 * 256) / 0.8e9, rel=1e-12, abs=0)
    assert c.energy_of("aau") == pytest.approx(4096 * 1.2e-12, rel=1e-12, abs=0)
    silu = Op(kind="nonlinear", elements=160, nonlinear_class="silu")
    assert a.op_cost(silu).duration_s == pytest.approx((8 + 2 * 10) / 0.8e9, rel=1e-12, abs=0)
    rms = Op(kind="nonlinear", elements=160, nonlinear_class="rmsnorm")
    assert a.op_cost(rms).energy_of("aau") == pytest.approx(160 * 1.0e-12, rel=1e-12, abs=0)
    # split over 2 AAUs: half the elements each, same total energy
    c2 = a.op_cost(elementwise("softmax", 4096), n_aau=2)
    assert c2.duration_s == pytest.approx((8 + 3 * 128) / 0.8e9, rel=1e-12, abs=0)
    assert c2.energy_j == pytest.approx(c.energy_j, rel=1e-12, abs=0)
    with pytest.raises(ValueError):
        a.op_cost(Op(kind="nonlinear", elements=10, nonlinear_class="tanh-ish"))


def test_aau_disabled_offloads_to_host_over_the_bus():
    cfg = make_cfg({"pim": {"aau": {"enabled": False}}})
    p = Platform.build(cfg)
    assert not p.aau.enabled and not p.has("aau")
    op = elementwise("softmax", 32 * 1024)
    nbytes = p.pim.offload_transfer_bytes(op)
    assert nbytes == 2 * 32 * 1024
    c = p.pim_op_cost(op, 2)
    npu = p.npu_op_cost(op)
    mem = p.memory
    assert c.duration_s == pytest.approx(5e-6 + nbytes / mem.effective_bandwidth_bytes_s + npu.duration_s, rel=1e-12, abs=0)
    assert c.bus_bytes == nbytes
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(nbytes / 2) + mem.write_energy_j(nbytes / 2), rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="disabled"):
        p.aau.op_cost(op)
    # with the AAU it stays in memory
    on = Platform.build(make_cfg()).pim_op_cost(op, 2)
    assert on.bus_bytes == 0 and on.duration_s < c.duration_s


def test_gts_switch_cost_enabled_and_coarse():
    g = Gts(make_cfg().pim.gts, 0.8)
    c = g.switch_cost()
    assert c.duration_s == pytest.approx(1.25e-9, rel=1e-12, abs=0)
    assert c.energy_of("gts") == pytest.approx(50e-12, rel=1e-12, abs=0)
    coarse = Gts(make_cfg({"pim": {"gts": {"enabled": False}}}).pim.gts, 0.8).switch_cost()
    assert coarse.duration_s == pytest.approx(10e-6, rel=1e-12, abs=0)
    assert coarse.energy_of("gts") == pytest.approx(5e-6, rel=1e-12, abs=0)
