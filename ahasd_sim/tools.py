"""The study, reproduction, plotting and benchmark tools as subcommands of the installed CLI.

Their code is the scripts in ``scripts/``, which a non-editable install ships inside the package
(``ahasd_sim/_data/scripts/``, see ``setup.py``), so ``ahasd-sim reproduce --smoke`` or
``python -m ahasd_sim plot bars ...`` work after ``pip install .`` from any folder; in a checkout
they run the checkout's scripts. Each tool parses its own options (``ahasd-sim TOOL --help``).
Adding a tool: a script in ``scripts/`` and a line in :data:`TOOLS` (or :data:`PLOTS`).
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

from .errors import InputError
from .paths import data_file

#: subcommand -> (script, one-line help)
TOOLS: dict[str, tuple[str, str]] = {
    "reproduce": ("reproduce_paper.py", "reproduce the AHASD paper's experiments: report, figures "
                  "(--smoke: a quick check of the pipeline)"),
    "hyco-study": ("hyco_study.py", "mobile-cloud study: every mode on links x phones per GPU"),
    "moe-study": ("moe_study.py", "MoE expert-offload baselines study (docs/moe-offload/)"),
    "bench": ("bench.py", "simulated tokens per wall-clock second, per mode"),
    "bench-sweep": ("bench_sweep.py", "sweep throughput benchmark (points per second)"),
}
#: ``plot KIND`` -> (script, one-line help)
PLOTS: dict[str, tuple[str, str]] = {
    "bars": ("plot_bars.py", "normalised bar chart from a sweep's results.csv"),
    "sweep": ("plot_sweep.py", "heat maps and line plots over sweep axes"),
    "distributions": ("plot_distributions.py", "distributions of per-round metrics of runs"),
    "timeline": ("plot_timeline.py", "device timeline (Gantt) of runs, from timeline.json"),
    "moe-sweep": ("plot_moe_sweep.py", "figures of the MoE offload sweeps"),
}


def script(name: str) -> Path:
    """The shipped script ``scripts/NAME`` (the checkout's, else the installed copy)."""
    p = data_file(f"scripts/{name}")
    if not p.is_file():
        raise InputError(f"scripts/{name} is not installed with this copy of ahasd_sim (reinstall it with pip)")
    return p


def run_script_file(path: Path, argv: list[str]) -> int:
    """Run ``path`` as ``__main__`` with ``argv`` (as ``python path argv...`` would); its exit code."""
    old_argv, old_path = sys.argv, list(sys.path)
    sys.argv = [str(path), *argv]
    sys.path.insert(0, str(path.parent))
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    finally:
        sys.argv, sys.path[:] = old_argv, old_path
    return 0


def run_tool(command: str, argv: list[str]) -> int:
    """``ahasd-sim COMMAND argv...`` for a command of :data:`TOOLS` or ``plot``."""
    if command == "plot":
        if not argv or argv[0] in ("-h", "--help"):
            print("usage: ahasd-sim plot KIND [options]  (ahasd-sim plot KIND --help)\n\nkinds:")
            for k, (_s, h) in PLOTS.items():
                print(f"  {k:14s} {h}")
            return 0 if argv else 2
        if argv[0] not in PLOTS:
            from .config.errors import did_you_mean
            print(f"error: plot: unknown kind '{argv[0]}'{did_you_mean(argv[0], PLOTS)}; kinds: {', '.join(PLOTS)}",
                  file=sys.stderr)
            return 2
        return run_script_file(script(PLOTS[argv[0]][0]), argv[1:])
    return run_script_file(script(TOOLS[command][0]), argv)
