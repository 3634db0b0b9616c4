"""The one statistics method of the project (docs/modeling.md, "Statistics").

* **Sample unit**: one trace window (disjoint positions of the trace). Seeds of the same window
  are averaged inside it (the mean of their totals), never counted as extra samples.
* **Point estimate**: a ratio estimator, total over windows / total over windows
  (:data:`RATIOS`): throughput = total tokens / total decode time, tokens/J = total tokens /
  total decode energy, energy/token = total decode energy / total tokens, so
  ``tokens_per_j * energy_per_token_j == 1`` up to one rounding. Never a mean of per-window ratios.
* **Ratio between two configurations** (paired: same windows): the ratio of their ratio
  estimators over the same windows.
* **95% interval**: percentile bootstrap over whole windows (:data:`BOOTSTRAP_RESAMPLES`
  resamples, seeded by :data:`BOOTSTRAP_SEED`, so an interval is reproducible); paired ratios
  resample the same window indices for both configurations; fewer than
  :data:`MIN_BOOTSTRAP_WINDOWS` windows give no interval (``None``, printed as ``n<5``). Per configuration: windows of different configurations (model pairs,
  policies) are never pooled as samples of one population; a summary over several
  configurations resamples windows *within* each one (stratified) and is labelled so.
* **Student-t interval** (:func:`t_interval`) for a mean over a few independent samples (a
  study's per-window objectives), from :data:`MIN_T_SAMPLES` samples; a positive quantity (a
  ratio, a rate) gets it on the log scale, so its bounds are never negative.
* **One representation**: every interval is ``[low, high]`` (``<name>_ci95_low`` /
  ``<name>_ci95_high`` columns in tables), never a half-width.
* **Excludes zero** (:func:`excludes_zero`): only beyond :data:`ZERO_REL_TOL` of the values'
  magnitude; a smaller difference is the simulator's floating-point noise, not an effect.
"""
from __future__ import annotations

import functools
import math
from typing import Mapping, Sequence

import numpy as np

#: metric -> (numerator total, denominator total) of its ratio estimator (windows.csv columns)
RATIOS: dict[str, tuple[str, str]] = {
    "throughput_tok_s": ("generated_tokens", "decode_makespan_s"),
    "throughput_e2e_tok_s": ("generated_tokens", "makespan_s"),
    "tokens_per_j": ("generated_tokens", "decode_energy_j"),
    "tokens_per_j_e2e": ("generated_tokens", "energy_j"),
    "energy_per_token_j": ("decode_energy_j", "generated_tokens"),
}
#: resamples of every bootstrap interval (percentile method). Monte Carlo error of a bound: the
#: 2.5% quantile of B draws has a standard error sqrt(0.025 x 0.975 / B) / density, 0.027 sd of a
#: normal-shaped bootstrap distribution at B = 10^4, i.e. 0.7% of the interval's width (3.92 sd)
BOOTSTRAP_RESAMPLES = 10_000
#: seed of the bootstrap's resampling (fixed: the same windows always give the same interval)
BOOTSTRAP_SEED = 0
#: fewest whole windows a bootstrap interval is drawn from. n windows have C(2n - 1, n) distinct
#: resamples (3 at n = 2, 10 at 3, 35 at 4, 126 at 5): below 5 the 2.5% and 97.5% percentiles are
#: two of a handful of values (a 2-window "interval" is the smaller and larger window's own rate)
MIN_BOOTSTRAP_WINDOWS = 5
#: fewest independent samples of a Student-t interval: at 2 samples the 97.5% t quantile is 12.7
#: (the interval is one difference x 9, a positive ratio's reaches below zero); at 3 it is 4.30
MIN_T_SAMPLES = 3
#: a difference whose interval clears zero by less than this fraction of the values' magnitude
#: is floating-point noise (event times summed in another order), not an effect: 1e-6 is six
#: orders above a double's rounding of a sum of thousands of events, far below any modelled effect
ZERO_REL_TOL = 1e-6
#: the method, as stated next to every interval in outputs and docs
METHOD = (f"ratio of totals over trace windows; 95% percentile bootstrap over whole windows "
          f"({BOOTSTRAP_RESAMPLES} resamples, paired for ratios between configurations; "
          f"none below {MIN_BOOTSTRAP_WINDOWS} windows)")


