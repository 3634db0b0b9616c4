"""Device timelines (Gantt charts) from runs' ``timeline.json`` (Chrome/Perfetto trace)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import pandas as pd

from .style import apply_style, colors_for, save_figure

DEVICE_ORDER = ("gpu", "h2d", "npu", "pim", "cpu", "network")


def load_timeline(path: str | Path, window: int = 0) -> pd.DataFrame:
    """Busy intervals of a timeline.json: columns device, task, start_s, end_s; of trace window
    ``window`` where the file has one process per window (each on its own clock)."""
    from ..config.errors import InputError
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a readable timeline.json ({type(exc).__name__})") from None
    if not isinstance(data, (dict, list)):
        raise InputError(f"{path}: not a timeline.json (expected a Chrome trace object)")
    events = data.get("traceEvents", data if isinstance(data, list) else [])
    names: dict[tuple[int, int], str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid", 0), e.get("tid", 0))] = e.get("args", {}).get("name", str(e.get("tid")))
    windows = {e.get("pid", 0): e.get("args", {}).get("name", "") for e in events
               if e.get("ph") == "M" and e.get("name") == "process_name"}
    pid = next((p for p, n in windows.items() if str(n).startswith(f"window {window}:")), None)
    rows = []
    for e in events:
        if e.get("ph") != "X" or (pid is not None and e.get("pid", 0) != pid):
            continue
        dev = names.get((e.get("pid", 0), e.get("tid", 0)), e.get("cat") or str(e.get("tid")))
        start = float(e["ts"]) * 1e-6
        rows.append({"device": dev, "task": e.get("name", ""), "start_s": start,
                     "end_s": start + float(e.get("dur", 0.0)) * 1e-6})
    return pd.DataFrame(rows, columns=["device", "task", "start_s", "end_s"])


def pick_window(df: pd.DataFrame, window_s: float | None, start_s: float | None) -> tuple[float, float]:
    """[t0, t1]: from ``start_s`` (default: 10% into the run, past the start-up) for ``window_s``
    (default: a fifth of the run)."""
    if df.empty:
        return 0.0, 1.0
    t_end = float(df["end_s"].max())
    t0 = 0.1 * t_end if start_s is None else float(start_s)
    w = 0.2 * t_end if window_s is None else float(window_s)
    return t0, t0 + w


def common_window(frames: Mapping[str, pd.DataFrame], window_s: float | None,
                  start_s: float | None) -> tuple[float, float]:
    """The one [t0, t1] every panel shows (:func:`pick_window` of the shortest run): panels
    of different x ranges (600-1700 ms next to 4000-11000 ms) cannot be compared by eye."""
    shortest = min((f for f in frames.values() if not f.empty), key=lambda f: float(f["end_s"].max()),
                   default=pd.DataFrame(columns=["end_s"]))
    return pick_window(shortest, window_s, start_s)


def check_window(frames: Mapping[str, pd.DataFrame], window_s: float | None, start_s: float | None) -> None:
    """Refuse a window that would draw an empty chart: negative, zero, or outside every run."""
    from ..config.errors import InputError
    for lab, f in frames.items():
        if f.empty:
            raise InputError(f"{lab}: the timeline has no busy intervals to draw")
    if start_s is not None and start_s < 0:
        raise InputError(f"--start-ms {start_s * 1e3:g}: expected >= 0")
    if window_s is not None and window_s <= 0:
        raise InputError(f"--window-ms {window_s * 1e3:g}: expected > 0")
    t0, t1 = common_window(frames, window_s, start_s)
    for lab, f in frames.items():
        end = float(f["end_s"].max())
        if not ((f["end_s"] > t0) & (f["start_s"] < t1)).any():
            raise InputError(f"{lab}: the window {t0 * 1e3:g}-{t1 * 1e3:g} ms holds no activity (the run spans "
                             f"0-{end * 1e3:g} ms); choose --start-ms/--window-ms inside it")


def plot_gantt(runs: Mapping[str, str | Path | pd.DataFrame], out: str | Path, *, window_s: float | None = None,
               start_s: float | None = None, title: str | None = None) -> list[Path]:
    """One row group per run (label -> timeline.json), one lane per device, bars coloured by
    task (draft, verify, preverify, ...), over one short window of simulated time shared by
    every panel (:func:`common_window`); the legend lists the tasks drawn in it, no others."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    apply_style()
    frames = {lab: (src if isinstance(src, pd.DataFrame) else load_timeline(src)) for lab, src in runs.items()}
    check_window(frames, window_s, start_s)
    t0, t1 = common_window(frames, window_s, start_s)
    tasks = sorted({t for f in frames.values() for t in f[(f["end_s"] > t0) & (f["start_s"] < t1)]["task"].unique()})
    cmap = colors_for(tasks)
    lanes: list[tuple[str, str]] = []
    for lab, f in frames.items():
        devs = sorted(f["device"].unique(), key=lambda d: (DEVICE_ORDER.index(d) if d in DEVICE_ORDER else 99, d))
        lanes.extend((lab, d) for d in devs)
    ncol = min(len(tasks), 6)
    legend_in = 0.28 * -(-len(tasks) // ncol) + 0.15      # legend rows, below the panels
    fig_h = 0.8 + 0.32 * len(lanes) + 0.15 * len(frames) + legend_in + (0.3 if title else 0.0)
    fig, axes = plt.subplots(len(frames), 1, figsize=(7.0, fig_h), squeeze=False, sharex=True,
                             gridspec_kw={"height_ratios": [max(1, f["device"].nunique()) for f in frames.values()]})
    for ax, (lab, f) in zip(axes[:, 0], frames.items()):
        devs = sorted(f["device"].unique(), key=lambda d: (DEVICE_ORDER.index(d) if d in DEVICE_ORDER else 99, d))
        for i, d in enumerate(devs):
            sel = f[(f["device"] == d) & (f["end_s"] > t0) & (f["start_s"] < t1)]
            for task, g in sel.groupby("task"):
                xs = [(max(s, t0) * 1e3, (min(e, t1) - max(s, t0)) * 1e3) for s, e in zip(g["start_s"], g["end_s"])]
                ax.broken_barh(xs, (i - 0.38, 0.76), facecolors=cmap[task], edgecolor="none")
        ax.set_yticks(range(len(devs)))
        ax.set_yticklabels([d.upper() for d in devs])
        ax.set_ylim(-0.6, len(devs) - 0.4)
        ax.set_xlim(t0 * 1e3, t1 * 1e3)
        ax.set_title(lab, loc="left", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
        ax.grid(axis="y", visible=False)
    axes[-1, 0].set_xlabel("Simulated time (ms)")
    # the legend goes below the panels, in space kept free for it: above them it covered the
    # first panel's title
    legend_frac = legend_in / fig_h
    fig.legend(handles=[Patch(facecolor=cmap[t], label=t) for t in tasks], loc="lower center",
               ncol=ncol, bbox_to_anchor=(0.5, 0.0), frameon=False)
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, legend_frac, 1, 1))
    return save_figure(fig, out)


def find_runs(points_dir: str | Path, labels: Sequence[str] | None = None) -> dict[str, Path]:
    """label -> timeline.json for run folders under ``points_dir`` (label: mode/policy of summary.json)."""
    out: dict[str, Path] = {}
    for d in sorted(Path(points_dir).iterdir()):
        tl, sm = d / "timeline.json", d / "summary.json"
        if tl.is_file() and sm.is_file():
            s = json.loads(sm.read_text())
            lab = f"{s.get('mode')} / {s.get('policy')}"
            if labels is None or lab in labels:
                out.setdefault(lab, tl)
    return out
