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
    assert m.peak_bandwidth_bytes_s == pytest.approx(51.2e9, rel=1e-12, abs=0)
    m5x = Lpddr5Memory(make_cfg({"memory": {"standard": "LPDDR5X", "data_rate_mts": 8533}}).memory)
    assert m5x.peak_bandwidth_bytes_s == pytest.approx(4 * 2 * 8533e6, rel=1e-12, abs=0)


def test_lpddr5_effective_bandwidth_hand_derivation_and_below_peak():
    m = Lpddr5Memory(make_cfg().memory)
    # 2.5 ns burst == tCCD_S (2 nCK x 1.25 ns) -> column eff 1; 64 bursts x 2.5 = 160 ns row
    # data; bank cycle max(40, 20 + 160) + 20 = 200 ns over 16 banks = 12.5 ns < 160 -> row
    # eff 1; all-bank refresh 1 - 350/3900; sequential-read controller efficiency 1.
    expected = 51.2e9 * (1 - 350 / 3900)
    assert m.effective_bandwidth_bytes_s == pytest.approx(expected, rel=1e-12, abs=0)
    assert m.effective_bandwidth_bytes_s < m.peak_bandwidth_bytes_s


def test_lpddr5_row_and_tfaw_limits_reduce_bandwidth():
    # one bank in rotation: a row every 200 ns for 160 ns of data -> 0.8
    m1 = Lpddr5Memory(make_cfg({"memory": {"interleaved_banks": 1}}).memory)
    assert m1.bandwidth_breakdown.row_efficiency == pytest.approx(0.8, rel=1e-12, abs=0)
    # 64-byte pages: 5 ns of data per row but tFAW allows an ACT only every 40/4 = 10 ns -> 0.5
    m2 = Lpddr5Memory(make_cfg({"memory": {"page_bytes": 64}}).memory)
    assert m2.bandwidth_breakdown.row_efficiency == pytest.approx(0.5, rel=1e-12, abs=0)
    # tCCD_S longer than the burst leaves bus bubbles: 4 nCK = 5 ns for a 2.5 ns burst
    m3 = Lpddr5Memory(make_cfg({"memory": {"tccd_s_nck": 4}}).memory)
    assert m3.bandwidth_breakdown.column_efficiency == pytest.approx(0.5, rel=1e-12, abs=0)
    # a mapping that keeps a row's bursts in one bank group pays tCCD_L = 3 nCK = 3.75 ns, except
    # where the 32-deep reorder window interleaves the next row: it opens after ceil(20 / 3.75)
    # = 6 bursts, then 31 - 6 = 25 pairs alternate 2 x 2.5 ns: 14 x 3.75 + 25 x 5 = 177.5 ns / row
    m4 = Lpddr5Memory(make_cfg({"memory": {"bank_group_interleaved": False}}).memory)
    assert m4.bandwidth_breakdown.column_efficiency == pytest.approx(160 / 177.5, rel=1e-12, abs=0)
    # one bank in rotation leaves nothing to interleave: every burst tCCD_L apart
    m5 = Lpddr5Memory(make_cfg({"memory": {"bank_group_interleaved": False, "interleaved_banks": 1}}).memory)
    assert m5.bandwidth_breakdown.column_efficiency == pytest.approx(2.5 / 3.75, rel=1e-12, abs=0)
    for m in (m1, m2, m3, m4, m5):
        assert m.effective_bandwidth_bytes_s <= m.peak_bandwidth_bytes_s


