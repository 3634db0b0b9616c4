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
    s_cool, s_hot = cool.pim._sequence_spec(1.0), hot.pim._sequence_spec(1.0)
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
    w = pd.read_csv(tmp_path / "c" / "windows.csv")
    assert set(w["mode"]) == set(s["mode"]) and w.groupby(["mode", "repetition"])["end_s"].max().eq(180).all()
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


def _window_run(*extra, duration_s=120.0, repetitions=None):
    from ahasd_sim.sustained import run_sustained
    cfg = load_config(PHONE16, [f"run.trace={SMOKE}", "run.generated_tokens=24", "run.windows=3",
                                "run.mode=autoregressive", "baseline.device=pim", "run.timeline=false", *extra])
    return cfg, run_sustained(cfg, duration_s, repetitions=repetitions)


def test_a_timed_run_decodes_consecutive_windows_with_the_thermal_state_carried_over():
    """Each repetition walks the run's windows in trace order from its own start (wrapping), a
    window starting at the time and node temperatures the previous one ended at (a reset to the
    ambient at a window boundary fails the equality and the warming check), each window decoding
    its own tokens; repetitions start at distinct windows."""
    cfg, res = _window_run()
    W, tokens = 3, 24
    wins, reps = res.windows, res.repetitions
    assert sorted(reps["start_window"]) == [0, 1, 2]            # distinct starting windows
    for r, g in wins.groupby("repetition"):
        g = g.sort_values("seq")
        assert g["window"].iloc[0] == reps.loc[reps["repetition"] == r, "start_window"].iloc[0]
        assert len(g) > W                                        # it wrapped around the run's windows
        for a, b in zip(g.iloc[:-1].itertuples(), g.iloc[1:].itertuples()):
            assert b.window == (a.window + 1) % W
            assert b.start_s == a.end_s
            for node in ("package_c", "board_c", "skin_c"):
                assert getattr(b, f"start_{node}") == getattr(a, f"end_{node}")
        first = g.iloc[0]
        assert first["start_skin_c"] == cfg.thermal.ambient_c
        # the phone warms across the boundaries: the 2nd window starts above the ambient
        assert g.iloc[1]["start_package_c"] > cfg.thermal.ambient_c + 1.0
        assert g.iloc[1]["start_skin_c"] > first["start_skin_c"]
        # the tokens decoded are the finished windows' tokens plus a part of the last
        s = res.series[res.series["repetition"] == r]
        decoded = float((s["tok_s"] * cfg.thermal.step_s).sum())
        done = int(g["finished"].sum())
        assert done * tokens <= decoded + 1e-6 < (done + 1) * tokens
    # one window's time = its tokens / its rate at the state it ran in (unthrottled at the start)
    rate = res.points["0"]["tok_s"]
    g0 = wins[(wins["repetition"] == 1) & (wins["seq"] == 0)].iloc[0]
    assert g0["end_s"] - g0["start_s"] == pytest.approx(tokens / rate[1], rel=1e-9)


def test_a_timed_run_uses_each_windows_own_operating_point():
    """In an unthrottled period the tokens decoded are sum over the windows it overlaps of window
    w's simulated rate x the overlap (a run replaying one window's rate fails this: the smoke
    trace's windows run at different rates)."""
    _cfg, res = _window_run(duration_s=20.0)
    rate = res.points["0"]["tok_s"]
    assert len(set(rate)) == len(rate)
    s, wins = res.series, res.windows
    checked = 0
    for row in s[s["state"] == 0].itertuples():
        g = wins[wins["repetition"] == row.repetition]
        lo, hi = row.time_s, row.time_s + 1.0
        want = sum(rate[int(w.window)] * max(0.0, min(hi, w.end_s) - max(lo, w.start_s)) for w in g.itertuples())
        assert row.tok_s * 1.0 == pytest.approx(want, rel=1e-9)
        checked += 1
    assert checked >= 20


def test_repetitions_start_at_distinct_evenly_spread_windows():
    from ahasd_sim.sustained import repetition_starts
    assert repetition_starts(10, 10) == list(range(10))
    assert repetition_starts(10, 3) == [0, 3, 6]
    assert len(set(repetition_starts(7, 7))) == 7
    _cfg, res = _window_run(duration_s=5.0, repetitions=2)
    assert list(res.repetitions["start_window"]) == [0, 1]
    # 5 s decode several 24-token windows each: repetitions from windows 0 and 1 overlap
    summ = res.summary()
    assert summ["windows_per_repetition"] == pytest.approx(res.repetitions["windows_decoded"].mean())
    assert summ["windows_per_repetition"] > 2 and summ["repetitions_share_windows"]
    _cfg, one = _window_run("thermal.step_s=0.1", duration_s=0.2, repetitions=3)   # part of its first window each
    assert one.summary()["windows_per_repetition"] == 1 and not one.summary()["repetitions_share_windows"]
    with pytest.raises(ValueError):
        _window_run(duration_s=5.0, repetitions=4)


