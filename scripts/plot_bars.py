#!/usr/bin/env python3
"""Normalised bar chart (throughput, energy efficiency, ...) from a sweep's results.csv.

  python scripts/plot_bars.py --results results/paper/results.csv --baseline gpu_only \
      --bars gpu_only,npu_pim,plus_aau,plus_edc,ahasd --out results/paper/figures/ablation

Bars are the values of --by (default: variant), grouped by --group (default: model_pair) plus
an all-configurations group (ratio of totals); each point is divided by the --baseline row
with the same --match columns. Error bars: 95% paired bootstrap over the points' trace windows
(points/*/windows.csv of the sweep folder); without windows the figure says it has none. Writes OUT.pdf and OUT.png. A missing baseline or bar value, or rows that cannot be
paired with a baseline, are errors (exit 2), not empty figures.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def _list(s: str | None) -> list[str] | None:
    return [x.strip() for x in s.split(",") if x.strip()] if s else None


def parser():
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("--results", required=True, help="results.csv (or the sweep folder)")
    p.add_argument("--by", default="variant", help="column whose values are the bars (default: variant)")
    p.add_argument("--baseline", required=True, help="value of --by that the others are divided by")
    p.add_argument("--bars", default=None, help="comma-separated values of --by, in order (default: all)")
    p.add_argument("--group", default="model_pair", help="column of the bar groups (default: model_pair)")
    p.add_argument("--match", default="model_pair,run.policy,seed",
                   help="columns that pair a row with its baseline (default: model_pair,run.policy,seed)")
    p.add_argument("--metrics", default="throughput_tok_s,tokens_per_j", help="metric columns, one panel each")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--out", required=True, help="output path without suffix (OUT.pdf, OUT.png)")
    return p


def body(a) -> int:
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.plots import normalised_bars
    from ahasd_sim.plots.runs import sweep_windows
    from ahasd_sim.sweep import read_results
    check_output_file(a.out, suffixes=(".pdf", ".png"))
    df = read_results(a.results)
    labels = {"throughput_tok_s": "Throughput", "tokens_per_j": "Energy efficiency",
              "energy_per_token_j": "Energy per token"}
    metrics = {m: labels.get(m, m) for m in _list(a.metrics) or []}
    paths = normalised_bars(df, a.out, by=a.by, baseline=a.baseline, bars=_list(a.bars), group=a.group,
                            match=_list(a.match) or [], metrics=metrics or None, title=a.title,
                            windows=sweep_windows(a.results, df, [a.by, a.group, *(_list(a.match) or [])]))
    print("\n".join(str(x) for x in paths))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
