"""95% confidence intervals over windows (one contiguous window of rounds = one sample).

Kept separate so it can be replaced by the project-wide ``run.windows`` machinery when that
lands (issue 12): :func:`window_samples` cuts, :func:`mean_ci95` summarises.
"""
from __future__ import annotations

import math

import numpy as np

# two-sided 95% Student-t quantiles t_{0.975, df}, df = 1..30 (standard table)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    if df < 1:
        return float("nan")
    return _T975[df - 1] if df <= 30 else 1.96 + 2.4 / df   # df > 30: within 0.3% of the exact value


def mean_ci95(values) -> dict:
    """{'mean', 'ci95_low', 'ci95_high', 'n'} of the samples (t interval; NaN bounds for n < 2)."""
    x = np.asarray([v for v in values if np.isfinite(v)], dtype=float)
    n = int(x.size)
    if n == 0:
        return {"mean": float("nan"), "ci95_low": float("nan"), "ci95_high": float("nan"), "n": 0}
    m = float(x.mean())
    if n < 2:
        return {"mean": m, "ci95_low": float("nan"), "ci95_high": float("nan"), "n": n}
    h = t975(n - 1) * float(x.std(ddof=1)) / math.sqrt(n)
    return {"mean": m, "ci95_low": m - h, "ci95_high": m + h, "n": n}


def window_samples(round_tokens, round_time_s, round_energy_j, n_windows: int) -> dict[str, list[float]]:
    """Per window of consecutive rounds: throughput (tok/s) and energy per token (J)."""
    tok = np.asarray(round_tokens, dtype=float)
    dur = np.asarray(round_time_s, dtype=float)
    en = np.asarray(round_energy_j, dtype=float)
    k = max(1, min(int(n_windows), tok.size))
    thr, ept = [], []
    for idx in np.array_split(np.arange(tok.size), k):
        if idx.size == 0:
            continue
        t, d, e = tok[idx].sum(), dur[idx].sum(), en[idx].sum()
        thr.append(t / d if d > 0 else float("nan"))
        ept.append(e / t if t > 0 else float("nan"))
    return {"throughput_tok_s": thr, "energy_per_token_j": ept}
