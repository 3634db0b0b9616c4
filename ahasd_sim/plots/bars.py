"""Normalised bar charts (throughput, energy efficiency) from a sweep's results.csv."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from ..config.errors import InputError
from ..metrics.stats import RATIOS, has_totals, ratio_of_totals, totals
from ..metrics.tables import ok_rows
from .style import HATCHES, apply_style, color, save_figure

#: metric column -> axis label (ratios are unitless: "x baseline")
DEFAULT_METRICS = {"throughput_tok_s": "Throughput", "tokens_per_j": "Energy efficiency"}
MEAN_GROUP = "all (total)"


def wrap_label(text: str, width: int = 14) -> str:
    """Break long group labels (``draft/target`` model pairs) onto two lines."""
    text = str(text)
    if len(text) <= width or "/" not in text:
        return text
    a, _, b = text.partition("/")
    return f"{a}/\n{b}"


def _suite_ratio(rows: pd.DataFrame, base: pd.DataFrame, metric: str) -> float:
    """metric over ``rows`` / metric over the matched ``base`` rows, each a ratio estimator
    (total / total, metrics.stats.RATIOS) over those rows."""
    num, den = RATIOS[metric]
    rb = ratio_of_totals(totals(base, num), totals(base, den))
    ra = ratio_of_totals(totals(rows, num), totals(rows, den))
    return ra / rb if rb > 0 and len(rows) else float("nan")


def bar_value_label(v: float) -> str:
    """A ratio's label: three significant digits ("1.02", "0.873", "12.3"), never "1" for 1.02."""
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def ratio_table(df: pd.DataFrame, *, by: str, baseline: str, group: str, match: Sequence[str],
                metrics: Sequence[str], bars: Sequence[str] | None = None) -> pd.DataFrame:
    """Long table (group, bar, metric, ratio): per (group, bar), the ratio estimator of ``metric``
    over the group's rows (total / total, the definition of summary.json and the report) divided
    by the baseline's over the matched rows (same ``match`` values); plus an ``all (total)``
    group over all rows. ``metric`` must be a ratio of totals the table carries."""
    match = [c for c in match if c in df.columns]
    d = ok_rows(df)
    for m in metrics:
        if m not in RATIOS:
            raise InputError(f"--metrics {m}: a bar is a ratio of totals; known rates: {', '.join(RATIOS)}")
        if not has_totals(d, m):
            raise InputError(f"--metrics {m}: the results table has no columns {' and '.join(RATIOS[m])} "
                             f"(the totals its ratio is formed from); rerun the sweep")
    bars = list(bars) if bars is not None else list(dict.fromkeys(d[by]))
    groups = list(dict.fromkeys(d[group])) if group in d.columns else []
    base_rows = d[d[by] == baseline].drop_duplicates(match).set_index(match) if match else d[d[by] == baseline]
    rows = []
    for m in metrics:
        for b in bars:
            sel = d[d[by] == b]
            if match:
                sel = sel[sel.set_index(match).index.isin(base_rows.index)]
                base = base_rows.loc[sel.set_index(match).index].reset_index()
            else:
                base = base_rows
            for g in groups:
                mask = (sel[group] == g).to_numpy()
                rows.append({"group": g, "bar": b, "metric": m, "ratio": _suite_ratio(sel[mask], base[mask], m),
                             "n": int(mask.sum())})
            rows.append({"group": MEAN_GROUP, "bar": b, "metric": m, "ratio": _suite_ratio(sel, base, m),
                         "n": int(len(sel))})
    return pd.DataFrame(rows)


def bar_intervals(windows: pd.DataFrame, tab: pd.DataFrame, *, by: str, baseline: str, group: str,
                  match: Sequence[str]) -> pd.DataFrame:
    """``tab`` (:func:`ratio_table`) with each bar's ratio and 95% interval recomputed from the
    window samples (metrics.windows.paired_ratio): the bar over the baseline on the same windows,
    seeds averaged within a window, a paired bootstrap over whole windows; a bar that summarises
    several configurations (model pairs, algorithms: the ``match`` columns other than seed)
    resamples within each, never across. Columns ``ci_low``/``ci_high`` (NaN: fewer windows
    than the bootstrap's minimum, or the baseline itself) and ``windows``."""
    from ..metrics.windows import paired_ratio
    w = windows
    if by != "variant":
        w = w.drop(columns=["variant"], errors="ignore").rename(columns={by: "variant"})
    w = w.assign(variant=w["variant"].astype(str))
    strata = [c for c in dict.fromkeys([*match, group]) if c != "seed" and c in w.columns]
    out = tab.copy()
    out["ci_low"], out["ci_high"], out["windows"] = np.nan, np.nan, 0
    for i, r in out.iterrows():
        if str(r["bar"]) == str(baseline):
            continue
        where = {} if r["group"] == MEAN_GROUP else {group: r["group"]}
        m, ci, n, _k = paired_ratio(w, str(r["bar"]), str(baseline), r["metric"], where, strata_keys=strata)
        if n:
            out.loc[i, ["ratio", "windows"]] = [m, n]
        if ci:
            out.loc[i, ["ci_low", "ci_high"]] = ci
    return out


