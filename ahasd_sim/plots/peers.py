"""Predicted-vs-reference figures of ``validate --peers``: y = x and the goal's error band."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

PEER_PLOT_STEM = "peers_validation"


def _panel(ax, ref, pred, labels, band: float, title: str, unit: str, log: bool) -> None:
    import numpy as np
    allv = np.concatenate([np.asarray(ref, float), np.asarray(pred, float)])
    lo, hi = float(allv.min()) / 1.3, float(allv.max()) * 1.3
    if not log:
        lo, hi = 0.0, float(allv.max()) * 1.1
    x = np.geomspace(max(lo, 1e-12), hi, 60) if log else np.linspace(lo, hi, 60)
    ax.fill_between(x, x * (1 - band), x * (1 + band), color="0.88", label=f"\u00b1{band * 100:g}%")
    ax.plot(x, x, color="0.3", lw=1, label="y = x")
    from .style import color
    markers = "os^Dv<>PX*"
    for i, (lab, idx) in enumerate(pd.Series(labels).groupby(pd.Series(labels), sort=False).groups.items()):
        # colour-blind palette, and a marker per group so that 8+ groups stay apart
        ax.scatter(np.asarray(ref)[list(idx)], np.asarray(pred)[list(idx)], s=16, color=color(i),
                   marker=markers[(i // 8) % len(markers)], label=lab, alpha=0.85)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"reference ({unit})")
    ax.set_ylabel(f"ours ({unit})")
    ax.set_title(title, fontsize=7)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=6, loc="upper left")


def write_peer_plots(npu: pd.DataFrame, mem: pd.DataFrame, gpu_points: pd.DataFrame, out_dir: Path) -> list[Path]:
    """One figure, four panels: NPU cycles vs SCALE-Sim, LPDDR5 bandwidth and latency vs
    Ramulator 2, GPU step latency out-of-sample (run 2) and H2D copies vs measured."""
    from .style import apply_style, figure_size, plt, save_figure
    apply_style()
    fig, axes = plt.subplots(2, 2, figsize=figure_size("two", aspect=0.95))
    _panel(axes[0, 0], npu["reference"], npu["predicted"], npu["dataflow"] + " " + npu["array"], 0.02,
           "NPU GEMM cycles vs SCALE-Sim (fold_model scalesim)", "cycles", True)
    bw = mem[mem["metric"].str.startswith("bandwidth")].reset_index(drop=True)
    lat = mem[mem["metric"].str.startswith("latency")].reset_index(drop=True)
    both = pd.concat([bw.assign(label=bw["pattern"] + " " + bw["channels"].astype(str) + "ch"),
                      lat.assign(label="latency " + lat["pattern"].str.replace("latency_", ""))]).reset_index(drop=True)
    _panel(axes[0, 1], both["reference"], both["predicted"], both["label"], 0.05,
           "LPDDR5-6400 vs Ramulator 2: bandwidth (GB/s) and latency (ns)", "GB/s or ns", True)
    g = gpu_points[(gpu_points["group"] == "graph") & (gpu_points["run"] != "h200_measured.csv")].reset_index(drop=True)
    _panel(axes[1, 0], g["measured_s"] * 1e3, g["simulated_s"] * 1e3, g["model"], 0.08,
           "GPU step latency, out-of-sample (run 2), H200 bf16 graphs", "ms", True)
    h = gpu_points[gpu_points["group"] == "h2d"].reset_index(drop=True)
    _panel(axes[1, 1], h["measured_s"] * 1e6, h["simulated_s"] * 1e6, h["sample"], 0.05,
           "H2D pinned copies 4 KiB - 1 GiB", "us", True)
    fig.tight_layout()
    return save_figure(fig, out_dir / PEER_PLOT_STEM, formats=("png", "pdf"))


PIM_PLOT_STEM = "peers_pim"


def write_pim_plot(pim: pd.DataFrame, out_dir: Path) -> list[Path]:
    """PIM GEMV time, ours vs the AiM simulator, one panel per preset (y = x, +-10% band)."""
    from .style import apply_style, figure_size, plt, save_figure
    apply_style()
    presets = list(dict.fromkeys(pim["preset"]))
    fig, axes = plt.subplots(1, max(1, len(presets)), figsize=figure_size("two", aspect=0.55), squeeze=False)
    for ax, p in zip(axes[0], presets):
        s = pim[pim["preset"] == p].reset_index(drop=True)
        label = s["rows"].astype(str) + "x" + s["cols"].astype(str)
        if "order" in s.columns:
            label = s["order"].astype(str) + " " + label
        _panel(ax, s["reference_s"] * 1e3, s["predicted_s"] * 1e3, label, 0.10,
               f"PIM GEMV vs AiM simulator, {p} (1-32 ch, 1-8 vectors, both driver orders)", "ms", True)
    fig.tight_layout()
    return save_figure(fig, out_dir / PIM_PLOT_STEM, formats=("png",))
