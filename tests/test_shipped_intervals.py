"""No shipped table holds an impossible interval, and every interval has one representation.

Walks every committed CSV under docs/ (the study tables the study figures are drawn from, the
reproduction and MoE tables) and checks each interval column pair ``<q>_ci95_low`` /
``<q>_ci95_high`` (``ci95_low`` / ``ci95_high`` for a table's own quantity): low <= high and
both bounds inside the range of the quantity (a rate, ratio, time or energy is >= 0; a Sobol
index and a rate of acceptance lie in [0, 1]; a difference may take any sign). A half-width
column (``<q>_ci95`` in a CSV, SALib's ``*_conf``) is the second representation the project
retired: every interval is [low, high].

The stamped study tables are regenerated after a change of the statistics; until then this test
fails on them, naming the file and column."""
from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from conftest import ROOT

CSVS = sorted(p for p in (ROOT / "docs").rglob("*.csv"))
UNIT = re.compile(r"^(S1|ST)$|acceptance|hit_rate|utilization|P\(")


def rel(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def quantity_range(q: str) -> tuple[float, float]:
    """The values quantity ``q`` can take (a column name, without its _ci95 suffix)."""
    if "diff" in q:
        return -math.inf, math.inf
    if UNIT.search(q):
        return 0.0, 1.0
    return 0.0, math.inf


def read(path, **kw) -> pd.DataFrame:
    """The table (an empty file, e.g. no study winner to confirm, is an empty table)."""
    return pd.read_csv(path, **kw) if path.read_text().strip() else pd.DataFrame()


def interval_pairs(cols) -> list[tuple[str, str, str]]:
    out = []
    for c in cols:
        if c.endswith("ci95_low") and c[:-4] + "_high" in cols:
            q = c[: -len("ci95_low")].rstrip("_") or "value"
            out.append((q, c, c[:-4] + "_high"))
    return out


@pytest.mark.parametrize("path", CSVS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_interval_bound_outside_the_quantity_range(path):
    df = read(path)
    bad = []
    for q, lo_c, hi_c in interval_pairs(list(df.columns)):
        qlo, qhi = quantity_range(q)
        for i, (lo, hi) in enumerate(zip(pd.to_numeric(df[lo_c], errors="coerce"),
                                         pd.to_numeric(df[hi_c], errors="coerce"))):
            if lo != lo and hi != hi:
                continue                      # no interval (too few samples): allowed
            if lo != lo or hi != hi or lo > hi or lo < qlo or hi > qhi:
                bad.append(f"row {i} {q}: [{lo}, {hi}] outside [{qlo}, {qhi}] or malformed")
    assert not bad, f"{rel(path)}: " + "; ".join(bad[:5])


@pytest.mark.parametrize("path", CSVS, ids=lambda p: str(p.relative_to(ROOT)))
def test_one_interval_representation(path):
    cols = list(read(path, nrows=0).columns)
    half = [c for c in cols if c.endswith("_ci95") or c.endswith("_conf")]
    assert not half, f"{rel(path)}: half-width columns {half}; write [low, high] as _ci95_low/_ci95_high"


def test_the_checker_catches_an_impossible_interval(tmp_path):
    """The walk above is not vacuous: a negative bound of a ratio and a Sobol bound above 1 are
    caught, a negative bound of a difference is not."""
    df = pd.DataFrame({"throughput_ratio_ci95_low": [-0.16], "throughput_ratio_ci95_high": [1.2],
                       "ST_ci95_low": [0.2], "ST_ci95_high": [1.3],
                       "low_diff_ci95_low": [-0.5], "low_diff_ci95_high": [0.1]})
    pairs = {q: quantity_range(q) for q, _, _ in interval_pairs(list(df.columns))}
    assert pairs == {"throughput_ratio": (0.0, math.inf), "ST": (0.0, 1.0), "low_diff": (-math.inf, math.inf)}
    p = tmp_path / "x.csv"
    df.to_csv(p, index=False)
    with pytest.raises(AssertionError, match="throughput_ratio.*ST"):
        test_no_interval_bound_outside_the_quantity_range(p)
