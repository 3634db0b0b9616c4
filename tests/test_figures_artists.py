"""Figures as an author reads them (issue 33): each figure kind is drawn from a small constructed
input and its artists are inspected -- axis and tick labels are words with units (no
snake_case keys), value labels keep three significant digits, error bars are the 95% window
bootstrap wherever window samples exist (and equal to the interval computed here by hand from
the same resample indices), the figure says so where there is one sample, the legend lies inside
the figure without covering titles or value labels, and numeric x axes are ticked at the data."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ahasd_sim.metrics.stats import resample_indices  # noqa: E402
from ahasd_sim.plots import bars, pareto, sweep_plots, timeline  # noqa: E402


def _capture(monkeypatch, module):
    figs = []
    monkeypatch.setattr(module, "save_figure", lambda fig, out: figs.append(fig) or [])
    return figs


def _no_key(text: str) -> None:
    """A label an author keeps: words, not a column key."""
    assert text.strip() and "_" not in text, repr(text)


def _boxes(fig, artists):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return [a.get_window_extent(r) for a in artists if a.get_visible() and (not hasattr(a, "get_text") or a.get_text())]


def _legend_clear(fig, legend, others) -> None:
    """``legend`` inside the figure's area and overlapping none of the ``others`` (texts)."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    lb = legend.get_window_extent(r)
    fb = fig.bbox
    assert fb.x0 - 0.5 <= lb.x0 and lb.x1 <= fb.x1 + 0.5 and fb.y0 - 0.5 <= lb.y0 and lb.y1 <= fb.y1 + 0.5, (lb, fb)
    for box in _boxes(fig, others):
        assert not lb.overlaps(box), (lb, box)


def _by_hand_ci(num_a, den_a, num_b, den_b=None):
    """The 95% percentile interval of (sum num_a / sum den_a) / (sum num_b / sum den_b) over the
    project's resample indices (metrics.stats: 10^4 draws, seed 0), written out here."""
    na, da = np.asarray(num_a, float), np.asarray(den_a, float)
    idx = resample_indices(na.size)
    draws = na[idx].sum(1) / da[idx].sum(1)
    if num_b is not None:
        nb, db = np.asarray(num_b, float), np.asarray(den_b, float)
        draws = draws / (nb[idx].sum(1) / db[idx].sum(1))
    return list(np.quantile(draws, [0.025, 0.975]))


def _errorbar_segments(ax):
    """(x, low, high) of every vertical error-bar segment on ``ax``."""
    from matplotlib.collections import LineCollection
    out = []
    for c in ax.collections:
        if isinstance(c, LineCollection):
            for seg in c.get_segments():
                if len(seg) == 2 and seg[0][0] == seg[1][0]:
                    out.append((float(seg[0][0]), float(min(seg[:, 1])), float(max(seg[:, 1]))))
    return out


# ------------------------------------------------------------------ grouped bars
#: three windows of one configuration (pair a/b, policy x, seed 0): gpu_only 100 tokens in 10 s
#: each; ahasd 100 tokens in 9.8, 9.9, 9.7 s. Ratio of totals: (300 / 29.4) / (300 / 30) = 30 / 29.4
#: = 1.0204..., labelled "1.02".
GPU_S, AHASD_S = [10.0, 10.0, 10.0], [9.8, 9.9, 9.7]


def _bars_input():
    res = pd.DataFrame({"point": ["p0", "p1"], "variant": ["gpu_only", "ahasd"], "model_pair": ["a/b"] * 2,
                        "run.policy": ["x"] * 2, "seed": [0, 0], "status": ["ok"] * 2,
                        "throughput_tok_s": [300 / 30, 300 / 29.4], "generated_tokens": [300, 300],
                        "decode_makespan_s": [30.0, 29.4], "decode_energy_j": [300.0, 290.0],
                        "tokens_per_j": [1.0, 300 / 290]})
    win = pd.DataFrame({"variant": ["gpu_only"] * 3 + ["ahasd"] * 3, "model_pair": "a/b", "run.policy": "x",
                        "seed": 0, "window": [0, 1, 2] * 2, "generated_tokens": 100.0,
                        "decode_makespan_s": GPU_S + AHASD_S, "decode_energy_j": [100.0] * 3 + [95.0, 100.0, 95.0]})
    return res, win


