"""Exact values of the statistics helpers (``ahasd_sim/metrics/stats.py``).

Every expected number is computed by hand in the test's docstring: ratios of totals, the
derived columns of older windows tables, the window resamples of a fixed seed (the generator's
draws are written out, and the bootstrap is recomputed from them row by row), the percentile
bounds by linear interpolation, paired and stratified resampling, seed averaging, formatting.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ahasd_sim.metrics import stats


@pytest.fixture(autouse=True)
def _hand_countable_windows(monkeypatch):
    """These tests check the resampling arithmetic on 2 to 4 windows, counted by hand; the
    minimum window count of a published interval (stats.MIN_BOOTSTRAP_WINDOWS) is tested in
    test_sizes_ok_needs_the_minimum_and_two_windows_per_stratum, which restores it."""
    monkeypatch.setattr(stats, "MIN_BOOTSTRAP_WINDOWS", 2)


def ex(x):
    return pytest.approx(x, rel=1e-12, abs=0)


# ------------------------------------------------------------------ the method's constants
def test_ratio_table_resamples_seed_and_method_text():
    """Each metric's (numerator, denominator) totals; 10^4 resamples seeded 0; the method line."""
    assert stats.RATIOS == {
        "throughput_tok_s": ("generated_tokens", "decode_makespan_s"),
        "throughput_e2e_tok_s": ("generated_tokens", "makespan_s"),
        "tokens_per_j": ("generated_tokens", "decode_energy_j"),
        "tokens_per_j_e2e": ("generated_tokens", "energy_j"),
        "energy_per_token_j": ("decode_energy_j", "generated_tokens"),
    }
    assert stats.BOOTSTRAP_RESAMPLES == 10_000 and stats.BOOTSTRAP_SEED == 0
    assert stats.METHOD == ("ratio of totals over trace windows; 95% percentile bootstrap over whole windows "
                            "(10000 resamples, paired for ratios between configurations; none below 5 windows)")


# ------------------------------------------------------------------ totals and ratios
def test_totals_reads_a_column_or_derives_decode_time_and_energy():
    """decode time = makespan - prefill = [3 - 1, 5 - 2] = [2, 3]; decode energy = energy per
    token x tokens = [0.5 x 4, 0.25 x 8] = [2, 2]. A present column wins over the derivation."""
    old = {"makespan_s": [3.0, 5.0], "prefill_s": [1.0, 2.0], "energy_per_token_j": [0.5, 0.25],
           "generated_tokens": [4, 8]}
    assert stats.totals(old, "decode_makespan_s").tolist() == [2.0, 3.0]
    assert stats.totals(old, "decode_energy_j").tolist() == [2.0, 2.0]
    assert stats.totals(old, "generated_tokens").dtype == np.float64
    assert stats.totals(pd.DataFrame(old), "decode_makespan_s").tolist() == [2.0, 3.0]
    new = dict(old, decode_makespan_s=[7.0, 9.0], decode_energy_j=[1.0, 1.5])
    assert stats.totals(new, "decode_makespan_s").tolist() == [7.0, 9.0]
    assert stats.totals(new, "decode_energy_j").tolist() == [1.0, 1.5]


@pytest.mark.parametrize("name, table", [
    ("decode_makespan_s", {"makespan_s": [1.0]}),             # prefill missing
    ("decode_makespan_s", {"prefill_s": [1.0]}),              # makespan missing
    ("decode_energy_j", {"energy_per_token_j": [1.0]}),       # tokens missing
    ("decode_energy_j", {"generated_tokens": [1.0]}),         # energy per token missing
    ("energy_j", {"makespan_s": [1.0], "prefill_s": [0.5]}),  # not derivable at all
])
def test_totals_without_the_inputs_of_a_derivation_is_a_key_error(name, table):
    with pytest.raises(KeyError) as e:
        stats.totals(table, name)
    assert e.value.args[0] == f"windows table has no column {name!r} (needed by a ratio estimator)"


