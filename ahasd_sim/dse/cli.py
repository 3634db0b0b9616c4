"""Command-line parsers of ``optimize`` and ``sensitivity`` (registered by ``ahasd_sim.__main__``)."""
from __future__ import annotations


def _common(p) -> None:
    p.add_argument("--config", required=True, help="study YAML file (see docs/dse.md)")
    p.add_argument("--workers", type=int, default=None, help="parallel simulations (default: all cores)")
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (executor dask)")
    p.add_argument("--out", default=None, help="study folder (default: studies/<name>)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def add_parsers(sub) -> None:
    o = sub.add_parser("optimize", help="multi-objective design-space search (optuna) -> Pareto front")
    _common(o)
    o.add_argument("--trials", type=int, default=None,
                   help="finished trials the study holds when the command ends (default: 'trials:' of the study)")
    s = sub.add_parser("sensitivity", help="one-at-a-time tornado and Sobol indices of a study's objectives")
    _common(s)
    s.add_argument("--sobol-samples", type=int, default=None,
                   help="Saltelli base samples N (power of two; N x (2D + 2) design points; 0 = no Sobol)")


def cmd_optimize(args) -> int:
    from .optimize import run_optimize_cli
    return run_optimize_cli(args)


def cmd_sensitivity(args) -> int:
    from .sensitivity import run_sensitivity_cli
    return run_sensitivity_cli(args)