def test_grouped_bars_carry_window_intervals_and_readable_labels(monkeypatch, tmp_path):
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)     # 3 windows, resampled by hand below
    res, win = _bars_input()
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(res, tmp_path / "b", bars=["gpu_only", "ahasd"], windows=win)
    fig = figs[-1]
    ax = fig.axes[0]                                   # throughput panel
    assert 30 / 29.4 == pytest.approx(1.0204081632653061, rel=1e-12, abs=0)
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("1.02") == 2, texts             # the pair's group and the all-configurations group
    lo, hi = _by_hand_ci([100] * 3, AHASD_S, [100] * 3, GPU_S)
    segs = _errorbar_segments(ax)
    assert len(segs) == 2                              # ahasd in both groups; none on the baseline (=1)
    for _x, a, b in segs:
        assert a == pytest.approx(lo, rel=1e-12, abs=0) and b == pytest.approx(hi, rel=1e-12, abs=0)
    assert lo < 30 / 29.4 < hi
    # value labels sit above the interval, inside the axes
    for t in ax.texts:
        if t.get_text() == "1.02":                      # anchored at the interval's top (+2 points)
            assert t.xy[1] == pytest.approx(hi, rel=1e-12, abs=0)
            assert t.xy[1] < ax.get_ylim()[1]
    # words with units: "Throughput (x GPU only)", legend entries without keys
    assert "(x GPU only)" in ax.get_ylabel()
    legend = fig.legends[0]
    for t in legend.get_texts():
        _no_key(t.get_text())
    value_texts = [t for a in fig.axes for t in a.texts]
    ticks = [t for a in fig.axes for t in a.get_xticklabels()]
    _legend_clear(fig, legend, value_texts + ticks + [a.yaxis.label for a in fig.axes] + list(fig.texts))
    assert any("95% CI" in t.get_text() and "windows" in t.get_text() for t in fig.texts)


def test_grouped_bars_without_window_samples_say_so(monkeypatch, tmp_path):
    res, _win = _bars_input()
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(res, tmp_path / "b", bars=["gpu_only", "ahasd"])
    fig = figs[-1]
    assert not any(_errorbar_segments(a) for a in fig.axes)
    assert any("no error bars" in t.get_text() and "window samples not given" in t.get_text() for t in fig.texts)
    # one window per bar: no interval either, and the figure counts those bars
    _res, win = _bars_input()
    figs2 = _capture(monkeypatch, bars)
    bars.normalised_bars(res, tmp_path / "b1", bars=["gpu_only", "ahasd"], windows=win[win["window"] == 0])
    assert not any(_errorbar_segments(a) for a in figs2[-1].axes)
    assert any("4 of 4 bars without: fewer than 5 windows (n<5)" in t.get_text() for t in figs2[-1].texts)


# ------------------------------------------------------------------ Pareto 2-D
def _pareto_input():
    # five designs of two model pairs; the 2-D front (max throughput, min energy/token) is
    # p0 (10, 1.0), p1 (12, 1.5), p3 (14, 2.0); p2 and p4 are dominated.
    return pd.DataFrame({"throughput_tok_s": [10.0, 12.0, 9.0, 14.0, 11.0],
                         "energy_per_token_j": [1.0, 1.5, 1.6, 2.0, 2.1],
                         "throughput_tok_s_ci95": [0.5, 0.4, 0.3, 0.2, 0.1],
                         "energy_per_token_j_ci95": [0.05, 0.1, 0.1, 0.2, 0.1],
                         "model_pair": ["a/b", "c/d", "a/b", "c/d", "a/b"]})


