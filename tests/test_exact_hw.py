"""Hardware units and mode costs: terms that a one-line change could drop (issue 19).

Values are derived by hand from the documented formulas (module docstrings of
hw/lpddr5.py and hw/npu.py; modeling.md) with configs chosen so that the term
under test is the binding one.
"""
from __future__ import annotations

import pytest

import math

from ahasd_sim.hw import Lpddr5Memory, Npu
from test_hw_helpers import make_cfg
from test_hw_helpers import Op, linear
from test_hw_memory_npu import OpDims


def _row_eff(**mem):
    return Lpddr5Memory(make_cfg({"memory": mem}).memory).bandwidth_breakdown.row_efficiency


# ------------------------------------------------------------------ LPDDR5 row-switch limit
# burst 32 B at 12.8 GB/s per x16 channel = 2.5 ns = tCCD_S -> t_col 2.5 ns.
# 64-byte pages: t_row_data = 2 bursts x 2.5 = 5 ns.
# bank cycle = max(tRAS, tRCD + t_row_data) + tRP; t_row = max(t_row_data, bank_cycle / banks, tFAW / 4, tRRD)
def test_row_limit_trrd_term():
    # tFAW 0, 16 banks: bank cycle (40 + 20)/16 = 3.75; tRRD 12.5 ns binds -> 5 / 12.5 = 0.4
    assert _row_eff(page_bytes=64, tfaw_ns=0.0, trrd_ns=12.5) == pytest.approx(0.4, rel=1e-12, abs=0)


def test_row_limit_tras_term():
    # one bank: bank cycle = max(tRAS 80, tRCD 20 + 5) + tRP 20 = 100 ns -> 5 / 100
    assert _row_eff(page_bytes=64, interleaved_banks=1, tras_ns=80.0) == pytest.approx(0.05, rel=1e-12, abs=0)


def test_row_limit_trcd_and_trp_terms():
    # one bank: max(tRAS 40, tRCD 50 + 5) + tRP 20 = 75 ns -> 5/75
    assert _row_eff(page_bytes=64, interleaved_banks=1, trcd_ns=50.0) == pytest.approx(5 / 75, rel=1e-12, abs=0)
    # tRP 45: max(40, 25) + 45 = 85 ns -> 5/85
    assert _row_eff(page_bytes=64, interleaved_banks=1, trp_ns=45.0) == pytest.approx(5 / 85, rel=1e-12, abs=0)


def test_row_limit_banks_divide_the_bank_cycle():
    # 4 banks: 2 KB pages, t_row_data 160 ns; bank cycle max(40, 180) + 20 = 200 -> 200/4 = 50 < 160 -> 1.0
    assert _row_eff(interleaved_banks=4) == pytest.approx(1.0, rel=1e-12, abs=0)
    # 64 B pages, 2 banks, tFAW 0, tRRD 0: bank cycle (40 + 20)/2 = 30 ns -> 5/30
    assert _row_eff(page_bytes=64, interleaved_banks=2, tfaw_ns=0.0, trrd_ns=0.0) == pytest.approx(5 / 30, rel=1e-12, abs=0)


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


# ------------------------------------------------------------------ mode costs (modes/costs/)
def _step_costs(*overrides):
    from ahasd_sim.config import load_config
    from ahasd_sim.hw.platform import Platform
    from ahasd_sim.modes.costs import StepCosts
    from ahasd_sim.workload.models import get_model
    from conftest import PAPER_PLATFORM
    cfg = load_config(PAPER_PLATFORM, ["pim.partition_policy=striped", *overrides])
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
    assert pv.duration_s == pytest.approx(expected, rel=1e-12, abs=0)
    assert pv.busy_s == {"pim": pytest.approx(expected, rel=1e-12, abs=0)}
    # and drafting runs the drafter on the drafter's ranks
    d_ops = sc.ops(sc.draft, 1, kv)
    assert sc.draft_token(kv).duration_s == pytest.approx(
        sum(p.pim_op_cost(op, part.draft_ranks).duration_s * op.layer_repeat for op in d_ops), rel=1e-12, abs=0)


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
    assert cost.duration_s == pytest.approx(dur, rel=1e-12, abs=0)
    assert cost.busy_s["npu"] == pytest.approx(busy_npu, rel=1e-12, abs=0)
    assert cost.busy_s["pim"] == pytest.approx(busy_pim, rel=1e-12, abs=0)
    # the two devices overlap inside tiers: the forward is shorter than their busy times added
    assert cost.duration_s < busy_npu + busy_pim


# ------------------------------------------------------------------ NPU energy, exact (issue 19)
# op_cost energy (hw/npu.py docstring): MACs x pJ/MAC (array) or element-ops x pJ/op (vector)
# + scratchpad bytes x 8 x pJ/bit + bus bytes x DMA pJ/B; the DRAM side of the bus bytes goes to
# the memory model, written bytes (KV appends, spilled outputs) as writes and the rest as reads.
from dataclasses import dataclass  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from ahasd_sim.config import ConfigError  # noqa: E402
from ahasd_sim.hw import Aau, Gts, PimMemory  # noqa: E402


@dataclass(frozen=True)
class OpKv(OpDims):
    kv_write_bytes: float = 0.0


def _npu_mem(npu=None, **mem):
    # distinct read and write energies so that a read/write mix-up shows; the NPU's DMA at the
    # whole given bandwidth (dram_bw_fraction 1: the fraction is checked on its own)
    cfg = make_cfg({"npu": {"dram_bw_fraction": 1.0, **(npu or {})},
                    "memory": {"read_pj_per_bit": 4.0, "write_pj_per_bit": 6.0, **mem}})
    m = Lpddr5Memory(cfg.memory)
    return Npu(cfg.npu, m), m


