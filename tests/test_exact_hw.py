"""Hardware units and mode costs: terms that a one-line change could drop (issue 19).

Values are derived by hand from the documented formulas (module docstrings of
hw/lpddr5.py and hw/npu.py; modeling.md) with configs chosen so that the term
under test is the binding one.
"""
from __future__ import annotations

import pytest

from ahasd_sim.hw import Lpddr5Memory, Npu
from test_hw_helpers import make_cfg
from test_hw_memory_npu import OpDims


def _row_eff(**mem):
    return Lpddr5Memory(make_cfg({"memory": mem}).memory).bandwidth_breakdown.row_efficiency


# ------------------------------------------------------------------ LPDDR5 row-switch limit
# burst 32 B at 12.8 GB/s per x16 channel = 2.5 ns = tCCD_S -> t_col 2.5 ns.
# 64-byte pages: t_row_data = 2 bursts x 2.5 = 5 ns.
# bank cycle = max(tRAS, tRCD + t_row_data) + tRP; t_row = max(t_row_data, bank_cycle / banks, tFAW / 4, tRRD)
def test_row_limit_trrd_term():
    # tFAW 0, 16 banks: bank cycle (40 + 20)/16 = 3.75; tRRD 12.5 ns binds -> 5 / 12.5 = 0.4
    assert _row_eff(page_bytes=64, tfaw_ns=0.0, trrd_ns=12.5) == pytest.approx(0.4, rel=1e-12)


def test_row_limit_tras_term():
    # one bank: bank cycle = max(tRAS 80, tRCD 20 + 5) + tRP 20 = 100 ns -> 5 / 100
    assert _row_eff(page_bytes=64, interleaved_banks=1, tras_ns=80.0) == pytest.approx(0.05, rel=1e-12)


def test_row_limit_trcd_and_trp_terms():
    # one bank: max(tRAS 40, tRCD 50 + 5) + tRP 20 = 75 ns -> 5/75
    assert _row_eff(page_bytes=64, interleaved_banks=1, trcd_ns=50.0) == pytest.approx(5 / 75, rel=1e-12)
    # tRP 45: max(40, 25) + 45 = 85 ns -> 5/85
    assert _row_eff(page_bytes=64, interleaved_banks=1, trp_ns=45.0) == pytest.approx(5 / 85, rel=1e-12)


def test_row_limit_banks_divide_the_bank_cycle():
    # 4 banks: 2 KB pages, t_row_data 160 ns; bank cycle max(40, 180) + 20 = 200 -> 200/4 = 50 < 160 -> 1.0
    assert _row_eff(interleaved_banks=4) == pytest.approx(1.0)
    # 64 B pages, 2 banks, tFAW 0, tRRD 0: bank cycle (40 + 20)/2 = 30 ns -> 5/30
    assert _row_eff(page_bytes=64, interleaved_banks=2, tfaw_ns=0.0, trrd_ns=0.0) == pytest.approx(5 / 30, rel=1e-12)


# ------------------------------------------------------------------ NPU tile passes over chips
def test_npu_odd_tile_passes_round_up_per_chip():
    # default NPU: 2 chips of 64 x 64, weight preload not hidden, min stream 4 cycles
    # K = 192, N = 64 -> 3 x 1 = 3 passes; 2 chips -> ceil(3/2) = 2 passes on the busier chip.
    # n = 10 tokens: pass = 64 preload + 10 stream = 74 cycles; fill 64 + 64 - 2 = 126.
    op = OpDims(kind="gemm", n_tokens=10, macs=10 * 192 * 64, flops=2 * 10 * 192 * 64, weight_bytes=192 * 64,
                act_bytes_in=10 * 192, act_bytes_out=10 * 64, k_dim=192, n_dim=64)
    b = Npu(make_cfg().npu).analyse(op, 1e15)
    assert b.passes == 3
    assert b.cycles == 2 * 74 + 126
    # with 3 chips each chip takes one pass
    b3 = Npu(make_cfg({"npu": {"chips": 3, "spm_bytes": 3 * 2**20}}).npu).analyse(op, 1e15)
    assert b3.cycles == 1 * 74 + 126


