#!/usr/bin/env python3
"""Energy / power per device and busy time per task, stacked, for one or more runs.

  python scripts/plot_breakdown.py RUN_DIR [RUN_DIR ...] [--labels a,b] [--columns one|two] \
      --out figures/breakdown

RUN_DIR is a run folder of ``python -m ahasd_sim`` (energy_breakdown.csv and summary.json; the
per-task figure also needs timeline.json: run.timeline: true). Writes OUT_energy.pdf/.png
(energy per token and mean power, stacked by device, the static share hatched) and, where every
run has a timeline, OUT_tasks.pdf/.png (busy time per token of each device, stacked by task).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def parser():
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders")
    p.add_argument("--labels", default=None, help="comma-separated labels, one per run (default: mode / policy)")
    p.add_argument("--columns", choices=("one", "two"), default="two",
                   help="figure width: one (3.5 in) or two (7 in) paper columns (default: two)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--out", required=True, help="output path without suffix (OUT_energy.*, OUT_tasks.*)")
    return p


def body(a) -> int:
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.plots.breakdown import energy_breakdown, latency_breakdown
    from ahasd_sim.plots.runs import resolve_runs
    check_output_file(a.out, suffixes=(".pdf", ".png"))
    files = resolve_runs(a.runs, "energy_breakdown.csv", a.labels, " (not a run folder)")
    runs = {lab: f.parent for lab, f in files.items()}
    out = energy_breakdown(runs, f"{a.out}_energy", columns=a.columns, title=a.title)
    if all((d / "timeline.json").is_file() for d in runs.values()):
        out += latency_breakdown(runs, f"{a.out}_tasks", columns=a.columns, title=a.title)
    else:
        print("no per-task figure: a run has no timeline.json (run.timeline: true)", file=sys.stderr)
    print("\n".join(str(x) for x in out))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
