"""Per-window samples of a sweep's points and paired ratio estimators over them.

One trace window is one sample: a point's ``windows.csv`` rows, seed-averaged within a window;
a ratio between two variants is a ratio of totals over their matched windows with a paired
bootstrap, stratified by configuration (never pooled across configurations). Used by the
paper reproduction (paper/report.py) and the figures (plots/).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import pandas as pd

from .tables import ok_rows


def window_table(df: pd.DataFrame, points_dir: Path, extra_keys: Sequence[str] = ()) -> pd.DataFrame:
    """One row per (finished point, trace window) from the points' windows.csv files."""
    frames = []
    keys = [c for c in ("variant", "model_pair", "run.policy", "seed", *extra_keys) if c in df.columns]
    for _, r in ok_rows(df).iterrows():
        f = Path(points_dir) / str(r["point"]) / "windows.csv"
        if f.is_file():
            w = pd.read_csv(f)
            for k in keys:
                w[k] = r[k]
            frames.append(w)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


#: what one configuration is in the reproduction: a (model pair, drafting algorithm) point; its
#: windows are its samples, and intervals never pool windows of different configurations
CONFIG_KEYS = ("model_pair", "run.policy")


def seed_averaged_windows(wt: pd.DataFrame, extra_keys: Sequence[str] = ()) -> pd.DataFrame:
    """``wt`` with the seeds of each (variant, configuration, window) averaged into one row
    (metrics.stats.seed_averaged): one sample per window, however many seeds ran."""
    from ..metrics.stats import seed_averaged
    if wt.empty:
        return wt
    return seed_averaged(wt, ["variant", *CONFIG_KEYS, *extra_keys, "window"])


def paired_windows(wt: pd.DataFrame, num: str, den: str, metric: str, where: dict | None = None,
                   strata_keys: Sequence[str] = CONFIG_KEYS) -> pd.DataFrame:
    """The matched windows of variants ``num`` and ``den``: per (configuration, window) the two
    totals of ``metric``'s ratio estimator for each (columns num_n, num_d, den_n, den_d) and the
    configuration label (``stratum``). Seeds are averaged within each window first."""
    from ..metrics.stats import RATIOS, totals
    cols = ["num_n", "num_d", "den_n", "den_d", "stratum"]
    if wt.empty:
        return pd.DataFrame(columns=cols)
    d = wt
    for k, v in (where or {}).items():
        d = d[d[k] == v]
    skeys = [c for c in strata_keys if c in d.columns]
    extra = [c for c in strata_keys if c not in CONFIG_KEYS]
    d = seed_averaged_windows(d, extra) if "seed" in d.columns else d
    keys = [*skeys, "window"]
    n_col, d_col = RATIOS[metric]
    out = {}
    for tag, v in (("num", num), ("den", den)):
        x = d[d["variant"] == v]
        out[tag] = pd.DataFrame({f"{tag}_n": totals(x, n_col), f"{tag}_d": totals(x, d_col)},
                                index=pd.MultiIndex.from_frame(x[keys]) if len(keys) > 1 else x[keys[0]])
    m = out["num"].join(out["den"], how="inner")
    m = m[(m["num_d"] > 0) & (m["den_d"] > 0)].copy()
    m["stratum"] = [tuple(i[:-1]) if isinstance(i, tuple) else () for i in m.index]
    return m.reset_index(drop=True)[cols]


def paired_ratio(wt: pd.DataFrame, num: str, den: str, metric: str, where: dict | None = None,
                 strata_keys: Sequence[str] = CONFIG_KEYS) -> tuple[float, list[float] | None, int, int]:
    """(ratio, 95% CI, windows, configurations) of ``metric`` between variants ``num`` and ``den``.
    One configuration: the ratio of their ratio estimators over its windows, paired bootstrap
    over those windows. Several: the ratio of the suite totals (all configurations' windows
    summed), with a stratified paired bootstrap (windows resampled within each configuration,
    never across), i.e. a stated summary, not a pooled sample."""
    from ..metrics.stats import paired_ratio_ci
    p = paired_windows(wt, num, den, metric, where, strata_keys)
    if p.empty:
        return float("nan"), None, 0, 0
    strata = list(p["stratum"])
    m, ci = paired_ratio_ci(p["num_n"], p["num_d"], p["den_n"], p["den_d"], strata=strata)
    return m, ci, len(p), len(set(strata))


def config_ratios(wt: pd.DataFrame, num: str, den: str, metric: str, where: dict | None = None) -> dict:
    """{configuration: (ratio, 95% CI)}: one paired ratio per (model pair, algorithm)."""
    out = {}
    p = paired_windows(wt, num, den, metric, where)
    from ..metrics.stats import paired_ratio_ci
    for st, g in p.groupby("stratum", sort=False):
        out[st] = paired_ratio_ci(g["num_n"], g["num_d"], g["den_n"], g["den_d"])
    return out