def test_has_totals_needs_both_columns_of_the_metric():
    t = {"generated_tokens": [1.0], "makespan_s": [2.0], "prefill_s": [1.0]}
    assert stats.has_totals(t, "throughput_tok_s")          # decode time derived
    assert stats.has_totals(t, "throughput_e2e_tok_s")
    assert not stats.has_totals(t, "tokens_per_j")           # no energy
    assert not stats.has_totals({"makespan_s": [2.0]}, "throughput_e2e_tok_s")   # no tokens


def test_ratio_of_totals_is_total_over_total_and_zero_without_a_positive_denominator():
    """[1, 2, 3] / [2, 2, 2]: 6 / 6 = 1 (the mean of ratios would be (0.5 + 1 + 1.5) / 3 = 1 too,
    so also [1, 9] / [1, 3]: 10 / 4 = 2.5, where the mean of ratios is (1 + 3) / 2 = 2)."""
    assert stats.ratio_of_totals([1, 2, 3], [2, 2, 2]) == 1.0
    assert stats.ratio_of_totals([1, 9], [1, 3]) == 2.5
    assert stats.ratio_of_totals([1.0], [0.0]) == 0.0
    assert stats.ratio_of_totals([1.0], [-2.0]) == 0.0
    assert isinstance(stats.ratio_of_totals(np.array([1]), np.array([4])), float)
    # fsum: 1e16 + 1 - 1e16 is 1 exactly (a left-to-right float sum gives 0)
    assert stats.ratio_of_totals([1e16, 1.0, -1e16], [1.0]) == 1.0


def test_pooled_rate_of_every_metric():
    """Two windows: tokens [10, 30], decode time [1, 3] (makespan [2, 5], prefill [1, 2]), decode
    energy [2, 6], energy [4, 6]. Throughput 40 / 4 = 10; e2e 40 / 7; tokens/J 40 / 8 = 5, e2e
    40 / 10 = 4; energy/token 8 / 40 = 0.2."""
    w = pd.DataFrame({"generated_tokens": [10, 30], "makespan_s": [2.0, 5.0], "prefill_s": [1.0, 2.0],
                      "decode_energy_j": [2.0, 6.0], "energy_j": [4.0, 6.0]})
    assert stats.pooled_rate(w, "throughput_tok_s") == 10.0
    assert stats.pooled_rate(w, "throughput_e2e_tok_s") == ex(40 / 7)
    assert stats.pooled_rate(w, "tokens_per_j") == 5.0
    assert stats.pooled_rate(w, "tokens_per_j_e2e") == 4.0
    assert stats.pooled_rate(w, "energy_per_token_j") == 0.2


# ------------------------------------------------------------------ resampling
def test_resample_indices_of_seed_5():
    """default_rng(5).integers(0, 3, (4, 3)) = [[2 2 0] [2 1 1] [1 0 2] [0 0 1]]; the default
    seed 0 draws default_rng(0)'s, 10^4 resamples."""
    idx = stats.resample_indices(3, n_resamples=4, seed=5)
    assert idx.tolist() == [[2, 2, 0], [2, 1, 1], [1, 0, 2], [0, 0, 1]]
    d = stats.resample_indices(3)
    assert d.shape == (10_000, 3)
    assert np.array_equal(d, np.random.default_rng(0).integers(0, 3, size=(10_000, 3)))


