"""PCIe processor-sharing link, network link, GPU roofline."""
from __future__ import annotations

import pytest
import simpy

from ahasd_sim.hw import Gpu, Link, Lpddr5Memory, NetworkLink
from test_hw_helpers import dense_decoder_ops, elementwise, linear, make_cfg


def h2d(tree=None) -> Link:
    return Link(make_cfg({"h2d": {"enabled": True, **(tree or {})}}).h2d)


def test_pcie_isolated_transfer_is_latency_plus_bytes_over_bandwidth():
    link = h2d({"effective_gb_s": 25.0, "latency_us": 8.0})
    assert link.isolated_transfer_time_s(1e9) == pytest.approx(8e-6 + 1e9 / 25e9, rel=1e-12)
    env = simpy.Environment()
    proc = env.process(link.transfer(env, 1e9))
    env.run()
    assert env.now == pytest.approx(8e-6 + 0.04, rel=1e-12)
    assert proc.value.duration_s == pytest.approx(env.now)
    assert proc.value.energy_of("h2d") == pytest.approx(1e9 * 40e-12)


def test_two_overlapping_transfers_share_bandwidth():
    """A: 100 MB at t=0; B: 50 MB requested at t=2 ms; 10 GB/s, 8 us latency each.
    A streams alone 0.008..2.008 ms (20 MB) -> 80 MB left; both at 5 GB/s: B's 50 MB take
    10 ms -> B ends at 12.008 ms, A has 30 MB left -> alone at 10 GB/s 3 ms -> 15.008 ms."""
    link = h2d({"effective_gb_s": 10.0, "latency_us": 8.0})
    env = simpy.Environment()
    ends = {}

    def job(name, start, nbytes):
        yield env.timeout(start)
        yield env.process(link.transfer(env, nbytes))
        ends[name] = env.now

    env.process(job("A", 0.0, 100e6))
    env.process(job("B", 2e-3, 50e6))
    env.run()
    assert ends["B"] == pytest.approx(12.008e-3, rel=1e-9)
    assert ends["A"] == pytest.approx(15.008e-3, rel=1e-9)
    assert link.active_transfers(env) == 0


def test_three_equal_transfers_finish_together_and_envs_are_independent():
    link = h2d({"effective_gb_s": 10.0, "latency_us": 0.0})
    env, other = simpy.Environment(), simpy.Environment()
    procs = [env.process(link.transfer(env, 10e6)) for _ in range(3)]
    lone = other.process(link.transfer(other, 10e6))
    env.run()
    other.run()
    assert env.now == pytest.approx(3 * 10e6 / 10e9, rel=1e-12)
    assert all(p.value.duration_s == pytest.approx(3e-3) for p in procs)
    assert other.now == pytest.approx(1e-3, rel=1e-12)
    assert lone.value.duration_s == pytest.approx(1e-3)


def test_h2d_effective_bandwidth_cannot_exceed_pcie_generation():
    from ahasd_sim.config import ConfigError
    with pytest.raises(ConfigError, match="h2d"):
        make_cfg({"h2d": {"generation": 4, "effective_gb_s": 40.0}})
    make_cfg({"h2d": {"generation": 5, "effective_gb_s": 40.0}})


def test_network_link_times():
    net = NetworkLink(make_cfg({"network": {"enabled": True, "uplink_mbps": 15.0, "downlink_mbps": 200.0,
                                            "rtt_ms": 50.0}}).network)
    assert net.transfer_time_s(1500, "up") == pytest.approx(0.025 + 1500 * 8 / 15e6)
    assert net.transfer_time_s(1500, "down") == pytest.approx(0.025 + 1500 * 8 / 200e6)
    c = net.cfg   # radio: energy per bit + active power over the serialisation time
    assert net.transfer_cost(1500, "up").energy_of("network") == pytest.approx(
        1500 * 8 * c.radio_tx_nj_per_bit * 1e-9 + c.radio_active_power_w * 1500 * 8 / 15e6)
    with pytest.raises(ValueError):
        net.transfer_time_s(1, "sideways")


# ------------------------------------------------------------------ GPU
def gpu(tree=None, memory=None) -> Gpu:
    cfg = make_cfg({"gpu": {"enabled": True, **(tree or {})}})
    return Gpu(cfg.gpu, memory)


def test_gpu_roofline_memory_and_compute_bound():
    g = gpu()
    gemv = linear(1, 4096, 4096)
    bytes_ = gemv.weight_bytes + gemv.act_bytes_in + gemv.act_bytes_out
    assert g.op_cost(gemv).duration_s == pytest.approx(bytes_ / (576e9 * 0.75), rel=1e-12)
    gemm = linear(8192, 4096, 4096)
    assert g.op_cost(gemm).duration_s == pytest.approx(gemm.flops / (303.6e12 * 0.6), rel=1e-12)
    bf = gpu({"compute_dtype": "bf16"})
    assert bf.op_cost(gemm).duration_s == pytest.approx(gemm.flops / (151.8e12 * 0.6), rel=1e-12)