@pytest.mark.parametrize("n, stream", [(1, 4), (3, 4), (4, 4), (5, 5)])
def test_npu_min_stream_cycles(n, stream):
    op = OpDims(kind="gemm", n_tokens=n, macs=n * 128 * 128, flops=2 * n * 128 * 128, weight_bytes=128 * 128,
                act_bytes_in=n * 128, act_bytes_out=n * 128, k_dim=128, n_dim=128)
    # 2 x 2 = 4 passes, 2 per chip; each 64 preload + max(n, 4) stream cycles; + 126 fill
    assert Npu(make_cfg().npu).analyse(op, 1e15).cycles == 2 * (64 + stream) + 126
    # preload hidden: a pass is max(64 rows, stream) = 64 cycles for every n here
    assert Npu(make_cfg({"npu": {"weight_preload_hidden": True}}).npu).analyse(op, 1e15).cycles == 2 * 64 + 126
    # a longer minimum stream binds for short passes only
    long = Npu(make_cfg({"npu": {"min_stream_cycles": 6}}).npu).analyse(op, 1e15).cycles
    assert long == 2 * (64 + max(n, 6)) + 126


# ------------------------------------------------------------------ mode costs (modes/costs.py)
def _step_costs(*overrides):
    from ahasd_sim.config import load_config
    from ahasd_sim.hw.platform import Platform
    from ahasd_sim.modes.costs import StepCosts
    from ahasd_sim.workload.models import get_model
    from conftest import PAPER_PLATFORM
    cfg = load_config(PAPER_PLATFORM, list(overrides))
    p = Platform.build(cfg)
    return cfg, p, StepCosts(p, get_model(cfg.run.draft_model), get_model(cfg.run.target_model), cfg)


def test_preverify_runs_the_target_on_the_targets_ranks():
    cfg, p, sc = _step_costs()
    part = sc.partition
    assert part.draft_ranks != part.target_ranks          # otherwise the check below could not tell
    kv, n = 512, 4
    ops = sc.ops(sc.target, n, kv)
    expected = sum(p.pim_op_cost(op, part.target_ranks).duration_s * op.layer_repeat for op in ops)
    wrong = sum(p.pim_op_cost(op, part.draft_ranks).duration_s * op.layer_repeat for op in ops)
    assert abs(expected - wrong) > 1e-3 * expected
    pv = sc.preverify(n, kv)
    assert pv.duration_s == pytest.approx(expected, rel=1e-12)
    assert pv.busy_s == {"pim": pytest.approx(expected, rel=1e-12)}
    # and drafting runs the drafter on the drafter's ranks
    d_ops = sc.ops(sc.draft, 1, kv)
    assert sc.draft_token(kv).duration_s == pytest.approx(
        sum(p.pim_op_cost(op, part.draft_ranks).duration_s * op.layer_repeat for op in d_ops), rel=1e-12)


def test_operator_sync_tier_takes_the_max_of_its_devices():
    # without shared-rank contention (tested with its own formula in the issue-12 tests) a tier's
    # host and PIM operators run side by side: the tier takes the longer of the two
    cfg, p, sc = _step_costs("pim.shared_rank_contention=false")
    kv, n = 512, 5
    ops = sc.ops(sc.target, n, kv)
    # a mapping that splits every tier with two or more ops across NPU and PIM
    tiers: dict[tuple[int, int], list] = {}
    for op in ops:
        tiers.setdefault((op.layer_repeat, op.tier), []).append(op)
    mapping = {}
    for group in tiers.values():
        for i, op in enumerate(group):
            mapping[op.name] = "pim" if i % 2 else "npu"
    assert any(len(g) >= 2 for g in tiers.values())
    barrier = cfg.operator_sync.barrier_ns * 1e-9
    ranks = sc.partition.target_ranks
    dur = busy_npu = busy_pim = 0.0
    for (rep, _tier), group in tiers.items():
        t_npu = sum(p.npu.op_cost(op, p.memory.effective_bandwidth_bytes_s).duration_s
                    for op in group if mapping[op.name] == "npu")
        t_pim = sum(p.pim_op_cost(op, ranks).duration_s for op in group if mapping[op.name] == "pim")
        dur += (max(t_npu, t_pim) + barrier) * rep        # barrier at the end of each tier
        busy_npu += t_npu * rep
        busy_pim += t_pim * rep
    cost = sc.opsync_forward("target", n, kv, {"target": mapping, "draft": {}})
    assert cost.duration_s == pytest.approx(dur, rel=1e-12)
    assert cost.busy_s["npu"] == pytest.approx(busy_npu, rel=1e-12)
    assert cost.busy_s["pim"] == pytest.approx(busy_pim, rel=1e-12)
    # the two devices overlap inside tiers: the forward is shorter than their busy times added
    assert cost.duration_s < busy_npu + busy_pim
