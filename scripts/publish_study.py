#!/usr/bin/env python3
"""Copy a finished study's report (and its sensitivity report, if any) into the docs.

Usage: python scripts/publish_study.py STUDY_DIR [--out docs/studies] [--intro FILE]

Writes ``<out>/<name>.md`` = the intro (a hand-written answer, optional) + ``report.md`` +
``sensitivity/sensitivity.md``, and the PNG figures into ``<out>/figures/<name>_*.png`` with
the image links rewritten; also ``<out>/<name>_pareto.csv`` (the interval-level front),
``_trials.csv``, ``_hypervolume.csv``, ``_tornado.csv``, ``_sobol.csv``, ``_sobol_convergence.csv``.
Every number comes from the study folder: nothing is typed in here.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.output import atomic_write_text  # noqa: E402


def _images(md: str, src_dir: Path, fig_out: Path, prefix: str) -> str:
    def repl(m: re.Match) -> str:
        src = src_dir / m.group(2)
        dst = fig_out / f"{prefix}{src.name}"
        fig_out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        return f"![{m.group(1)}](figures/{dst.name})"
    return re.sub(r"!\[([^\]]*)\]\(([^)]+\.png)\)", repl, md)


def parser():
    import argparse
    p = script_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study_dir", help="a finished study folder (optimize, and optionally sensitivity)")
    p.add_argument("--out", default=str(ROOT / "docs" / "studies"), help="docs folder (default docs/studies)")
    p.add_argument("--intro", default=None, help="Markdown file put before the generated report")
    return p


def body(args) -> int:
    from ahasd_sim.config.errors import InputError
    sd = Path(args.study_dir)
    rep = sd / "report.md"
    if not rep.is_file():
        raise InputError(f"{rep}: not found (run optimize first)")
    if args.intro and not Path(args.intro).is_file():
        raise InputError(f"--intro {args.intro}: not found")
    name = re.search(r"^# Study `([^`]+)`", rep.read_text(), re.M).group(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = [Path(args.intro).read_text().rstrip() + "\n"] if args.intro else []
    body_md = rep.read_text().replace("# Study `", "## Generated report: study `", 1)
    body_md = re.sub(r"^## ", "### ", body_md, flags=re.M).replace("### Generated report", "## Generated report", 1)
    parts.append(_images(body_md, sd, out / "figures", f"{name}_"))
    sens = sd / "sensitivity" / "sensitivity.md"
    if sens.is_file():
        s = sens.read_text().replace("# Sensitivity of study", "## Sensitivity of study", 1)
        s = re.sub(r"^## `", "### `", s, flags=re.M)
        parts.append(_images(s, sens.parent, out / "figures", f"{name}_"))
        shutil.copyfile(sens.parent / "tornado.csv", out / f"{name}_tornado.csv")
        for extra in ("sobol.csv", "sobol_convergence.csv"):
            if (sens.parent / extra).is_file():
                shutil.copyfile(sens.parent / extra, out / f"{name}_{extra}")
    shutil.copyfile(sd / "pareto.csv", out / f"{name}_pareto.csv")
    shutil.copyfile(sd / "trials.csv", out / f"{name}_trials.csv")
    if (sd / "hypervolume.csv").is_file():
        shutil.copyfile(sd / "hypervolume.csv", out / f"{name}_hypervolume.csv")
    atomic_write_text(out / f"{name}.md", "\n".join(parts))
    print(f"wrote {out / (name + '.md')}")
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