def test_pareto_front_keeps_pair_colours_with_intervals_and_unit_labels(monkeypatch, tmp_path):
    from matplotlib.colors import to_hex

    from ahasd_sim.plots.style import color
    figs = _capture(monkeypatch, pareto)
    df = _pareto_input()
    pareto.pareto_2d(df, "throughput_tok_s", "energy_per_token_j", "maximize", "minimize", tmp_path / "p",
                     color_by="model_pair", title="Design space")
    fig = figs[-1]
    ax = fig.axes[0]
    assert ax.get_xlabel() == "Throughput (tokens/s)" and ax.get_ylabel() == "Energy per token (J/token)"
    # the front's markers: black rims, faces in their pair's colour (a/b colour 0, c/d colour 1)
    front = [c for c in ax.collections if len(c.get_offsets()) == 3 and len(c.get_facecolors()) == 3]
    assert front, "front markers missing"
    faces = [to_hex(f) for f in front[0].get_facecolors()]
    xy = [tuple(o) for o in front[0].get_offsets()]
    want = {(10.0, 1.0): color(0), (12.0, 1.5): color(1), (14.0, 2.0): color(1)}
    assert {p: f for p, f in zip(xy, faces)} == {p: to_hex(c) for p, c in want.items()}
    assert all(to_hex(e) == "#000000" for e in front[0].get_edgecolors())
    # error bars = the half-widths of trials.csv on the front's points (vertical: y +- ci)
    segs = {(x, round(a, 12), round(b, 12)) for x, a, b in _errorbar_segments(ax)}
    for (x, y), h in zip([(10.0, 1.0), (12.0, 1.5), (14.0, 2.0)], [0.05, 0.1, 0.2]):
        assert (x, round(y - h, 12), round(y + h, 12)) in segs, segs
    legend = fig.legends[0]
    _legend_clear(fig, legend, [ax.title, ax.xaxis.label, *ax.get_xticklabels()])
    assert any("95% CI" in t.get_text() for t in fig.texts)
    for t in legend.get_texts():
        _no_key(t.get_text())


def test_pareto_without_intervals_says_so(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, pareto)
    df = _pareto_input().drop(columns=["throughput_tok_s_ci95", "energy_per_token_j_ci95"])
    pareto.pareto_2d(df, "throughput_tok_s", "energy_per_token_j", "maximize", "minimize", tmp_path / "p")
    fig = figs[-1]
    assert not _errorbar_segments(fig.axes[0])
    assert any("no error bars" in t.get_text() for t in fig.texts)


def test_objective_and_parameter_labels_are_words_with_units():
    assert pareto.objective_label("throughput_tok_s", "ahasd", "gpu_only", "maximize") == \
        "Throughput, AHASD / GPU only (ratio)\n(higher is better)"
    assert pareto.objective_label("energy_per_token_j") == "Energy per token (J/token)"
    assert pareto.parameter_label("npu.freq_ghz") == "NPU freq (GHz)"
    assert pareto.parameter_label("run.draft_model,run.target_model") == "Run draft model,\nRun target model"


def test_parallel_coordinates_axes_are_words(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, pareto)
    df = pd.DataFrame({"npu.freq_ghz": [1.0, 2.0, 3.0], "pim.ranks": [2, 4, 8], "throughput_tok_s": [5.0, 6.0, 7.0]})
    pareto.parallel_coordinates(df, df.iloc[[2]], ["npu.freq_ghz", "pim.ranks", "throughput_tok_s"], tmp_path / "pc")
    labels = [t.get_text() for t in figs[-1].axes[0].get_xticklabels()]
    assert labels == ["NPU freq (GHz)", "PIM ranks", "Throughput (tokens/s)"]


# ------------------------------------------------------------------ tornado and Sobol bars
def test_tornado_labels_intervals_and_legend(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, pareto)
    oat = pd.DataFrame({"parameter": ["npu.freq_ghz", "pim.ranks"], "low_label": ["1", "2"], "high_label": ["3", "8"],
                        "low": [9.0, 9.5], "high": [12.0, 10.5],
                        "low_diff_ci95_low": [-1.25, -1.0], "low_diff_ci95_high": [-0.75, 0.0],
                        "high_diff_ci95_low": [1.5, 0.25], "high_diff_ci95_high": [2.5, 0.75]})
    pareto.tornado(oat, "throughput_tok_s", 10.0, tmp_path / "t")
    fig = figs[-1]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["PIM ranks", "NPU freq (GHz)"]   # widest on top
    assert ax.get_xlabel() == "Throughput (tokens/s); base point 10"
    assert ax.get_title() == "One-at-a-time sensitivity: Throughput (tokens/s)"
    from matplotlib.collections import LineCollection
    horiz = sorted((round(min(s[:, 0]), 12), round(max(s[:, 0]), 12)) for c in ax.collections
                   if isinstance(c, LineCollection) for s in c.get_segments() if s[0][1] == s[1][1])
    assert horiz == [(8.75, 9.25), (9.0, 10.0), (10.25, 10.75), (11.5, 12.5)]
    _legend_clear(fig, fig.legends[0], [ax.title, ax.xaxis.label, *ax.texts])