def test_stratified_resample_draws_each_stratum_from_its_own_windows():
    """Labels a b a b: stratum a = windows {0, 2}, b = {1, 3}, drawn in order of first
    appearance from one generator. default_rng(0).integers(0, 2, (2, 2)) = [[1 1] [1 0]] ->
    a's columns [[2 2] [2 0]]; the next draw [[0 0] [0 0]] -> b's [[1 1] [1 1]]. Result
    [[2 1 2 1] [2 1 0 1]]: every index stays inside its window's stratum."""
    idx = stats.resample_indices(4, ["a", "b", "a", "b"], n_resamples=2, seed=0)
    assert idx.tolist() == [[2, 1, 2, 1], [2, 1, 0, 1]]
    rng = np.random.default_rng(0)
    a = np.array([0, 2])[rng.integers(0, 2, size=(2, 2))]
    b = np.array([1, 3])[rng.integers(0, 2, size=(2, 2))]
    assert idx[:, [0, 2]].tolist() == a.tolist() and idx[:, [1, 3]].tolist() == b.tolist()
    # three strata of unequal size: each column only ever holds windows of its label
    lab = ["x", "y", "y", "z", "z", "z"]
    big = stats.resample_indices(6, lab, n_resamples=500, seed=3)
    assert big.dtype == np.int64
    for j, l in enumerate(lab):
        assert {lab[i] for i in big[:, j]} == {l}
    assert set(big[:, 3].tolist()) == {3, 4, 5}
    with pytest.raises(ValueError, match="^one stratum label per window$"):
        stats.resample_indices(3, ["a", "b"])


def test_sizes_ok_needs_the_minimum_and_two_windows_per_stratum(monkeypatch):
    """A bootstrap interval needs MIN_BOOTSTRAP_WINDOWS (5) windows: 4 windows have 35 distinct
    resamples, too few for a 2.5% percentile; 5 have 126. With strata, two per stratum too."""
    monkeypatch.setattr(stats, "MIN_BOOTSTRAP_WINDOWS", 5)
    assert not stats._sizes_ok(4, None) and stats._sizes_ok(5, None)
    assert stats.ratio_ci([1.0, 2.0, 3.0, 4.0], [1.0] * 4)[1] is None
    assert stats.ratio_ci([1.0, 2.0, 3.0, 4.0, 5.0], [1.0] * 5)[1] is not None
    assert stats.too_few(4) == "n<5" and stats.too_few(5) is None and stats.too_few(2, "t") == "n<3"
    assert not stats._sizes_ok(5, ["a", "a", "a", "a", "b"])     # b has one window
    assert stats._sizes_ok(6, ["a", "b", "a", "b", "a", "b"])
    monkeypatch.setattr(stats, "MIN_BOOTSTRAP_WINDOWS", 2)
    assert not stats._sizes_ok(1, None) and stats._sizes_ok(2, None)
    assert stats._sizes_ok(4, ["a", "b", "a", "b"])
    assert not stats._sizes_ok(3, ["a", "b", "a"])         # b has one window
    assert not stats._sizes_ok(0, [])
    assert stats._sizes_ok(3, ["a", "a", "a"])


def test_percentile_interpolates_and_drops_non_finite_draws():
    """draws 0..40 (41 values): the 2.5% quantile sits at position 0.025 x 40 = 1 -> 1.0, the 97.5%
    at 39 -> 39.0. [1, 2, inf, nan] keeps [1, 2]: positions 0.025 and 0.975 -> 1.025, 1.975. No
    finite draw: the point twice."""
    assert stats._percentile(5.0, np.arange(41, dtype=float)) == [1.0, 39.0]
    assert stats._percentile(5.0, np.array([1.0, 2.0, np.inf, np.nan])) == [ex(1.025), ex(1.975)]
    assert stats._percentile(5.0, np.array([np.nan, np.inf])) == [5.0, 5.0]
    lo, hi = stats._percentile(0.0, np.array([3.0, 1.0]))
    assert type(lo) is float and type(hi) is float


# ------------------------------------------------------------------ intervals
NUM, DEN = [1.0, 2.0, 4.0], [1.0, 1.0, 2.0]


def test_ratio_ci_by_hand_on_four_resamples():
    """num [1 2 4], den [1 1 2]: point 7 / 4. Seed 5, 4 resamples (rows above): [2 2 0] -> 9/5 =
    1.8; [2 1 1] -> 8/4 = 2; [1 0 2] -> 7/4; [0 0 1] -> 4/3. Sorted [4/3, 1.75, 1.8, 2]; 2.5% at
    position 0.075: 4/3 + 0.075 x (1.75 - 4/3) = 4/3 + 0.03125; 97.5% at 2.925: 1.8 + 0.925 x 0.2
    = 1.985."""
    point, ci = stats.ratio_ci(NUM, DEN, n_resamples=4, seed=5)
    assert point == 1.75
    assert ci == [ex(4 / 3 + 0.03125), ex(1.985)]


