"""Writes t_quantiles_mpmath.csv: Student-t quantiles to 25 significant digits, the reference that
tests/test_t_interval.py checks metrics.stats.t_quantile against (scipy's own values move between
versions: 1.15.3 is up to 4.7e-11 off at 75 df, 1.17.1 within 1e-15).

Needs mpmath (a development tool, not a dependency of the simulator or its tests):
    pip install mpmath && python tests/data/make_t_quantiles.py

Each value solves F(t) = q at 40 digits (q the double the tests pass), F the t distribution's CDF through the regularized
incomplete beta function, I_{df/(df+t^2)}(df/2, 1/2) = 2 (1 - F(t)) for t > 0."""
from pathlib import Path

import mpmath as mp

mp.mp.dps = 40
QS = ("0.6", "0.9", "0.95", "0.975", "0.995", "0.9995")
DFS = ("0.5", "1", "2", "2.5", "3", "5", "10", "30", "75", "98", "120", "165", "300", "999.5", "2999",
       "3000", "10000", "1000000")


def cdf(t, df):
    tail = mp.betainc(df / 2, mp.mpf(1) / 2, 0, df / (df + t * t), regularized=True) / 2
    return 1 - tail if t > 0 else tail


def quantile(q, df):
    """The root of F(t) = q (q > 1/2) in a bracket [lo, hi] with a sign change, by Illinois."""
    lo, hi = mp.mpf(0), mp.mpf(1)
    while cdf(hi, df) < q:
        lo, hi = hi, 2 * hi
    return mp.findroot(lambda t: cdf(t, df) - q, (lo, hi), solver="illinois")


rows = ["q,df,t"]
for q in QS:
    for df in DFS:
        # at the binary double nearest q, the value the tests pass (0.95 is 0.9499999999999999556)
        rows.append(f"{q},{df},{mp.nstr(quantile(mp.mpf(float(q)), mp.mpf(df)), 25)}")
Path(__file__).with_name("t_quantiles_mpmath.csv").write_text("\n".join(rows) + "\n")
