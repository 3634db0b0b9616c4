"""Design-space figures: 2-D Pareto fronts over the dominated cloud, parallel coordinates of
a front, tornado charts and Sobol-index bars (read study / sensitivity tables only)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from .style import apply_style, color, plt, save_figure

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]


def interval_bounds(d: pd.DataFrame, name: str, value: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) arrays of the 95% interval of column ``name``: ``<name>_ci95_low`` /
    ``<name>_ci95_high``, or a table written before intervals were [low, high] (``<name>_ci95``
    half-widths around ``value``, default ``name``); NaN where there is none."""
    if f"{name}_ci95_low" in d.columns:
        return d[f"{name}_ci95_low"].to_numpy(float), d[f"{name}_ci95_high"].to_numpy(float)
    if f"{name}_ci95" in d.columns:
        v, h = d[value or name].to_numpy(float), d[f"{name}_ci95"].to_numpy(float)
        return v - h, v + h
    return np.full(len(d), np.nan), np.full(len(d), np.nan)


def error_extent(v, lo, hi) -> np.ndarray:
    """matplotlib's asymmetric error extents (2, n) of intervals [lo, hi] around values ``v``
    (0 where there is no interval)."""
    v, lo, hi = (np.atleast_1d(np.asarray(a, dtype=float)) for a in (v, lo, hi))
    return np.vstack([np.nan_to_num(np.maximum(v - lo, 0.0)), np.nan_to_num(np.maximum(hi - v, 0.0))])


def objective_label(metric: str, run: str | None = None, over: str | None = None, direction: str | None = None) -> str:
    """A study objective as an axis label in words with units: ``throughput_tok_s`` of run
    ``ahasd`` -> "Throughput (tokens/s), AHASD"; a ratio (``over``) -> "Throughput, AHASD /
    GPU only (ratio)"; the direction as "higher/lower is better"."""
    from .sweep_plots import metric_label, words
    lab = metric_label(metric)
    who = words(run) if run and run != "main" else ""
    if over:
        text = f"{lab.split(' (')[0]}, {who or 'main'} / {words(over)} (ratio)"
    else:
        text = lab + (f", {who}" if who else "")
    if direction:
        text += "\n(" + ("higher" if direction == "maximize" else "lower") + " is better)"
    return text


def parameter_label(name: str) -> str:
    """A design parameter (a config key, or comma-joined keys set together) in words with units."""
    from .sweep_plots import metric_label
    return ",\n".join(metric_label(k.strip()) for k in str(name).split(","))


