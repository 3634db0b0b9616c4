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


def ci_pareto_mask(values, ci95, directions: Sequence[str]) -> np.ndarray:
    """Boolean mask of the rows not dominated *at the interval level*: row ``b`` is dropped only
    when some row ``a``'s 95% interval lies entirely on the better side of ``b``'s in every
    objective (``a``'s worst end at least as good as ``b``'s best end) and strictly in one.
    ``ci95``: the intervals ``[low, high]``, shape (rows, objectives, 2), or symmetric
    half-widths, shape (rows, objectives) (NaN: no interval, the point value is used). With
    zero-width intervals this is :func:`pareto_mask`; wider intervals only ever add rows."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or len(v) == 0:
        return np.zeros(len(v), dtype=bool)
    c = np.asarray(ci95, dtype=float)
    if c.ndim == 3:
        if c.shape != (*v.shape, 2):
            raise ValueError(f"ci95 has shape {c.shape}, values {v.shape}")
        low = np.where(np.isnan(c[..., 0]), v, np.minimum(c[..., 0], v))
        high = np.where(np.isnan(c[..., 1]), v, np.maximum(c[..., 1], v))
    else:
        h = np.nan_to_num(np.abs(c), nan=0.0)
        if h.shape != v.shape:
            raise ValueError(f"ci95 has shape {h.shape}, values {v.shape}")
        low, high = v - h, v + h
    sign = np.array([1.0 if d == "maximize" else -1.0 for d in directions])
    g = v * sign                     # larger is better in every column
    # worst and best end of each interval, in the larger-is-better orientation
    lo = np.where(sign > 0, low, -high)
    hi = np.where(sign > 0, high, -low)
    ok = ~np.isnan(g).any(axis=1)
    mask = ok.copy()
    idx = np.flatnonzero(ok)
    for i in idx:
        ge = (lo[idx] >= hi[i]).all(axis=1)
        gt = (lo[idx] > hi[i]).any(axis=1)
        if (ge & gt).any():
            mask[i] = False
    return mask


def hypervolume(points, ref) -> float:
    """Hypervolume (Lebesgue measure) dominated by ``points`` and bounded by ``ref``, all
    objectives maximised (negate minimised ones first); points not better than ``ref`` in every
    objective add nothing. Exact, by slicing along the first objective (fine for the fronts of
    a study: tens of points, a few objectives)."""
    p = np.asarray(points, dtype=float).reshape(-1, len(ref))
    r = np.asarray(ref, dtype=float)
    p = p[(p > r).all(axis=1)] if len(p) else p
    if len(p) == 0:
        return 0.0
    if len(r) == 1:
        return float(p[:, 0].max() - r[0])
    p = p[np.argsort(-p[:, 0])]
    total = 0.0
    for k in range(len(p)):       # slab between the k-th and (k+1)-th largest first coordinate
        x_hi = p[k, 0]
        x_lo = p[k + 1, 0] if k + 1 < len(p) else r[0]
        if x_hi > x_lo:
            total += (x_hi - x_lo) * hypervolume(p[: k + 1, 1:], r[1:])
    return float(total)
