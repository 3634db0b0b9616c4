"""Where the energy, power and time of a run go: stacked bars per device (from every run's
``energy_breakdown.csv``) and per task (from its ``timeline.json``).

* :func:`energy_breakdown`: per run, the energy per generated token (mJ/token) and the mean
  power over the run (W, energy / makespan) stacked by device, the static share of each device
  hatched. Both panels are the same joules divided by tokens or by seconds: their stacks have
  the same proportions.
* :func:`latency_breakdown`: per run and device, the busy time per generated token (ms/token)
  stacked by task (draft, verify, ...): the latency each task puts on each device, over the
  first trace window (the one ``timeline.json`` records). A device's stack is at most that
  window's time per token (busy time never exceeds the makespan).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from .style import apply_style, color, figure_size, plt, save_figure

DEVICE_ORDER = ("npu", "pim", "dram", "gpu", "h2d", "cpu", "aau", "ctrl", "network")


def _order(devs) -> list[str]:
    return sorted(devs, key=lambda d: (DEVICE_ORDER.index(d) if d in DEVICE_ORDER else 99, d))


def read_run(run_dir: str | Path) -> tuple[pd.DataFrame, dict]:
    """(energy_breakdown.csv, summary.json) of a run folder; an InputError names a missing file."""
    from ..config.errors import InputError
    d = Path(run_dir)
    e, s = d / "energy_breakdown.csv", d / "summary.json"
    for f in (e, s):
        if not f.is_file():
            raise InputError(f"{d}: no {f.name} (expected a run folder written by python -m ahasd_sim)")
    return pd.read_csv(e), json.loads(s.read_text())


def energy_table(runs: Mapping[str, str | Path]) -> pd.DataFrame:
    """Long table (run, device, kind, energy_j, mj_per_token, mean_w) of the runs' energies:
    mJ per generated token and mean power = energy / makespan."""
    rows = []
    for lab, d in runs.items():
        e, s = read_run(d)
        tokens, wall = float(s["generated_tokens"]), float(s["makespan_s"])
        for r in e.itertuples():
            rows.append({"run": lab, "device": r.device, "kind": r.kind, "energy_j": float(r.energy_j),
                         "mj_per_token": float(r.energy_j) / tokens * 1e3 if tokens else np.nan,
                         "mean_w": float(r.energy_j) / wall if wall > 0 else np.nan})
    return pd.DataFrame(rows, columns=["run", "device", "kind", "energy_j", "mj_per_token", "mean_w"])


def _stack(ax, tab: pd.DataFrame, value: str, runs: list[str], keys: list, key_cols: list[str], colors, hatches):
    x = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    for k in keys:
        sel = tab
        for c, v in zip(key_cols, k if isinstance(k, tuple) else (k,)):
            sel = sel[sel[c] == v]
        h = np.array([float(sel.loc[sel["run"] == r, value].sum()) for r in runs])
        if not (h > 0).any():
            continue
        ax.bar(x, h, 0.6, bottom=bottom, color=colors[k], hatch=hatches.get(k, ""), edgecolor="white",
               linewidth=0.4)
        bottom += h
    if bottom.max() > 0:
        ax.set_ylim(0, float(bottom.max()) * 1.08)
    ax.set_xticks(x)
    ax.set_xticklabels(runs, fontsize=7)
    return bottom


def energy_breakdown(runs: Mapping[str, str | Path], out: str | Path, *, columns: str = "two",
                     title: str | None = None) -> list[Path]:
    """Stacked energy per token and mean power per device (static share hatched), one bar per
    run (label -> run folder). Writes ``out``.pdf/.png; returns their paths."""
    from matplotlib.patches import Patch
    apply_style()
    tab = energy_table(runs)
    tab = tab[tab["energy_j"] > 0]
    labels = list(runs)
    devs = _order(tab["device"].unique())
    keys = [(d, k) for d in devs for k in ("dynamic", "static") if ((tab["device"] == d) & (tab["kind"] == k)).any()]
    colors = {(d, k): color(i) for i, d in enumerate(devs) for k in ("dynamic", "static")}
    hatches = {(d, "static"): "//" for d in devs}
    fig, axes = plt.subplots(1, 2, figsize=figure_size(columns, aspect=0.5))
    for ax, value, ylab in ((axes[0], "mj_per_token", "Energy per token (mJ)"),
                            (axes[1], "mean_w", "Mean power (W)")):
        _stack(ax, tab, value, labels, keys, ["device", "kind"], colors, hatches)
        ax.set_ylabel(ylab)
    handles = [Patch(facecolor=colors[(d, "dynamic")], label=d.upper()) for d in devs]
    handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//", label="static (hatched)"))
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=6, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.06 * (1 + len(handles) // 7) + 0.04, 1, 1))
    return save_figure(fig, out)


def task_table(runs: Mapping[str, str | Path]) -> pd.DataFrame:
    """Long table (run, device, task, busy_s, ms_per_token) of the runs' timelines."""
    from .timeline import load_timeline
    rows = []
    for lab, d in runs.items():
        _e, s = read_run(d)
        tl = Path(d) / "timeline.json"
        if not tl.is_file():
            from ..config.errors import InputError
            raise InputError(f"{d}: no timeline.json (rerun with run.timeline=true)")
        f = load_timeline(tl)
        # timeline.json holds the first trace window only: its busy time over that window's tokens
        tokens = float(s["generated_tokens"])
        wf = Path(d) / "windows.csv"
        if wf.is_file() and int(s.get("windows", 1) or 1) > 1:
            tokens = float(pd.read_csv(wf)["generated_tokens"].iloc[0])
        g = f.assign(busy_s=f["end_s"] - f["start_s"]).groupby(["device", "task"], as_index=False)["busy_s"].sum()
        for r in g.itertuples():
            rows.append({"run": lab, "device": r.device, "task": r.task, "busy_s": float(r.busy_s),
                         "ms_per_token": float(r.busy_s) / tokens * 1e3 if tokens else np.nan})
    return pd.DataFrame(rows, columns=["run", "device", "task", "busy_s", "ms_per_token"])


def latency_breakdown(runs: Mapping[str, str | Path], out: str | Path, *, columns: str = "two",
                      title: str | None = None) -> list[Path]:
    """Busy time per generated token of each device, stacked by task; one panel per device,
    one bar per run. Writes ``out``.pdf/.png; returns their paths."""
    from matplotlib.patches import Patch
    apply_style()
    tab = task_table(runs)
    tab = tab[tab["busy_s"] > 0]
    labels = list(runs)
    devs = _order(tab["device"].unique())
    tasks = sorted(tab["task"].unique())
    colors = {t: color(i) for i, t in enumerate(tasks)}
    fig, axes = plt.subplots(1, max(1, len(devs)), figsize=figure_size(columns, aspect=0.45), squeeze=False,
                             sharey=True)
    for ax, d in zip(axes[0], devs):
        _stack(ax, tab[tab["device"] == d], "ms_per_token", labels, tasks, ["task"], colors, {})
        ax.set_title(d.upper(), fontsize=8)
    axes[0, 0].set_ylabel("Busy time per token (ms)")
    handles = [Patch(facecolor=colors[t], label=t) for t in tasks]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=6, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.06 * (1 + len(handles) // 7) + 0.04, 1, 1))
    return save_figure(fig, out)
