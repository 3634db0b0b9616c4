"""The tidy results table of a sweep (``results.csv``): one row per point.

Columns, in order:

* ``point`` -- the point folder name (hash of the resolved config) under ``points/``;
* ``status`` -- ``ok`` (summary.json present), ``failed`` (error.json) or ``pending``;
* the axis columns: ``variant``, ``model_pair``, the dotted config keys that the sweep
  varies (``run.mode``, ``run.policy``, ``run.draft_model``, ``pim.ranks``, ...) and ``seed``;
* ``error_type``, ``error`` -- for failed points (one line);
* ``wall_time_s`` -- simulation wall-clock time from meta.json / error.json;
* every scalar of summary.json, nested dicts flattened with dots
  (``device_utilization.npu``, ``energy_breakdown_j.pim.dynamic``); lists are skipped.

Units are in the metric names (``_s``, ``_j``, ``_tok_s``, ...), see summary.json.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from ..output import atomic_write
from .worker import ERROR, SUMMARY

FIXED_LEAD = ("point", "status")
ERROR_COLS = ("error_type", "error", "wall_time_s")


def flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dict -> {"a.b.c": scalar}; lists and None-valued dicts are dropped."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (list, tuple)):
            continue
        else:
            out[key] = v
    return out


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def point_row(point_dir: Path) -> dict[str, Any]:
    """status, error and metric columns of one point folder."""
    point_dir = Path(point_dir)
    summary = _read_json(point_dir / SUMMARY)
    if summary is not None:
        meta = _read_json(point_dir / "meta.json") or {}
        row: dict[str, Any] = {"status": "ok", "error_type": None, "error": None,
                               "wall_time_s": meta.get("wall_time_s")}
        row.update({f"summary::{k}": v for k, v in flatten(summary).items()})
        return row
    err = _read_json(point_dir / ERROR)
    if err is not None:
        return {"status": "failed", "error_type": err.get("type"), "error": err.get("message"),
                "wall_time_s": err.get("wall_time_s")}
    return {"status": "pending", "error_type": None, "error": None, "wall_time_s": None}


def build_table(points: Iterable, points_dir: Path, axis_columns: list[str]) -> pd.DataFrame:
    """One row per point (in sweep order)."""
    rows = []
    metric_cols: list[str] = []
    seen: set[str] = set()
    for pt in points:
        row: dict[str, Any] = {"point": pt.hash}
        info = point_row(Path(points_dir) / pt.hash)
        row["status"] = info.pop("status")
        for c in axis_columns:
            row[c] = pt.labels.get(c)
        for c in ERROR_COLS:
            row[c] = info.pop(c, None)
        for k, v in info.items():
            name = k[len("summary::"):]
            if name in row:          # e.g. seed: the axis column already has it
                continue
            row[name] = v
            if name not in seen:
                seen.add(name)
                metric_cols.append(name)
        rows.append(row)
    cols = [*FIXED_LEAD, *[c for c in axis_columns if c not in FIXED_LEAD], *ERROR_COLS, *metric_cols]
    return pd.DataFrame(rows, columns=cols)


def write_table(df: pd.DataFrame, path: Path) -> None:
    atomic_write(Path(path), lambda fh: df.to_csv(fh, index=False))


def read_results(path: str | Path) -> pd.DataFrame:
    """Read a results.csv (or a sweep folder containing one)."""
    from ..config.errors import InputError
    p = Path(path)
    if p.is_dir():
        p = p / "results.csv"
    if not p.is_file():
        raise InputError(f"--results {path}: {p} not found (a sweep folder or its results.csv)")
    try:
        df = pd.read_csv(p)
    except (OSError, UnicodeDecodeError, ValueError) as exc:   # pandas' parser errors are ValueErrors
        raise InputError(f"--results {p}: not a readable results.csv ({type(exc).__name__})") from None
    if df.empty:
        raise InputError(f"--results {p}: the table has no rows")
    return df
