#!/usr/bin/env python3
"""Draft-length and accepted-length distributions of one or more runs, from events.csv.

  python scripts/plot_distributions.py RUN_DIR [RUN_DIR ...] [--labels a,b] --out figures/dist

Draft lengths: n_tokens of batch_pushed events (asynchronous modes), else of verify events;
accepted: the accepted column of verify events. Writes OUT.pdf and OUT.png.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def parser():
    p = script_parser(__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="run folders or events.csv files")
    p.add_argument("--labels", default=None, help="comma-separated labels, one per run (default: mode / policy)")
    p.add_argument("--max-len", type=int, default=None, help="clip lengths at this many tokens (>= 1)")
    p.add_argument("--title", default=None, help="figure title")
    p.add_argument("--out", required=True, help="output path without suffix (OUT.pdf, OUT.png)")
    return p


def body(a) -> int:
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.plots import plot_distributions
    from ahasd_sim.plots.runs import resolve_runs
    if a.max_len is not None and a.max_len < 1:
        raise InputError(f"--max-len {a.max_len}: expected >= 1")
    check_output_file(a.out, suffixes=(".pdf", ".png"))
    runs = resolve_runs(a.runs, "events.csv", a.labels, "")
    out = plot_distributions(runs, a.out, title=a.title, max_len=a.max_len)
    print("\n".join(str(x) for x in out))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
