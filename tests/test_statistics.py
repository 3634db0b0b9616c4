"""The one statistics method (docs/modeling.md, Statistics; issue 26 part A): disjoint windows,
ratio estimators, bootstrap intervals over whole windows, never pooled across configurations,
seeds averaged within a window, and the same point estimate in summary, compare, report and
figures."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import ahasd_sim.metrics.stats as stats_mod

from ahasd_sim.compare import run_compare
from ahasd_sim.config import load_config
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.metrics import stats
from ahasd_sim.plots.bars import ratio_table
from ahasd_sim.simulation import disjoint_window_starts, max_disjoint_windows, window_start_prompts
from ahasd_sim.metrics import windows
from ahasd_sim.paper import report
from ahasd_sim.traces.format import load_trace

from conftest import ROOT, SMOKE_TRACE

CHAIN_TRACES = [ROOT / "traces" / n for n in ("qwc-0.5b-1.5b_greedy.npz", "qwc-0.5b-1.5b_t1.npz",
                                               "qwc-0.5b-1.5b_greedy_smoke.npz")]


# ---------------------------------------------------------------- disjoint windows
@pytest.mark.parametrize("path", CHAIN_TRACES, ids=lambda p: p.name)
def test_windows_never_overlap(path):
    """Every window count that fits, for several window lengths, on every shipped chain trace:
    window i+1 starts at or after window i's end, each starts at a prompt and fits the trace."""
    trace = load_trace(path)
    n = len(trace)
    starts = [int(b[0]) for b in trace.prompt_bounds()]
    for T in sorted({1, 7, 24, 100, 257, 1024, n // 3, n} & set(range(1, n + 1))):
        most = max_disjoint_windows(starts, n, T)
        for k in range(1, most + 1):
            picks = disjoint_window_starts(starts, n, T, k)
            assert len(picks) == k and set(picks) <= set(starts), (T, k)
            assert all(b - a >= T for a, b in zip(picks, picks[1:])), (T, k, picks)
            assert picks[-1] + T <= n


def test_the_default_job_windows_are_disjoint_and_the_excess_is_an_error():
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml")
    trace = load_trace(CHAIN_TRACES[0])
    bounds = trace.prompt_bounds()
    first = [int(bounds[p, 0]) for p in window_start_prompts(cfg, trace)]
    spans = [set(range(f, f + cfg.run.generated_tokens)) for f in first]
    assert sum(len(s) for s in spans) == len(set().union(*spans))       # no position counts twice
    too_many = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml", [f"run.windows={len(first) + 1}"])
    with pytest.raises(ConfigError, match=r"run\.windows: 11 disjoint windows .* at most 10"):
        window_start_prompts(too_many, trace)


# ---------------------------------------------------------------- ratio estimators
def test_rates_are_ratios_of_totals_not_means_of_ratios():
    """Two windows: 10 tokens in 1 s and 30 tokens in 1.5 s. Mean of the per-window rates: (10 +
    20) / 2 = 15 tok/s; ratio of totals: 40 / 2.5 = 16 tok/s. Energy 2 J and 10 J: mean of
    tokens/J (5 + 3) / 2 = 4; ratio of totals 40 / 12 = 3.33."""
    w = pd.DataFrame({"generated_tokens": [10, 30], "decode_makespan_s": [1.0, 1.5], "decode_energy_j": [2.0, 10.0],
                      "makespan_s": [1.5, 2.5], "energy_j": [3.0, 11.0]})
    assert stats.pooled_rate(w, "throughput_tok_s") == 16.0
    assert stats.pooled_rate(w, "tokens_per_j") == 40 / 12
    assert stats.pooled_rate(w, "energy_per_token_j") == 12 / 40
    assert stats.pooled_rate(w, "throughput_e2e_tok_s") == 10.0 and stats.pooled_rate(w, "tokens_per_j_e2e") == 40 / 14
    # a paired ratio between two configurations is the ratio of their ratio estimators
    b = w.assign(decode_makespan_s=[2.0, 1.0])            # 40 tokens in 3 s: per-window ratios 2 and 2/3
    m, _ci = stats.paired_metric_ci(w, b, "throughput_tok_s")
    assert m == pytest.approx(16.0 / (40 / 3), rel=1e-15)  # 1.2, not the mean 4/3 of the window ratios
    # the paper's cells: the same ratio
    wt = pd.concat([w.assign(variant="x"), b.assign(variant="y")]).assign(
        window=[0, 1, 0, 1], model_pair="p", **{"run.policy": "a"})
    assert windows.paired_ratio(wt, "x", "y", "throughput_tok_s")[0] == pytest.approx(1.2, rel=1e-15)


def test_old_windows_tables_give_the_same_totals():
    """windows.csv written before decode_makespan_s / decode_energy_j: derived exactly."""
    old = pd.DataFrame({"generated_tokens": [4, 8], "makespan_s": [3.0, 5.0], "prefill_s": [1.0, 1.0],
                        "energy_per_token_j": [0.5, 0.25]})
    assert stats.totals(old, "decode_makespan_s").tolist() == [2.0, 4.0]
    assert stats.totals(old, "decode_energy_j").tolist() == [2.0, 2.0]
    assert stats.pooled_rate(old, "throughput_tok_s") == 2.0 and stats.pooled_rate(old, "tokens_per_j") == 3.0


def test_tokens_per_j_times_energy_per_token_is_one(tmp_path):
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    from ahasd_sim.simulation import run_simulation
    s = run_simulation(cfg).summary
    # n / d and d / n are each correctly rounded: their product is 1 within 2 roundings
    assert abs(s["tokens_per_j"] * s["energy_per_token_j"] - 1.0) <= 4e-16
    assert s["tokens_per_j"] == stats.pooled_rate(pd.DataFrame({
        "generated_tokens": [s["generated_tokens"]], "decode_energy_j": [s["decode_energy_j"]]}), "tokens_per_j")


# ---------------------------------------------------------------- intervals
def test_bootstrap_is_seeded_and_resamples_whole_windows(monkeypatch):
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # plumbing on the 2-4 window test traces
    num, den = [10.0, 30.0, 20.0], [1.0, 1.5, 2.0]
    a = stats.ratio_ci(num, den)
    assert a == stats.ratio_ci(num, den)                 # reproducible
    lo, hi = a[1]
    # every resample is a ratio of whole windows' totals: bounded by the extreme window rates
    assert 10.0 <= lo <= a[0] <= hi <= 20.0
    assert stats.ratio_ci([5.0], [1.0]) == (5.0, None)   # one window: no interval


def test_bootstrap_agrees_with_scipy():
    """Our percentile bootstrap of a paired ratio of totals against scipy.stats.bootstrap
    (percentile, paired) on the same data: the bounds agree to Monte Carlo error."""
    sp = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    n = 12
    na, nb = rng.uniform(900, 1100, n), rng.uniform(900, 1100, n)
    da, db = na / rng.uniform(10, 14, n), nb / rng.uniform(8, 12, n)
    m, (lo, hi) = stats.paired_ratio_ci(na, da, nb, db)

    def stat(i, axis=-1):
        i = np.asarray(i, dtype=int)
        return (na[i].sum(axis) / da[i].sum(axis)) / (nb[i].sum(axis) / db[i].sum(axis))
    res = sp.bootstrap((np.arange(n),), stat, n_resamples=20000, method="percentile", vectorized=True,
                       random_state=1)
    assert lo == pytest.approx(res.confidence_interval.low, rel=3e-3)
    assert hi == pytest.approx(res.confidence_interval.high, rel=3e-3)


def test_no_interval_pools_windows_of_different_configurations(monkeypatch):
    """Two model pairs, 4 windows each, AHASD/baseline exactly 0.5 in every window of pair A and
    2.0 in every window of pair B. Within each configuration there is no noise, so every honest
    interval is a point: per configuration [0.5, 0.5] and [2, 2]; the suite (ratio of the suite's
    totals: 4 x 10 tokens in 4 x 2 s vs 4 x 1 s for A, in 4 x 1 s vs 4 x 2 s for B: 80 / 12 over
    80 / 12 = 1) with a bootstrap stratified by configuration is [1, 1] too. Pooling the 8
    windows as one sample would give an interval around 1 of visible width."""
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # plumbing on the 2-4 window test traces
    rows = []
    for pair, t_num, t_den in (("A", 2.0, 1.0), ("B", 1.0, 2.0)):
        for v, t in (("ahasd", t_num), ("base", t_den)):
            for w in range(4):
                rows.append({"variant": v, "model_pair": pair, "run.policy": "adaedl", "seed": 0, "window": w,
                             "generated_tokens": 10, "decode_makespan_s": t, "decode_energy_j": t})
    wt = pd.DataFrame(rows)
    per = windows.config_ratios(wt, "ahasd", "base", "throughput_tok_s")
    assert per == {("A", "adaedl"): (0.5, [0.5, 0.5]), ("B", "adaedl"): (2.0, [2.0, 2.0])}
    m, ci, n, k = windows.paired_ratio(wt, "ahasd", "base", "throughput_tok_s")
    assert (m, n, k) == (1.0, 8, 2) and ci == [1.0, 1.0]
    assert report.range_cell(wt, "ahasd", "base", "throughput_tok_s") == "0.50-2.00 (1 above 1, 1 below)"
    # the pooled (unstratified) bootstrap this replaces: visibly wide
    p = windows.paired_windows(wt, "ahasd", "base", "throughput_tok_s")
    _m, pooled = stats.paired_ratio_ci(p["num_n"], p["num_d"], p["den_n"], p["den_d"])
    assert pooled[1] - pooled[0] > 0.3
    # the stratified resampler keeps every draw inside its configuration
    idx = stats.resample_indices(8, ["A"] * 4 + ["B"] * 4, n_resamples=200)
    assert (idx[:, :4] < 4).all() and (idx[:, 4:] >= 4).all()


def test_seeds_are_averaged_within_a_window_not_counted_as_samples():
    """Two seeds of the same 2 windows: still 2 samples; the window's totals are the seed means
    (seed 0: 1 s, seed 1: 3 s -> 2 s for window 0)."""
    rows = []
    for seed, t0 in ((0, 1.0), (1, 3.0)):
        for v, scale in (("x", 1.0), ("y", 2.0)):
            for w, t in ((0, t0), (1, 2.0)):
                rows.append({"variant": v, "model_pair": "p", "run.policy": "a", "seed": seed, "window": w,
                             "generated_tokens": 10, "decode_makespan_s": t * scale, "decode_energy_j": 1.0})
    wt = pd.DataFrame(rows)
    avg = windows.seed_averaged_windows(wt)
    assert len(avg) == 4 and set(avg["seeds"]) == {2}
    assert avg.set_index(["variant", "window"]).loc[("x", 0), "decode_makespan_s"] == 2.0
    m, ci, n, k = windows.paired_ratio(wt, "x", "y", "throughput_tok_s")
    assert (n, k) == (2, 1) and m == 2.0


# ---------------------------------------------------------------- one point estimate everywhere
def test_summary_compare_report_and_figures_agree(tmp_path, monkeypatch):
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # plumbing on the 2-4 window test traces
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=24", "run.timeline=false"])
    table, out = run_compare(cfg, ["async", "ahasd"], "async", str(tmp_path / "cmp"))
    t = table.set_index("mode")
    frames = []
    for mode in ("async", "ahasd"):
        s = json.loads((out / mode / "summary.json").read_text())
        w = pd.read_csv(out / mode / "windows.csv")
        for k in ("throughput_tok_s", "tokens_per_j"):
            # summary.json == compare's row == the ratio estimator of windows.csv, to the bit
            assert s[k] == t.loc[mode, k] == stats.pooled_rate(w, k)
        frames.append(w.assign(variant=mode, model_pair="smoke", **{"run.policy": "adaedl", "seed": 0}))
    wt = pd.concat(frames, ignore_index=True)
    for metric, col in (("throughput_tok_s", "throughput_vs_async"), ("tokens_per_j", "energy_efficiency_vs_async")):
        m, ci, _n, _k = windows.paired_ratio(wt, "ahasd", "async", metric)     # the report's cell
        assert m == t.loc["ahasd", col]
        assert ci == [t.loc["ahasd", col + "_ci95_low"], t.loc["ahasd", col + "_ci95_high"]]
        # the figures' bar (results.csv rows: one per run, the summaries' totals)
        res = pd.DataFrame([{**json.loads((out / mode / "summary.json").read_text()), "variant": mode,
                             "model_pair": "smoke", "status": "ok"} for mode in ("async", "ahasd")])
        bars = ratio_table(res, by="variant", baseline="async", group="model_pair", match=["model_pair"],
                           metrics=[metric])
        bar = bars[(bars["bar"] == "ahasd") & (bars["group"] == "smoke")]["ratio"].iloc[0]
        assert bar == pytest.approx(m, rel=1e-15)


def test_figure_cells_are_ratios_of_totals():
    """A sweep cell of two seeds (10 tokens in 1 s, 10 tokens in 4 s): the heat map / line value
    is 20 / 5 = 4 tok/s, not the mean (10 + 2.5) / 2 = 6.25 of the points' rates; a column
    that is not a rate is averaged."""
    from ahasd_sim.plots.sweep_plots import cell_values
    d = pd.DataFrame({"x": [1, 1, 2], "seed": [0, 1, 0], "generated_tokens": [10, 10, 10],
                      "decode_makespan_s": [1.0, 4.0, 2.0], "throughput_tok_s": [10.0, 2.5, 5.0],
                      "acceptance_rate": [0.2, 0.4, 0.5]})
    assert cell_values(d, "x", "throughput_tok_s").to_dict() == {1: 4.0, 2: 5.0}
    assert cell_values(d, "x", "acceptance_rate").to_dict() == pytest.approx({1: 0.3, 2: 0.5})
