#!/usr/bin/env python3
"""Draft-length and accepted-length distributions of one or more runs, from events.csv.

  python scripts/plot_distributions.py RUN_DIR [RUN_DIR ...] [--labels a,b] --out figures/dist

Draft lengths: n_tokens of batch_pushed events (asynchronous modes), else of verify events;
accepted: the accepted column of verify events. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.config.errors import InputError  # noqa: E402
from ahasd_sim.plots import plot_distributions  # noqa: E402
from ahasd_sim.plots.runs import resolve_runs  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders or events.csv files")
    p.add_argument("--labels", default=None, help="comma-separated labels, one per run")
    p.add_argument("--max-len", type=int, default=None, help="clip lengths at this many tokens")
    p.add_argument("--title", default=None)
    p.add_argument("--out", required=True, help="output path without suffix")
    a = p.parse_args(argv)
    try:
        runs = resolve_runs(a.runs, "events.csv", a.labels, "")
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = plot_distributions(runs, a.out, title=a.title, max_len=a.max_len)
    print("\n".join(str(x) for x in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