def test_ratio_ci_default_resamples_match_a_by_hand_bootstrap():
    """The default (10^4 resamples, seed 0) recomputed from the generator's index rows: row sums
    of num over row sums of den, sorted, linear interpolation at 0.025 (B - 1) and 0.975 (B - 1)."""
    num, den = np.array([3.0, 1.0, 4.0, 1.0]), np.array([1.0, 2.0, 2.0, 3.0])
    idx = np.random.default_rng(0).integers(0, 4, size=(10_000, 4))
    d = sorted(sum(num[r]) / sum(den[r]) for r in idx.tolist())

    def q(p):
        pos = p * (len(d) - 1)
        i = int(math.floor(pos))
        return d[i] + (pos - i) * (d[i + 1] - d[i])
    point, ci = stats.ratio_ci(num, den)
    assert point == 9 / 8
    assert ci == [ex(q(0.025)), ex(q(0.975))]


def test_no_interval_below_two_windows_or_with_a_singleton_stratum():
    assert stats.ratio_ci([3.0], [2.0]) == (1.5, None)
    assert stats.ratio_ci(NUM, DEN, strata=["a", "a", "b"]) == (1.75, None)
    assert stats.paired_ratio_ci([1.0], [1.0], [1.0], [2.0]) == (2.0, None)


def test_stratified_ratio_ci_resamples_within_strata():
    """Windows 0, 2 (stratum a) and 1, 3 (b); seed 0, 2 resamples: rows [2 1 2 1] and [2 1 0 1]
    (above). num [1 2 3 4], den [1 1 1 1]: row sums 3+2+3+2 = 10 and 3+2+1+2 = 8 over 4 -> 2.5,
    2. Sorted [2, 2.5]: 2 + 0.025 x 0.5 = 2.0125 and 2 + 0.975 x 0.5 = 2.4875. Point 10 / 4."""
    point, ci = stats.ratio_ci([1.0, 2.0, 3.0, 4.0], [1.0] * 4, strata=["a", "b", "a", "b"],
                               n_resamples=2, seed=0)
    assert point == 2.5 and ci == [ex(2.0125), ex(2.4875)]


def test_paired_ratio_ci_resamples_the_same_windows_for_both():
    """a = (num [1 2 4], den [1 1 2]), b = (num [1 1 1], den [1 2 1]); point (7/4) / (3/4) = 7/3.
    Seed 5 rows: [2 2 0] a 1.8, b 3/3 = 1 -> 1.8; [2 1 1] a 2, b 3/5 -> 10/3; [1 0 2] a 1.75,
    b 3/4 -> 7/3; [0 0 1] a 4/3, b 3/4 -> 16/9. Sorted [16/9, 1.8, 7/3, 10/3]: 2.5% = 16/9 + 0.075
    x (1.8 - 16/9) = (16 + 0.015) / 9; 97.5% = 7/3 + 0.925 x 1."""
    point, ci = stats.paired_ratio_ci(NUM, DEN, [1.0, 1.0, 1.0], [1.0, 2.0, 1.0], n_resamples=4, seed=5)
    assert point == ex(7 / 3)
    assert ci == [ex(16.015 / 9), ex(7 / 3 + 0.925)]