@pytest.mark.parametrize("rate", [8533, 9600, 10667])
def test_lpddr5x_data_rate_sweep_scales_bandwidth(rate):
    """Issue 12: timings JEDEC gives in nCK (tCCD) scale with the clock, so a faster
    LPDDR5X keeps column efficiency 1 and its bandwidth grows with the data rate."""
    base = Lpddr5Memory(make_cfg().memory)
    m = Lpddr5Memory(make_cfg({"memory": {"standard": "LPDDR5X", "data_rate_mts": rate}}).memory)
    assert m.tck_ns == pytest.approx(8000.0 / rate, rel=1e-12, abs=0)
    assert m.bandwidth_breakdown.column_efficiency == pytest.approx(1.0, rel=1e-12, abs=0)
    # ns timings still leave the row term at 1 (bank cycle / 16 banks < row data time)
    assert m.effective_bandwidth_bytes_s == pytest.approx(base.effective_bandwidth_bytes_s * rate / 6400, rel=1e-12, abs=0)
    assert m.effective_bandwidth_bytes_s > base.effective_bandwidth_bytes_s


def test_lpddr5_traffic_classes_hand_derivation():
    m = Lpddr5Memory(make_cfg().memory)
    refresh = 1 - 350 / 3900
    # random: tRC = 40 + 20 = 60 ns over 16 x (1 - (15/16)^32) = 13.97 busy banks = 4.3 ns,
    # tRRD 5 ns, tFAW/4 = 10 ns -> one 32 B access every 10 ns: 2.5 / 10 of the bus
    rnd = m.class_breakdown("random")
    assert m.random_access_interval_ns() == pytest.approx(10.0, rel=1e-12, abs=0)
    assert rnd.effective_bytes_s == pytest.approx(51.2e9 * 0.25 * refresh, rel=1e-12, abs=0)
    # mixed: 16 writes + 16 x 0.67/0.33 reads per switch pair, 2.5 ns each; RL + BL/n + 2 - WL
    # = 17 + 2 + 2 - 9 = 12 nCK and WL + BL/n + tWTR_S = 9 + 2 + 5 = 16 nCK at 1.25 ns
    reads = 16 * 0.67 / 0.33
    data = (16 + reads) * 2.5
    mixed = m.class_breakdown("mixed")
    assert mixed.column_efficiency == pytest.approx(data / (data + 12 * 1.25 + 16 * 1.25), rel=1e-12, abs=0)
    seq = m.class_breakdown("sequential_read")
    assert rnd.effective_bytes_s < mixed.effective_bytes_s < seq.effective_bytes_s
    assert m.effective_bandwidth_bytes_s == seq.effective_bytes_s  # traffic_class default
    m_rnd = Lpddr5Memory(make_cfg({"memory": {"traffic_class": "random"}}).memory)
    assert m_rnd.effective_bandwidth_bytes_s == pytest.approx(rnd.effective_bytes_s, rel=1e-12, abs=0)


def test_lpddr5_access_latency_and_per_bank_refresh():
    m = Lpddr5Memory(make_cfg().memory)
    hit = (1 + 17) * 1.25 + 2.5  # CAS + RL + BL16 on x16
    assert m.read_latency_ns("hit") == pytest.approx(hit, rel=1e-12, abs=0)
    assert m.read_latency_ns("miss") == pytest.approx(hit + 20.0, rel=1e-12, abs=0)
    assert m.read_latency_ns("conflict") == pytest.approx(hit + 40.0, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="row"):
        m.read_latency_ns("open")
    # random pointer chasing: miss fraction f = 16 t / 3900 and t = f miss + (1 - f) conflict
    t = m.random_read_latency_ns()
    f = 16 * t / 3900
    assert t == pytest.approx(f * (hit + 20) + (1 - f) * (hit + 40), rel=1e-9, abs=0)
    assert hit + 20 < t < hit + 40
    pb = Lpddr5Memory(make_cfg({"memory": {"refresh_mode": "per_bank"}}).memory)
    # one of 16 banks out for 140 ns every 3900/16 ns -> the stream loses 140/3900
    assert pb.refresh_efficiency == pytest.approx(1 - 140 / 3900, rel=1e-12, abs=0)
    assert pb.effective_bandwidth_bytes_s > m.effective_bandwidth_bytes_s


