#!/usr/bin/env python3
"""Normalised bar chart (throughput, energy efficiency, ...) from a sweep's results.csv.

  python scripts/plot_bars.py --results results/paper/results.csv --baseline gpu_only \
      --bars gpu_only,npu_pim,plus_aau,plus_edc,ahasd --out results/paper/figures/ablation

Bars are the values of --by (default: variant), grouped by --group (default: model_pair) plus
a geometric-mean group; each point is divided by the --baseline row with the same --match
columns. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.plots import normalised_bars  # noqa: E402
from ahasd_sim.sweep import read_results  # noqa: E402


def _list(s: str | None) -> list[str] | None:
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results.csv (or the sweep folder)")
    p.add_argument("--by", default="variant", help="column whose values are the bars")
    p.add_argument("--baseline", required=True, help="value of --by that the others are divided by")
    p.add_argument("--bars", default=None, help="comma-separated values of --by, in order (default: all)")
    p.add_argument("--group", default="model_pair", help="column of the bar groups")
    p.add_argument("--match", default="model_pair,run.policy,seed", help="columns that pair a row with its baseline")
    p.add_argument("--metrics", default="throughput_tok_s,tokens_per_j", help="metric columns, one panel each")
    p.add_argument("--title", default=None)
    p.add_argument("--out", required=True, help="output path without suffix")
    a = p.parse_args(argv)
    df = read_results(a.results)
    labels = {"throughput_tok_s": "Throughput", "tokens_per_j": "Energy efficiency",
              "energy_per_token_j": "Energy per token"}
    metrics = {m: labels.get(m, m) for m in _list(a.metrics)}
    paths = normalised_bars(df, a.out, by=a.by, baseline=a.baseline, bars=_list(a.bars), group=a.group,
                            match=_list(a.match), metrics=metrics, title=a.title)
    print("\n".join(str(x) for x in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