def test_npu_array_op_energy_and_time_exact():
    npu, mem = _npu_mem()
    # n = 10 tokens, K = 192, N = 64 (3 folds, 2 per chip, 274 cycles: see the test above)
    op = OpKv(kind="gemm", n_tokens=10, macs=10 * 192 * 64, weight_bytes=192 * 64, act_bytes_in=1920,
              act_bytes_out=640, kv_bytes=1000.0, kv_write_bytes=300.0, k_dim=192, n_dim=64)
    bw = 4e9
    c = npu.op_cost(op, bw)
    bus = 192 * 64 + 1000                      # weights once (activations fit) + KV read and written
    assert c.bus_bytes == bus and c.macs == 10 * 192 * 64
    compute_s = 274 / (1e9 * 0.9)
    assert bus / bw > compute_s                # memory bound here
    assert c.duration_s == pytest.approx(bus / bw + 200e-9, rel=1e-12, abs=0)
    # SPM: bus fill + weights into the array once + one 64-byte row per token per pass + outputs
    spm = bus + 192 * 64 + 3 * 10 * 64 + 640
    npu_j = 10 * 192 * 64 * 0.17e-12 + spm * 8 * 0.05e-12 + bus * 2.0e-12
    assert c.energy_of("npu") == pytest.approx(npu_j, rel=1e-12, abs=0)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(bus - 300) + mem.write_energy_j(300), rel=1e-12, abs=0)
    # compute bound with a fast bus
    assert npu.op_cost(op, 1e15).duration_s == pytest.approx(compute_s + 200e-9, rel=1e-12, abs=0)
    # without a memory model only the NPU is charged
    assert Npu(npu.cfg).op_cost(op, bw).energy_j_by_device == {"npu": pytest.approx(npu_j, rel=1e-12, abs=0)}


def test_npu_one_token_op_without_token_count_attribute():
    """A GEMV given without ``n_tokens`` is one token (not two, not an error)."""
    npu, mem = _npu_mem()
    op = SimpleNamespace(kind="gemv", macs=128 * 64, weight_bytes=128 * 64, act_bytes_in=128, act_bytes_out=64,
                         k_dim=128, n_dim=64)
    c = npu.op_cost(op, 1e9)
    spm = 128 * 64 + 128 * 64 + 2 * 1 * 64 + 64          # 2 folds, one token each
    assert c.energy_of("npu") == pytest.approx(128 * 64 * 0.17e-12 + spm * 8 * 0.05e-12 + 128 * 64 * 2e-12, rel=1e-12, abs=0)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(128 * 64), rel=1e-12, abs=0)


@pytest.mark.parametrize("act_out, spilled", [(192, False), (194, True)])
def test_npu_activation_spill_threshold(act_out, spilled):
    # smallest SPM the config accepts (one double-buffered 64x64 tile per chip): 16 KiB; half of
    # each chip's 8 KiB holds activations -> 4096 B; working set = inputs + outputs / 2 chips
    npu, mem = _npu_mem({"spm_bytes": 16384})
    op = OpKv(kind="gemm", n_tokens=4, macs=4 * 64 * 64, weight_bytes=64 * 64, act_bytes_in=4000,
              act_bytes_out=act_out, k_dim=64, n_dim=64)
    b = npu.analyse(op, 1e9)
    act = 4000 + act_out if spilled else 0
    chunks = 2 if spilled else 1            # ceil(4097 / 4096) re-reads of the weights
    assert b.weight_reads == chunks
    assert b.bus_bytes == 64 * 64 * chunks + act
    c = npu.op_cost(op, 1e9)
    written = act_out if spilled else 0
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(b.bus_bytes - written)
                                                  + mem.write_energy_j(written), rel=1e-12, abs=0)


def test_npu_vector_op_energy_and_time_exact():
    npu, mem = _npu_mem()
    op = Op(kind="nonlinear", nonlinear_class="softmax", elements=1000, act_bytes_in=1000, act_bytes_out=900,
            weight_bytes=64)
    c = npu.op_cost(op, 1e9)
    cycles = math.ceil(3 * 1000 / (2 * 2048)) + 8
    assert c.duration_s == pytest.approx(max(cycles / (1e9 * 0.8), 64 / 1e9) + 200e-9, rel=1e-12, abs=0)
    spm = 64 + 1000 + 900 + 64                 # bus fill (the weights) + inputs + outputs + weights
    assert c.macs == 0 and c.bus_bytes == 64
    assert c.energy_of("npu") == pytest.approx(3000 * 0.47e-12 + spm * 8 * 0.05e-12 + 64 * 2e-12, rel=1e-12, abs=0)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(64), rel=1e-12, abs=0)
    # one element still takes the pipeline; zero elements (or none given) cost only the overhead
    one = npu.op_cost(Op(kind="nonlinear", nonlinear_class="gelu", elements=1), 1e9)
    assert one.duration_s == pytest.approx((1 + 8) / (1e9 * 0.8) + 200e-9, rel=1e-12, abs=0)
    assert one.energy_of("npu") == pytest.approx(2 * 0.47e-12, rel=1e-12, abs=0)
    bare = SimpleNamespace(kind="nonlinear", nonlinear_class="gelu", macs=0, weight_bytes=0, act_bytes_in=0,
                           act_bytes_out=0)
    z = npu.op_cost(bare, 1e9)
    assert z.duration_s == pytest.approx(200e-9, rel=1e-12, abs=0) and z.energy_of("npu") == 0.0
    assert "lpddr5" not in z.energy_j_by_device           # nothing crossed the bus


