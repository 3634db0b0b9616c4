"""Design-space exploration: multi-objective studies (optuna) and sensitivity analysis on the
sweep executor. See ``docs/dse.md``. Entry points: :func:`load_study`, :func:`run_optimize`,
:func:`run_sensitivity`, ``python -m ahasd_sim optimize|sensitivity --config STUDY.yaml``.
"""
from __future__ import annotations

import importlib

__all__ = ["Study", "dominates", "load_study", "pareto_mask"]

# Imported on first use (PEP 562): the command line builds the optimize/sensitivity parsers from
# ahasd_sim.dse.cli on every invocation, and a plain run must not pay for numpy/pandas/the sweep
# machinery that the study modules import.
_LAZY = {"Study": ".study", "load_study": ".study", "dominates": ".pareto", "pareto_mask": ".pareto"}


def __getattr__(name: str):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(mod, __name__), name)
    globals()[name] = value
    return value