def plot_grouped_bars(ax, table: pd.DataFrame, *, bars: Sequence[str], groups: Sequence[str],
                      bar_labels: Mapping[str, str] | None = None, reference: Mapping[str, float] | None = None,
                      reference_group: str = MEAN_GROUP, ylabel: str = "", baseline_line: float | None = 1.0,
                      annotate: bool = True, unlabelled: Sequence = ()) -> None:
    """Grouped bars from a long (group, bar, ratio) table on ``ax``; optional reference markers
    (e.g. the paper's reported values) over ``reference_group``. Value labels sit 2 points above
    the bar's interval (clear of the whisker's cap); ``unlabelled`` bars (the baseline: 1 by
    definition) get none."""
    bar_labels = dict(bar_labels or {})
    n = len(bars)
    width = 0.8 / max(n, 1)
    x = np.arange(len(groups))
    tops: list[float] = []
    for i, b in enumerate(bars):
        vals = []
        for g in groups:
            v = table.loc[(table["group"] == g) & (table["bar"] == b), "ratio"]
            vals.append(float(v.iloc[0]) if len(v) else np.nan)
        lo, hi = _bounds(table, b, groups)
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, vals, width * 0.95, label=bar_labels.get(b, b), color=color(i), hatch=HATCHES[i % len(HATCHES)],
               edgecolor="white" if not HATCHES[i % len(HATCHES)] else "#333333", linewidth=0.4)
        vals = np.asarray(vals, dtype=float)
        has = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(vals)
        if has.any():
            ax.errorbar(pos[has], vals[has], yerr=[np.clip(vals - lo, 0, None)[has], np.clip(hi - vals, 0, None)[has]],
                        fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5, zorder=4)
        tops.extend(np.where(has, hi, vals)[np.isfinite(vals)])
        if annotate and n <= 8 and b not in set(unlabelled):
            for p, v, t in zip(pos, vals, np.where(has, hi, vals)):
                if np.isfinite(v):    # above the interval's top, not inside the error bar
                    ax.annotate(bar_value_label(v), (p, t), xytext=(0, 2), textcoords="offset points",
                                ha="center", va="bottom", fontsize=6, rotation=90 if n > 4 else 0)
        if reference and b in reference and reference_group in groups:
            gi = list(groups).index(reference_group)
            ax.plot([pos[gi]], [reference[b]], marker="D", color="black", markersize=4, linestyle="none",
                    label="paper (reported)" if i == next(j for j, bb in enumerate(bars) if bb in reference) else None,
                    zorder=5)
    if baseline_line is not None:
        ax.axhline(baseline_line, color="#555555", linewidth=0.8, linestyle="--", zorder=0)
    ax.set_xticks(x)
    ax.set_xticklabels([wrap_label(g) for g in groups])
    ax.set_ylabel(ylabel)
    # headroom for the value labels over the tallest interval (they stayed inside the axes)
    top = max([t for t in tops if np.isfinite(t)] + [baseline_line or 0.0, 0.0])
    ax.set_ylim(0, top * (1.28 if annotate and n > 4 else 1.15) if top > 0 else None)