def too_few(n: int, method: str = "bootstrap") -> str | None:
    """Why ``n`` samples give no interval with ``method`` ("bootstrap" or "t"), in one word for a
    table cell (``"n<5"``), or None when they are enough."""
    need = {"bootstrap": MIN_BOOTSTRAP_WINDOWS, "t": MIN_T_SAMPLES}[method]
    return f"n<{need}" if n < need else None


def totals(table, name: str) -> np.ndarray:
    """Per-window totals column ``name`` of a windows table (a DataFrame or a dict of columns);
    decode time and energy are derived from older windows.csv columns when absent
    (decode time = makespan - prefill; decode energy = energy per token x tokens)."""
    cols = table.columns if hasattr(table, "columns") else table.keys()
    if name in cols:
        return np.asarray(table[name], dtype=float)
    if name == "decode_makespan_s" and {"makespan_s", "prefill_s"} <= set(cols):
        return np.asarray(table["makespan_s"], dtype=float) - np.asarray(table["prefill_s"], dtype=float)
    if name == "decode_energy_j" and {"energy_per_token_j", "generated_tokens"} <= set(cols):
        return np.asarray(table["energy_per_token_j"], dtype=float) * np.asarray(table["generated_tokens"], dtype=float)
    raise KeyError(f"windows table has no column {name!r} (needed by a ratio estimator)")


def has_totals(table, metric: str) -> bool:
    try:
        for c in RATIOS[metric]:
            totals(table, c)
    except KeyError:
        return False
    return True


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else 0.0


def ratio_of_totals(num: Sequence[float], den: Sequence[float]) -> float:
    """sum(num) / sum(den); 0 when the denominator total is not positive (no decode time)."""
    # fsum: correctly rounded, so every caller gets the same bits whatever the summation order
    return _ratio(math.fsum(np.asarray(num, dtype=float)), math.fsum(np.asarray(den, dtype=float)))


def pooled_rate(windows, metric: str) -> float:
    """The ratio estimator of ``metric`` (:data:`RATIOS`) over a run's windows table."""
    num, den = RATIOS[metric]
    return ratio_of_totals(totals(windows, num), totals(windows, den))