def test_npu_forward_cost_repeats_each_op_by_its_layers():
    npu = Npu(make_cfg({"npu": {"dram_bw_fraction": 1.0}}).npu)
    a = OpDims(kind="gemm", n_tokens=10, macs=10 * 192 * 64, weight_bytes=192 * 64, act_bytes_in=1920,
               act_bytes_out=640, k_dim=192, n_dim=64, layer_repeat=3)
    b = Op(kind="nonlinear", nonlinear_class="softmax", elements=1000, layer_repeat=2)
    ca, cb = npu.op_cost(a, 1e10), npu.op_cost(b, 1e10)
    f = npu.forward_cost([a, b], 1e10)
    assert f.duration_s == pytest.approx(3 * ca.duration_s + 2 * cb.duration_s, rel=1e-12, abs=0)
    assert f.energy_of("npu") == pytest.approx(3 * ca.energy_of("npu") + 2 * cb.energy_of("npu"), rel=1e-12, abs=0)
    assert f.macs == 3 * 10 * 192 * 64 and f.bus_bytes == 3 * 192 * 64


def test_npu_peaks_and_dims_exact():
    npu = Npu(make_cfg({"npu": {"chips": 3, "array_rows": 32, "array_cols": 16, "freq_ghz": 1.5,
                                "vector_macs_per_cycle": 100, "spm_bytes": 2**20}}).npu)
    assert npu.macs_per_cycle == 3 * 32 * 16
    assert npu.peak_ops_s == 3 * 32 * 16 * 2 * 1.5e9 and npu.peak_tops == pytest.approx(3 * 32 * 16 * 2 * 1.5e-3, rel=1e-12, abs=0)
    assert npu.vector_peak_ops_s == 3 * 100 * 2 * 1.5e9
    assert npu.static_power_w == 0.14
    # an op without k/n: K = N = round(sqrt(macs / n))
    assert npu.gemm_dims(Op(kind="gemm", n_tokens=4, macs=4 * 30 * 30), 4) == (4, 30, 30)
    assert npu.gemm_dims(Op(kind="gemm", n_tokens=2, macs=2 * 50), 2) == (2, 7, 7)     # sqrt(50) = 7.07
    with pytest.raises(ValueError, match=r"mem_bw_bytes_s must be > 0, got 0"):
        npu.analyse(Op(kind="gemm", macs=1), 0)
    with pytest.raises(ValueError, match="NPU cannot run op kind 'conv'"):
        npu.analyse(Op(kind="conv"), 1e9)


@pytest.mark.parametrize("cls, expected", [("silu", "gelu"), ("SwiGLU", "gelu"), ("relu", "gelu"),
                                           ("rmsnorm", "layernorm"), ("attention", "attention_score"),
                                           ("sum", "reduction"), ("max", "reduction"), ("Softmax", "softmax")])
def test_nonlinear_class_aliases(cls, expected):
    from ahasd_sim.hw.npu import nonlinear_class_of
    assert nonlinear_class_of(Op(kind="nonlinear", nonlinear_class=cls)) == expected


def test_nonlinear_class_errors():
    from ahasd_sim.hw.npu import nonlinear_class_of
    assert nonlinear_class_of(Op(kind="reduction")) == "reduction"
    with pytest.raises(ValueError) as ei:
        nonlinear_class_of(Op(name="n1", kind="nonlinear"))
    assert str(ei.value) == "op 'n1' has no nonlinear_class"
    with pytest.raises(ValueError) as ei:
        nonlinear_class_of(Op(name="n2", kind="nonlinear", nonlinear_class="tanh"))
    assert str(ei.value) == ("unknown nonlinear class 'tanh' of op 'n2'; expected one of gelu, softmax, layernorm, "
                             "reduction, attention_score")


# ------------------------------------------------------------------ PIM, AAU, GTS exact (issue 19)
def _pim(**pim):
    cfg = make_cfg({"pim": pim})
    return PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))


def test_pim_roofline_tie_is_bandwidth_bound():
    # integer rates so that the two times are the same float: 256 GB/s and 128 GOPS per rank;
    # bytes = 4 x MACs -> bytes / 256e9 = 2 MACs / 128e9
    p = _pim(unit_gops_int8=128.0, internal_bw_gb_s=256.0)
    op = Op(kind="gemv", macs=1024.0, weight_bytes=4096.0)
    assert p.bound(op, 1) == "bandwidth"
    assert p.bound(Op(kind="gemv", macs=1024.0, weight_bytes=4095.0), 1) == "compute"
    assert p.bound(Op(kind="gemv", macs=1024.0, weight_bytes=4097.0), 3) == "bandwidth"


