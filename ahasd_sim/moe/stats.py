"""Windows of a tree-trace replay: contiguous blocks of verification rounds, one sample each.

The mode hands them to the project-wide window statistics (``simulation.combine_windows``,
``metrics.stats``: bootstrap over these windows' totals) as ``mode_windows``.
"""
from __future__ import annotations

import numpy as np


def window_samples(round_tokens, round_time_s, round_energy_j, n_windows: int) -> dict[str, list[float]]:
    """Per window of consecutive rounds: its totals (tokens, decode time, decode energy: the
    ratio estimators' inputs) and, for reading, its throughput (tok/s) and energy per token (J)."""
    tok = np.asarray(round_tokens, dtype=float)
    dur = np.asarray(round_time_s, dtype=float)
    en = np.asarray(round_energy_j, dtype=float)
    k = max(1, min(int(n_windows), tok.size))
    thr, ept, tokens, times, energies = [], [], [], [], []
    for idx in np.array_split(np.arange(tok.size), k):
        if idx.size == 0:
            continue
        t, d, e = tok[idx].sum(), dur[idx].sum(), en[idx].sum()
        tokens.append(float(t))
        times.append(float(d))
        energies.append(float(e))
        thr.append(t / d if d > 0 else float("nan"))
        ept.append(e / t if t > 0 else float("nan"))
    return {"throughput_tok_s": thr, "energy_per_token_j": ept, "generated_tokens": tokens,
            "decode_makespan_s": times, "decode_energy_j": energies}


def pooled(tokens, time_s) -> float:
    """Ratio estimator: total tokens / total time."""
    t = float(np.sum(time_s))
    return float(np.sum(tokens)) / t if t > 0 else float("nan")


def bootstrap_ratio_ci(tok_a, time_a, tok_b=None, time_b=None, n_boot: int = 4000, seed: int = 0):
    """95% percentile interval of pooled(a) -- or of pooled(a) / pooled(b), paired -- by resampling
    whole windows with replacement (the same window indices for a and b). Windows of a and b
    must cover the same rounds (checked by the caller)."""
    ta, da = np.asarray(tok_a, float), np.asarray(time_a, float)
    n = ta.size
    if n < 2:
        return [float("nan"), float("nan")]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    est = ta[idx].sum(axis=1) / da[idx].sum(axis=1)
    if tok_b is not None:
        tb, db = np.asarray(tok_b, float), np.asarray(time_b, float)
        est = est / (tb[idx].sum(axis=1) / db[idx].sum(axis=1))
    lo, hi = np.percentile(est, [2.5, 97.5])
    return [float(lo), float(hi)]