def resample_indices(n: int, strata: Sequence | None = None, n_resamples: int = BOOTSTRAP_RESAMPLES,
                     seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """(n_resamples, n) window indices drawn with replacement; with ``strata`` (one label per
    window) each resample draws, within every stratum, as many of its windows as it has."""
    rng = np.random.default_rng(seed)
    if strata is None:
        return rng.integers(0, n, size=(n_resamples, n))
    labels = list(strata)
    if len(labels) != n:
        raise ValueError("one stratum label per window")
    out = np.empty((n_resamples, n), dtype=np.int64)
    for lab in dict.fromkeys(labels):
        rows = np.flatnonzero(np.array([x == lab for x in labels]))
        out[:, rows] = rows[rng.integers(0, rows.size, size=(n_resamples, rows.size))]
    return out


def _sizes_ok(n: int, strata) -> bool:
    """Enough windows for a bootstrap interval: :data:`MIN_BOOTSTRAP_WINDOWS` in all, and with
    strata at least two in each (one window of a stratum is never resampled: no variation)."""
    if n < MIN_BOOTSTRAP_WINDOWS:
        return False
    if strata is None:
        return True
    counts = {}
    for x in strata:
        counts[x] = counts.get(x, 0) + 1
    return bool(counts) and min(counts.values()) >= 2


def _percentile(point: float, draws: np.ndarray) -> list[float]:
    d = draws[np.isfinite(draws)]
    if d.size == 0:
        return [point, point]
    lo, hi = np.quantile(d, [0.025, 0.975])
    return [float(lo), float(hi)]


def ratio_ci(num: Sequence[float], den: Sequence[float], strata: Sequence | None = None,
             **kw) -> tuple[float, list[float] | None]:
    """(sum(num) / sum(den), its 95% percentile-bootstrap interval over whole windows). With
    ``strata``, windows are resampled within each stratum (a stated summary over configurations)."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    point = ratio_of_totals(num, den)
    if not _sizes_ok(num.size, strata):
        return point, None
    idx = resample_indices(num.size, strata, **kw)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    return point, _percentile(point, draws)


def paired_ratio_ci(num_a, den_a, num_b, den_b, strata: Sequence | None = None,
                    **kw) -> tuple[float, list[float] | None]:
    """(rate_a / rate_b, 95% interval), rate = ratio of totals over the same windows (row i of
    every array is window i); each resample draws the same window indices for both."""
    na, da, nb, db = (np.asarray(x, dtype=float) for x in (num_a, den_a, num_b, den_b))
    if not na.size == da.size == nb.size == db.size:
        raise ValueError("paired ratio: both configurations need the same windows")
    ra, rb = ratio_of_totals(na, da), ratio_of_totals(nb, db)
    point = ra / rb if rb > 0 else float("nan")
    if not _sizes_ok(na.size, strata):
        return point, None
    idx = resample_indices(na.size, strata, **kw)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = (na[idx].sum(axis=1) / da[idx].sum(axis=1)) / (nb[idx].sum(axis=1) / db[idx].sum(axis=1))
    return point, _percentile(point, draws)


def metric_ci(windows, metric: str, **kw) -> tuple[float, list[float] | None]:
    """The ratio estimator of ``metric`` over a windows table with its bootstrap interval."""
    num, den = RATIOS[metric]
    return ratio_ci(totals(windows, num), totals(windows, den), **kw)


def paired_metric_ci(a, b, metric: str, **kw) -> tuple[float, list[float] | None]:
    """metric(a) / metric(b) over the same windows (tables aligned row by row)."""
    num, den = RATIOS[metric]
    return paired_ratio_ci(totals(a, num), totals(a, den), totals(b, num), totals(b, den), **kw)


def seed_averaged(table, keys: Sequence[str], seed_col: str = "seed"):
    """A windows table with the seeds of each (``keys``, window) averaged into one row: every
    total column is the mean over seeds (so a ratio estimator weights seeds equally), one
    sample per window (seeds are not extra samples)."""
    cols = set(table.columns)
    by = [k for k in keys if k in cols and k != seed_col]
    if seed_col not in cols or not by:
        return table
    tot = sorted({c for pair in RATIOS.values() for c in pair})
    d = table.copy()
    for c in tot:
        if c not in cols:
            try:
                d[c] = totals(table, c)
            except KeyError:
                continue
    agg = {c: "mean" for c in tot if c in d.columns}
    agg[seed_col] = "nunique"
    out = d.groupby(by, sort=False, as_index=False, dropna=False).agg(agg)
    return out.rename(columns={seed_col: "seeds"})


# -------------------------------------------------------------- formatting
def fmt_ci(mean: float, ci: Sequence[float] | None, digits: int = 2, why: str | None = None) -> str:
    """'1.23 [1.10, 1.36]', or the value alone without an interval ('1.23 (n<5)' with ``why``)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    if not ci or any(c is None or (isinstance(c, float) and math.isnan(c)) for c in ci):
        return f"{mean:.{digits}f}" + (f" ({why})" if why else "")
    return f"{mean:.{digits}f} [{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def ci_fields(metric: str, point: float, ci: list[float] | None) -> Mapping[str, object]:
    """summary.json's ``<metric>``, ``<metric>_ci95`` and ``_ci95_low``/``_ci95_high`` (all None
    without an interval: never the point twice, which would read as a zero-width interval)."""
    return {metric: point, f"{metric}_ci95": ci, f"{metric}_ci95_low": ci[0] if ci else None,
            f"{metric}_ci95_high": ci[1] if ci else None}


# Student-t intervals. The bootstrap above is the method for a simulated run's metrics; a mean
# over a few independent samples (a study's per-window objectives, a tree trace's prompts, a
# phone's TPOT windows) gets the t interval below. One exact quantile for all of them, in pure
# Python: an interval must not depend on whether the optional scipy is installed (tables
# rounded to 3 digits and a normal 1.96 beyond them gave three different answers before).

def _beta_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes,
    3rd ed., section 6.4), converging for x < (a + 1) / (a + b + 2)."""
    tiny = 1e-300
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    c, h = 1.0, d
    for m in range(1, 100_000):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            step = c * d
            h *= step
        if abs(step - 1.0) < 1e-16:
            return h
    raise ArithmeticError(f"incomplete beta ({a}, {b}, {x}) did not converge")  # pragma: no cover


def _lgamma_shift(z: float, s: float) -> float:
    """ln Gamma(z + s) - ln Gamma(z). For large z, lgamma's two large values cancel (1e-10
    relative error at z = 5e5); Stirling's series of the difference keeps full precision there
    (its next term is below 1e-19 for z >= 100)."""
    if z < 100.0:
        return math.lgamma(z + s) - math.lgamma(z)
    w = z + s
    return ((z - 0.5) * math.log1p(s / z) + s * math.log(w) - s
            + (1.0 / w - 1.0 / z) / 12.0 - (1.0 / w ** 3 - 1.0 / z ** 3) / 360.0
            + (1.0 / w ** 5 - 1.0 / z ** 5) / 1260.0)


def _beta_regularized(a: float, b: float, x: float, one_minus_x: float) -> float:
    """I_x(a, b), with 1 - x passed in (computed without cancellation by the caller)."""
    if x <= 0.0:
        return 0.0
    if one_minus_x <= 0.0:
        return 1.0
    # log x and log(1 - x) from whichever of the two is accurate (x near 1: log1p(-(1 - x)))
    log_x, log_1mx = ((math.log1p(-one_minus_x), math.log(one_minus_x)) if x > 0.5
                      else (math.log(x), math.log1p(-x)))
    big, small = max(a, b), min(a, b)
    log_front = _lgamma_shift(big, small) - math.lgamma(small) + a * log_x + b * log_1mx
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, one_minus_x) / b


def t_two_sided_tail(t: float, df: float) -> float:
    """P(|T| > t) for Student's t with ``df`` degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    t2 = t * t
    return _beta_regularized(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


#: from this many degrees of freedom the quantile is the expansion below: the continued fraction
#: needs about sqrt(df) steps there and its rounding grows with them (3e-12 relative at 1e6)
_T_EXPANSION_DF = 3000.0


def _t_quantile_expansion(q: float, df: float) -> float:
    """Fisher's (1925) expansion of the t quantile in powers of 1/df around the normal quantile
    z (Abramowitz & Stegun 26.7.5, to 1/df^4); the first term left out is below 1e-16 relative
    for df >= 3000 at the quantiles an interval uses."""
    from statistics import NormalDist
    z = NormalDist().inv_cdf(q)
    z2 = z * z
    return z * (1.0 + (z2 + 1.0) / (4.0 * df)
                + ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * df ** 2)
                + (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * df ** 3)
                + ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / (92160.0 * df ** 4))