def test_paired_ratio_ci_stratified_and_degenerate_cases():
    """Stratified a b a b, seed 0, 2 resamples (rows [2 1 2 1], [2 1 0 1]): a = num [1 2 3 4] over
    den 1s -> 10/4, 8/4; b = num 1s over den [1 1 1 2]: neither row draws window 3, so b = 4/4 = 1.
    Ratios 2.5, 2 -> [2.0125, 2.4875]; point (10/4) / (4/5) = 3.125. A zero b rate gives a NaN
    point; unequal lengths raise."""
    point, ci = stats.paired_ratio_ci([1.0, 2.0, 3.0, 4.0], [1.0] * 4, [1.0] * 4, [1.0, 1.0, 1.0, 2.0],
                                      strata=["a", "b", "a", "b"], n_resamples=2, seed=0)
    assert point == 3.125 and ci == [ex(2.0125), ex(2.4875)]
    p, _ = stats.paired_ratio_ci([1.0, 1.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0])
    assert math.isnan(p)
    for bad in (([1.0], [1.0, 1.0], [1.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, 1.0], [1.0], [1.0, 1.0]),
                ([1.0, 1.0], [1.0, 1.0], [1.0, 1.0], [1.0])):
        with pytest.raises(ValueError, match="^paired ratio: both configurations need the same windows$"):
            stats.paired_ratio_ci(*bad)


def test_metric_ci_and_paired_metric_ci_read_the_metric_columns():
    """Throughput of a: tokens [1 2 4] / decode time [1 1 2] -> the seed-5 interval above; of b:
    tokens [1 1 1] / decode time (makespan - prefill) [1 2 1]; paired a / b -> the paired one."""
    a = {"generated_tokens": NUM, "decode_makespan_s": DEN}
    b = {"generated_tokens": [1.0, 1.0, 1.0], "makespan_s": [2.0, 3.0, 2.0], "prefill_s": [1.0, 1.0, 1.0]}
    assert stats.metric_ci(a, "throughput_tok_s", n_resamples=4, seed=5) == (1.75, [ex(4 / 3 + 0.03125), ex(1.985)])
    p, ci = stats.paired_metric_ci(a, b, "throughput_tok_s", n_resamples=4, seed=5)
    assert p == ex(7 / 3) and ci == [ex(16.015 / 9), ex(7 / 3 + 0.925)]
    # energy per token: numerator and denominator the other way round (den / num of tokens/J)
    e = {"generated_tokens": [2.0, 2.0], "decode_energy_j": [1.0, 3.0]}
    assert stats.metric_ci(e, "energy_per_token_j")[0] == 1.0
    assert stats.metric_ci(e, "tokens_per_j")[0] == 1.0
    e2 = {"generated_tokens": [2.0, 6.0], "decode_energy_j": [1.0, 1.0]}
    assert stats.metric_ci(e2, "energy_per_token_j")[0] == 0.25


# ------------------------------------------------------------------ seeds
def test_seed_averaged_averages_the_seeds_of_each_window():
    """Window 0 ran seeds 1, 2 (tokens 10, 20; decode time 1, 3), window 1 seed 1 (tokens 6,
    time 2). Rows: window 0 -> tokens 15, time 2, seeds 2; window 1 -> 6, 2, 1. An older table
    without decode_makespan_s gets it derived (makespan - prefill) before averaging."""
    t = pd.DataFrame({"variant": ["v", "v", "v"], "window": [0, 0, 1], "seed": [1, 2, 1],
                      "generated_tokens": [10, 20, 6], "makespan_s": [2.0, 5.0, 3.0], "prefill_s": [1.0, 2.0, 1.0],
                      "other": [1, 2, 3]})
    out = stats.seed_averaged(t, ["variant", "window", "seed"])
    assert out["window"].tolist() == [0, 1]
    assert out["generated_tokens"].tolist() == [15.0, 6.0]
    assert out["decode_makespan_s"].tolist() == [2.0, 2.0]
    assert out["makespan_s"].tolist() == [3.5, 3.0]
    assert out["seeds"].tolist() == [2, 1]
    assert "other" not in out.columns and "seed" not in out.columns and "decode_energy_j" not in out.columns
    assert stats.pooled_rate(out, "throughput_tok_s") == 21 / 4
    # no seed column, or no key besides the seed: the table itself
    assert stats.seed_averaged(t.drop(columns="seed"), ["window"]) is not None
    nos = t.drop(columns="seed")
    assert stats.seed_averaged(nos, ["window"]) is nos
    assert stats.seed_averaged(t, ["seed", "missing"]) is t