def test_junction_limit_steps_one_state_per_period_and_clears_below_its_clear_point():
    """Package at or above package_limit_c: one state deeper each period (to the deepest); below
    package_clear_c one back each period; in between it holds. The deeper of skin and junction applies."""
    g = Governor(_thermal("thermal.package_limit_c=80", "thermal.package_clear_c=70"))
    seq = [(79.9, 0), (80.0, 1), (85.0, 2), (81.0, 3), (90.0, 3), (75.0, 3), (69.9, 2), (71.0, 2), (60.0, 1),
           (60.0, 0), (60.0, 0)]
    for pkg, state in seq:
        assert g.update(30.0, pkg) == state, pkg
    g = Governor(_thermal("thermal.package_limit_c=80", "thermal.package_clear_c=70"))
    assert g.update(43.5, 81.0) == 2 and not g.junction_bound      # skin state 2 > junction state 1
    assert g.update(43.5, 81.0) == 2 and g.update(43.5, 81.0) == 3 and g.junction_bound
    with pytest.raises(ConfigError):
        _thermal("thermal.package_limit_c=80", "thermal.package_clear_c=80")


def test_a_timed_run_throttles_on_the_junction_limit_before_the_skin():
    """A 50 C junction limit (the phone's package passes it within seconds, its skin far later):
    the first throttle is the junction's, before the skin reaches its first threshold."""
    cfg, res = _window_run("thermal.package_limit_c=50", "thermal.package_clear_c=45", duration_s=60.0)
    s = res.series
    for r, row in res.repetitions.iterrows():
        sr = s[s["repetition"] == r]
        first = sr[sr["state"] > 0].iloc[0]
        assert first["junction_limited"]
        assert first["skin_c"] < cfg.thermal.skin_thresholds_c[0]
        assert row["junction_limited_s"] > 0
    _cfg, cool = _window_run(duration_s=60.0)
    assert (cool.repetitions["junction_limited_s"] == 0).all()


def test_voltage_scaling_charges_the_npu_c_v2_of_each_state():
    """thermal.voltage_scaling: the NPU's per-operation energies at state s are (V(f_s) / V(1))^2 of
    full speed, V from the V-f table (state 1 at f = 0.8: 0.75 + 0.1 (0.8 - 0.714) / 0.143 V)."""
    from ahasd_sim.sustained import state_overrides
    cfg = load_config(PHONE16, ["thermal.voltage_scaling=true"])
    t = cfg.thermal
    v08 = 0.75 + 0.1 * (0.8 - 0.714) / (0.857 - 0.714)
    assert t.voltage_v(0.8) == pytest.approx(v08)
    assert t.energy_scale(1) == pytest.approx((v08 / 0.95) ** 2)
    assert t.voltage_v(0.2) == 0.55                                # the regulator's floor below the table
    ovr = dict(o.split("=") for o in state_overrides(cfg, 1, False))
    assert float(ovr["npu.pj_per_mac"]) == pytest.approx(cfg.npu.pj_per_mac * (v08 / 0.95) ** 2)
    assert float(ovr["npu.vector_pj_per_op"]) == pytest.approx(cfg.npu.vector_pj_per_op * (v08 / 0.95) ** 2)
    off = dict(o.split("=") for o in state_overrides(load_config(PHONE16, []), 1, False))
    assert "npu.pj_per_mac" not in off
    assert load_config(PHONE16, []).thermal.energy_scale(3) == 1.0
    with pytest.raises(ConfigError):
        load_config(PHONE16, ["thermal.vf_clock_fractions=[0.5, 0.9]"])   # must end at the top clock


def test_voltage_scaling_lowers_the_power_of_a_throttled_npu_decoder():
    """operator_sync's draft runs on the NPU: at state 2 its simulated power falls with C V^2 at
    the same rate (energy does not move timing)."""
    from ahasd_sim.sustained import operating_point
    from ahasd_sim.simulation import load_run_windows
    base = [f"run.trace={SMOKE}", "run.generated_tokens=16", "run.windows=1", "run.mode=operator_sync",
            "run.timeline=false"]
    off = load_config(PHONE16, base)
    on = load_config(PHONE16, [*base, "thermal.voltage_scaling=true"])
    w = load_run_windows(off)
    r_off, p_off = operating_point(off, w, 2, False)
    r_on, p_on = operating_point(on, w, 2, False)
    assert r_on[0] == pytest.approx(r_off[0], rel=1e-12)
    assert p_on[0] < p_off[0]


def test_voltage_scaling_without_an_npu_warns():
    from ahasd_sim.checks import config_warnings
    on = load_config(PHONE16, ["thermal.voltage_scaling=true", "npu.enabled=false"])
    assert any("thermal.voltage_scaling has no effect" in w for w in config_warnings(on))
    assert not any("voltage_scaling" in w for w in config_warnings(load_config(PHONE16, ["thermal.voltage_scaling=true"])))
