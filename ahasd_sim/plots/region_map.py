"""Region maps of a speculation map (``dse/speculation_map.py``): which decoder is best in each
cell of a plane, with the best speculative decoder's paired ratio to plain decoding on PIM."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba

from .style import apply_style, color, plt, save_figure


#: how a null axis value (the platform's own derived default) is shown
DEFAULT_LABEL = "default"


def _levels(series: pd.Series) -> list:
    seen = []
    for v in series:
        if v not in seen:
            seen.append(v)
    return seen


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def region_map(cells: pd.DataFrame, axis_cols: Sequence[str], decoders: Sequence[str], labels: dict[str, str],
               out: str | Path, title: str = "", axis_labels: dict[str, str] | None = None) -> list[Path]:
    """A grid over the plane's first two axes (one row when the plane has one): each cell is
    coloured by its best decoder (by throughput) and lists the best speculative decoder's ratio
    to the reference with its 95% interval; a cell where that interval lies above 1 is outlined.
    Further axes become one panel per level."""
    apply_style()
    cols = list(axis_cols)
    if not cols:
        raise ValueError("a region map needs at least one axis")
    # a null axis value (the platform's derived default) reads back as NaN, which equals nothing
    cells = cells.copy()
    for c in cols:
        cells[c] = [DEFAULT_LABEL if isinstance(v, float) and math.isnan(v) else v for v in cells[c]]
    x = cols[-1]
    y = cols[-2] if len(cols) > 1 else None
    rest = cols[:-2]
    panels = [((), cells)] if not rest else list(cells.groupby(rest, sort=False))
    xs = _levels(cells[x])
    ys = _levels(cells[y]) if y else [None]
    colours = {d: color(i) for i, d in enumerate(decoders)}
    width = min(7.0, 1.2 + 1.25 * len(xs))
    fig, axes = plt.subplots(len(panels), 1, figsize=(width, 0.5 + (0.75 * len(ys) + 0.6) * len(panels)),
                             squeeze=False)
    for ax, (pkey, sub) in zip(axes[:, 0], panels):
        ax.set_xlim(-0.5, len(xs) - 0.5)
        ax.set_ylim(-0.5, len(ys) - 0.5)
        ax.grid(False)
        for _, r in sub.iterrows():
            i = xs.index(r[x])
            j = ys.index(r[y]) if y else 0
            best = r.get("best_decoder") or ""
            face = colours.get(best, "#dddddd")
            wins = bool(r.get("speculation_wins"))
            ax.add_patch(plt.Rectangle((i - 0.48, j - 0.45), 0.96, 0.9, facecolor=to_rgba(face, 0.35),
                                       edgecolor="black" if wins else "none", linewidth=1.6 if wins else 0))
            ratio = r.get("spec_vs_ref")
            lo, hi = r.get("spec_vs_ref_ci95_low"), r.get("spec_vs_ref_ci95_high")
            line2 = ""
            if ratio is not None and not (isinstance(ratio, float) and math.isnan(ratio)):
                line2 = f"spec/AR {ratio:.2f}"
                if lo is not None and not math.isnan(lo):
                    line2 += f"\n[{lo:.2f}, {hi:.2f}]"
            ax.text(i, j, f"{labels.get(best, best) or 'none fits'}\n{line2}".strip(), ha="center", va="center",
                    fontsize=7)
        ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs])
        ax.set_xlabel((axis_labels or {}).get(x, x))
        if y:
            ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys])
            ax.set_ylabel((axis_labels or {}).get(y, y))
        else:
            ax.set_yticks([])
        head = ", ".join(f"{c}={_fmt(v)}" for c, v in zip(rest, pkey if isinstance(pkey, tuple) else (pkey,)))
        ax.set_title(" ".join(s for s in (title, head) if s), fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, facecolor=to_rgba(colours[d], 0.35)) for d in decoders]
    handles.append(plt.Rectangle((0, 0), 1, 1, facecolor="white", edgecolor="black", linewidth=1.6))
    names = [labels.get(d, d) for d in decoders] + ["speculation wins\n(interval above 1)"]
    fig.tight_layout()
    fig.legend(handles, names, loc="center left", bbox_to_anchor=(1.0, 0.5), title="best decoder", title_fontsize=8)
    return save_figure(fig, out)


def pareto_plot(front: pd.DataFrame, decoders: Sequence[str], labels: dict[str, str], out: str | Path) -> list[Path]:
    """Throughput vs tokens/J of the interval-level Pareto front (PIM logic area is the third
    objective: the marker size grows with it), 95% intervals as error bars."""
    apply_style()
    fig, ax = plt.subplots(figsize=(3.5, 2.8))
    if len(front):
        area = front["pim_logic_area_mm2"].to_numpy(dtype=float)
        amin, amax = float(np.nanmin(area)), float(np.nanmax(area))
        for i, d in enumerate(decoders):
            sub = front[front["decoder"] == d]
            if sub.empty:
                continue
            t = sub["throughput_tok_s"].to_numpy(dtype=float)
            e = sub["tokens_per_j"].to_numpy(dtype=float)
            xerr = np.abs(np.vstack([t - sub["throughput_tok_s_ci95_low"], sub["throughput_tok_s_ci95_high"] - t]))
            yerr = np.abs(np.vstack([e - sub["tokens_per_j_ci95_low"], sub["tokens_per_j_ci95_high"] - e]))
            ax.errorbar(t, e, xerr=xerr, yerr=yerr, fmt="none", ecolor=color(decoders.index(d)), elinewidth=0.8)
            sizes = 15 + 45 * ((sub["pim_logic_area_mm2"].to_numpy(dtype=float) - amin) / (amax - amin)
                               if amax > amin else 0.0)
            ax.scatter(t, e, s=sizes, color=color(decoders.index(d)), label=labels.get(d, d), zorder=3)
    ax.set_xlabel("throughput (tok/s)")
    ax.set_ylabel("tokens per joule")
    ax.grid(True, axis="both", alpha=0.3)
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    return save_figure(fig, out)
