"""Package power cap (``pim.dram_power_limit_w``) on the power a run actually draws: PIM GEMVs at
their achieved rate, the host's I/O only in modes whose host streams while PIM computes;
instantaneous (per operator) and mean (over the run) variants; any positive limit above the
package's static power runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw.pim import PACKAGE_DEVICES
from ahasd_sim.hw.platform import Platform
from ahasd_sim.modes import MODES
from ahasd_sim.simulation import build_platform, run_simulation
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import forward_ops

ROOT = Path(__file__).resolve().parent.parent
PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
BASE = [f"run.trace={SMOKE}", "run.generated_tokens=40", "run.windows=1", "run.timeline=false"]
AR_PIM = ["run.mode=autoregressive", "baseline.device=pim"]


def _pim(*overrides):
    cfg = load_config(PLATFORM, list(overrides))
    return cfg, Platform.build(cfg).pim


def _gemvs(model="llama2-13b"):
    return [o for o in forward_ops(get_model(model), 1, 512) if o.kind.value in ("gemv", "gemm", "attention")]


def test_full_rate_and_static_power_by_hand():
    cfg, pim = _pim()
    mem = cfg.memory
    # derived lpddr5_pim: 16 units x 51.2 GB/s = 819.2 GB/s, 16 x 102.4 GOPS = 819.2 GMAC/s: one INT8
    # weight byte per MAC, so 819.2e9 bytes (and MACs) per second
    per_byte = 8 * cfg.pim.bank_pj_per_bit * 1e-12 + mem.act_pre_nj_per_row * 1e-9 / mem.page_bytes
    assert pim.full_rate_power_w == pytest.approx(819.2e9 * (per_byte + cfg.pim.pj_per_mac * 1e-12), rel=1e-12)
    # the command sequence reaches part of the bank rate: what PIM draws is below the bound
    assert 0 < pim.achieved_power_w < pim.full_rate_power_w
    # static: 4 x 20 mW background + 16 x 5 mW PIM + 16 x 5 mW AAU + 0.5 mW GTS
    assert pim.package_static_w == pytest.approx(0.08 + 0.08 + 0.08 + 0.0005, rel=1e-12)
    b = pim.power_budget()
    assert b["limit_w"] is None and b["pim_budget_w"] is None and b["host_rate_fraction"] == 1.0


def test_ar_on_pim_keeps_no_host_io_and_a_concurrent_mode_splits_the_budget():
    limit = 2.0
    ar = build_platform(load_config(PLATFORM, [*AR_PIM, f"pim.dram_power_limit_w={limit}"]), MODES["autoregressive"])
    b = ar.pim.power_budget()
    room = limit - b["static_w"]
    assert not b["host_overlaps_pim"] and b["pim_budget_w"] == pytest.approx(room, rel=1e-12)
    ah = build_platform(load_config(PLATFORM, ["run.mode=ahasd", f"pim.dram_power_limit_w={limit}"]), MODES["ahasd"])
    a = ah.pim.power_budget()
    h, p = a["host_io_w"], a["pim_achieved_w"]
    assert h + p > room        # both at once would exceed it: shared in proportion to their powers
    assert a["pim_budget_w"] == pytest.approx(room * p / (h + p), rel=1e-12)
    assert a["host_io_budget_w"] == pytest.approx(room * h / (h + p), rel=1e-12)
    assert ah.memory.host_rate_fraction == pytest.approx(a["host_io_budget_w"] / h, rel=1e-12)
    # the old static derating reserved 1.72 W of host I/O for AR on PIM too: now it gets the whole room
    assert b["pim_budget_w"] > a["pim_budget_w"]


def test_every_capped_gemv_stays_under_its_ranks_share_of_the_budget():
    cfg, free = _pim()
    limit = 1.0
    _, capped = _pim(f"pim.dram_power_limit_w={limit}")
    budget = capped.power_budget()["pim_budget_w"]
    slowed = 0
    for ranks in (1, 4, 16):
        for op in _gemvs():
            c, f = capped.gemv_cost(op, ranks), free.gemv_cost(op, ranks)
            assert c.energy_j_by_device == f.energy_j_by_device            # same work, same energy
            e = c.energy_j_by_device["pim"]
            # duration = max(unthrottled, energy / (budget x ranks / 16)): by hand
            assert c.duration_s == pytest.approx(max(f.duration_s, e / (budget * ranks / 16)), rel=1e-12)
            assert e / c.duration_s <= budget * ranks / 16 * (1 + 1e-12)
            slowed += c.duration_s > f.duration_s
    assert slowed > 0
    # a limit far above what the package draws changes nothing
    _, loose = _pim("pim.dram_power_limit_w=50")
    op = _gemvs()[0]
    assert loose.gemv_cost(op, 16).duration_s == free.gemv_cost(op, 16).duration_s


@pytest.mark.parametrize("mode", [AR_PIM, ["run.mode=ahasd"]], ids=["ar_pim", "ahasd"])
@pytest.mark.parametrize("kind", ["instantaneous", "mean"])
def test_a_capped_run_never_draws_more_than_its_cap_and_a_1w_cap_runs(mode, kind):
    free = run_simulation(load_config(PLATFORM, [*BASE, *mode])).summary
    s = run_simulation(load_config(PLATFORM, [*BASE, *mode, "pim.dram_power_limit_w=1.0",
                                              f"pim.power_limit_kind={kind}"])).summary
    d = s["dram_power"]
    assert free["dram_power"]["mean_w"] > 1.0                 # uncapped, the package draws more
    assert 0 < s["throughput_tok_s"] < free["throughput_tok_s"]
    assert d["mean_w"] <= 1.0 + 1e-9
    if kind == "instantaneous":
        assert d["peak_bound_w"] <= 1.0 + 1e-9 and d["mean_dilation"] == 1.0
    else:
        assert d["mean_w"] == pytest.approx(1.0, rel=1e-9) and d["mean_dilation"] > 1


def test_mean_cap_dilates_the_run_by_hand():
    """k = E_dyn(package) / ((limit - static) x T): the run is T k long, its package mean power
    (E_dyn + static x T k) / (T k) = limit exactly."""
    free = run_simulation(load_config(PLATFORM, [*BASE, *AR_PIM])).summary
    e_dyn = sum(free["energy_breakdown_j"][d]["dynamic"] for d in PACKAGE_DEVICES if d in free["energy_breakdown_j"])
    limit = 1.5
    cfg = load_config(PLATFORM, [*BASE, *AR_PIM, f"pim.dram_power_limit_w={limit}", "pim.power_limit_kind=mean"])
    s = run_simulation(cfg).summary
    static = Platform.build(cfg).pim.package_static_w
    k = e_dyn / ((limit - static) * free["makespan_s"])
    assert s["dram_power"]["mean_dilation"] == pytest.approx(k, rel=1e-9)
    assert s["makespan_s"] == pytest.approx(free["makespan_s"] * k, rel=1e-9)
    assert s["throughput_tok_s"] == pytest.approx(free["throughput_tok_s"] / k, rel=1e-9)


def test_a_limit_at_or_below_the_static_power_is_a_config_error():
    with pytest.raises(ConfigError) as e:      # refused when the platform is built, before any run
        _pim("pim.dram_power_limit_w=0.2")
    assert e.value.key_path == "pim.dram_power_limit_w" and "static power" in e.value.message
    _pim("pim.dram_power_limit_w=0.3")         # just above 0.2405 W runs