def test_seed_averaged_keeps_first_appearance_order_and_missing_keys():
    """groupby(sort=False, dropna=False): windows in order of first appearance (2 before 1), a
    NaN key is its own group; a custom seed column name."""
    t = pd.DataFrame({"window": [2, 1, 2, np.nan], "s": [0, 0, 1, 0], "generated_tokens": [1.0, 2.0, 3.0, 4.0]})
    out = stats.seed_averaged(t, ["window"], seed_col="s")
    assert out["generated_tokens"].tolist() == [2.0, 2.0, 4.0]
    assert out["seeds"].tolist() == [2, 1, 1]
    assert out.columns.tolist() == ["window", "generated_tokens", "seeds"]


# ------------------------------------------------------------------ formatting
def test_fmt_ci_and_ci_fields():
    assert stats.fmt_ci(1.2345, [1.1, 1.36]) == "1.23 [1.10, 1.36]"
    assert stats.fmt_ci(1.2345, [1.1, 1.36], digits=1) == "1.2 [1.1, 1.4]"
    assert stats.fmt_ci(1.2345, None) == "1.23"
    assert stats.fmt_ci(1.2345, []) == "1.23"
    assert stats.fmt_ci(None, [1.0, 2.0]) == "n/a"
    assert stats.fmt_ci(float("nan"), [1.0, 2.0]) == "n/a"
    assert stats.fmt_ci(3, None, 0) == "3"
    assert stats.ci_fields("x", 2.0, [1.0, 3.0]) == {"x": 2.0, "x_ci95": [1.0, 3.0], "x_ci95_low": 1.0,
                                                      "x_ci95_high": 3.0}
    assert stats.ci_fields("x", 2.0, None) == {"x": 2.0, "x_ci95": None, "x_ci95_low": None, "x_ci95_high": None}


def test_percentile_of_one_finite_draw_is_that_draw():
    """[3, nan]: one finite draw; both quantiles are 3 (not the point 5)."""
    assert stats._percentile(5.0, np.array([3.0, np.nan])) == [3.0, 3.0]


@pytest.mark.filterwarnings("error")
def test_intervals_with_zero_denominators_in_a_resample_raise_no_warning():
    """num [0, 1], den [0, 1]: a resample of window 0 twice is 0 / 0 (NaN, dropped); num [1, 1],
    den [0, 1]: 2 / 0 (inf, dropped). Seed 0, 4 resamples of 2 windows: default_rng(0).integers(0,
    2, (4, 2)) = [[1 1] [1 0] [0 0] [0 0]] -> draws 1, 1/1 = 1 (0+1 / 0+1), nan, nan -> [1, 1];
    and 1, 2, inf, inf -> finite [1, 2] -> [1.025, 1.975]. Paired the same way."""
    assert stats.ratio_ci([0.0, 1.0], [0.0, 1.0], n_resamples=4, seed=0) == (1.0, [1.0, 1.0])
    assert stats.ratio_ci([1.0, 1.0], [0.0, 1.0], n_resamples=4, seed=0) == (2.0, [ex(1.025), ex(1.975)])
    p, ci = stats.paired_ratio_ci([0.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0], n_resamples=4, seed=0)
    assert p == 1.0 and ci == [1.0, 1.0]


def test_totals_derives_from_exactly_the_two_columns_it_needs():
    """A table holding only makespan and prefill (or only energy per token and tokens) still
    derives decode time [2] (or decode energy [3 x 0.5 = 1.5])."""
    assert stats.totals({"makespan_s": [3.0], "prefill_s": [1.0]}, "decode_makespan_s").tolist() == [2.0]
    assert stats.totals({"energy_per_token_j": [0.5], "generated_tokens": [3.0]}, "decode_energy_j").tolist() == [1.5]