@functools.lru_cache(maxsize=256)
def t_quantile(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t distribution with ``df`` > 0 degrees of freedom.

    Bisection on the exact tail (:func:`t_two_sided_tail`) down to adjacent floats, or for
    df >= 3000 the expansion in 1/df; within 3e-13 relative of quantiles solved to 25 digits by
    mpmath (tests/data/t_quantiles_mpmath.csv; scipy.stats.t.ppf 1.17 agrees to 3e-13, 1.15 is
    up to 5e-11 off). Remembered per (q, df)."""
    if not (0.0 < q < 1.0) or not df > 0 or math.isinf(df):
        raise ValueError(f"t_quantile({q}, {df}): expected 0 < q < 1 and a finite df > 0")
    if q == 0.5:
        return 0.0
    if q < 0.5:
        return -t_quantile(1.0 - q, df)
    return _t_quantile_expansion(q, df) if df >= _T_EXPANSION_DF else _t_quantile_bisection(q, df)


def _t_quantile_bisection(q: float, df: float) -> float:
    """The upper quantile ``q`` > 0.5 by bisection on the exact tail, down to adjacent floats."""
    target = 2.0 * (1.0 - q)            # two-sided tail beyond the quantile
    lo, hi = 0.0, 1.0
    while t_two_sided_tail(hi, df) > target:
        lo, hi = hi, hi * 2.0
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:      # adjacent floats: the tail crosses the target between them
            return hi
        if t_two_sided_tail(mid, df) > target:
            lo = mid
        else:
            hi = mid


def mean_t_interval(samples: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of its two-sided Student-t interval) over independent samples; the mean
    is NaN for no samples and the half-width NaN for fewer than two (never a zero width). The
    arithmetic alone: outputs use :func:`t_interval` (its minimum sample count, ``[low, high]``,
    the log scale for ratios)."""
    xs = [float(x) for x in samples]
    n = len(xs)
    if n == 0:
        return float("nan"), float("nan")
    m = sum(xs) / n
    if n < 2:
        return m, float("nan")
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)