def pareto_2d(df: pd.DataFrame, x: str, y: str, x_dir: str, y_dir: str, out: str | Path, *,
              front: np.ndarray | None = None, color_by: str | None = None, ref_x: float | None = None,
              ref_y: float | None = None, xlabel: str | None = None, ylabel: str | None = None,
              title: str | None = None) -> list[Path]:
    """Scatter of all evaluated points (the dominated cloud, faint, coloured by ``color_by``) and
    the 2-D front of ``x``/``y``: a black staircase through markers that keep their group's
    colour (black rims), so the front shows which model pair reaches it. With ``<x>_ci95_low`` /
    ``_high`` columns (95% intervals over windows, dse trials.csv) the front's points carry
    error bars, and the points on the 2-D front only at the interval level
    (dse.pareto.ci_pareto_mask: not beaten beyond both intervals) are drawn as dashed rings;
    without them the figure says there is no interval. ``front``: the study's front (all
    objectives), drawn as hollow rings. ``ref_x``/``ref_y``: reference lines (e.g. ratio 1),
    with the quadrant where both are better shaded. Axis labels default to words with units
    (sweep_plots.metric_label)."""
    from matplotlib.lines import Line2D

    from ..metrics.pareto import ci_pareto_mask, pareto_mask
    from .sweep_plots import metric_label, words
    apply_style()
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    d = df.dropna(subset=[x, y])
    xs, ys = d[x].to_numpy(float), d[y].to_numpy(float)
    lx, hx = interval_bounds(d, x)
    ly, hy = interval_bounds(d, y)
    has_ci = np.isfinite(lx) | np.isfinite(ly)
    point_colors = None
    if color_by and color_by in d.columns:
        groups = list(dict.fromkeys(d[color_by].astype(str)))
        gidx = {g: gi for gi, g in enumerate(groups)}
        point_colors = np.array([color(gidx[g]) for g in d[color_by].astype(str)], dtype=object)
        for gi, g in enumerate(groups):
            m = (d[color_by].astype(str) == g).to_numpy()
            ax.scatter(xs[m], ys[m], s=14, alpha=0.45, color=color(gi), marker=MARKERS[gi % len(MARKERS)],
                       linewidths=0, label=f"{g}")
    else:
        ax.scatter(xs, ys, s=12, alpha=0.35, color="0.45", linewidths=0, label="evaluated (dominated cloud)")
    m2 = pareto_mask(np.c_[xs, ys], [x_dir, y_dir])
    if m2.any():
        px, py = xs[m2], ys[m2]
        order = np.argsort(px)
        ax.step(px[order], py[order], where="post" if (x_dir == "maximize") != (y_dir == "maximize") else "pre",
                color="black", linewidth=1.0, zorder=3)
        fc = list(point_colors[m2]) if point_colors is not None else [color(0)] * int(m2.sum())
        front_label = f"2-D front ({int(m2.sum())})" + (f", colour = {words(color_by).lower()}" if point_colors is not None else "")
        ax.scatter(px, py, s=34, c=fc, edgecolors="black", linewidths=0.9, zorder=4, label=front_label)
        # its legend entry: a neutral ringed marker on the staircase (the scatter's handle shows
        # only the first point's colour, as if the front were one pair's)
        proxy = {front_label: Line2D([], [], color="black", linewidth=1.0, marker="o", markersize=5,
                                     markerfacecolor="white", markeredgecolor="black", label=front_label)}
    else:
        proxy = {}
    if has_ci.any():
        ci_front = ci_pareto_mask(np.c_[xs, ys], np.stack([np.c_[lx, ly], np.c_[hx, hy]], axis=-1), [x_dir, y_dir])
        e = m2 | ci_front
        ax.errorbar(xs[e], ys[e], xerr=error_extent(xs[e], lx[e], hx[e]), yerr=error_extent(ys[e], ly[e], hy[e]),
                    fmt="none",
                    ecolor="0.25", elinewidth=0.7, capsize=1.5, zorder=3.5, label="95% CI over windows")
        extra = ci_front & ~m2
        if extra.any():
            ax.scatter(xs[extra], ys[extra], s=50, facecolors="none", edgecolors="black", linewidths=0.8,
                       linestyles="--", zorder=4, label=f"on the front within the CIs ({int(extra.sum())} more)")
    if front is not None:
        f = np.asarray(front, dtype=bool)[d.index.map(lambda i: df.index.get_loc(i))] if len(d) != len(df) \
            else np.asarray(front, dtype=bool)
        if f.any() and not np.array_equal(f, m2):
            ax.scatter(xs[f], ys[f], s=60, facecolors="none", edgecolors=color(3), linewidths=1.0, zorder=5,
                       label=f"front over all objectives ({int(f.sum())})")
    if ref_x is not None:
        ax.axvline(ref_x, color="0.3", linewidth=0.8, linestyle="--")
    if ref_y is not None:
        ax.axhline(ref_y, color="0.3", linewidth=0.8, linestyle="--")
    if ref_x is not None and ref_y is not None:
        xl, yl = ax.get_xlim(), ax.get_ylim()
        x0, x1 = (ref_x, xl[1]) if x_dir == "maximize" else (xl[0], ref_x)
        y0, y1 = (ref_y, yl[1]) if y_dir == "maximize" else (yl[0], ref_y)
        if x1 > x0 and y1 > y0:
            ax.fill_between([x0, x1], y0, y1, color=color(2), alpha=0.08, linewidth=0, zorder=0,
                            label="better on both")
        ax.set_xlim(xl)
        ax.set_ylim(yl)
    ax.set_xlabel(xlabel or metric_label(x))
    ax.set_ylabel(ylabel or metric_label(y))
    ax.grid(True, axis="both", alpha=0.3)
    if title:
        ax.set_title(title)
    handles, labels = ax.get_legend_handles_labels()
    handles = [proxy.get(lab, h) for h, lab in zip(handles, labels)]
    note = "error bars: 95% CI over whole trace windows" if has_ci.any() else \
        "no error bars: the trials have no window samples (one value each)"
    _legend_below(fig, handles, labels, note)
    return save_figure(fig, out)


