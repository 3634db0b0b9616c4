"""AdaEDL (Agrawal, Jeon, Lee; arXiv 2410.18351): entropy lower bound with an online threshold.

Before sampling draft token i the drafter's next-token entropy ``H_i`` gives the acceptance
lower bound ``LB = 1 - sqrt(gamma_ent * H_i)``. If ``LB < lambda`` the round stops and token i
is *not* drafted (its forward is spent): :data:`Decision.STOP_DISCARD`. If discarding would
leave fewer than the round's ``min_tokens`` the token is kept instead (``STOP_AFTER``).

After each verification (third-party reimplementations, see references.md#adaedl)::

    AR  = beta1*AR + (1-beta1)*n_acc/n_drafted
    lambda' = lambda + eps        if AR < alpha_target
              lambda - eps        elif n_acc != L
              lambda              otherwise
    lambda  = beta2*lambda + (1-beta2)*lambda'     (clipped to [lambda_min, lambda_max])

``L`` is the round's max draft length (``full_length = "max"``) or the number drafted
(``"drafted"``).
"""
from __future__ import annotations

import math

import numpy as np

from .base import CONTINUE, STOP_DISCARD, Decision, DraftPolicy, DraftTokenView, VerifyOutcome, register_policy


@register_policy("adaedl")
class AdaEdlPolicy(DraftPolicy):
    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        p = self.params
        self.gamma_ent = float(p.gamma_ent)
        self.beta1 = float(p.beta1)
        self.beta2 = float(p.beta2)
        self.eps = float(p.eps)
        self.alpha_target = float(p.alpha_target)
        self.full_length = str(p.full_length)
        self.lambda_min = float(p.lambda_min)
        self.lambda_max = float(p.lambda_max)
        self.lam = float(p.lambda0)
        self.ar = float(p.ar_init)
        self.lambda_history: list[float] = [self.lam]
        self.bound_stops = 0
        cap = getattr(config, "max_tokens", None)
        self._config_max_tokens = None if cap is None else int(cap)   # read once (on_verify)

    def lower_bound(self, entropy_nats: float) -> float:
        return 1.0 - math.sqrt(self.gamma_ent * max(entropy_nats, 0.0))

    def decide(self, view: DraftTokenView) -> Decision:
        # lower_bound(view.entropy_nats) < lambda, inlined (once per drafter forward)
        h = view.entropy_nats
        fail = 1.0 - math.sqrt(self.gamma_ent * (0.0 if 0.0 > h else h)) < self.lam   # max(h, 0.0)
        d = self.bounded(view, STOP_DISCARD if fail else CONTINUE)   # module aliases: per-token path
        if fail and d is not CONTINUE:
            self.bound_stops += 1
        return d

    def on_verify(self, outcome: VerifyOutcome):
        rec = super().on_verify(outcome)
        if outcome.n_drafted <= 0:
            return rec
        self.ar = self.beta1 * self.ar + (1.0 - self.beta1) * outcome.n_accepted / outcome.n_drafted
        if self.full_length == "max":
            ctx = rec.ctx if rec is not None else self.default_context()
            cap = self._config_max_tokens
            length = min(ctx.max_tokens, ctx.max_tokens if cap is None else cap)
        else:
            length = outcome.n_drafted
        if self.ar < self.alpha_target:
            target = self.lam + self.eps
        elif outcome.n_accepted != length:
            target = self.lam - self.eps
        else:
            target = self.lam
        lam = self.beta2 * self.lam + (1.0 - self.beta2) * target
        self.lam = float(min(max(lam, self.lambda_min), self.lambda_max))
        self.lambda_history.append(self.lam)
        return rec

    @property
    def entropy_threshold_nats(self) -> float:
        """Current threshold expressed as an entropy: stop if H > this."""
        return (1.0 - self.lam) ** 2 / self.gamma_ent if self.lam < 1.0 else 0.0

    def stats(self):
        out = super().stats()
        lh = np.asarray(self.lambda_history, dtype=float)
        out["lambda"] = {"initial": float(lh[0]), "final": float(lh[-1]), "min": float(lh.min()),
                         "max": float(lh.max()), "mean": float(lh.mean()), "updates": int(lh.size - 1)}
        out["acceptance_rate_ema"] = float(self.ar)
        out["entropy_threshold_nats_final"] = float(self.entropy_threshold_nats)
        out["rounds_stopped_by_bound"] = self.bound_stops
        return out
