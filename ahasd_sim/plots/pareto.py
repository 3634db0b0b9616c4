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


def pareto_2d(df: pd.DataFrame, x: str, y: str, x_dir: str, y_dir: str, out: str | Path, *,
              front: np.ndarray | None = None, color_by: str | None = None, ref_x: float | None = None,
              ref_y: float | None = None, xlabel: str | None = None, ylabel: str | None = None,
              title: str | None = None) -> list[Path]:
    """Scatter of all evaluated points (the dominated cloud, faint) and the 2-D front of
    ``x``/``y`` (marked and joined by a staircase). ``front``: the study's front (all
    objectives), drawn as hollow rings. ``ref_x``/``ref_y``: reference lines (e.g. ratio 1),
    with the quadrant where both are better shaded."""
    from ..metrics.pareto import pareto_mask
    apply_style()
    fig, ax = plt.subplots(figsize=(5.2, 4.0))
    d = df.dropna(subset=[x, y])
    xs, ys = d[x].to_numpy(float), d[y].to_numpy(float)
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
        # front points keep their group's colour (black rims mark them), so the front shows
        # which model pair (or other colour_by group) reaches it
        fc = list(point_colors[m2]) if point_colors is not None else "black"
        ax.scatter(px, py, s=30, c=fc, edgecolors="black", linewidths=0.9, zorder=4,
                   label=f"2-D front of {x} / {y} ({int(m2.sum())})")
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
    ax.set_xlabel(xlabel or x)
    ax.set_ylabel(ylabel or y)
    ax.grid(True, axis="both", alpha=0.3)
    if title:
        ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7)
    return save_figure(fig, out)


def parallel_coordinates(df: pd.DataFrame, front: pd.DataFrame, axes: Sequence[str], out: str | Path, *,
                         categories: dict[str, list] | None = None, log_axes: set[str] | None = None,
                         limits: dict[str, tuple] | None = None) -> list[Path]:
    """One vertical axis per parameter and objective, each scaled to [0, 1] over the evaluated
    points (categorical axes: one tick per choice); the evaluated points faint, the front bold."""
    apply_style()
    categories = categories or {}
    log_axes = log_axes or set()
    limits = limits or {}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(axes)), 3.8))

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
        ticks = [(0.0, f"{lo:.3g}"), (1.0, f"{hi:.3g}")]
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
            ax.text(i + 0.04, pos, lab, fontsize=6, va="center", ha="left", color="0.15", zorder=6,
                    bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "alpha": 0.75, "linewidth": 0})
    ax.set_xticks(xs)
    ax.set_xticklabels([a.replace(",", ",\n") for a in axes], rotation=25, ha="right", fontsize=7)
    ax.set_yticks([])
    ax.set_ylim(-0.05, 1.05)
    ax.grid(False)
    ax.spines["left"].set_visible(False)
    ax.set_title(f"Pareto front ({len(front)} trials, colours) over {len(df)} evaluated points (grey)")
    return save_figure(fig, out)


def tornado(oat: pd.DataFrame, objective: str, base_value: float, out: str | Path, *, title: str | None = None,
            ref: float | None = None) -> list[Path]:
    """Tornado chart of one objective. ``oat``: rows with ``parameter``, ``low_label``,
    ``high_label``, ``low``, ``high``, ``low_ci95``, ``high_ci95`` (objective values at the two
    ends); sorted by the span, widest on top; error bars are the 95% CIs over windows."""
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
            ci = r.get(f"{end}_ci95", np.nan)
            if np.isfinite(ci):
                ax.errorbar(v, i, xerr=ci, color="black", capsize=2, linewidth=0.8)
            left = v <= base_value if end == "low" else v < base_value
            ax.text(v, i + 0.33, str(r[f"{end}_label"]), fontsize=6, va="bottom",
                    ha="right" if left else "left")
    ax.axvline(base_value, color="black", linewidth=0.8)
    if ref is not None:
        ax.axvline(ref, color="0.4", linewidth=0.8, linestyle="--")
    ax.set_yticks(ys)
    ax.set_yticklabels(d["parameter"].str.replace(",", ",\n"), fontsize=7)
    ax.set_xlabel(f"{objective} (base point {base_value:.4g})")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title or f"One-at-a-time sensitivity of {objective}")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / max(1, len(d))), ncol=1, fontsize=7)
    return save_figure(fig, out)


def sobol_bars(sob: pd.DataFrame, objective: str, out: str | Path, *, title: str | None = None) -> list[Path]:
    """First-order (S1) and total (ST) Sobol indices per parameter with their bootstrap 95% CIs."""
    apply_style()
    d = sob.sort_values("ST", ascending=False)
    fig, ax = plt.subplots(figsize=(max(4.5, 0.8 * len(d) + 1.5), 3.2))
    xs = np.arange(len(d))
    w = 0.38
    ax.bar(xs - w / 2, d["S1"], w, yerr=d["S1_conf"], color=color(0), capsize=2, label="first order S1")
    ax.bar(xs + w / 2, d["ST"], w, yerr=d["ST_conf"], color=color(1), capsize=2, hatch="//", label="total ST")
    ax.set_xticks(xs)
    ax.set_xticklabels([p.replace(",", ",\n") for p in d["parameter"]], rotation=25, ha="right", fontsize=7)
    ax.set_ylabel("Sobol index")
    ax.set_ylim(bottom=min(0.0, float(np.nanmin((d["S1"] - d["S1_conf"]).to_numpy())) if len(d) else 0.0))
    ax.set_title(title or f"Sobol indices of {objective}")
    ax.legend(fontsize=7)
    return save_figure(fig, out)


def _finite(v) -> bool:
    return v is not None and isinstance(v, (int, float)) and math.isfinite(v)
