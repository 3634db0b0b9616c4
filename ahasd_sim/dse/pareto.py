"""Non-dominated (Pareto) sets."""
from __future__ import annotations

from typing import Sequence

import numpy as np


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """True if ``a`` is at least as good as ``b`` in every objective and better in one."""
    better = False
    for x, y, d in zip(a, b, directions):
        if d == "minimize":
            x, y = -x, -y
        if x < y:
            return False
        if x > y:
            better = True
    return better


def pareto_mask(values: np.ndarray | Sequence[Sequence[float]], directions: Sequence[str]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of ``values`` (n x m). Rows with equal
    objective vectors are all kept; rows with a NaN are never on the front."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or len(v) == 0:
        return np.zeros(len(v), dtype=bool)
    if v.shape[1] != len(directions):
        raise ValueError(f"{v.shape[1]} objective columns but {len(directions)} directions")
    sign = np.array([1.0 if d == "maximize" else -1.0 for d in directions])
    g = v * sign                     # larger is better in every column
    ok = ~np.isnan(g).any(axis=1)
    mask = ok.copy()
    idx = np.flatnonzero(ok)
    gg = g[idx]
    for k, i in enumerate(idx):
        ge = (gg >= gg[k]).all(axis=1)
        gt = (gg > gg[k]).any(axis=1)
        if (ge & gt).any():
            mask[i] = False
    return mask
