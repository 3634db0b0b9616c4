"""Draft-length and acceptance distributions from runs' ``events.csv``.

* draft length: ``n_tokens`` of ``batch_pushed`` events (asynchronous modes: one PIM batch
  each); runs without such events (synchronous modes) use ``n_tokens`` of ``verify`` events
  (the draft tokens of each round);
* accepted tokens per verification: ``accepted`` of ``verify`` events.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from .style import apply_style, color, save_figure

MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1))]


def load_events(path: str | Path) -> pd.DataFrame:
    from ..config.errors import InputError
    if not Path(path).exists():
        raise InputError(f"{path}: no such file (a sweep writes a point's events.csv only with "
                         "`sweep --full-points`)")
    try:
        return pd.read_csv(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:   # pandas' parser errors are ValueErrors
        raise InputError(f"{path}: not a readable events.csv ({type(exc).__name__})") from None


def draft_lengths(ev: pd.DataFrame) -> np.ndarray:
    if "event" not in ev.columns or "n_tokens" not in ev.columns:
        return np.zeros(0, dtype=int)
    b = ev.loc[ev["event"] == "batch_pushed", "n_tokens"].dropna()
    if b.empty:
        b = ev.loc[ev["event"] == "verify", "n_tokens"].dropna()
    return b.astype(int).to_numpy()


def accepted_per_verify(ev: pd.DataFrame) -> np.ndarray:
    if "event" not in ev.columns or "accepted" not in ev.columns:
        return np.zeros(0, dtype=int)
    return ev.loc[ev["event"] == "verify", "accepted"].dropna().astype(int).to_numpy()


def _pmf(values: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.arange(0, max_len + 1)
    if values.size == 0:
        return x, np.zeros_like(x, dtype=float)
    counts = np.bincount(np.clip(values, 0, max_len), minlength=max_len + 1)
    return x, counts / counts.sum()


def plot_distributions(runs: Mapping[str, str | Path | pd.DataFrame], out: str | Path, *,
                       title: str | None = None, max_len: int | None = None) -> list[Path]:
    """Two panels: draft length per batch/round, accepted tokens per verification; one line per
    run (label -> events.csv). Legend entries carry the means."""
    import matplotlib.pyplot as plt
    apply_style()
    frames = {lab: (src if isinstance(src, pd.DataFrame) else load_events(src)) for lab, src in runs.items()}
    data = {lab: (draft_lengths(f), accepted_per_verify(f)) for lab, f in frames.items()}
    from ..config.errors import InputError
    for lab, (dl, ac) in data.items():
        if not dl.size and not ac.size:
            raise InputError(f"{lab}: events.csv has no draft batches or verifications to plot")
    top = max([1] + [int(v.max()) for dl, ac in data.values() for v in (dl, ac) if v.size])
    if max_len is not None:
        top = min(top, max_len)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(7.0, 2.9), sharey=False)
    handles = []
    for i, (lab, (dl, ac)) in enumerate(data.items()):
        style = LINESTYLES[i % len(LINESTYLES)]
        for ax, vals, which in ((a1, dl, "draft"), (a2, ac, "acc")):
            x, p = _pmf(vals, top)
            h, = ax.plot(x, p, marker=MARKERS[i % len(MARKERS)], markersize=3.5, linewidth=1.1, color=color(i),
                         linestyle=style, markerfacecolor="none" if i % 2 else color(i),
                         label=f"{lab} (mean draft {dl.mean():.2f}, accepted {ac.mean():.2f})"
                         if dl.size and ac.size else lab)
            if which == "draft":
                handles.append(h)
    a1.set_xlabel("Draft length per batch / round (tokens)")
    a2.set_xlabel("Accepted draft tokens per verification (tokens)")
    from matplotlib.ticker import MaxNLocator
    for ax in (a1, a2):
        ax.set_ylabel("Fraction of batches" if ax is a1 else "Fraction of verifications")
        ax.set_xlim(-0.5, top + 0.5)
        ax.set_ylim(bottom=0)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ncol = 2 if len(handles) > 3 else 1
    fig.legend(handles=handles, loc="upper center", ncol=ncol, fontsize=7,
               bbox_to_anchor=(0.5, 1.0 + 0.045 * ((len(handles) + ncol - 1) // ncol)))
    if title:
        fig.suptitle(title, y=1.02 + 0.045 * ((len(handles) + ncol - 1) // ncol) + 0.05)
    fig.tight_layout()
    return save_figure(fig, out)
