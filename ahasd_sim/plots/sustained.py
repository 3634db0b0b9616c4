"""Runs of a duration (``compare --duration-min``'s series.csv, scripts/sustained_study.py):
decode rate, decoder power and temperatures against time, one line per decoder (the mean over
its repetitions, shaded between the slowest and the fastest repetition)."""
from __future__ import annotations

from pathlib import Path

from .style import apply_style, colors_for, plt, save_figure


def plot_sustained(series, out: str | Path, title: str = "", thresholds=()) -> list[Path]:
    """Three panels over time: tok/s, decoder W, skin (solid) and package (dashed) C.
    ``series`` has columns mode, repetition, time_s, tok_s, power_w, skin_c, package_c."""
    apply_style()
    modes = list(dict.fromkeys(series["mode"]))
    col = colors_for(modes)
    fig, axes = plt.subplots(3, 1, figsize=(6.5, 7.0), sharex=True)
    for m in modes:
        g = series[series["mode"] == m].groupby("time_s")
        t = g.size().index.to_numpy() / 60.0
        for ax, key in ((axes[0], "tok_s"), (axes[1], "power_w")):
            ax.plot(t, g[key].mean().to_numpy(), color=col[m], label=m, lw=1.2)
            ax.fill_between(t, g[key].min().to_numpy(), g[key].max().to_numpy(), color=col[m], alpha=0.15, lw=0)
        axes[2].plot(t, g["skin_c"].mean().to_numpy(), color=col[m], lw=1.2, label=f"{m} skin")
        axes[2].plot(t, g["package_c"].mean().to_numpy(), color=col[m], lw=1.0, ls="--", label=f"{m} package")
    for th in thresholds:
        axes[2].axhline(th, color="grey", lw=0.6, ls=":")
    axes[0].set_ylabel("decode tok/s")
    axes[1].set_ylabel("decoder power (W)")
    axes[2].set_ylabel("temperature (C)")
    axes[2].set_xlabel("time (min)")
    axes[0].legend(loc="upper right", ncol=2)
    axes[2].legend(loc="lower right", ncol=2, fontsize=6)
    if title:
        axes[0].set_title(title)
    fig.tight_layout()
    return save_figure(fig, out, formats=("png",))