def _bounds(table: pd.DataFrame, bar: str, groups: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The 95% interval of ``bar`` in each group (NaN where the table has none)."""
    lo, hi = [], []
    for g in groups:
        r = table[(table["group"] == g) & (table["bar"] == bar)]
        ok = len(r) and "ci_low" in r.columns
        lo.append(float(r["ci_low"].iloc[0]) if ok else np.nan)
        hi.append(float(r["ci_high"].iloc[0]) if ok else np.nan)
    return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)


def check_bars_input(df: pd.DataFrame, *, by: str, baseline: str, bars: Sequence[str] | None, group: str,
                     metrics: Sequence[str]) -> None:
    """Refuse input that would give an empty or misleading bar chart."""
    from ..metrics.tables import ok_rows
    for flag, c in (("--by", by), ("--group", group), *(("--metrics", m) for m in metrics)):
        if c not in df.columns:
            raise InputError(f"{flag} {c}: no column '{c}' in the results table")
    d = ok_rows(df)
    if d.empty:
        raise InputError("the results table has no finished (status ok) points to plot")
    resolve_levels(d, by, [baseline], "--baseline")
    resolve_levels(d, by, list(bars or []), "--bars")


def _spellings(v) -> set[str]:
    """The ways a user may write the table value ``v`` on the command line: 16 for 16.0, 1e3 too."""
    out = {str(v)}
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v):
        out |= {repr(float(v)), f"{float(v):g}"}
        if float(v).is_integer():
            out.add(str(int(v)))
    return out


def resolve_levels(d: pd.DataFrame, by: str, wanted: Sequence, flag: str) -> list:
    """``wanted`` (command-line strings, or table values) as the values of column ``by`` they
    name: a numeric column holds floats (16.0) that "--baseline 16" names. A value no finished
    row has is an InputError naming ``flag`` and the column's values."""
    values = list(dict.fromkeys(d[by]))
    out = []
    for w in wanted:
        hit = [v for v in values if v == w or str(w) in _spellings(v)
               or (not isinstance(w, str) and str(v) in _spellings(w))]
        if not hit:
            raise InputError(f"{flag} {w}: no finished point has {by} == {w} "
                             f"(values: {', '.join(map(str, values))})")
        out.append(hit[0])
    return out


def normalised_bars(df: pd.DataFrame, out: str | Path, *, by: str = "variant", baseline: str = "gpu_only",
                    bars: Sequence[str] | None = None, bar_labels: Mapping[str, str] | None = None,
                    group: str = "model_pair", match: Sequence[str] = ("model_pair", "run.policy", "seed"),
                    metrics: Mapping[str, str] | None = None, paper: Mapping[str, Mapping[str, float]] | None = None,
                    title: str | None = None, baseline_label: str | None = None,
                    windows: pd.DataFrame | None = None) -> list[Path]:
    """One panel per metric: ratio (of totals) vs ``baseline`` per ``group`` (model pair) and
    overall, bars = values of ``by``. ``paper``: metric -> {bar: reported ratio} markers.
    ``windows``: the points' window samples (metrics.windows.window_table): each bar then carries
    its 95% interval (:func:`bar_intervals`); without them, or with one window, the figure says
    that a bar has no interval. Writes ``out``.pdf and ``out``.png; returns their paths."""
    import matplotlib.pyplot as plt
    apply_style()
    metrics = dict(metrics or DEFAULT_METRICS)
    check_bars_input(df, by=by, baseline=baseline, bars=bars, group=group, metrics=list(metrics))
    # the table's own values (a numeric --by column holds 16.0 where the command line says "16")
    d_ok = ok_rows(df)
    baseline = resolve_levels(d_ok, by, [baseline], "--baseline")[0]
    bars = resolve_levels(d_ok, by, list(bars), "--bars") if bars is not None else None
    tab = ratio_table(df, by=by, baseline=baseline, group=group, match=match, metrics=list(metrics), bars=bars)
    bars = list(bars) if bars is not None else list(dict.fromkeys(tab["bar"]))
    others = tab[tab["bar"].astype(str) != str(baseline)] if len(bars) > 1 else tab
    if not others["ratio"].notna().any():
        raise InputError(f"no finished row could be paired with a '{baseline}' row on {', '.join(match)}: "
                         "nothing to plot (check --match)")
    if windows is not None and len(windows):
        tab = bar_intervals(windows, tab, by=by, baseline=baseline, group=group, match=match)
    groups = [g for g in dict.fromkeys(tab["group"]) if g != MEAN_GROUP] + [MEAN_GROUP]
    fig, axes = plt.subplots(len(metrics), 1, figsize=(max(6.5, 1.1 * len(groups) * max(1, len(bars)) / 3), 2.6 * len(metrics)),
                             squeeze=False)
    from .sweep_plots import level_label, words
    bar_labels = {b: (bar_labels or {}).get(b) or level_label(b) for b in bars}   # "GPU only", not gpu_only
    base_name = baseline_label or bar_labels.get(baseline) or words(baseline)
    for ax, (m, label) in zip(axes[:, 0], metrics.items()):
        plot_grouped_bars(ax, tab[tab["metric"] == m], bars=bars, groups=groups, bar_labels=bar_labels,
                          reference=(paper or {}).get(m), ylabel=f"{label}\n(x {base_name})", unlabelled=[baseline])
    handles, labels = axes[0, 0].get_legend_handles_labels()
    order = [i for i, lab in enumerate(labels) if lab != "paper (reported)"] + \
            [i for i, lab in enumerate(labels) if lab == "paper (reported)"]
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    # the legend goes below the panels, in space kept free for it: above them it covered the
    # value labels of the tallest bars
    ncol = min(len(labels), 4)
    note_in = 0.14                                         # the line under the legend saying what bars are
    legend_in = 0.25 * -(-len(labels) // ncol) + 0.15 + note_in
    fig.set_figheight(fig.get_figheight() + legend_in)     # room for the legend, not taken from the panels
    legend_frac = legend_in / fig.get_figheight()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, note_in / fig.get_figheight()),
               frameon=False)
    if title:
        fig.suptitle(title)
    fig.text(0.01, 0.005, interval_note(tab, baseline), fontsize=6, ha="left", va="bottom", color="#444444")
    fig.tight_layout(rect=(0, legend_frac, 1, 1))
    return save_figure(fig, out)


def interval_note(tab: pd.DataFrame, baseline: str) -> str:
    """What the error bars are, or why a bar has none (one sample is not an interval)."""
    others = tab[tab["bar"].astype(str) != str(baseline)]
    if "ci_low" not in tab.columns:
        return "no error bars: window samples not given (one value per bar)"
    n_ci = int(others["ci_low"].notna().sum())
    text = "error bars: 95% CI, paired bootstrap over whole trace windows (within each configuration)"
    if n_ci < len(others):
        from ..metrics.stats import MIN_BOOTSTRAP_WINDOWS
        text += (f"; {len(others) - n_ci} of {len(others)} bars without: fewer than {MIN_BOOTSTRAP_WINDOWS} "
                 f"windows (n<{MIN_BOOTSTRAP_WINDOWS})")
    return text