def test_lpddr5_stream_time_and_energy():
    m = Lpddr5Memory(make_cfg().memory)
    n = 1e9
    assert m.stream_time_s(n) == pytest.approx(n / m.effective_bandwidth_bytes_s, rel=1e-12, abs=0)
    assert m.stream_time_s(0) == 0.0 and m.stream_time_s(0.5) == pytest.approx(0.5 / m.effective_bandwidth_bytes_s, rel=1e-12, abs=0)
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -1"):
        m.stream_time_s(-1)
    # one 2 KB row: 2048 x 8 x 4.5 pJ + 1.8 nJ activation
    assert m.read_energy_j(2048) == pytest.approx(2048 * 8 * 4.5e-12 + 1.8e-9, rel=1e-12, abs=0)
    assert m.write_energy_j(2048) == pytest.approx(2048 * 8 * 4.5e-12 + 1.8e-9, rel=1e-12, abs=0)
    assert m.background_power_w == pytest.approx(4 * 0.020, rel=1e-12, abs=0)
    assert m.capacity_bytes == 64 * 2**30


def test_lpddr5_traffic_classes():
    m = Lpddr5Memory(make_cfg().memory)
    assert m.class_bandwidth_bytes_s("random") < m.class_bandwidth_bytes_s("mixed") < m.class_bandwidth_bytes_s("sequential_read")
    assert m.read_latency_ns() == m.read_latency_ns("hit") < m.read_latency_ns("miss")
    with pytest.raises(ValueError, match="unknown traffic class 'bulk'; expected one of sequential_read, mixed, random"):
        m.class_breakdown("bulk")


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
    with pytest.raises(ConfigError, match="memory.seq_read_controller_efficiency"):
        make_cfg({"memory": {"seq_read_controller_efficiency": 1.5}})
    with pytest.raises(ConfigError, match="trfc_pb"):
        make_cfg({"memory": {"trfc_pb_ns": 300.0}})


# ------------------------------------------------------------------ NPU
def test_npu_peak_is_16_4_tops_and_vector_8_2():
    npu = Npu(make_cfg().npu)
    assert npu.peak_tops == pytest.approx(2 * 64 * 64 * 2 * 1.0e9 / 1e12, rel=1e-12, abs=0)
    assert npu.vector_peak_ops_s == pytest.approx(2 * 2048 * 2 * 1e9, rel=1e-12, abs=0)


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
    assert c.duration_s == pytest.approx(exact, rel=1e-12, abs=0)
    assert c.duration_s == pytest.approx(op.flops / (npu.peak_ops_s * util), rel=1e-3, abs=0)
    # without double-buffered weights each pass also pays the 64-cycle preload
    c2 = Npu(make_cfg().npu).op_cost(op, bw)
    assert c2.duration_s == pytest.approx((2048 * (n + 64) + 126) / (f * util) + 200e-9, rel=1e-12, abs=0)


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


def _gemm(m, k, n):
    return OpDims(kind="gemm", n_tokens=m, macs=m * k * n, flops=2 * m * k * n, weight_bytes=k * n,
                  act_bytes_in=m * k, act_bytes_out=m * n, k_dim=k, n_dim=n)


@pytest.mark.parametrize("dataflow,folds,per_fold", [
    # M = 16 tokens, K = 70, N = 100 on one 32x32 array (R = C = 32):
    ("ws", 3 * 4, 32 + 16 + 62),   # ceil(K/R) x ceil(N/C) folds; weight preload R, stream M
    ("os", 1 * 4, 0 + 70 + 62),    # ceil(M/R) x ceil(N/C); no preload, stream K
    ("is", 3 * 1, 32 + 100 + 62),  # ceil(K/R) x ceil(M/C); input preload R, stream N
])
def test_npu_dataflow_fold_arithmetic(dataflow, folds, per_fold):
    base = {"chips": 1, "array_rows": 32, "array_cols": 32, "min_stream_cycles": 1, "dataflow": dataflow}
    op = _gemm(16, 70, 100)
    sc = Npu(make_cfg({"npu": {**base, "fold_model": "scalesim"}}).npu).analyse(op, 1e15)
    assert (sc.passes, sc.cycles) == (folds, folds * per_fold)  # fill + drain (R + C - 2) every fold
    ov = Npu(make_cfg({"npu": {**base, "fold_model": "onnxim_overlap"}}).npu).analyse(op, 1e15)
    assert ov.cycles == folds * (per_fold - 62) + 62               # fill + drain once per op
    assert ov.cycles < sc.cycles


