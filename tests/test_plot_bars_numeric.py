"""scripts/plot_bars.py --by <numeric column>: the table holds floats (12.0, 16.0) where the
command line says "12"; the bars are drawn (the check and the ratio table compare the same
values), and a value no row has is an error naming --baseline, not --match."""
from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from conftest import ROOT  # noqa: E402

SCRIPT = ROOT / "scripts" / "plot_bars.py"


def _results(tmp_path):
    p = tmp_path / "results.csv"
    pd.DataFrame({"point": list("abcd"), "status": "ok", "pim.ranks": [12.0, 16.0, 12.0, 16.0],
                  "model_pair": ["x/y", "x/y", "u/v", "u/v"], "seed": 0,
                  "generated_tokens": [6, 6, 6, 6], "decode_makespan_s": [6.0, 3.0, 4.0, 2.0],
                  "decode_energy_j": [6.0, 2.0, 4.0, 4.0], "throughput_tok_s": [1.0, 2.0, 1.5, 3.0]}).to_csv(p, index=False)
    return p


def _run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_numeric_by_column_draws_the_ratios(tmp_path, monkeypatch):
    """16 ranks over 12: throughput 6/3 over 6/6 = 2 (x/y) and 6/2 over 6/4 = 2 (u/v)."""
    from ahasd_sim.plots import bars
    tab = {}
    monkeypatch.setattr(bars, "save_figure", lambda fig, out: [])
    orig = bars.plot_grouped_bars
    monkeypatch.setattr(bars, "plot_grouped_bars", lambda ax, t, **kw: tab.setdefault("t", t) is not None
                        and orig(ax, t, **kw))
    df = pd.read_csv(_results(tmp_path))
    bars.normalised_bars(df, tmp_path / "f", by="pim.ranks", baseline="12", bars=["12", "16"],
                         group="model_pair", match=["model_pair", "seed"], metrics={"throughput_tok_s": "Throughput"})
    t = tab["t"]
    r = t[t["bar"] == 16.0].set_index("group")["ratio"]
    assert r["x/y"] == pytest.approx(2.0) and r["u/v"] == pytest.approx(2.0)


def test_numeric_by_from_the_command_line(tmp_path):
    res = _results(tmp_path)
    ok = _run("--results", res, "--by", "pim.ranks", "--baseline", "12", "--match", "model_pair,seed",
              "--metrics", "throughput_tok_s", "--out", tmp_path / "f")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "f.png").is_file()
    bad = _run("--results", res, "--by", "pim.ranks", "--baseline", "8", "--match", "model_pair,seed",
               "--metrics", "throughput_tok_s", "--out", tmp_path / "g")
    assert bad.returncode == 2 and "--baseline 8" in bad.stderr and "--match" not in bad.stderr
    assert bad.stderr.strip().count("\n") == 0