def test_pim_capacity_power_and_kv_write_bytes():
    p = _pim(rank_capacity_gib=2.0, ranks=8, static_mw_per_rank=3.0, vectors_per_weight_read=2, gemv_timing="roofline")
    assert p.rank_capacity_bytes == 2 * 2**30 and p.capacity_bytes == 8 * 2 * 2**30
    # leakage follows the unit's logic area: k = 2 doubles its lanes, buffer and registers
    assert p.leakage_area_ratio == pytest.approx(2.0, rel=1e-12)
    assert p.static_power_w == pytest.approx(8 * 3.0e-3 * 2, rel=1e-12, abs=0)
    assert p.total_units == 8
    # 5 tokens, 2 vectors held: ceil(5/2) = 3 passes over the weights and the KV read; the KV
    # written (new tokens' K/V) is written once
    op = OpKv(kind="attention", n_tokens=5, macs=0.0, weight_bytes=100.0, kv_bytes=1000.0, kv_write_bytes=40.0)
    assert p.bytes_read(op) == 3 * 100 + 3 * (1000 - 40) + 40
    assert p.bytes_read(SimpleNamespace(weight_bytes=100.0)) == 100.0      # one token, no KV
    with pytest.raises(ValueError, match=r"ranks must be in 1\.\.8, got 9"):
        p.gemv_cost(op, 9)
    with pytest.raises(ValueError, match=r"ranks must be in 1\.\.8, got 0"):
        p.gemv_cost(op, 0)
    # bandwidth bound (no MACs) at the derived default (issue 25): 51.2 GB/s per unit = one x8
    # LPDDR5-6400 die, 16 banks x 16 B / (4 x 1.25 ns); was the typed 256 GB/s
    assert p.gemv_cost(op, 8).duration_s == pytest.approx(p.bytes_read(op) / (8 * 51.2e9) + 100e-9, rel=1e-12, abs=0)


def test_pim_gemv_energy_exact():
    cfg = make_cfg({"memory": {"page_bytes": 1024, "act_pre_nj_per_row": 2.5}, "pim": {"gemv_timing": "roofline"}})
    p = PimMemory(cfg.pim, Lpddr5Memory(cfg.memory))
    op = linear(1, 512, 256)
    c = p.gemv_cost(op, 3)
    nbytes = 512 * 256
    assert c.energy_j_by_device == {"pim": pytest.approx(nbytes * 8 * 0.8e-12 + nbytes * 0.3e-12
                                                         + nbytes / 1024 * 2.5e-9, rel=1e-12, abs=0)}
    assert c.bus_bytes == 0 and c.macs == nbytes
    t = max(nbytes / (3 * 256e9), 2 * nbytes / (3 * 102.4e9)) + 100e-9
    assert c.duration_s == pytest.approx(t, rel=1e-12, abs=0)
    # without a memory model there are no row activations to charge
    bare = PimMemory(cfg.pim).gemv_cost(op, 3)
    assert bare.energy_of("pim") == pytest.approx(nbytes * 8 * 0.8e-12 + nbytes * 0.3e-12, rel=1e-12, abs=0)


def test_aau_offload_bytes_and_roundtrip():
    a = Aau(make_cfg({"pim": {"aau": {"offload_bytes_per_element": 2.0, "offload_roundtrip_us": 7.0}}}).pim.aau)
    # the op's own activation bytes (in + out) when it states them
    assert a.offload_transfer_bytes(Op(kind="nonlinear", elements=10, act_bytes_in=30.0, act_bytes_out=5.0)) == 35.0
    assert a.offload_transfer_bytes(Op(kind="nonlinear", elements=10, act_bytes_in=0.0, act_bytes_out=5.0)) == 5.0
    assert a.offload_transfer_bytes(Op(kind="nonlinear", elements=10, act_bytes_in=3.0)) == 3.0
    # else each element goes each way at offload_bytes_per_element
    assert a.offload_transfer_bytes(Op(kind="nonlinear", elements=10)) == 2 * 10 * 2.0
    assert a.offload_transfer_bytes(SimpleNamespace(kind="nonlinear", elements=10)) == 40.0
    assert a.offload_transfer_bytes(SimpleNamespace(kind="nonlinear")) == 0.0
    assert a.offload_transfer_bytes(SimpleNamespace(kind="nonlinear", elements=None)) == 0.0
    assert a.offload_roundtrip_s == pytest.approx(7e-6, rel=1e-12, abs=0)
    p = PimMemory(make_cfg({"pim": {"aau": {"offload_bytes_per_element": 2.0, "offload_roundtrip_us": 7.0}}}).pim)
    assert p.offload_transfer_bytes(Op(kind="nonlinear", elements=3)) == 12.0
    assert p.offload_roundtrip_s == pytest.approx(7e-6, rel=1e-12, abs=0)


def test_aau_static_power_and_edge_cases():
    cfg = make_cfg({"pim": {"aau": {"static_power_mw": 4.0}, "ranks": 6}}).pim
    p = PimMemory(cfg)
    assert p.aau.n_units == 6 and p.aau.enabled
    assert p.aau.static_power_w == pytest.approx(6 * 4.0e-3, rel=1e-12, abs=0)
    off = Aau(make_cfg({"pim": {"aau": {"enabled": False}}}).pim.aau, n_units=6)
    assert off.static_power_w == 0.0 and not off.enabled
    a = Aau(make_cfg().pim.aau)
    assert a.cycles("gelu", 0) == 0 and a.cycles("softmax", -5) == 0
    assert a.cycles("gelu", 16) == 8 + 2 and a.cycles("gelu", 17) == 8 + 4
    assert a.cycles("reduction", 2) == 8 + 1 + 1
    # the elements split over n_aau units (rounded up), energy for all of them
    c = a.op_cost(Op(kind="nonlinear", nonlinear_class="gelu", elements=33), n_aau=2)
    assert c.duration_s == pytest.approx((8 + 2 * 2) / 0.8e9, rel=1e-12, abs=0)      # ceil(33/2) = 17 -> 2 vectors
    assert c.energy_j_by_device == {"aau": pytest.approx(33 * 0.8e-12, rel=1e-12, abs=0)}
    assert a.op_cost(Op(kind="nonlinear", nonlinear_class="gelu", elements=33), n_aau=0).duration_s == \
        pytest.approx((8 + 2 * 3) / 0.8e9, rel=1e-12, abs=0)                          # at least one unit
    assert a.op_cost(SimpleNamespace(kind="reduction")).duration_s == 0.0
    with pytest.raises(ValueError) as ei:
        a.op_cost(Op(name="mm", kind="gemm"))
    assert str(ei.value) == "AAU runs nonlinear/reduction ops, not 'gemm' (mm)"
    with pytest.raises(ValueError) as ei:
        off.op_cost(Op(kind="nonlinear", nonlinear_class="gelu", elements=1))
    assert str(ei.value) == "AAU disabled (pim.aau.enabled: false): offload the op to the host instead"
    with pytest.raises(ValueError) as ei:
        PimMemory(make_cfg().pim).gemv_cost(Op(name="g", kind="nonlinear"), 1)
    assert str(ei.value) == "PIM GEMV engines run gemm/gemv/attention ops, not 'nonlinear' (g); send it to the AAU or the host"


