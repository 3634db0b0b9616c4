"""Post-processing of sweep tables: ratios against a baseline, geometric means.

Everything here reads a results table (``results.csv``) only.
"""
from __future__ import annotations

import math
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


def geomean(values: Iterable[float]) -> float:
    v = [float(x) for x in values if x is not None and not (isinstance(x, float) and math.isnan(x)) and x > 0]
    if not v:
        return float("nan")
    return float(math.exp(sum(math.log(x) for x in v) / len(v)))


def summarise_ratio(df: pd.DataFrame, by: str, col: str, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Per value of ``by``: geometric mean, arithmetic mean, min and max of ``col``, and n."""
    rows = []
    keys = order if order is not None else list(dict.fromkeys(df[by]))
    for k in keys:
        s = df.loc[df[by] == k, col].dropna()
        rows.append({by: k, "geomean": geomean(s), "mean": float(s.mean()) if len(s) else float("nan"),
                     "min": float(s.min()) if len(s) else float("nan"),
                     "max": float(s.max()) if len(s) else float("nan"), "n": int(len(s))})
    return pd.DataFrame(rows)


def memory_energy_j(df: pd.DataFrame) -> pd.Series:
    """Main-memory energy: LPDDR5 + PIM units + AAU + GTS (all of the memory device)."""
    cols = [c for c in df.columns if c.startswith("energy_breakdown_j.")
            and c.split(".")[1] in ("lpddr5", "pim", "aau", "gts")]
    return df[cols].fillna(0.0).sum(axis=1) if cols else pd.Series(np.nan, index=df.index)


def device_energy_j(df: pd.DataFrame, device: str) -> pd.Series:
    cols = [c for c in df.columns if c.startswith(f"energy_breakdown_j.{device}.")]
    return df[cols].fillna(0.0).sum(axis=1) if cols else pd.Series(np.nan, index=df.index)
