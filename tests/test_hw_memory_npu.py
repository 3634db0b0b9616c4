"""LPDDR5 and NPU models against hand-computed values."""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from ahasd_sim.config import ConfigError
from ahasd_sim.hw import Lpddr5Memory, Npu, Platform
from test_hw_helpers import Op, dense_decoder_ops, elementwise, linear, make_cfg


# ------------------------------------------------------------------ LPDDR5
def test_lpddr5_peak_is_51_2_gb_s_for_4_x16_channels_at_6400():
    m = Lpddr5Memory(make_cfg().memory)
    assert m.peak_bandwidth_bytes_s == pytest.approx(51.2e9, rel=1e-12)
    m5x = Lpddr5Memory(make_cfg({"memory": {"standard": "LPDDR5X", "data_rate_mts": 8533}}).memory)
    assert m5x.peak_bandwidth_bytes_s == pytest.approx(4 * 2 * 8533e6, rel=1e-12)


def test_lpddr5_effective_bandwidth_hand_derivation_and_below_peak():
    m = Lpddr5Memory(make_cfg().memory)
    # 2.5 ns burst == tCCD_S -> column eff 1; 64 bursts x 2.5 = 160 ns row data; bank cycle
    # max(40, 20 + 160) + 20 = 200 ns over 16 banks = 12.5 ns < 160 -> row eff 1;
    # refresh 1 - 350/3900; controller 0.8.
    expected = 51.2e9 * (1 - 350 / 3900) * 0.8
    assert m.effective_bandwidth_bytes_s == pytest.approx(expected, rel=1e-12)
    assert m.effective_bandwidth_bytes_s < m.peak_bandwidth_bytes_s


def test_lpddr5_row_and_tfaw_limits_reduce_bandwidth():
    # one bank in rotation: a row every 200 ns for 160 ns of data -> 0.8
    m1 = Lpddr5Memory(make_cfg({"memory": {"interleaved_banks": 1, "controller_efficiency": 1.0}}).memory)
    assert m1.bandwidth_breakdown.row_efficiency == pytest.approx(0.8)
    # 64-byte pages: 5 ns of data per row but tFAW allows an ACT only every 40/4 = 10 ns -> 0.5
    m2 = Lpddr5Memory(make_cfg({"memory": {"page_bytes": 64, "controller_efficiency": 1.0}}).memory)
    assert m2.bandwidth_breakdown.row_efficiency == pytest.approx(0.5)
    # tCCD_S longer than the burst leaves bus bubbles
    m3 = Lpddr5Memory(make_cfg({"memory": {"tccd_s_ns": 5.0}}).memory)
    assert m3.bandwidth_breakdown.column_efficiency == pytest.approx(0.5)
    for m in (m1, m2, m3):
        assert m.effective_bandwidth_bytes_s <= m.peak_bandwidth_bytes_s


def test_lpddr5_stream_time_and_energy():
    m = Lpddr5Memory(make_cfg().memory)
    n = 1e9
    assert m.stream_time_s(n) == pytest.approx(n / m.effective_bandwidth_bytes_s, rel=1e-12)
    assert m.stream_time_s(0) == 0.0 and m.stream_time_s(0.5) == pytest.approx(0.5 / m.effective_bandwidth_bytes_s)
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -1"):
        m.stream_time_s(-1)
    # one 2 KB row: 2048 x 8 x 4.5 pJ + 1.8 nJ activation
    assert m.read_energy_j(2048) == pytest.approx(2048 * 8 * 4.5e-12 + 1.8e-9, rel=1e-12)
    assert m.write_energy_j(2048) == pytest.approx(2048 * 8 * 4.5e-12 + 1.8e-9, rel=1e-12)
    assert m.background_power_w == pytest.approx(4 * 0.020)
    assert m.capacity_bytes == 64 * 2**30


