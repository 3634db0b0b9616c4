"""The one Student-t quantile and interval of the project (metrics/stats.py): exact values, scipy
agreement where scipy is installed, and no dependence on it."""
from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.metrics.stats import (_t_quantile_bisection, _t_quantile_expansion, mean_t_interval, t_quantile,
                                     t_two_sided_tail)


@pytest.mark.parametrize("q", [0.6, 0.9, 0.95, 0.975, 0.995, 0.9995])
def test_closed_forms_of_one_and_two_degrees_of_freedom(q):
    """df = 1 (Cauchy): tan(pi (q - 1/2)); df = 2: (2q - 1) / sqrt(2 q (1 - q))."""
    assert t_quantile(q, 1) == pytest.approx(math.tan(math.pi * (q - 0.5)), rel=1e-13)
    assert t_quantile(q, 2) == pytest.approx((2 * q - 1) / math.sqrt(2 * q * (1 - q)), rel=1e-13)


def test_published_table_values():
    """Two-sided 95% points of the standard tables (3 decimals), e.g. Abramowitz & Stegun 26.10."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 7: 2.365, 10: 2.228, 11: 2.201, 20: 2.086,
             30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}
    for df, t in table.items():
        assert round(t_quantile(0.975, df), 3) == t


def test_symmetry_median_and_the_tail_it_inverts():
    for df in (1, 3, 7.5, 40, 2999, 3000, 10_000):
        t = t_quantile(0.975, df)
        assert t_quantile(0.025, df) == -t and t_quantile(0.5, df) == 0.0
        assert t_two_sided_tail(t, df) == pytest.approx(0.05, rel=1e-12)


def test_decreasing_in_df_towards_the_normal_quantile_across_the_expansion():
    """Bisection below 3000 df, the 1/df expansion from there: one smooth decreasing curve above
    1.959963984540054 (the normal quantile)."""
    dfs = [1, 2, 5, 30, 100, 1000, 2998, 2999, 2999.5, 3000, 3001, 1e4, 1e6, 1e9]
    ts = [t_quantile(0.975, df) for df in dfs]
    assert all(a > b for a, b in zip(ts, ts[1:]))
    z = 1.959963984540054
    assert ts[-1] - z == pytest.approx((z ** 3 + z) / 4e9, rel=1e-6)     # the first term in 1/df
    for q in (0.9, 0.975, 0.9995):      # both methods agree where one hands over to the other
        for df in (1000, 3000, 10_000):
            assert _t_quantile_expansion(q, df) == pytest.approx(_t_quantile_bisection(q, df), rel=1e-13)


def test_exact_to_1e12_against_a_25_digit_reference():
    """tests/data/t_quantiles_mpmath.csv: 108 quantiles solved at 40 digits by mpmath
    (tests/data/make_t_quantiles.py), across the bisection (< 3000 df) and the expansion (>= 3000),
    fractional df included; the lower tail by symmetry."""
    ref = (Path(__file__).parent / "data" / "t_quantiles_mpmath.csv").read_text().split()[1:]
    assert len(ref) == 108
    worst = 0.0
    for row in ref:
        q, df, t = (float(v) for v in row.split(","))
        worst = max(worst, abs(t_quantile(q, df) - t) / t, abs(t_quantile(1 - q, df) + t) / t)
    assert worst < 1e-12


def test_agrees_with_scipy():
    """Within scipy's own accuracy: scipy 1.17.1 agrees to 3e-13, but 1.15.3 (the newest for
    Python 3.10) is up to 4.7e-11 off the exact value at 75 df, where this quantile is within 3e-14
    (the reference test above holds the 1e-12 claim)."""
    stats = pytest.importorskip("scipy.stats")
    worst = 0.0
    for q in (0.6, 0.9, 0.95, 0.975, 0.995, 0.9995, 0.025):
        for df in [*range(1, 301), 0.5, 2.5, 999.5, 2999, 3000, 1e4, 1e5, 1e6, 1e8]:
            ref = float(stats.t.ppf(q, df))
            worst = max(worst, abs(t_quantile(q, df) - ref) / abs(ref))
    assert worst < 1e-10


@pytest.mark.parametrize("q, df", [(0.0, 3), (1.0, 3), (float("nan"), 3), (0.975, 0), (0.975, -1),
                                   (0.975, float("inf")), (0.975, float("nan"))])
def test_impossible_arguments_are_refused(q, df):
    with pytest.raises(ValueError, match="expected 0 < q < 1"):
        t_quantile(q, df)


def test_interval_of_a_mean():
    x = [2.0, 4.0, 9.0]
    m, h = mean_t_interval(x)
    assert m == 5.0 and h == pytest.approx(4.302652729749464 * np.std(x, ddof=1) / math.sqrt(3), rel=1e-13)
    assert mean_t_interval(x, confidence=0.9)[1] == pytest.approx(
        0.9 / math.sqrt(2 * 0.95 * 0.05) * np.std(x, ddof=1) / math.sqrt(3), rel=1e-12)
    assert math.isnan(mean_t_interval([1.0])[1]) and all(math.isnan(v) for v in mean_t_interval([]))


def test_no_interval_needs_scipy():
    """A study's, a tree trace's and a phone's intervals come from the same exact quantile with or
    without the optional scipy: none of them imports it (a fresh interpreter, so an import made
    by another test cannot hide one)."""
    code = ("import sys\n"
            "from ahasd_sim.dse import evaluate\n"
            "from ahasd_sim.traces import tree_stats\n"
            "from ahasd_sim.modes.mobile_cloud import engine\n"
            "from ahasd_sim.metrics.stats import mean_t_interval\n"
            "mean_t_interval([1.0, 2.0, 4.0])\n"
            "print(sorted(m for m in sys.modules if m == 'scipy' or m.startswith('scipy.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_t_interval_minimum_bounds_and_log_scale():
    """Below MIN_T_SAMPLES (3) no interval. Linear: mean +- t(0.975, 2) s / sqrt(3) with samples
    1, 2, 3 (s = 1): 2 +- 4.302653 / 1.732051. Log scale for a positive ratio: the samples 0.1,
    1, 10 have logs -2.3026, 0, 2.3026 (s_log = 2.3026), so the interval is centre x exp(+-t
    s_log / sqrt 3) = centre x exp(+-5.7199): positive, where the linear interval of the same
    samples reaches -10.9."""
    from ahasd_sim.metrics.stats import MIN_T_SAMPLES, excludes_zero, t_interval
    assert MIN_T_SAMPLES == 3
    assert t_interval([1.0, 3.0]) == (2.0, None) and t_interval([1.0, 3.0], positive=True) == (2.0, None)
    m, (lo, hi) = t_interval([1.0, 2.0, 3.0])
    h = t_quantile(0.975, 2) / math.sqrt(3)
    assert m == 2.0 and lo == pytest.approx(2.0 - h, rel=1e-14) and hi == pytest.approx(2.0 + h, rel=1e-14)
    xs = [0.1, 1.0, 10.0]
    assert t_interval(xs)[1][0] < 0
    c, (lo, hi) = t_interval(xs, positive=True, center=1.0)
    hl = t_quantile(0.975, 2) * math.log(10.0) / math.sqrt(3)
    assert c == 1.0 and lo == pytest.approx(math.exp(-hl), rel=1e-12) and hi == pytest.approx(math.exp(hl), rel=1e-12)
    assert lo > 0 and lo * hi == pytest.approx(1.0)
    assert t_interval([1.0, -1.0, 2.0], positive=True)[1] is None     # not a positive quantity
    # excludes zero only beyond 1e-6 of the values' magnitude
    assert not excludes_zero([-2.3e-7, -1.2e-7], scale=0.49) and excludes_zero([-2.3e-3, -1.2e-3], scale=0.49)
    assert not excludes_zero(None, 1.0) and not excludes_zero([-1.0, 1.0], 1.0)