def test_object_columns_give_float_totals_and_the_same_intervals():
    """A windows table whose columns came out as object dtype (e.g. built from rows holding None
    elsewhere) gives float64 totals, derived ones too, and the same intervals as float input."""
    obj = pd.DataFrame({"makespan_s": pd.Series([3.0, 5.0], dtype=object),
                        "prefill_s": pd.Series([1.0, 2.0], dtype=object),
                        "energy_per_token_j": pd.Series([0.5, 0.25], dtype=object),
                        "generated_tokens": pd.Series([4, 8], dtype=object)})
    for name in ("decode_makespan_s", "decode_energy_j", "generated_tokens"):
        assert stats.totals(obj, name).dtype == np.float64
    assert stats.totals(obj, "decode_makespan_s").tolist() == [2.0, 3.0]
    num, den = np.array(NUM, dtype=object), np.array(DEN, dtype=object)
    assert stats.ratio_ci(num, den, n_resamples=4, seed=5) == (1.75, [ex(4 / 3 + 0.03125), ex(1.985)])
    one = np.array([1.0, 1.0, 1.0], dtype=object)
    p, ci = stats.paired_ratio_ci(num, den, one, np.array([1.0, 2.0, 1.0], dtype=object), n_resamples=4, seed=5)
    assert p == ex(7 / 3) and ci == [ex(16.015 / 9), ex(7 / 3 + 0.925)]


def test_interval_without_any_finite_resample_is_the_point_twice():
    """Decode time 0 in every window: the rate is 0 (no positive denominator) and every resample
    divides by 0: the interval is [0, 0]. Paired with a zero-time a: 0 / 1 = 0, draws inf."""
    assert stats.ratio_ci([1.0, 1.0], [0.0, 0.0]) == (0.0, [0.0, 0.0])
    assert stats.paired_ratio_ci([1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]) == (0.0, [0.0, 0.0])


def test_paired_interval_needs_two_windows_per_stratum():
    assert stats.paired_ratio_ci(NUM, DEN, NUM, DEN, strata=["a", "a", "b"]) == (1.0, None)


@pytest.mark.filterwarnings("error")
def test_paired_interval_with_a_zero_time_resample_raises_no_warning():
    """a: num [1 1], den [0 1]; b: all 1. Seed 0, 4 resamples ([1 1], [1 0], [0 0], [0 0]):
    a's draws 1, 2, inf, inf over b's 1 -> finite [1, 2] -> [1.025, 1.975]; point 2 / 1."""
    p, ci = stats.paired_ratio_ci([1.0, 1.0], [0.0, 1.0], [1.0, 1.0], [1.0, 1.0], n_resamples=4, seed=0)
    assert p == 2.0 and ci == [ex(1.025), ex(1.975)]


# ------------------------------------------------------------------ window placement (simulation.py)
def test_disjoint_window_placement_by_hand():
    """Prompt starts [0 4 8 12 16 30], 40 positions, windows of 10: greedy count 0 (to 10), 12 (to
    22), 30 (to 40) = 3. Three windows aimed at the evenly spread fitting starts fits[0, round(2.5)
    = 2, 5] = 0, 8, 30; latest starts that leave room for the rest: 30, 16, 4. Window 0 at 0;
    window 1 at the first start >= max(10, 8) = 12 (8 would overlap); window 2 at 30."""
    from ahasd_sim.simulation import disjoint_window_starts, max_disjoint_windows
    starts = [0, 4, 8, 12, 16, 30]
    assert max_disjoint_windows(starts, 40, 10) == 3
    assert max_disjoint_windows(starts, 39, 10) == 2            # 30 + 10 > 39
    assert disjoint_window_starts(starts, 40, 10, 3) == [0, 12, 30]
    # evenly spread and already disjoint: exactly them (aims 0, 20, 40)
    assert disjoint_window_starts([0, 10, 20, 30, 40], 50, 10, 3) == [0, 20, 40]