def test_gts_switch_and_static_power_exact():
    on = Gts(make_cfg({"pim": {"gts": {"switch_cycles": 3, "switch_pj": 20.0}}}).pim.gts, 0.8)
    c = on.switch_cost()
    assert c.duration_s == pytest.approx(3 / 0.8e9, rel=1e-12, abs=0)
    assert c.energy_j_by_device == {"gts": pytest.approx(20e-12, rel=1e-12, abs=0)}
    assert on.enabled and on.static_power_w == pytest.approx(0.5e-3, rel=1e-12, abs=0)
    off = Gts(make_cfg({"pim": {"gts": {"enabled": False, "coarse_switch_us": 12.0, "coarse_switch_uj": 4.0}}}).pim.gts,
              0.8)
    c = off.switch_cost()
    assert c.duration_s == pytest.approx(12e-6, rel=1e-12, abs=0)
    assert c.energy_j_by_device == {"gts": pytest.approx(4e-6, rel=1e-12, abs=0)}
    assert not off.enabled and off.static_power_w == 0.0
    assert PimMemory(make_cfg({"pim": {"clock_ghz": 0.5}}).pim).gts.switch_cost().duration_s == \
        pytest.approx(1 / 0.5e9, rel=1e-12, abs=0)


def test_npu_paths_and_breakdown_fields():
    npu = Npu(make_cfg({"npu": {"dram_bw_fraction": 1.0}}).npu)
    # a matrix op with MACs runs on the array; one MAC is enough
    b = npu.analyse(OpDims(kind="gemv", n_tokens=1, macs=1, weight_bytes=1, k_dim=1, n_dim=1), 0.5)
    assert (b.unit, b.passes, b.weight_reads) == ("array", 1, 1)
    assert b.cycles == 64 + 4 + 126 and b.memory_s == 1 / 0.5
    # a matrix op without MACs and an elementwise op that states MACs both go to the vector unit
    v = npu.analyse(Op(kind="gemv", macs=0, weight_bytes=100.0), 1e9)
    assert (v.unit, v.passes, v.cycles, v.weight_reads, v.bus_bytes) == ("vector", 0, 0, 1, 100.0)
    v = npu.analyse(Op(kind="nonlinear", nonlinear_class="gelu", macs=50, elements=4096), 1e9)
    assert (v.unit, v.passes, v.cycles) == ("vector", 0, 2 * 4096 // 4096 + 8)
    assert v.compute_s == pytest.approx(10 / 0.8e9, rel=1e-12, abs=0)


def test_npu_spilled_ops_without_weights_and_vector_spill():
    npu = Npu(make_cfg({"npu": {"spm_bytes": 16384}}).npu)          # 4096 B of activations per chip
    # no weights: nothing to re-read, one pass over the (spilled) activations
    b = npu.analyse(OpDims(kind="gemm", n_tokens=4, macs=4 * 64 * 64, weight_bytes=0, act_bytes_in=5000,
                           act_bytes_out=100, k_dim=64, n_dim=64), 1e9)
    assert (b.weight_reads, b.bus_bytes) == (1, 5100)
    # one weight byte: ceil(5050 / 4096) = 2 reads of it
    b = npu.analyse(OpDims(kind="gemm", n_tokens=4, macs=4 * 64 * 64, weight_bytes=1, act_bytes_in=5000,
                           act_bytes_out=100, k_dim=64, n_dim=64), 1e9)
    assert (b.weight_reads, b.bus_bytes) == (2, 2 + 5100)
    # a spilled vector op reads its weights once, its KV, and its activations in and out
    v = npu.analyse(Op(kind="nonlinear", nonlinear_class="gelu", elements=10, weight_bytes=7.0, kv_bytes=100.0,
                       act_bytes_in=5000.0, act_bytes_out=300.0), 1e9)
    assert (v.unit, v.bus_bytes, v.weight_reads) == ("vector", 7 + 100 + 5300, 1)
    # the smallest scratchpad the NPU accepts holds one double-buffered tile per chip: 2 x 64 x 64 x 2 B
    with pytest.raises(ConfigError) as ei:
        make_cfg({"npu": {"spm_bytes": 16383}})
    assert str(ei.value) == "npu: spm_bytes (16383) cannot hold one double-buffered weight tile per chip"


def test_npu_dims_of_ops_with_one_or_no_stated_dimension():
    npu = Npu(make_cfg().npu)
    # only one of k_dim / n_dim: K = N = round(sqrt(MACs / tokens)) like an op without either
    k_only = SimpleNamespace(kind="gemm", n_tokens=2, macs=2 * 30 * 30, k_dim=128)
    n_only = SimpleNamespace(kind="gemm", n_tokens=2, macs=2 * 30 * 30, n_dim=128)
    bare = SimpleNamespace(kind="gemm", n_tokens=2, macs=2 * 30 * 30)
    for op in (k_only, n_only, bare):
        assert npu.gemm_dims(op, 2) == (2, 30, 30)
        assert npu.fold_geometry(op, 2) == (1, 2, 64)      # ceil(900 / 4096) = 1 fold, T = 2 tokens
    assert npu.gemm_dims(Op(kind="gemm", n_tokens=3, macs=3), 3) == (3, 1, 1)
    assert npu.gemm_dims(Op(kind="gemm", n_tokens=3, macs=0.5), 3) == (3, 1, 1)   # never below 1
    # input stationary with more tokens than columns: ceil(K/R) x ceil(M/C) folds, streamed N
    isd = Npu(make_cfg({"npu": {"chips": 1, "array_rows": 32, "array_cols": 32, "dataflow": "is"}}).npu)
    assert isd.fold_geometry(OpDims(kind="gemm", n_tokens=40, macs=40 * 70 * 100, k_dim=70, n_dim=100), 40) == \
        (3 * 2, 100, 32)
    osd = Npu(make_cfg({"npu": {"chips": 1, "array_rows": 32, "array_cols": 32, "dataflow": "os"}}).npu)
    assert osd.fold_geometry(OpDims(kind="gemm", n_tokens=40, macs=40 * 70 * 100, k_dim=70, n_dim=100), 40) == \
        (2 * 4, 70, 0)


# ------------------------------------------------------------------ LPDDR5 classes, refresh, latency (issue 19)
# Default LPDDR5-6400 x16 channel: 12.8 GB/s, 32-byte burst = 2.5 ns, tCK = 1.25 ns, tCCD_S 2 nCK
# = 2.5 ns, tCCD_L 3 nCK = 3.75 ns, 2 KB pages = 64 bursts; tRCD = tRP = 20, tRAS 40, tRRD 5,
# tFAW 40 ns; tRFCab 350, tRFCpb 140, tREFI 3900 ns; 16 banks.
def _mem(**mem):
    return Lpddr5Memory(make_cfg({"memory": mem}).memory)


@pytest.mark.parametrize("mem, col", [
    # reads = writes = 16 bursts (read fraction 0.5): 32 x 2.5 = 80 ns of data per switch pair;
    # read->write RL + BL/n + 2 - WL = 17 + 2 + 2 - 9 = 12 nCK = 15 ns, write->read WL + BL/n + tWTR_S
    # = 9 + 2 + 5 = 16 nCK = 20 ns
    ({"mixed_read_fraction": 0.5}, 80 / (80 + 15 + 20)),
    # a read latency shorter than the write latency cannot give a negative turnaround
    ({"mixed_read_fraction": 0.5, "read_latency_nck": 1}, 80 / (80 + 0 + 20)),
    # 3 reads per write: 64 bursts = 160 ns per switch pair
    ({"mixed_read_fraction": 0.75}, 160 / (160 + 35)),
    ({"mixed_read_fraction": 0.5, "rw_batch_bursts": 4, "twtr_s_nck": 1}, 20 / (20 + 15 + 15)),
    # only reads or only writes: no turnaround
    ({"mixed_read_fraction": 1.0}, 1.0),
    ({"mixed_read_fraction": 0.0}, 1.0),
])
def test_mixed_class_turnarounds(mem, col):
    b = _mem(**mem, mixed_controller_efficiency=0.9).class_breakdown("mixed")
    assert b.column_efficiency == pytest.approx(col, rel=1e-12, abs=0)
    assert b.row_efficiency == 1.0 and b.controller_efficiency == 0.9 and b.traffic_class == "mixed"
    assert b.refresh_efficiency == pytest.approx(1 - 350 / 3900, rel=1e-12, abs=0)


@pytest.mark.parametrize("mem, interval", [
    ({}, 10.0),                                                       # tFAW / 4 binds
    ({"tfaw_ns": 0.0, "trrd_ns": 7.0}, 7.0),                          # tRRD binds
    ({"tfaw_ns": 0.0, "trrd_ns": 0.0, "interleaved_banks": 1}, 60.0),  # one bank: tRC = tRAS + tRP
    # 2 banks, 1 queued request: 2 x (1 - 1/2) = 1 busy bank; 2 requests: 2 x (1 - 1/4) = 1.5
    ({"tfaw_ns": 0.0, "trrd_ns": 0.0, "interleaved_banks": 2, "controller_queue_depth": 1}, 60.0),
    ({"tfaw_ns": 0.0, "trrd_ns": 0.0, "interleaved_banks": 2, "controller_queue_depth": 2}, 40.0),
    ({"tfaw_ns": 0.0, "trrd_ns": 0.0, "tras_ns": 1.0, "trp_ns": 1.0, "interleaved_banks": 1}, 2.5),  # the burst
])
def test_random_class_access_interval(mem, interval):
    m = _mem(**mem, random_controller_efficiency=0.8)
    assert m.random_access_interval_ns() == pytest.approx(interval, rel=1e-12, abs=0)
    b = m.class_breakdown("random")
    assert b.column_efficiency == pytest.approx(2.5 / interval, rel=1e-12, abs=0)
    assert (b.row_efficiency, b.controller_efficiency, b.traffic_class) == (1.0, 0.8, "random")
    assert m.class_bandwidth_bytes_s("random") == pytest.approx(
        51.2e9 * 2.5 / interval * (1 - 350 / 3900) * 0.8, rel=1e-12, abs=0)


def test_traffic_class_selects_the_simulators_bandwidth():
    for tc in ("sequential_read", "mixed", "random"):
        m = _mem(traffic_class=tc)
        assert m.bandwidth_breakdown.traffic_class == tc
        assert m.effective_bandwidth_bytes_s == m.class_bandwidth_bytes_s(tc)
        assert m.stream_time_s(1e6) == pytest.approx(1e6 / m.class_bandwidth_bytes_s(tc), rel=1e-12, abs=0)
    assert _mem(traffic_class="random").effective_bandwidth_bytes_s == pytest.approx(
        51.2e9 * 0.25 * (1 - 350 / 3900), rel=1e-12, abs=0)
    m = _mem()
    with pytest.raises(ValueError) as ei:
        m.class_breakdown("burst")
    assert str(ei.value) == "unknown traffic class 'burst'; expected one of sequential_read, mixed, random"
    with pytest.raises(ValueError) as ei:
        m.stream_time_s(-1)
    assert str(ei.value) == "nbytes must be >= 0, got -1"
    assert m.stream_time_s(0) == 0.0


def test_refresh_modes_and_their_limits():
    assert _mem().refresh_efficiency == pytest.approx(1 - 350 / 3900, rel=1e-12, abs=0)
    # per bank: one bank out for tRFCpb every tREFI / 16, a 16-bank stream loses 1/16 of that
    assert _mem(refresh_mode="per_bank").refresh_efficiency == pytest.approx(1 - 140 / 3900, rel=1e-12, abs=0)
    assert _mem(refresh_mode="per_bank", banks_per_channel=8, interleaved_banks=8,
                trfc_pb_ns=100.0).refresh_efficiency == pytest.approx(1 - 100 / 3900, rel=1e-12, abs=0)
    with pytest.raises(ConfigError) as ei:
        make_cfg({"memory": {"trfc_ns": 3900.0}})
    assert str(ei.value) == "memory: trfc_ns (3900.0) must be < trefi_ns (3900.0)"
    with pytest.raises(ConfigError) as ei:
        make_cfg({"memory": {"trfc_pb_ns": 243.75}})
    assert str(ei.value) == "memory: trfc_pb_ns (243.75) must be < trefi_ns / banks_per_channel (243.75)"
    make_cfg({"memory": {"trfc_pb_ns": 243.7}})
    with pytest.raises(ConfigError) as ei:
        make_cfg({"memory": {"interleaved_banks": 17}})
    assert str(ei.value) == "memory: interleaved_banks (17) > banks_per_channel (16)"
    with pytest.raises(ConfigError) as ei:
        make_cfg({"memory": {"page_bytes": 2047}})
    assert str(ei.value) == "memory: page_bytes (2047) must be a multiple of burst_bytes (32)"


def test_read_latencies_and_the_random_read_fixed_point():
    m = _mem()
    # CAS 1 + RL 17 = 18 nCK = 22.5 ns, + 2.5 ns burst
    assert m.read_latency_ns("hit") == pytest.approx(25.0, rel=1e-12, abs=0)
    assert m.read_latency_ns("miss") == pytest.approx(45.0, rel=1e-12, abs=0)
    assert m.read_latency_ns("conflict") == pytest.approx(65.0, rel=1e-12, abs=0)
    with pytest.raises(ValueError) as ei:
        m.read_latency_ns("open")
    assert str(ei.value) == "row must be 'hit', 'miss' or 'conflict', got 'open'"
    assert m.random_read_miss_fraction(100.0) == pytest.approx(16 * 100 / 3900, rel=1e-12, abs=0)
    assert m.random_read_miss_fraction(243.75) == 1.0 and m.random_read_miss_fraction(1e4) == 1.0
    # t = f(t) x 45 + (1 - f(t)) x 65 with f(t) = 16 t / 3900  ->  t = 65 / (1 + 320 / 3900)
    assert m.random_read_latency_ns() == pytest.approx(65 / (1 + 320 / 3900), rel=1e-9, abs=0)
    # every read a miss (refresh interval short against 16 banks x the latency)
    short = _mem(trefi_ns=400.0, trfc_ns=100.0, trfc_pb_ns=10.0)
    assert short.random_read_latency_ns() == pytest.approx(45.0, rel=1e-12, abs=0)


def test_lpddr5_energy_power_capacity_exact():
    m = _mem(read_pj_per_bit=4.0, write_pj_per_bit=5.0, act_pre_nj_per_row=2.0, channels=2,
             background_mw_per_channel=30.0, capacity_gib=8.0)
    assert m.read_energy_j(4096) == pytest.approx(4096 * 8 * 4e-12 + 2 * 2e-9, rel=1e-12, abs=0)
    assert m.write_energy_j(4096) == pytest.approx(4096 * 8 * 5e-12 + 2 * 2e-9, rel=1e-12, abs=0)
    assert m.static_power_w == m.background_power_w == pytest.approx(0.06, rel=1e-12, abs=0)
    assert m.capacity_bytes == 8 * 2**30
    assert m.tck_ns == 1.25 and m.nck_ns(4) == 5.0 and m.trc_ns == 60.0
    assert m.peak_bandwidth_bytes_s == 2 * 12.8e9 and m.burst_time_ns == pytest.approx(2.5, rel=1e-12, abs=0)


def test_npu_token_count_without_dims_and_tiny_bus_traffic():
    npu, mem = _npu_mem()
    # no k/n dims: K x N = MACs / tokens -> 8192 / 1 = 2 tiles of 64 x 64 (with 2 tokens it would be 1)
    assert npu.analyse(Op(kind="gemv", n_tokens=1, macs=8192.0), 1e9).passes == 2
    assert npu.analyse(SimpleNamespace(kind="gemv", macs=8192.0, weight_bytes=0.0, act_bytes_in=0.0,
                                       act_bytes_out=0.0), 1e9).passes == 2
    # a single byte over the bus is charged to DRAM too
    c = npu.op_cost(OpDims(kind="gemv", n_tokens=1, macs=1, weight_bytes=1, k_dim=1, n_dim=1), 1e9)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(1), rel=1e-12, abs=0)


