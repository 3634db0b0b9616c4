#!/usr/bin/env python3
"""Device timeline (Gantt chart) of a short window for one or more runs, from timeline.json.

  python scripts/plot_timeline.py RUN_DIR [RUN_DIR ...] [--labels a,b] [--start-ms 500 --window-ms 300] \
      --out figures/timeline

RUN_DIR is a run folder (with timeline.json; runs need run.timeline: true) or a timeline.json
file. A negative window, or one outside a run, is an
error (exit 2), not an empty figure. Writes OUT.pdf and OUT.png.
Every panel shows the same window (default: 10% to 30% of the shortest run).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def parser():
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders or timeline.json files")
    p.add_argument("--labels", default=None, help="comma-separated labels, one per run (default: mode / policy)")
    p.add_argument("--start-ms", type=float, default=None, help="window start (ms of simulated time, >= 0)")
    p.add_argument("--window-ms", type=float, default=None, help="window length (ms, > 0)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--out", required=True, help="output path without suffix (OUT.pdf, OUT.png)")
    return p


def body(a) -> int:
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.plots import plot_gantt
    from ahasd_sim.plots.runs import resolve_runs
    check_output_file(a.out, suffixes=(".pdf", ".png"))
    runs = resolve_runs(a.runs, "timeline.json", a.labels, " (run with run.timeline: true)")
    out = plot_gantt(runs, a.out, title=a.title,
                     start_s=None if a.start_ms is None else a.start_ms / 1e3,
                     window_s=None if a.window_ms is None else a.window_ms / 1e3)
    print("\n".join(str(x) for x in out))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
