"""The input-error types, under the name most of the package imports them by.

They live in :mod:`ahasd_sim.errors` (the bottom layer: ``paths`` and ``config`` both raise them).
"""
from ..errors import ConfigError, InputError, OutputError, did_you_mean

__all__ = ["ConfigError", "InputError", "OutputError", "did_you_mean"]
