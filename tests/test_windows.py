"""Trace windows as samples: disjoint placement, ratio estimators and bootstrap 95% intervals (issues 12, 26)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ahasd_sim.metrics.stats as stats_mod

from ahasd_sim.compare import run_compare
from ahasd_sim.config import load_config
from ahasd_sim.metrics.stats import RATIOS, metric_ci, paired_metric_ci
from ahasd_sim.simulation import run_simulation, window_start_prompts
from ahasd_sim.traces.format import load_trace

from conftest import ROOT, SMOKE_TRACE

GREEDY = ROOT / "traces" / "qwc-0.5b-1.5b_greedy.npz"


def test_default_windows_are_disjoint_and_spread_over_the_trace():
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml")
    trace = load_trace(GREEDY)
    starts = window_start_prompts(cfg, trace)
    n, T = len(trace), cfg.run.generated_tokens
    bounds = trace.prompt_bounds()
    first = [int(bounds[p, 0]) for p in starts]
    # 11449 positions hold floor(11449 / 1024) = 11 windows only if prompt boundaries allowed it;
    # from the first prompt on, greedily, 10 disjoint ones fit (checked by hand from the bounds)
    assert len(starts) == 10 and starts[0] == 0 and starts == sorted(set(starts))
    assert all(b - a >= T for a, b in zip(first, first[1:]))        # disjoint
    assert all(n - f >= T for f in first)                             # every window fits
    assert n - first[-1] < 2 * T                                      # the last one reaches the end
    # one window at the chosen prompt when asked
    one = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", ["run.windows=1", "run.trace_start_prompt=7"])
    assert window_start_prompts(one, trace) == [7]
    three = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", ["run.windows=3"])
    assert window_start_prompts(three, trace) == [0, 27, 54]          # round(i x 54 / 2) of the 55 that fit
    # evenly spread prompts that are already disjoint are kept as they are (the sweeps' 5 windows)
    five = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", ["run.windows=5"])
    assert window_start_prompts(five, trace) == [0, 14, 27, 40, 54]


def test_summary_rates_and_intervals_come_from_the_windows(tmp_path, monkeypatch):
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # plumbing on the 2-4 window test traces
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    res = run_simulation(cfg)
    s, w = res.summary, res.windows
    assert s["windows"] == len(w) == 3 and s["generated_tokens"] == w["generated_tokens"].sum()
    for k in ("throughput_tok_s", "tokens_per_j", "energy_per_token_j"):
        num, den = RATIOS[k]
        assert s[k] == pytest.approx(w[num].sum() / w[den].sum(), rel=1e-15)       # ratio of totals
        m, ci = metric_ci(w, k)
        assert s[k] == m and s[f"{k}_ci95"] == ci and ci[0] <= m <= ci[1]
    assert s["decode_makespan_s"] == pytest.approx(w["decode_makespan_s"].sum())
    # each window is its own run: the same as running that window alone
    solo = run_simulation(cfg.replace(["run.windows=1", "run.trace_start_prompt=1"])).summary
    assert w.loc[1, "throughput_tok_s"] != w.loc[0, "throughput_tok_s"]
    assert solo["generated_tokens"] == 24 and solo["windows"] == 1 and solo["throughput_tok_s_ci95"] is None
    assert s["makespan_s"] == pytest.approx(w["makespan_s"].sum())
    assert s["energy_j"] == pytest.approx(w["energy_j"].sum())


def test_compare_reports_paired_ratio_intervals(tmp_path, monkeypatch):
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # plumbing on the 2-4 window test traces
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    table, out = run_compare(cfg, ["async", "ahasd"], "async", str(tmp_path / "cmp"))
    assert (out / "ahasd" / "windows.csv").is_file()
    row = table.set_index("mode").loc["ahasd"]
    wa = pd.read_csv(out / "ahasd" / "windows.csv")
    wb = pd.read_csv(out / "async" / "windows.csv")
    m, ci = paired_metric_ci(wa, wb, "throughput_tok_s")
    assert m == pytest.approx((wa["generated_tokens"].sum() / wa["decode_makespan_s"].sum())
                              / (wb["generated_tokens"].sum() / wb["decode_makespan_s"].sum()), rel=1e-12)
    assert row["throughput_vs_async"] == pytest.approx(m, rel=1e-12)
    assert [row["throughput_vs_async_ci95_low"], row["throughput_vs_async_ci95_high"]] == pytest.approx(ci, rel=1e-12)
    base = table.set_index("mode").loc["async"]
    assert base["throughput_vs_async"] == 1 and base["throughput_vs_async_ci95_low"] == 1


def test_too_few_windows_give_no_interval_anywhere(tmp_path):
    """The smoke trace's 3 windows are below the bootstrap's minimum (5): summary.json, the
    compare table and its printed form carry no interval (no zero-width [m, m]) and say why."""
    from ahasd_sim.compare import format_compare
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    table, _out = run_compare(cfg, ["async", "ahasd"], "async", str(tmp_path / "cmp"))
    row = table.set_index("mode").loc["ahasd"]
    assert row["windows"] == 3 and np.isnan(row["throughput_vs_async_ci95_low"])
    assert pd.isna(row["throughput_tok_s_ci95_low"])
    text = format_compare(table, "async")
    assert "(n<5)" in text and "[" not in text.split("\n", 1)[1]


def test_window_totals_add_up():
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    res = run_simulation(cfg)
    s = res.summary
    first = run_simulation(cfg.replace(["run.windows=1"])).summary     # window 0 alone: same run
    assert first["device_busy_s"]["npu"] < s["device_busy_s"]["npu"] <= s["makespan_s"]
    total_dyn = sum(v["dynamic"] + v["static"] for v in s["energy_breakdown_j"].values())
    assert total_dyn == pytest.approx(s["energy_j"])
    by_task = sum(e for devs in s["dynamic_energy_by_task_j"].values() for e in devs.values())
    assert by_task == pytest.approx(sum(v["dynamic"] for v in s["energy_breakdown_j"].values()))
    for d, u in s["device_utilization"].items():
        assert u == pytest.approx(s["device_busy_s"][d] / s["makespan_s"])
    assert 0.2 < s["device_utilization"]["npu"] <= 1.0


def test_parallel_windows_give_the_same_result():
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    import json
    a = run_simulation(cfg, workers=1).summary
    b = run_simulation(cfg, workers=2).summary
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
