#!/usr/bin/env python3
"""Device timeline (Gantt chart) of a short window for one or more runs, from timeline.json.

  python scripts/plot_timeline.py RUN_DIR [RUN_DIR ...] [--labels a,b] [--start-ms 500 --window-ms 300] \
      --out figures/timeline

RUN_DIR is a run folder (with timeline.json; runs need run.timeline: true) or a timeline.json
file. Default window: 10% to 30% of each run. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.config.errors import InputError  # noqa: E402
from ahasd_sim.plots import plot_gantt  # noqa: E402
from ahasd_sim.plots.runs import resolve_runs  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders or timeline.json files")
    p.add_argument("--labels", default=None, help="comma-separated labels, one per run")
    p.add_argument("--start-ms", type=float, default=None, help="window start (ms of simulated time)")
    p.add_argument("--window-ms", type=float, default=None, help="window length (ms)")
    p.add_argument("--title", default=None)
    p.add_argument("--out", required=True, help="output path without suffix")
    a = p.parse_args(argv)
    try:
        runs = resolve_runs(a.runs, "timeline.json", a.labels, " (run with run.timeline: true)")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = plot_gantt(runs, a.out, title=a.title,
                     start_s=None if a.start_ms is None else a.start_ms / 1e3,
                     window_s=None if a.window_ms is None else a.window_ms / 1e3)
    print("\n".join(str(x) for x in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
