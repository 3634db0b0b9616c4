#!/usr/bin/env python3
"""Heat maps and line plots over sweep axes, from a sweep's results.csv.

  python scripts/plot_sweep.py heatmap --results sweeps/NAME --x pim.unit_gops_int8 \
      --y ahasd.max_verify_tokens --metric throughput_tok_s [--where run.mode=ahasd] --out figs/heat
  python scripts/plot_sweep.py lines --results sweeps/NAME --x pim.unit_gops_int8 \
      --metric tokens_per_j --hue run.mode [--logx] --out figs/lines

Values are averaged over the axes not shown (seeds, model pairs, ...) unless fixed with
--where KEY=VALUE (repeatable); the figure names the axes it averaged over. Line plots carry
95% intervals bootstrapped over the points' trace windows (points/*/windows.csv), stratified by
the averaged configurations; marks without window samples have none, and the figure says so. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def _where(items: list[str]) -> dict[str, str]:
    from ahasd_sim.config.errors import InputError
    out = {}
    for it in items:
        if "=" not in it:
            raise InputError(f"--where expects KEY=VALUE, got {it!r}")
        k, _, v = it.partition("=")
        out[k.strip()] = v.strip()
    return out


def parser():
    p = script_parser(__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="kind", required=True, metavar="{heatmap,lines}")
    for name, help_ in (("heatmap", "metric on an x-by-y grid"), ("lines", "metric against x, one line per --hue")):
        s = sub.add_parser(name, help=help_, description=help_)
        s.add_argument("--results", required=True, help="results.csv or the sweep folder")
        s.add_argument("--x", required=True, help="column on the x axis")
        s.add_argument("--metric", required=True, help="metric column (e.g. throughput_tok_s)")
        s.add_argument("--where", action="append", default=[], metavar="KEY=VALUE",
                       help="keep rows with KEY == VALUE (repeatable); axes not shown and not fixed are averaged, "
                            "and the figure says so")
        s.add_argument("--title", default=None, help="figure title")
        s.add_argument("--out", required=True, help="output path without suffix (OUT.pdf, OUT.png)")
        if name == "heatmap":
            s.add_argument("--y", required=True, help="column on the y axis")
            s.add_argument("--agg", default="mean", choices=("mean", "median", "min", "max"),
                           help="aggregation over the remaining rows (default: mean)")
        else:
            s.add_argument("--hue", default=None, help="one line per value of this column")
            s.add_argument("--logx", action="store_true", help="logarithmic x axis")
    return p


def body(a) -> int:
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.plots import heatmap, lines
    from ahasd_sim.sweep import read_results
    where = _where(a.where)
    check_output_file(a.out, suffixes=(".pdf", ".png"))
    df = read_results(a.results)
    if a.kind == "heatmap":
        out = heatmap(df, a.x, a.y, a.metric, a.out, where=where, agg=a.agg, title=a.title)
    else:
        from ahasd_sim.plots.sweep_plots import sweep_axis_columns
        from ahasd_sim.plots.runs import sweep_windows
        wt = sweep_windows(a.results, df, [a.x, a.hue, *sweep_axis_columns(df), *where])
        out = lines(df, a.x, a.metric, a.out, hue=a.hue, where=where, title=a.title, logx=a.logx, windows=wt)
    print("\n".join(str(x) for x in out))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