def test_npu_default_is_ws_onnxim_overlap_and_two_chips_split_folds():
    npu = Npu(make_cfg().npu)
    assert (npu.cfg.dataflow, npu.cfg.fold_model) == ("ws", "onnxim_overlap")
    # K = N = 128 on 64x64: 4 folds, 2 per chip, each 64 preload + max(1, 4) streamed
    assert npu.analyse(_gemm(1, 128, 128), 1e15).cycles == 2 * (64 + 4) + 126


def test_npu_memory_bound_gemv_is_weight_bytes_over_bandwidth():
    """A streamed matrix takes bytes / (the DMA's share of the memory bandwidth): the default
    npu.dram_bw_fraction 0.703 (fitted on phone NPU decode, validate --mobile), and 1 (v0.1)."""
    cfg = make_cfg()
    npu = Npu(cfg.npu)
    op = linear(1, 4096, 4096)
    bw = 37.0e9
    c = npu.op_cost(op, bw)
    assert cfg.npu.dram_bw_fraction == 0.703
    assert c.duration_s == pytest.approx(4096 * 4096 / (0.703 * bw) + 200e-9, rel=1e-12, abs=0)
    whole = Npu(make_cfg({"npu": {"dram_bw_fraction": 1.0}}).npu).op_cost(op, bw)
    assert whole.duration_s == pytest.approx(4096 * 4096 / bw + 200e-9, rel=1e-12, abs=0)
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
    assert c.duration_s == pytest.approx(cycles / (1e9 * 0.8) + 200e-9, rel=1e-12, abs=0)
    # 3 element-ops per element at 0.47 pJ + inputs and outputs through the scratchpad (nothing on the bus)
    assert c.macs == 0 and c.energy_of("npu") == pytest.approx(3e6 * 0.47e-12 + 2e6 * 8 * 0.05e-12, rel=1e-12, abs=0)


def test_npu_energy_components_and_dram_energy_when_memory_attached():
    cfg = make_cfg()
    mem = Lpddr5Memory(cfg.memory)
    op = linear(1, 4096, 4096)
    bare = Npu(cfg.npu).op_cost(op, 37e9)
    assert set(bare.energy_j_by_device) == {"npu"}
    c = Npu(cfg.npu, mem).op_cost(op, 37e9)
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(4096 * 4096), rel=1e-12, abs=0)
    assert c.energy_of("npu") == pytest.approx(bare.energy_of("npu"), rel=1e-12, abs=0)
    # MACs + scratchpad (bus fill, weights into the 4096 tile passes, one 64-byte row per pass, outputs) + DMA
    w = 4096 * 4096
    spm = w + w + 4096 * 64 + 4096
    assert c.energy_of("npu") == pytest.approx(w * 0.17e-12 + spm * 8 * 0.05e-12 + w * 2e-12, rel=1e-12, abs=0)


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
    npu_bw = p.memory.effective_bandwidth_bytes_s * p.npu.cfg.dram_bw_fraction
    assert t >= streamed / npu_bw
    # and the bound is nearly tight on the NPU (weight streaming dominates decode)
    assert t < 1.1 * (streamed + sum(o.kv_bytes * o.layer_repeat for o in ops)) / npu_bw