def test_sobol_bars_labels_and_intervals(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, pareto)
    sob = pd.DataFrame({"parameter": ["npu.freq_ghz", "pim.ranks"], "S1": [0.6, 0.2], "S1_conf": [0.05, 0.04],
                        "ST": [0.7, 0.3], "ST_conf": [0.06, 0.05]})
    pareto.sobol_bars(sob, "throughput_tok_s", tmp_path / "s")
    fig = figs[-1]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["NPU freq (GHz)", "PIM ranks"]
    assert ax.get_ylabel() == "Sobol index (share of variance)"
    assert ax.get_title() == "Sobol indices of Throughput (tokens/s)"
    segs = sorted((round(a, 12), round(b, 12)) for _x, a, b in _errorbar_segments(ax))
    assert segs == sorted([(0.55, 0.65), (0.16, 0.24), (0.64, 0.76), (0.25, 0.35)])
    _legend_clear(fig, ax.get_legend(), [ax.title])


# ------------------------------------------------------------------ timeline
def test_gantt_legend_clears_panel_titles(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, timeline)
    tl = pd.DataFrame({"device": ["npu", "pim", "gpu", "npu"], "task": ["draft", "verify", "verify", "preverify"],
                       "start_s": [0.0, 0.001, 0.002, 0.003], "end_s": [0.002, 0.003, 0.004, 0.005]})
    timeline.plot_gantt({"AHASD / AdaEDL": tl, "GPU only / AdaEDL": tl}, tmp_path / "g", window_s=0.004,
                        start_s=0.0, title="Device activity")
    fig = figs[-1]
    assert fig.axes[-1].get_xlabel() == "Simulated time (ms)"
    titles = [a.title for a in fig.axes] + [a._left_title for a in fig.axes] + [fig._suptitle]
    _legend_clear(fig, fig.legends[0], titles + [a.xaxis.label for a in fig.axes])
    for a in fig.axes:
        for t in a.get_yticklabels():
            assert t.get_text() in {"GPU", "NPU", "PIM"}


def test_gantt_panels_share_one_x_range_and_the_legend_lists_drawn_tasks(monkeypatch, tmp_path):
    """A short run (ends at 5 ms) next to a long one (ends at 50 ms): both panels show the same
    window, 10%-30% of the shortest (0.5-1.5 ms); "wait" occurs only after it and is not in the
    legend."""
    figs = _capture(monkeypatch, timeline)
    short = pd.DataFrame({"device": ["npu", "pim"], "task": ["draft", "verify"],
                          "start_s": [0.0, 0.001], "end_s": [0.002, 0.005]})
    long = pd.DataFrame({"device": ["npu", "pim", "npu"], "task": ["draft", "verify", "wait"],
                         "start_s": [0.0, 0.001, 0.010], "end_s": [0.02, 0.03, 0.05]})
    timeline.plot_gantt({"short": short, "long": long}, tmp_path / "g")
    fig = figs[-1]
    lims = {tuple(round(v, 9) for v in a.get_xlim()) for a in fig.axes}
    assert lims == {(0.5, 1.5)}
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["draft", "verify"]


