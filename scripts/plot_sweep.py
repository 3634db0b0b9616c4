#!/usr/bin/env python3
"""Heat maps and line plots over sweep axes, from a sweep's results.csv.

  python scripts/plot_sweep.py heatmap --results sweeps/NAME --x pim.unit_gops_int8 \
      --y ahasd.max_verify_tokens --metric throughput_tok_s [--where run.mode=ahasd] --out figs/heat
  python scripts/plot_sweep.py lines --results sweeps/NAME --x pim.unit_gops_int8 \
      --metric tokens_per_j --hue run.mode [--logx] --out figs/lines

Values are averaged over the axes not shown (seeds, ...) unless fixed with --where KEY=VALUE
(repeatable); line plots shade the min-max range. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.plots import heatmap, lines  # noqa: E402
from ahasd_sim.sweep import read_results  # noqa: E402


def _where(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it:
            raise SystemExit(f"error: --where expects KEY=VALUE, got {it!r}")
        k, _, v = it.partition("=")
        out[k.strip()] = v.strip()
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="kind", required=True)
    for name in ("heatmap", "lines"):
        s = sub.add_parser(name)
        s.add_argument("--results", required=True, help="results.csv or the sweep folder")
        s.add_argument("--x", required=True, help="column on the x axis")
        s.add_argument("--metric", required=True, help="metric column (e.g. throughput_tok_s)")
        s.add_argument("--where", action="append", default=[], metavar="KEY=VALUE", help="keep rows with KEY == VALUE")
        s.add_argument("--title", default=None)
        s.add_argument("--out", required=True, help="output path without suffix")
        if name == "heatmap":
            s.add_argument("--y", required=True, help="column on the y axis")
            s.add_argument("--agg", default="mean", help="aggregation over the remaining rows (mean, median, max...)")
        else:
            s.add_argument("--hue", default=None, help="one line per value of this column")
            s.add_argument("--logx", action="store_true")
    a = p.parse_args(argv)
    df = read_results(a.results)
    for col in [a.x, a.metric, getattr(a, "y", None), getattr(a, "hue", None)]:
        if col and col not in df.columns:
            print(f"error: no column '{col}' in {a.results}", file=sys.stderr)
            return 2
    try:
        if a.kind == "heatmap":
            out = heatmap(df, a.x, a.y, a.metric, a.out, where=_where(a.where), agg=a.agg, title=a.title)
        else:
            out = lines(df, a.x, a.metric, a.out, hue=a.hue, where=_where(a.where), title=a.title, logx=a.logx)
    except (KeyError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(str(x) for x in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