def test_npu_spilled_energy_with_kv_writes():
    npu, mem = _npu_mem({"spm_bytes": 16384})
    op = OpKv(kind="gemm", n_tokens=4, macs=4 * 64 * 64, weight_bytes=64 * 64, act_bytes_in=4000,
              act_bytes_out=194, kv_bytes=50.0, kv_write_bytes=20.0, k_dim=64, n_dim=64)
    c = npu.op_cost(op, 1e9)
    bus = 2 * 64 * 64 + 50 + 4194              # weights read twice (2 chunks) + KV + spilled activations
    assert c.bus_bytes == bus
    # written: the KV appended and the spilled outputs
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(bus - 214) + mem.write_energy_j(214), rel=1e-12, abs=0)
    spm = bus + 64 * 64 * 2 + 1 * 4 * 64 + 194           # 1 tile pass of 4 tokens
    assert c.energy_of("npu") == pytest.approx(4 * 64 * 64 * 0.17e-12 + spm * 8 * 0.05e-12 + bus * 2e-12, rel=1e-12, abs=0)


def test_nonlinear_class_of_ops_without_the_attribute():
    from ahasd_sim.hw.npu import nonlinear_class_of
    assert nonlinear_class_of(SimpleNamespace(kind="reduction")) == "reduction"
    with pytest.raises(ValueError) as ei:
        nonlinear_class_of(SimpleNamespace(kind="nonlinear"))
    assert str(ei.value) == "op namespace(kind='nonlinear') has no nonlinear_class"
    with pytest.raises(ValueError) as ei:
        nonlinear_class_of(SimpleNamespace(kind="nonlinear", nonlinear_class="tanh"))
    assert str(ei.value).startswith("unknown nonlinear class 'tanh' of op namespace(kind='nonlinear', ")


