"""Thermals over minutes: the RC network against closed-form step responses, the governor's
thresholds and hysteresis, JEDEC refresh derating above 85 C, and a run of a duration (energy =
the integral of its power; statistics per repetition)."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.hw.platform import Platform
from ahasd_sim.hw.thermal import Governor, RcNetwork

ROOT = Path(__file__).resolve().parent.parent
PHONE16 = ROOT / "hw_configs" / "phone_16gb.yaml"
SMOKE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"


def _thermal(*overrides):
    return load_config(PHONE16, list(overrides)).thermal


def test_single_node_limit_matches_the_first_order_step_response():
    """With the package and board nodes made tiny and nearly short-circuited, the network is one
    node C_s behind R_sa: T(t) = T_a + P R (1 - exp(-t / (R C))) (the closed form)."""
    t = _thermal("thermal.c_package_j_per_k=1e-6", "thermal.c_board_j_per_k=1e-6",
                 "thermal.r_package_board_k_per_w=1e-6", "thermal.r_board_skin_k_per_w=1e-6",
                 "thermal.r_skin_ambient_k_per_w=4", "thermal.c_skin_j_per_k=90")
    net = RcNetwork(t)
    p, r, c = 3.0, 4.0, 90.0
    temps = np.full(3, t.ambient_c)
    for k in range(1, 601):
        temps = net.step(temps, (p, 0.0, 0.0), 1.0)
        if k in (10, 100, 360, 600):
            want = t.ambient_c + p * r * (1 - math.exp(-k / (r * c)))
            assert temps[2] == pytest.approx(want, abs=1e-3)
    assert max(net.time_constants_s) == pytest.approx(r * c, rel=1e-4)


def test_three_node_step_response_matches_the_modal_closed_form():
    """T(t) - T_ss = sum_i a_i v_i exp(lambda_i t) (eigen-decomposition of C^-1 G, solved here
    independently with numpy); the network's exact steps of 1 s and of 37 s land on it, and its
    steady state is T_a + G^-1 P: the package above ambient by P (R1 + R2 + R3)."""
    t = _thermal()
    net = RcNetwork(t)
    p = np.array([3.0, 0.0, 0.8])
    C = np.array([t.c_package_j_per_k, t.c_board_j_per_k, t.c_skin_j_per_k])
    g1, g2, g3 = (1 / t.r_package_board_k_per_w, 1 / t.r_board_skin_k_per_w, 1 / t.r_skin_ambient_k_per_w)
    G = np.array([[g1, -g1, 0], [-g1, g1 + g2, -g2], [0, -g2, g2 + g3]])
    ss = np.linalg.solve(G, p)
    lam, V = np.linalg.eig(-G / C[:, None])
    a = np.linalg.solve(V, -ss)                       # start at the ambient: rise 0
    closed = lambda s: ss + (V * np.exp(lam * s)) @ a  # noqa: E731
    one = np.full(3, t.ambient_c)
    for _ in range(740):
        one = net.step(one, p, 1.0)
    big = np.full(3, t.ambient_c)
    for _ in range(20):
        big = net.step(big, p, 37.0)
    assert one - t.ambient_c == pytest.approx(closed(740.0).real, abs=1e-9)
    assert big - t.ambient_c == pytest.approx(closed(740.0).real, abs=1e-9)
    hot = net.steady_state_c(p)
    assert hot[0] - t.ambient_c == pytest.approx(3.0 * (t.r_package_board_k_per_w + t.r_board_skin_k_per_w
                                                        + t.r_skin_ambient_k_per_w) + 0.8 * t.r_skin_ambient_k_per_w)


def test_governor_steps_at_each_threshold_and_back_with_hysteresis():
    g = Governor(_thermal())          # 39 / 43 / 45 C, 1 C hysteresis
    seq = [(38.9, 0), (39.0, 1), (42.9, 1), (43.0, 2), (45.5, 3), (44.5, 3), (43.9, 2), (42.5, 2),
           (41.9, 1), (38.5, 1), (37.9, 0), (50.0, 3)]
    for skin, state in seq:
        assert g.update(skin) == state, skin


def test_thermal_section_checks_its_ladder():
    with pytest.raises(ConfigError):
        _thermal("thermal.skin_thresholds_c=[43, 39, 45]")
    with pytest.raises(ConfigError):
        _thermal("thermal.npu_clock_fractions=[1.0, 0.5]")        # 2 states need 1 threshold
    with pytest.raises(ConfigError):
        _thermal("thermal.pim_rate_fractions=[0.9, 0.8, 0.6, 0.4]")


def test_refresh_derating_above_85c_halves_trefi_in_memory_and_pim():
    from ahasd_sim.hw import pim_spec
    cool = Platform.build(load_config(PHONE16, ["memory.dram_temperature_c=85"]))
    hot = Platform.build(load_config(PHONE16, ["memory.dram_temperature_c=85.5"]))
    c = cool.memory.cfg
    assert not cool.memory.refresh_derated and hot.memory.refresh_derated
    assert cool.memory.trefi_ns == c.trefi_ns and hot.memory.trefi_ns == c.trefi_ns / 2
    # all-bank refresh efficiency 1 - tRFC / tREFI: 350 / 3900 -> 350 / 1950
    assert cool.memory.bandwidth_breakdown.refresh_efficiency == pytest.approx(1 - c.trfc_ns / c.trefi_ns)
    assert hot.memory.bandwidth_breakdown.refresh_efficiency == pytest.approx(1 - 2 * c.trfc_ns / c.trefi_ns)
    s_cool, s_hot = cool.pim._sequence_spec(1.0, 1), hot.pim._sequence_spec(1.0, 1)
    assert s_hot.timings.n_refi == s_cool.timings.n_refi // 2
    assert pim_spec.refresh_stretch(s_hot) > pim_spec.refresh_stretch(s_cool)
    from ahasd_sim.workload.models import get_model
    from ahasd_sim.workload.ops import forward_ops
    op = next(o for o in forward_ops(get_model("llama2-13b"), 1, 256) if o.kind.value == "gemv")
    assert hot.pim.gemv_cost(op, 16).duration_s > cool.pim.gemv_cost(op, 16).duration_s
    assert hot.memory.effective_bandwidth_bytes_s < cool.memory.effective_bandwidth_bytes_s


def test_pim_dvfs_rate_fraction_stretches_gemvs_at_equal_energy():
    from ahasd_sim.workload.models import get_model
    from ahasd_sim.workload.ops import forward_ops
    full = Platform.build(load_config(PHONE16, [])).pim
    slow = Platform.build(load_config(PHONE16, ["pim.dvfs_rate_fraction=0.5"])).pim
    op = next(o for o in forward_ops(get_model("llama2-13b"), 1, 256) if o.kind.value == "gemv")
    a, b = full.gemv_cost(op, 16), slow.gemv_cost(op, 16)
    assert b.duration_s == pytest.approx(2 * a.duration_s, rel=1e-12)
    assert b.energy_j_by_device == a.energy_j_by_device


def test_a_run_of_a_duration_energy_is_the_integral_of_its_power_and_hot_phones_throttle():
    from ahasd_sim.sustained import run_sustained
    cfg = load_config(PHONE16, [f"run.trace={SMOKE}", "run.generated_tokens=24", "run.windows=2",
                                "run.mode=autoregressive", "baseline.device=pim", "run.timeline=false",
                                # a hot day and a phone that sheds heat badly: it must throttle
                                "thermal.ambient_c=35", "thermal.r_skin_ambient_k_per_w=8"])
    res = run_sustained(cfg, 300.0)
    reps, series = res.repetitions, res.series
    assert len(reps) == 2
    for r, row in reps.iterrows():
        s = series[series["repetition"] == r]
        dt = cfg.thermal.step_s
        energy = float((s["power_w"] * dt).sum())
        tokens = float((s["tok_s"] * dt).sum())
        assert row["energy_per_token_j"] == pytest.approx(energy / tokens, rel=1e-12)
        assert row["mean_power_w"] == pytest.approx(energy / 300.0, rel=1e-12)
        assert row["burst_tok_s"] == pytest.approx(float(s["tok_s"].iloc[0]))
        # throttled: the first step down happens when the skin crosses the first threshold
        assert row["time_to_first_throttle_s"] > 0
        first = s[s["state"] > 0]["time_s"].min()
        assert first == pytest.approx(row["time_to_first_throttle_s"])
        assert s[s["time_s"] < first]["skin_c"].max() < cfg.thermal.skin_thresholds_c[0]
        assert row["sustained_tok_s"] < row["burst_tok_s"]
    # slower states are slower and draw less
    p0, p1 = res.points["0"], res.points["1"]
    assert all(a > b for a, b in zip(p0["tok_s"], p1["tok_s"]))
    assert all(a > b for a, b in zip(p0["power_w"], p1["power_w"]))
    summ = res.summary()
    assert summ["repetitions"] == 2 and summ["throttled_repetitions"] == 2
    assert summ["sustained_tok_s"] == pytest.approx(reps["sustained_tok_s"].mean())


def test_phone_presets_carry_the_fit_on_the_iphone_measurement():
    """The presets' heat capacities are the section defaults x the kappa fitted on the iPhone 16
    Pro (validate_thermal.fit); the fit reproduces both iPhone observables."""
    from ahasd_sim.hw.thermal import ThermalConfig
    from ahasd_sim.validate_thermal import fit
    f = fit(ThermalConfig())
    t = _thermal()
    for k in ("c_package_j_per_k", "c_board_j_per_k", "c_skin_j_per_k"):
        assert getattr(t, k) == pytest.approx(f[k], rel=5e-3), k
    assert f["iphone_retained"] == pytest.approx(f["iphone_target_retained"], abs=0.01)
    assert abs(f["iphone_first_throttle_s"] - f["iphone_target_first_throttle_s"]) <= 1.0
    assert f["s24_predicted_floor_s"] > 0


def test_compare_duration_ranks_by_sustained_throughput(tmp_path, capsys):
    from ahasd_sim.__main__ import main
    rc = main(["compare", "--config", str(PHONE16), "--modes", "autoregressive@pim,operator_sync",
               "--set", f"run.trace={SMOKE}", "--set", "run.generated_tokens=24", "--set", "run.windows=2",
               "--set", f"tuning.trace={SMOKE}", "--set", "tuning.generated_tokens=16",
               "--duration-min", "3", "--out", str(tmp_path / "c")])
    assert rc == 0
    import pandas as pd
    t = pd.read_csv(tmp_path / "c" / "compare_sustained.csv")
    assert list(t["sustained_tok_s"]) == sorted(t["sustained_tok_s"], reverse=True)
    assert list(t["rank_sustained"]) == [1, 2]
    s = pd.read_csv(tmp_path / "c" / "series.csv")
    assert set(s["mode"]) == {"autoregressive@pim", "operator_sync"} and s["time_s"].max() == 179
    assert "sustained tok/s" in capsys.readouterr().out


def test_refresh_power_doubles_above_85c():
    cool = Platform.build(load_config(PHONE16, ["memory.dram_temperature_c=80"])).memory
    hot = Platform.build(load_config(PHONE16, ["memory.dram_temperature_c=90"])).memory
    c = cool.cfg
    # 4 channels x (92 mW, of which 12 mW refresh): above 85 C the 12 mW doubles
    assert cool.background_power_w == pytest.approx(4 * 92e-3)
    assert hot.background_power_w - cool.background_power_w == pytest.approx(c.channels * c.refresh_mw_per_channel * 1e-3)
    with pytest.raises(ConfigError):
        load_config(PHONE16, ["memory.refresh_mw_per_channel=100"])