def t_interval(samples: Sequence[float], *, positive: bool = False, center: float | None = None,
               lower: float | None = None, confidence: float = 0.95) -> tuple[float, list[float] | None]:
    """(estimate, ``[low, high]`` 95% Student-t interval) over independent samples, or
    (estimate, None) below :data:`MIN_T_SAMPLES` samples. The estimate is ``center`` (e.g. a
    ratio of totals over the same samples) or else the mean.

    ``positive`` (a ratio or a rate: every sample > 0): the interval is built on the log scale,
    ``center x exp(+-t s_log / sqrt(n))`` with ``s_log`` the standard deviation of the samples'
    logarithms (to first order their relative standard deviation), so both bounds are positive
    and the interval is symmetric in ratio terms (1/r maps to the same interval inverted).
    A non-positive sample gives no log-scale interval (None). ``lower``: the smallest value the
    quantity can take (0 for a time that can be 0 in a sample); the linear interval is cut there."""
    xs = [float(x) for x in samples]
    n = len(xs)
    mean = sum(xs) / n if n else float("nan")
    est = float(center) if center is not None else mean
    if n < MIN_T_SAMPLES or not all(math.isfinite(x) for x in xs) or not math.isfinite(est):
        return est, None
    q = t_quantile(0.5 + confidence / 2.0, n - 1)
    if positive:
        if min(xs) <= 0 or est <= 0:
            return est, None
        logs = [math.log(x) for x in xs]
        ml = sum(logs) / n
        h = q * math.sqrt(sum((v - ml) ** 2 for v in logs) / (n - 1)) / math.sqrt(n)
        return est, [est * math.exp(-h), est * math.exp(h)]
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    h = q * sd / math.sqrt(n)
    return est, [est - h if lower is None else max(lower, est - h), est + h]


def excludes_zero(ci: Sequence[float] | None, scale: float, rel_tol: float = ZERO_REL_TOL) -> bool:
    """True when the interval ``[low, high]`` lies beyond zero by more than ``rel_tol`` x
    ``|scale|`` (the magnitude of the values differenced, e.g. the base point's value): a
    difference of 1e-7 on a value of 0.5 is rounding noise, however narrow its interval."""
    if not ci or any(c is None or c != c for c in ci):
        return False
    tol = rel_tol * abs(float(scale))
    return float(ci[0]) > tol or float(ci[1]) < -tol