def test_parallel_coordinates_texts_do_not_overlap(monkeypatch, tmp_path):
    """The shipped study's axes (9, long model-pair choices, a 32-1024 GB/s log axis): no value
    label overlaps another text, and numbers are plain ("1020", not "1.02e+03")."""
    figs = _capture(monkeypatch, pareto)
    rng = np.random.default_rng(0)
    pairs = ["opt-1.3b/opt-6.7b", "llama2-7b/llama2-13b", "palm-like-8b/palm-like-30b"]
    pols = ["adaedl", "svip", "specdecpp", "banditspec", "fixed"]
    mems = ["LPDDR5/4266", "LPDDR5/5500", "LPDDR5/6400", "LPDDR5X/7500", "LPDDR5X/8533"]
    n = 40
    df = pd.DataFrame({"pim.unit_gops_int8": rng.uniform(25.6, 819.2, n), "pim.internal_bw_gb_s": rng.uniform(32, 1024, n),
                       "pim.ranks": rng.choice([12, 16], n), "memory.channels": rng.choice([2, 4, 8], n),
                       "memory.standard,memory.data_rate_mts": rng.choice(mems, n),
                       "run.draft_model,run.target_model": rng.choice(pairs, n), "run.policy": rng.choice(pols, n),
                       "throughput_ratio": rng.uniform(0.08, 0.9, n), "energy_efficiency_ratio": rng.uniform(0.36, 0.95, n)})
    axes = list(df.columns)
    pareto.parallel_coordinates(df, df.iloc[:3], axes, tmp_path / "pc",
                                categories={"pim.ranks": [12, 16], "memory.channels": [2, 4, 8],
                                            "memory.standard,memory.data_rate_mts": mems,
                                            "run.draft_model,run.target_model": pairs, "run.policy": pols},
                                log_axes={"pim.unit_gops_int8", "pim.internal_bw_gb_s"},
                                limits={"pim.unit_gops_int8": (25.6, 819.2), "pim.internal_bw_gb_s": (32.0, 1024.0)})
    fig = figs[-1]
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert "1020" in texts and not any("e+" in t for t in texts)
    assert not _overlaps(fig, list(ax.texts))


# ------------------------------------------------------------------ paper style
def _overlaps(fig, texts, others=()):
    """Pairs of visible, non-empty texts (and text-vs-artist) whose drawn boxes intersect."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in texts if t.get_visible() and t.get_text()]
    bad = [(a, b) for i, (a, ba) in enumerate(boxes) for b, bb in boxes[i + 1:] if ba.overlaps(bb)]
    from matplotlib.transforms import Bbox
    for o in others:              # each drawn segment of a collection (a whisker, a cap)
        for seg in o.get_segments():
            pts = o.get_transform().transform(seg)
            ob = Bbox.from_extents(pts[:, 0].min(), pts[:, 1].min(), pts[:, 0].max(), pts[:, 1].max())
            bad += [(a, "whisker") for a, ba in boxes if ba.overlaps(ob)]
    return bad


def test_log_axes_print_plain_decimals(tmp_path):
    """save_figure labels every log axis with plain decimals: 0.6 and 2, never "6x10^-1"."""
    from ahasd_sim.plots.style import apply_style, plt, save_figure
    apply_style()
    fig, ax = plt.subplots()
    ax.plot([0.55, 0.9], [0.001, 1000])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(0.5, 0.95)          # less than a decade: the minor ticks are labelled
    save_figure(fig, tmp_path / "f", formats=("png",))
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels(minor=True) + ax.get_xticklabels()
              + ax.get_yticklabels() if t.get_text()]
    assert labels and "0.6" in labels and "1000" in labels and "0.001" in labels
    for t in labels:
        float(t.replace("\u2212", "-"))            # a plain number: no mathtext, no "x10^"
        assert "$" not in t and "times" not in t


def test_column_presets():
    from ahasd_sim.plots.style import figure_size
    assert figure_size("one") == (3.5, pytest.approx(3.5 * 0.62))
    assert figure_size("two", height_in=2.0) == (7.0, 2.0)
    with pytest.raises(ValueError):
        figure_size("three")


def test_bar_value_labels_clear_of_whiskers_and_texts(monkeypatch, tmp_path):
    """Grouped bars with intervals: no value label overlaps another text or an error bar, and
    the baseline's bars (1 by definition) carry no "1" label."""
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)
    res, win = _bars_input()
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(res, tmp_path / "b", bars=["gpu_only", "ahasd"], windows=win)
    fig = figs[-1]
    for ax in fig.axes:
        assert "1" not in [t.get_text() for t in ax.texts]
        from matplotlib.collections import LineCollection
        whiskers = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert not _overlaps(fig, list(ax.texts) + list(ax.get_xticklabels()), whiskers)