def test_partition_reserves_inputs_and_limits():
    # single-die placement (die lockstep off): the rank arithmetic itself; lockstep is
    # tests/test_pim_unit.py::test_a_placement_never_splits_a_ranks_dies
    p = _pim(partition_policy="min_fit", rank_capacity_gib=1.0, ranks=4, die_lockstep=False)
    gib = 2.0**30
    # exactly one rank each (no reserve by default: one byte more would need a second rank)
    part = p.partition(gib, gib)
    assert (part.draft_ranks, part.target_ranks, part.spare_ranks) == (1, 1, 2)
    assert (part.draft_bytes, part.target_bytes, part.rank_capacity_bytes) == (gib, gib, gib)
    # the target may get its own KV reserve; the draft reserve applies to both otherwise
    part = p.partition(gib / 2, gib / 2, gib / 4, target_kv_reserve_bytes=gib)
    assert (part.draft_ranks, part.target_ranks) == (1, 2) and part.target_bytes == 1.5 * gib
    part = p.partition(gib / 2, gib / 2, gib)
    assert (part.draft_ranks, part.target_ranks) == (2, 2)          # 1.5 GiB each: all 4 ranks
    assert p.partition(0.5, 0.5).draft_bytes == 0.5                 # any positive size
    for d, t in ((0, 1), (1, 0), (0, 0), (-1, 5)):
        with pytest.raises(ValueError) as ei:
            p.partition(d, t)
        assert str(ei.value) == "partition needs positive draft and target sizes"
    with pytest.raises(ConfigError) as ei:
        p.partition(2 * gib, 2.5 * gib, 0.25 * gib)
    assert ei.value.source == "" and ei.value.key_path == "pim.ranks"
    assert ei.value.message == ("draft model 2.15 GB + target model 2.68 GB (+ KV reserve 0.54 GB) need 3 + 3 ranks "
                                "of 1.07 GB free in distinct ranks, but the device has 4 ranks (4.3 GB)")


def test_pim_reads_of_ops_without_token_or_write_attributes():
    p = _pim()                                              # one vector per weight read
    assert p.bytes_read(SimpleNamespace(weight_bytes=100.0)) == 100.0
    assert p.bytes_read(SimpleNamespace(weight_bytes=100.0, n_tokens=0)) == 100.0        # at least one token
    # KV read once per token; without kv_write_bytes nothing of it is a write
    assert p.bytes_read(SimpleNamespace(weight_bytes=0.0, kv_bytes=10.0, n_tokens=3)) == 30.0
    with pytest.raises(ValueError) as ei:
        p.gemv_cost(SimpleNamespace(kind="nonlinear"), 1)
    assert str(ei.value) == "PIM GEMV engines run gemm/gemv/attention ops, not 'nonlinear' (); send it to the AAU or the host"
    with pytest.raises(ValueError) as ei:
        p.aau.op_cost(SimpleNamespace(kind="gemm"))
    assert str(ei.value) == "AAU runs nonlinear/reduction ops, not 'gemm' ()"
    # one byte of activations is the op's own figure (not the per-element estimate)
    assert p.aau.offload_transfer_bytes(Op(kind="nonlinear", elements=10, act_bytes_in=1.0)) == 1.0