def _legend_below(fig, handles, labels, note: str | None = None, ncol: int = 2) -> None:
    """The legend (and a note on the intervals) in space kept free under the axes: a legend
    inside them covered points, one hung below them ran off the figure."""
    rows = -(-len(labels) // ncol) if labels else 0
    note_in = 0.14 if note else 0.0
    legend_in = 0.2 * rows + 0.1 + note_in
    h = fig.get_figheight() + legend_in
    fig.set_figheight(h)
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=ncol, bbox_to_anchor=(0.5, note_in / h),
                   frameon=False, fontsize=7)
    if note:
        fig.text(0.01, 0.005, note, fontsize=6, ha="left", va="bottom", color="#444444")
    fig.tight_layout(rect=(0, legend_in / h, 1, 1))


def parallel_coordinates(df: pd.DataFrame, front: pd.DataFrame, axes: Sequence[str], out: str | Path, *,
                         categories: dict[str, list] | None = None, log_axes: set[str] | None = None,
                         limits: dict[str, tuple] | None = None, labels: dict[str, str] | None = None) -> list[Path]:
    """One vertical axis per parameter and objective, each scaled to [0, 1] over the evaluated
    points (categorical axes: one tick per choice); the evaluated points faint, the front bold.
    Value labels are plain numbers (1020, not 1.02e+03), long choices ("palm-like-8b/palm-like-30b")
    break after their "/" so that they stay clear of the next axis."""
    from .style import plain_number
    apply_style()
    categories = categories or {}
    log_axes = log_axes or set()
    limits = limits or {}
    fig, ax = plt.subplots(figsize=(max(7.0, 0.95 * len(axes)), 3.8))

    def short(lab: str) -> str:
        return lab.replace("/", "/\n", 1) if len(lab) > 10 and "/" in lab else lab

    def scale(col: str, s: pd.Series) -> tuple[np.ndarray, list[tuple[float, str]]]:
        if col in categories:
            labels = [str(c) for c in categories[col]]
            idx = s.astype(str).map({lab: i for i, lab in enumerate(labels)}).to_numpy(float)
            n = max(1, len(labels) - 1)
            return idx / n, [(i / n, lab) for i, lab in enumerate(labels)]
        v = pd.to_numeric(s, errors="coerce").to_numpy(float)
        allv = pd.to_numeric(df[col], errors="coerce").to_numpy(float)
        lo, hi = limits.get(col, (np.nanmin(allv), np.nanmax(allv)))
        f = (lambda a: np.log(a)) if col in log_axes and lo > 0 else (lambda a: a)
        span = f(hi) - f(lo) if hi != lo else 1.0
        ticks = [(0.0, plain_number(float(f"{lo:.3g}"))), (1.0, plain_number(float(f"{hi:.3g}")))]
        return (f(v) - f(lo)) / span, ticks

    xs = np.arange(len(axes))
    cloud = np.column_stack([scale(a, df[a])[0] for a in axes])
    for row in cloud:
        ax.plot(xs, row, color="0.7", alpha=0.25, linewidth=0.6)
    fr = np.column_stack([scale(a, front[a])[0] for a in axes])
    for i, row in enumerate(fr):
        ax.plot(xs, row, color=color(i), alpha=0.9, linewidth=1.4, marker="o", markersize=3)
    for i, a in enumerate(axes):
        ax.axvline(i, color="0.2", linewidth=0.6)
        for pos, lab in scale(a, df[a])[1]:
            ax.text(i + 0.04, pos, short(lab), fontsize=6, va="center", ha="left", color="0.15", zorder=6,
                    linespacing=0.9,
                    bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0})
    ax.set_xticks(xs)
    ax.set_xticklabels([(labels or {}).get(a) or parameter_label(a) for a in axes], rotation=25, ha="right",
                       fontsize=7)
    ax.set_yticks([])
    ax.set_ylim(-0.05, 1.05)
    ax.grid(False)
    ax.spines["left"].set_visible(False)
    ax.set_title(f"Pareto front ({len(front)} trials, colours) over {len(df)} evaluated points (grey)")
    return save_figure(fig, out)


