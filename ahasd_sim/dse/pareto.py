"""Pareto fronts and hypervolume; moved to :mod:`ahasd_sim.metrics.pareto` (0.2.0), where the
plots (below dse) can use them. These names stay importable from here."""
from ..metrics.pareto import ci_pareto_mask, dominates, hypervolume, pareto_mask

__all__ = ["ci_pareto_mask", "dominates", "hypervolume", "pareto_mask"]
