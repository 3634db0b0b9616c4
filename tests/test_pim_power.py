"""DRAM power budget (issue 25): ``pim.dram_power_limit_w`` throttles PIM by a static derating,
and summary.json reports the budget, the mean memory power and the throttled time."""
from __future__ import annotations

from pathlib import Path

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw.platform import Platform
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import forward_ops

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"


def _pim(*overrides):
    cfg = load_config(PLATFORM, list(overrides))
    return cfg, Platform.build(cfg).pim


def test_full_rate_power_by_hand():
    cfg, pim = _pim()
    mem = cfg.memory
    # derived lpddr5_pim: 16 units x 51.2 GB/s = 819.2 GB/s, 16 x 102.4 GOPS = 819.2 GMAC/s: one INT8
    # weight byte per MAC, so 819.2e9 bytes (and MACs) per second
    per_byte = 8 * cfg.pim.bank_pj_per_bit * 1e-12 + mem.act_pre_nj_per_row * 1e-9 / mem.page_bytes
    assert pim.total_internal_bw_bytes_s == pytest.approx(819.2e9)
    assert pim.full_rate_power_w == pytest.approx(819.2e9 * (per_byte + cfg.pim.pj_per_mac * 1e-12), rel=1e-12)
    b = pim.power_budget()
    assert b["limit_w"] is None and b["pim_throttle"] == 1.0
    assert b["host_io_full_rate_w"] == pytest.approx(
        pim.memory.effective_bandwidth_bytes_s * pim.memory.read_energy_j(1.0), rel=1e-12)


def test_a_capped_device_throttles_its_gemvs_and_an_uncapped_one_does_not():
    cfg, free = _pim()
    _, capped = _pim("pim.dram_power_limit_w=4.0")
    b = capped.power_budget()
    room = 4.0 - b["background_w"] - b["host_io_full_rate_w"] - b["pim_static_w"]
    assert b["pim_throttle"] == pytest.approx(room / b["pim_full_rate_w"], rel=1e-12) and b["pim_throttle"] < 1
    assert b["peak_bound_w"] == pytest.approx(4.0, rel=1e-12)
    op = next(o for o in forward_ops(get_model("llama2-13b"), 1, 512) if o.kind.value in ("gemv", "gemm"))
    t_free = free.gemv_cost(op, 16)
    t_cap = capped.gemv_cost(op, 16)
    # the whole command sequence runs at the throttled rate
    assert t_cap.duration_s == pytest.approx(t_free.duration_s / b["pim_throttle"], rel=1e-12)
    assert t_cap.energy_j_by_device == t_free.energy_j_by_device          # same work, same energy
    # a limit above the full-rate worst case changes nothing
    _, loose = _pim("pim.dram_power_limit_w=50")
    assert loose.throttle == 1.0 and loose.gemv_cost(op, 16).duration_s == t_free.duration_s


def test_summary_reports_throttled_time_only_when_capped(tmp_path):
    from ahasd_sim.simulation import run_simulation
    base = [f"run.trace={SMOKE}", "run.generated_tokens=40", "run.windows=1", "run.mode=autoregressive",
            "baseline.device=pim", "run.timeline=false"]
    free = run_simulation(load_config(PLATFORM, base)).summary
    capped = run_simulation(load_config(PLATFORM, [*base, "pim.dram_power_limit_w=3.0"])).summary
    assert free["dram_power"]["throttled_time_s"] == 0.0 and free["dram_power"]["pim_throttle"] == 1.0
    assert capped["dram_power"]["throttled_time_s"] > 0 and capped["dram_power"]["pim_throttle"] < 1
    assert capped["throughput_tok_s"] < free["throughput_tok_s"]
    assert capped["dram_power"]["mean_w"] < free["dram_power"]["mean_w"]
    assert capped["dram_power"]["mean_w"] <= capped["dram_power"]["peak_bound_w"] <= 3.0 + 1e-9


def test_a_limit_below_background_and_host_io_is_a_config_error():
    with pytest.raises(ConfigError) as e:      # refused when the platform is built, before any run
        _pim("pim.dram_power_limit_w=0.5")
    assert e.value.key_path == "pim.dram_power_limit_w" and "leaves no power for PIM" in e.value.message