def tornado(oat: pd.DataFrame, objective: str, base_value: float, out: str | Path, *, title: str | None = None,
            ref: float | None = None, label: str | None = None) -> list[Path]:
    """Tornado chart of one objective. ``oat``: rows with ``parameter``, ``low_label``,
    ``high_label``, ``low``, ``high`` (objective values at the two ends) and ``low_diff_ci95_low``
    / ``_high`` (and ``high_...``: the 95% intervals of the paired differences from the base
    point); sorted by the span, widest on top; error bars are those intervals, at base + difference."""
    apply_style()
    d = oat.copy()
    d["span"] = (d["high"] - d["low"]).abs()
    d = d.sort_values("span", ascending=True)
    fig, ax = plt.subplots(figsize=(6.0, 0.45 * len(d) + 1.2))
    ys = np.arange(len(d))
    for i, (_, r) in enumerate(d.iterrows()):
        for end, c in (("low", color(0)), ("high", color(1))):
            v = r[end]
            if not np.isfinite(v):
                continue
            ax.barh(i, v - base_value, left=base_value, color=c, alpha=0.85, height=0.6,
                    label=("lowest" if end == "low" else "highest") + " value over the range (setting above the bar)"
                    if i == len(d) - 1 else None)
            lo_d, hi_d = r.get(f"{end}_diff_ci95_low", np.nan), r.get(f"{end}_diff_ci95_high", np.nan)
            if np.isfinite(lo_d) and np.isfinite(hi_d):
                ax.errorbar(v, i, xerr=error_extent(v, base_value + lo_d, base_value + hi_d), color="black",
                            capsize=2, linewidth=0.8)
            left = v <= base_value if end == "low" else v < base_value
            ax.text(v, i + 0.33, str(r[f"{end}_label"]), fontsize=6, va="bottom",
                    ha="right" if left else "left")
    ax.axvline(base_value, color="black", linewidth=0.8)
    if ref is not None:
        ax.axvline(ref, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yticks(ys)
    ax.set_yticklabels([parameter_label(p) for p in d["parameter"]], fontsize=7)
    from .sweep_plots import metric_label
    ax.set_xlabel(f"{(label or metric_label(objective)).splitlines()[0]}; base point {base_value:.4g}")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title or f"One-at-a-time sensitivity: {(label or metric_label(objective)).splitlines()[0]}")
    handles, labels = ax.get_legend_handles_labels()
    has_ci = any(np.isfinite(float(v)) for c in ("low_diff_ci95_low", "high_diff_ci95_low") if c in d.columns
                 for v in d[c])
    _legend_below(fig, handles, labels, "error bars: 95% CI over whole trace windows" if has_ci else
                  "no error bars: the points have no window samples (one value each)", ncol=1)
    return save_figure(fig, out)


def sobol_bars(sob: pd.DataFrame, objective: str, out: str | Path, *, title: str | None = None,
               label: str | None = None) -> list[Path]:
    """First-order (S1) and total (ST) Sobol indices per parameter with their bootstrap 95% CIs."""
    apply_style()
    d = sob.sort_values("ST", ascending=False)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.8 * len(d) + 1.5), 3.2))
    xs = np.arange(len(d))
    w = 0.38
    (l1, h1), (lt, ht) = (interval_bounds(d, k) if f"{k}_ci95_low" in d.columns else
                          ((d[k] - d[f"{k}_conf"]).to_numpy(float), (d[k] + d[f"{k}_conf"]).to_numpy(float))
                          for k in ("S1", "ST"))
    ax.bar(xs - w / 2, d["S1"], w, yerr=error_extent(d["S1"], l1, h1), color=color(0), capsize=2,
           label="first order S1")
    ax.bar(xs + w / 2, d["ST"], w, yerr=error_extent(d["ST"], lt, ht), color=color(1), capsize=2, hatch="//",
           label="total ST")
    ax.set_xticks(xs)
    ax.set_xticklabels([parameter_label(p) for p in d["parameter"]], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("Sobol index (share of variance)")
    ax.set_ylim(bottom=min(0.0, float(np.nanmin(np.r_[d["S1"].to_numpy(float), l1])) if len(d) else 0.0))
    from .sweep_plots import metric_label
    ax.set_title(title or f"Sobol indices of {(label or metric_label(objective)).splitlines()[0]}")
    ax.legend(fontsize=7, loc="upper right")
    return save_figure(fig, out)


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
