"""Post-processing of sweep tables: per-point ratios against a baseline, energy columns.

Everything here reads a results table (``results.csv``) only.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd


def ok_rows(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of finished points (status ok), or all rows if there is no status column."""
    if "status" in df.columns:
        return df[df["status"] == "ok"].copy()
    return df.copy()


def normalise(df: pd.DataFrame, by: str, baseline: str, group: Sequence[str], metrics: Iterable[str],
              suffix: str = "_ratio") -> pd.DataFrame:
    """Divide each metric by the baseline row's value in the same ``group``.

    ``by``: the column naming the configuration (e.g. ``variant``); ``baseline``: its value
    for the reference rows; ``group``: the columns that identify comparable rows (e.g. model
    pair, policy, seed). Returns the finished rows with ``<metric><suffix>`` columns added;
    groups without a finished baseline row get NaN.
    """
    d = ok_rows(df)
    metrics = list(metrics)
    group = list(group)
    base = d[d[by] == baseline][group + metrics].drop_duplicates(group)
    base = base.rename(columns={m: f"__base_{m}" for m in metrics})
    out = d.merge(base, on=group, how="left") if group else d.assign(
        **{f"__base_{m}": (base[f"__base_{m}"].iloc[0] if len(base) else np.nan) for m in metrics})
    for m in metrics:
        out[f"{m}{suffix}"] = out[m] / out[f"__base_{m}"]
    return out.drop(columns=[f"__base_{m}" for m in metrics])


def memory_energy_j(df: pd.DataFrame) -> pd.Series:
    """Main-memory energy: LPDDR5 + PIM units + AAU + GTS (all of the memory device)."""
    cols = [c for c in df.columns if c.startswith("energy_breakdown_j.")
            and c.split(".")[1] in ("lpddr5", "pim", "aau", "gts")]
    return df[cols].fillna(0.0).sum(axis=1) if cols else pd.Series(np.nan, index=df.index)


def device_energy_j(df: pd.DataFrame, device: str) -> pd.Series:
    cols = [c for c in df.columns if c.startswith(f"energy_breakdown_j.{device}.")]
    return df[cols].fillna(0.0).sum(axis=1) if cols else pd.Series(np.nan, index=df.index)