def test_gpu_forward_adds_launch_overhead_and_power_state_energy():
    g = gpu()
    ops = dense_decoder_ops(layers=4)
    body = sum(g.op_cost(o).duration_s * o.layer_repeat for o in ops)
    launch = 4 * 8 * 4e-6
    c = g.forward_cost(ops)
    assert c.duration_s == pytest.approx(body + launch, rel=1e-12)
    assert g.forward_time_s(ops) == pytest.approx(c.duration_s)
    assert c.energy_of("gpu") == pytest.approx((120.0 - 10.0) * c.duration_s, rel=1e-12)


def test_gpu_overflow_bytes_for_7b_plus_13b_int8_on_16_gb():
    g = gpu()
    usable = (16 - 1) * 2**30
    assert g.overflow_bytes(6.738e9 + 13.016e9) == pytest.approx(6.738e9 + 13.016e9 - usable)
    assert g.overflow_bytes(1e9) == 0.0


def test_mobile_gpu_shares_lpddr5_bandwidth_and_charges_dram_energy():
    cfg = make_cfg()
    mem = Lpddr5Memory(cfg.memory)
    g = gpu({"memory_source": "lpddr5", "mem_bw_gb_s": 76.8, "memory_gib": 64.0}, mem)
    assert g.effective_bandwidth_bytes_s == pytest.approx(mem.effective_bandwidth_bytes_s)
    op = linear(1, 4096, 4096)
    c = g.op_cost(op)
    nbytes = op.weight_bytes + op.act_bytes_in + op.act_bytes_out
    assert c.duration_s >= nbytes / mem.peak_bandwidth_bytes_s
    assert c.energy_of("lpddr5") == pytest.approx(mem.read_energy_j(nbytes))
    with pytest.raises(ValueError):
        gpu({"memory_source": "lpddr5"}, None)
    assert g.op_cost(elementwise("gelu", 1000)).duration_s > 0


def test_h2d_overlapped_latency_small_copies_flat_large_copies_pay_only_the_setup():
    """Issue 13: time = max(latency, latency - overlapped + bytes / bandwidth), in the
    analytic form and in the SimPy process alike."""
    link = h2d({"generation": 5, "effective_gb_s": 50.0, "latency_us": 12.0, "overlapped_us": 5.0})
    for nbytes, expect in ((4096, 12e-6),                        # 7 us + 0.08 us < 12 us
                           (2**20, 7e-6 + 2**20 / 50e9),          # 7 + 21 us
                           (2**30, 7e-6 + 2**30 / 50e9)):
        assert link.isolated_transfer_time_s(nbytes) == pytest.approx(expect, rel=1e-12)
        env = simpy.Environment()
        proc = env.process(link.transfer(env, nbytes))
        env.run()
        assert proc.value.duration_s == pytest.approx(expect, rel=1e-9)
    from ahasd_sim.config import ConfigError
    with pytest.raises(ConfigError, match="overlapped_us"):
        h2d({"latency_us": 5.0, "overlapped_us": 6.0})


def test_gpu_multi_token_terms_and_kernels_per_architecture():
    from ahasd_sim.workload.models import get_model
    from ahasd_sim.workload.ops import forward_ops
    base = {"kernels_per_layer": 25.0, "kernels_per_layer_plain_mlp": 14.5, "launch_overhead_us": 2.0}
    g0 = gpu(base)
    g1 = gpu({**base, "multi_token_layer_overhead_us": 10.0, "multi_token_kv_bw_fraction": 0.5})
    llama, opt = get_model("llama2-7b"), get_model("opt-1.3b")
    # decode (k = 1): the k > 1 terms do not apply; kernel count by architecture
    dec = forward_ops(llama, 1, 1024)
    assert g1.forward_time_s(dec) == pytest.approx(g0.forward_time_s(dec), rel=1e-12)
    assert g0.kernels_per_layer_for(dec) == 25.0 and g0.kernels_per_layer_for(forward_ops(opt, 1, 64)) == 14.5
    # verify (k = 4): + 32 layers x 10 us, and the attention KV read at half the bandwidth
    ver = forward_ops(llama, 4, 1024)
    kv = sum(o.kv_bytes * o.layer_repeat for o in ver if o.kind == "attention")
    extra = 32 * 10e-6 + kv / g0.effective_bandwidth_bytes_s
    assert g1.forward_time_s(ver) == pytest.approx(g0.forward_time_s(ver) + extra, rel=1e-9)
