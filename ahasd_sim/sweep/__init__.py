"""Design-space sweeps: a YAML spec expanded into points, run in parallel, resumable.

See ``docs/sweeps.md``. Entry points: :func:`load_sweep_spec`, :func:`run_sweep`,
``python -m ahasd_sim sweep --config SWEEP.yaml``.
"""
from .results import flatten, read_results
from .runner import SweepResult, run_sweep, run_sweep_cli, summarize
from .spec import Point, SweepSpec, expand, load_sweep_spec

__all__ = ["Point", "SweepResult", "SweepSpec", "expand", "flatten", "load_sweep_spec", "read_results",
           "run_sweep", "run_sweep_cli", "summarize"]
