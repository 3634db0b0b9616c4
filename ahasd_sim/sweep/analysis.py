"""Post-processing of sweep tables; moved to :mod:`ahasd_sim.metrics.tables` (0.2.0), where the
plots (below the sweep engine) can use it. These names stay importable from here."""
from ..metrics.tables import device_energy_j, memory_energy_j, normalise, ok_rows

__all__ = ["device_energy_j", "memory_energy_j", "normalise", "ok_rows"]
