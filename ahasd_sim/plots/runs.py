"""Locating run result files for the plotting command lines."""
from __future__ import annotations

import json
from pathlib import Path

from ..config.errors import InputError


def _label(path: Path) -> str:
    s = path.parent / "summary.json"
    if s.is_file():
        d = json.loads(s.read_text())
        return f"{d.get('mode')} / {d.get('policy')}"
    return path.parent.name


def resolve_runs(runs: list[str], filename: str, labels: str | None, hint: str = "") -> dict[str, Path]:
    """Map each run folder (or file) to ``folder/filename``, labelled by ``labels`` (comma list)
    or by the run's mode/policy; duplicate labels get a suffix. Missing files are InputErrors."""
    paths = [Path(r) / filename if Path(r).is_dir() else Path(r) for r in runs]
    for x in paths:
        if not x.is_file():
            raise InputError(f"{x} not found{hint}")
    names = [s.strip() for s in labels.split(",")] if labels else [_label(x) for x in paths]
    if len(names) != len(paths):
        raise InputError("--labels needs one label per run")
    out: dict[str, Path] = {}
    for lab, x in zip(names, paths):
        key, i = lab, 2
        while key in out:
            key, i = f"{lab} ({i})", i + 1
        out[key] = x
    return out


def sweep_windows(results: str, df, keys):
    """The points' window samples (points/<point>/windows.csv next to results.csv), carrying
    ``keys``; None when the sweep folder has none (the figure then says it has no intervals)."""
    from ..metrics.windows import window_table
    folder = Path(results) if Path(results).is_dir() else Path(results).parent
    if not (folder / "points").is_dir() or "point" not in df.columns:
        return None
    wt = window_table(df, folder / "points", extra_keys=[k for k in dict.fromkeys(keys) if k in df.columns])
    return wt if len(wt) else None