def test_lpddr5_config_limits_and_messages():
    make_cfg({"memory": {"data_rate_mts": 6400}})                       # the LPDDR5 maximum itself is fine
    with pytest.raises(ConfigError, match=r"LPDDR5 tops out at 6400 MT/s, got data_rate_mts=6401(\.0)? \(set standard: LPDDR5X\)"):
        make_cfg({"memory": {"data_rate_mts": 6401}})
    with pytest.raises(ConfigError, match=r"trfc_ns \(3900.0\) must be < trefi_ns \(3900.0\)"):
        make_cfg({"memory": {"trfc_ns": 3900.0}})                       # equal is refused too
    with pytest.raises(ConfigError, match=r"page_bytes \(100\) must be a multiple of burst_bytes \(32\)"):
        make_cfg({"memory": {"page_bytes": 100}})
    with pytest.raises(ConfigError, match=r"interleaved_banks \(17\) > banks_per_channel \(16\)"):
        make_cfg({"memory": {"interleaved_banks": 17}})


def test_lpddr5_rejects_impossible_timing_and_rate():
    with pytest.raises(ConfigError, match="6400"):
        make_cfg({"memory": {"data_rate_mts": 8533}})
    with pytest.raises(ConfigError, match="trfc"):
        make_cfg({"memory": {"trfc_ns": 5000.0}})
    with pytest.raises(ConfigError, match="memory.controller_efficiency"):
        make_cfg({"memory": {"controller_efficiency": 1.5}})


# ------------------------------------------------------------------ NPU
def test_npu_peak_is_16_4_tops_and_vector_8_2():
    npu = Npu(make_cfg().npu)
    assert npu.peak_tops == pytest.approx(2 * 64 * 64 * 2 * 1.0e9 / 1e12)
    assert npu.vector_peak_ops_s == pytest.approx(2 * 2048 * 2 * 1e9)


def test_npu_compute_bound_gemm_takes_flops_over_peak_times_util():
    cfg = make_cfg({"npu": {"weight_preload_hidden": True}})
    npu = Npu(cfg.npu)
    n, k, nout = 65536, 4096, 4096
    op = linear(n, k, nout)
    bw = 1e15  # memory never the bound
    c = npu.op_cost(op, bw)
    util, f = cfg.npu.matrix_util, 1e9
    # exact tiling count: 64 x 64 = 4096 passes / 2 chips, each n cycles (preload hidden) + fill 126
    exact = (4096 // 2 * n + 126) / (f * util) + cfg.npu.op_overhead_ns * 1e-9
    assert c.duration_s == pytest.approx(exact, rel=1e-12)
    assert c.duration_s == pytest.approx(op.flops / (npu.peak_ops_s * util), rel=1e-3)
    # without double-buffered weights each pass also pays the 64-cycle preload
    c2 = Npu(make_cfg().npu).op_cost(op, bw)
    assert c2.duration_s == pytest.approx((2048 * (n + 64) + 126) / (f * util) + 200e-9, rel=1e-12)


@dataclass(frozen=True)
class OpDims(Op):
    k_dim: int = 0
    n_dim: int = 0


def test_npu_tiling_pads_partial_tiles():
    npu = Npu(make_cfg().npu)
    # K = N = 65 -> 2 x 2 = 4 tile passes, 2 per chip, although the MACs fill barely one tile
    n = 1000
    op = OpDims(kind="gemm", n_tokens=n, macs=n * 65 * 65, flops=2 * n * 65 * 65, weight_bytes=65 * 65,
                act_bytes_in=n * 65, act_bytes_out=n * 65, k_dim=65, n_dim=65)
    b = npu.analyse(op, 1e15)
    assert b.passes == 4
    assert b.cycles == 2 * (64 + n) + 126
    # without explicit dims K*N = macs / n -> ceil(4225 / 4096) = 2 passes
    assert npu.analyse(Op(kind="gemm", n_tokens=n, macs=n * 65 * 65, weight_bytes=65 * 65), 1e15).passes == 2


def test_npu_memory_bound_gemv_is_weight_bytes_over_bandwidth():
    cfg = make_cfg()
    npu = Npu(cfg.npu)
    op = linear(1, 4096, 4096)
    bw = 37.0e9
    c = npu.op_cost(op, bw)
    assert c.duration_s == pytest.approx(4096 * 4096 / bw + 200e-9, rel=1e-12)
    assert c.bus_bytes == 4096 * 4096  # activations stay in the scratchpad


def test_npu_rereads_weights_when_activations_exceed_spm():
    cfg = make_cfg({"npu": {"spm_bytes": 1 << 20}})  # 1 MiB -> 256 KiB of activations per chip
    npu = Npu(cfg.npu)
    n, k, nout = 256, 4096, 1024
    op = linear(n, k, nout)
    act_ws = n * k + n * nout / 2  # inputs + this chip's half of the outputs
    chunks = math.ceil(act_ws / (256 * 1024))
    b = npu.analyse(op, 10e9)
    assert b.weight_reads == chunks and chunks > 1
    assert b.bus_bytes == k * nout * chunks + n * k + n * nout


def test_npu_nonlinear_runs_on_vector_unit():
    cfg = make_cfg()
    npu = Npu(cfg.npu)
    op = elementwise("softmax", 1_000_000)
    c = npu.op_cost(op, 37e9)
    cycles = math.ceil(3 * 1_000_000 / (2 * 2048)) + 8
    assert c.duration_s == pytest.approx(cycles / (1e9 * 0.8) + 200e-9, rel=1e-12)
    assert c.macs == 0 and c.energy_of("npu") > 0


def test_npu_energy_components_and_dram_energy_when_memory_attached():
    cfg = make_cfg()
    mem = Lpddr5Memory(cfg.memory)
    op = linear(1, 4096, 4096)
    bare = Npu(cfg.npu).op_cost(op, 37e9)
    assert set(bare.energy_j_by_device) == {"npu"}
    c = Npu(cfg.npu, mem).op_cost(op, 37e9)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(4096 * 4096), rel=1e-12)
    assert c.energy_of("npu") == pytest.approx(bare.energy_of("npu"))
    # MAC energy alone is a lower bound of the NPU's dynamic energy
    assert c.energy_of("npu") > op.macs * 0.17e-12


