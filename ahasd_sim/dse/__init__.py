"""Design-space exploration: multi-objective studies (optuna) and sensitivity analysis on the
sweep executor. See ``docs/dse.md``. Entry points: :func:`load_study`, :func:`run_optimize`,
:func:`run_sensitivity`, ``python -m ahasd_sim optimize|sensitivity --config STUDY.yaml``.
"""
from .pareto import dominates, pareto_mask
from .study import Study, load_study

__all__ = ["Study", "dominates", "load_study", "pareto_mask"]