# ------------------------------------------------------------------ sweep lines and heat map
def _sweep_input(xs=(8, 16, 32)):
    """One point per (x, seed); windows: 2 seeds x 3 windows per x. At x the tokens per window are
    x*(10, 11, 12) (seed 0) and x*(12, 11, 10) (seed 1), all in 1 s: seed-averaged 11x tokens in
    each window, throughput 11 x."""
    rows, wins = [], []
    for x in xs:
        for seed, toks in ((0, (10, 11, 12)), (1, (12, 11, 10))):
            rows.append({"point": f"{x}-{seed}", "status": "ok", "ahasd.max_verify_tokens": x, "seed": seed,
                         "error_type": None, "throughput_tok_s": 11.0 * x, "generated_tokens": 33.0 * x,
                         "decode_makespan_s": 3.0})
            for w, t in enumerate(toks):
                wins.append({"ahasd.max_verify_tokens": x, "seed": seed, "window": w,
                             "generated_tokens": float(t * x), "decode_makespan_s": 1.0 + 0.1 * w})
    return pd.DataFrame(rows), pd.DataFrame(wins)


def test_sweep_lines_ticks_log2_and_window_intervals(monkeypatch, tmp_path):
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)     # 3 windows, resampled by hand below
    figs = _capture(monkeypatch, sweep_plots)
    res, win = _sweep_input()
    sweep_plots.lines(res, "ahasd.max_verify_tokens", "throughput_tok_s", tmp_path / "l", windows=win)
    fig = figs[-1]
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2     # doublings: log2 axis
    assert list(ax.get_xticks()) == [8.0, 16.0, 32.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["8", "16", "32"]
    assert ax.get_xlabel() == "AHASD max verify tokens (tokens)" and ax.get_ylabel() == "Throughput (tokens/s)"
    # seeds averaged within a window (11x tokens each), windows of 1.0, 1.1, 1.2 s: the bootstrap
    # over those three windows (the line's mark is their ratio of totals, 33x / 3.3 = 10x)
    segs = sorted(_errorbar_segments(ax))
    assert [s[0] for s in segs] == [8.0, 16.0, 32.0]
    for x, lo, hi in segs:
        want = _by_hand_ci([11.0 * x] * 3, [1.0, 1.1, 1.2], None)
        assert lo == pytest.approx(want[0], rel=1e-12, abs=0) and hi == pytest.approx(want[1], rel=1e-12, abs=0)
    assert list(ax.lines[0].get_ydata()) == pytest.approx([80.0, 160.0, 320.0], rel=1e-12, abs=0)
    note = " ".join(t.get_text() for t in fig.texts)
    assert "95% CI" in note and "min-max" not in note and "seed (2 values)" in note


def test_sweep_lines_two_levels_without_windows(monkeypatch, tmp_path):
    """x values 8 and 32 are ticked at 8 and 32 (not 9, 12, ... 33); no window samples: no band
    and no bars (never min-max), and the figure says there is no interval."""
    figs = _capture(monkeypatch, sweep_plots)
    res, _win = _sweep_input((8, 32))
    sweep_plots.lines(res, "ahasd.max_verify_tokens", "throughput_tok_s", tmp_path / "l")
    fig = figs[-1]
    ax = fig.axes[0]
    assert list(ax.get_xticks()) == [8.0, 32.0]
    assert not _errorbar_segments(ax) and not [c for c in ax.collections if c.get_paths()]
    assert any("no interval" in t.get_text() and "window samples not given" in t.get_text() for t in fig.texts)


def test_sweep_lines_legend_clear_of_title(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, sweep_plots)
    res, win = _sweep_input()
    res = pd.concat([res.assign(variant="ahasd"), res.assign(variant="gpu_only", throughput_tok_s=res["throughput_tok_s"] / 2)])
    win = pd.concat([win.assign(variant="ahasd"), win.assign(variant="gpu_only")])
    sweep_plots.lines(res, "ahasd.max_verify_tokens", "throughput_tok_s", tmp_path / "l", hue="variant",
                      windows=win, title="Verify width")
    fig = figs[-1]
    ax = fig.axes[0]
    leg = ax.get_legend()
    assert leg.get_title().get_text() == "Variant"
    assert [t.get_text() for t in leg.get_texts()] == ["ahasd", "GPU only"]     # gpu_only as words
    _legend_clear(fig, leg, [ax.title, *fig.texts])


def test_heatmap_ticks_and_labels(monkeypatch, tmp_path):
    figs = _capture(monkeypatch, sweep_plots)
    df = pd.DataFrame({"status": "ok", "pim.ranks": [2, 4, 2, 4], "npu.freq_ghz": [1.0, 1.0, 2.0, 2.0],
                       "energy_j": [1.0, 2.0, 3.0, 4.0]})
    sweep_plots.heatmap(df, "pim.ranks", "npu.freq_ghz", "energy_j", tmp_path / "h")
    fig = figs[-1]
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1.0", "2.0"]
    assert ax.get_xlabel() == "PIM ranks" and ax.get_ylabel() == "NPU freq (GHz)"
    assert fig.axes[1].get_ylabel() == "Energy (J)"                           # the colour bar
    assert sorted(t.get_text() for t in ax.texts) == ["1", "2", "3", "4"]


def test_bars_summary_interval_resamples_within_each_configuration(monkeypatch, tmp_path):
    """Two algorithms (x, y) of one pair, three windows each: the pair's bar summarises both, so
    its interval resamples windows within x and within y (stratified), never the six as one
    sample. ahasd decode times: x 9.8, 9.9, 9.7 s; y 5.0, 6.0, 7.0 s (gpu_only 10 s each)."""
    res, win = _bars_input()
    y_s = [5.0, 6.0, 7.0]
    res = pd.concat([res, res.assign(**{"run.policy": "y", "point": ["q0", "q1"]})], ignore_index=True)
    res.loc[(res["run.policy"] == "y") & (res["variant"] == "ahasd"), "decode_makespan_s"] = sum(y_s)
    wy = win.assign(**{"run.policy": "y"})
    wy.loc[wy["variant"] == "ahasd", "decode_makespan_s"] = y_s
    win = pd.concat([win, wy], ignore_index=True)
    figs = _capture(monkeypatch, bars)
    bars.normalised_bars(res, tmp_path / "b", bars=["gpu_only", "ahasd"], windows=win,
                         metrics={"throughput_tok_s": "Throughput"})
    segs = _errorbar_segments(figs[-1].axes[0])
    assert len(segs) == 2
    # by hand: rows x0 x1 x2 y0 y1 y2, each resample draws three of x's rows and three of y's
    num, den_a, den_b = np.full(6, 100.0), np.array(AHASD_S + y_s), np.full(6, 10.0)
    idx = resample_indices(6, ["x"] * 3 + ["y"] * 3)
    draws = (num[idx].sum(1) / den_a[idx].sum(1)) / (num[idx].sum(1) / den_b[idx].sum(1))
    lo, hi = np.quantile(draws, [0.025, 0.975])
    idx_pooled = resample_indices(6)
    pooled = (num[idx_pooled].sum(1) / den_a[idx_pooled].sum(1)) / (num[idx_pooled].sum(1) / den_b[idx_pooled].sum(1))
    assert np.quantile(pooled, 0.975) != pytest.approx(hi, rel=1e-6)      # the two methods differ here
    for _x, a, b in segs:
        assert a == pytest.approx(lo, rel=1e-12, abs=0) and b == pytest.approx(hi, rel=1e-12, abs=0)
    # the point: 600 tokens in 29.4 + 18 s over 600 tokens in 60 s
    texts = [t.get_text() for t in figs[-1].axes[0].texts]
    assert texts.count(bars.bar_value_label(60 / 47.4)) == 2 and bars.bar_value_label(60 / 47.4) == "1.27"