def test_autoregressive_decode_cannot_beat_weight_streaming_bound():
    """Dense decode on a bandwidth-bound device: per token >= weight bytes / bandwidth."""
    cfg = make_cfg({"gpu": {"enabled": True}})
    p = Platform.build(cfg)
    ops = dense_decoder_ops(d=2048, ffn=8192, layers=8, n=1)
    weights = sum(o.weight_bytes * o.layer_repeat for o in ops)
    npu_t = p.forward_cost(ops, "npu").duration_s
    assert npu_t >= weights / p.memory.effective_bandwidth_bytes_s
    assert npu_t >= weights / p.memory.peak_bandwidth_bytes_s
    gpu_t = p.forward_cost(ops, "gpu").duration_s
    assert gpu_t >= weights / (cfg.gpu.mem_bw_gb_s * 1e9)
    pim_t = p.forward_cost(ops, "pim", ranks=2).duration_s
    assert pim_t >= weights / (2 * p.pim.rank_internal_bw_bytes_s)


def test_real_workload_decode_bound_llama2_7b():
    from ahasd_sim.workload import models
    from ahasd_sim.workload import ops as ops_mod
    p = Platform.build(make_cfg())
    m = models.get_model("llama2-7b")
    ops = ops_mod.forward_ops(m, 1, 512)
    streamed = sum(o.weight_bytes * o.layer_repeat for o in ops)
    t = p.forward_cost(ops, "npu").duration_s
    assert t >= streamed / p.memory.effective_bandwidth_bytes_s
    # and the bound is nearly tight on the NPU (weight streaming dominates decode)
    assert t < 1.1 * (streamed + sum(o.kv_bytes * o.layer_repeat for o in ops)) / p.memory.effective_bandwidth_bytes_s
