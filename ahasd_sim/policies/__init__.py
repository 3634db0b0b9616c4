"""Adaptive drafting policies: registry, config section and factory.

Importing this package registers the ``policy`` config section and every policy
(``fixed``, ``svip``, ``adaedl``, ``specdecpp``, ``banditspec``) in :data:`POLICIES`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..config.errors import InputError, did_you_mean
from . import adaedl, banditspec, fixed, rtt_aware, specdecpp, svip  # noqa: F401  (register policies)
from . import eagle_dynamic, eagle_fixed, ecospec, expert_budget, no_draft, specfit  # noqa: F401,E401  (tree policies, mode moe_offload)
from . import hw_tree  # noqa: F401,E402  (hardware-aware tree selection, SoC tree modes)
from .base import (POLICIES, Decision, DraftPolicy, DraftTokenView, RoundContext, RoundRecord,
                   VerifyOutcome, register_policy)
from .config import PolicyConfig

__all__ = ["POLICIES", "Decision", "DraftPolicy", "DraftTokenView", "PolicyConfig", "RoundContext",
           "RoundRecord", "VerifyOutcome", "make_policy", "policy_needs_fit_data", "register_policy"]


def _policy_class(name: str) -> type[DraftPolicy]:
    try:
        return POLICIES[name]
    except KeyError:
        raise InputError(f"unknown policy '{name}'{did_you_mean(str(name), POLICIES)}; "
                         f"valid policies: {', '.join(sorted(POLICIES))}") from None


def policy_needs_fit_data(name: str) -> bool:
    """True if the policy must be given a held-out trace part (``fit_data``)."""
    return bool(_policy_class(name).needs_fit_data)


def make_policy(name: str, policy_cfg: PolicyConfig, rng: np.random.Generator,
                fit_data: Any = None) -> DraftPolicy:
    """Build policy ``name`` from the ``policy`` config section and the run's RNG.

    Raises :class:`~ahasd_sim.config.errors.InputError` (a ``ValueError``) for an unknown
    name or, for policies that need it, missing/too small ``fit_data``.
    """
    cls = _policy_class(name)
    return cls(policy_cfg, rng, fit_data)
