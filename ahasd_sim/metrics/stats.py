"""Means and 95% confidence intervals over independent samples (trace windows, seeds).

One trace window is one sample (GUIDE: statistics). The interval is Student's t interval of
the mean, ``mean +- t(0.975, n-1) * sd / sqrt(n)``; with fewer than two samples it is
undefined (``None``). Ratios between configurations are formed per window (paired, same
tokens) before averaging; :func:`geomean_ci95` averages them on the log scale.
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

# two-sided 95% Student t quantiles t(0.975, df), df = 1..30 (standard tables)
_T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
         2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
         2.052, 2.048, 2.045, 2.042]


def t975(df: int) -> float:
    """Two-sided 95% Student t quantile for ``df`` degrees of freedom (normal beyond the table)."""
    if df < 1:
        raise ValueError("t quantile needs df >= 1")
    if df <= len(_T975):
        return _T975[df - 1]
    if df <= 60:
        return 2.000 + (2.042 - 2.000) * (60 - df) / 30     # linear between df 30 and 60
    if df <= 120:
        return 1.980 + (2.000 - 1.980) * (120 - df) / 60
    return 1.960


def mean_ci95(values: Iterable[float]) -> tuple[float, list[float] | None]:
    """(mean, [low, high]) of ``values``; the interval is None for fewer than two samples."""
    xs = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    n = len(xs)
    if n == 0:
        return float("nan"), None
    m = sum(xs) / n
    if n < 2:
        return m, None
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t975(n - 1) * sd / math.sqrt(n)
    return m, [m - h, m + h]


def geomean_ci95(ratios: Sequence[float]) -> tuple[float, list[float] | None]:
    """Geometric mean of positive ratios with the t interval taken on the log scale."""
    logs = [math.log(r) for r in ratios if r is not None and r > 0 and not math.isnan(r)]
    m, ci = mean_ci95(logs)
    if math.isnan(m):
        return m, None
    return math.exp(m), ([math.exp(ci[0]), math.exp(ci[1])] if ci else None)


def fmt_ci(mean: float, ci: Sequence[float] | None, digits: int = 2) -> str:
    """'1.23 [1.10, 1.36]' (or just the mean without an interval)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    if not ci:
        return f"{mean:.{digits}f}"
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def pooled_rate(windows, metric: str) -> float:
    """Ratio estimator of ``metric`` over a run's windows table: total tokens / total decode time
    (``throughput_tok_s``) or total tokens / total energy (``tokens_per_j``); the window mean when
    the table lacks the totals; 0 for a run with no decode time or energy."""
    if {"generated_tokens", "makespan_s", "prefill_s", "energy_j"} <= set(windows.columns):
        den = ((windows["makespan_s"] - windows["prefill_s"]).sum() if metric == "throughput_tok_s"
               else windows["energy_j"].sum())
        return float(windows["generated_tokens"].sum() / den) if den > 0 else 0.0
    return float(windows[metric].mean())
