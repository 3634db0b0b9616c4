"""SVIP (Zhang et al., EMNLP 2025): stop drafting after a high-entropy token, keeping it.

Rule (official code): after sampling ``x_j`` stop if ``sqrt(gamma * H_j) > h``; with the
defaults (gamma 0.15, h 0.3) that is ``H_j > 0.6`` nats. The high-entropy token stays in the
verified draft. Hard cap ``max_draft_tokens`` (40). EOS is not visible to the simulator.
"""
from __future__ import annotations

import math

from .base import Decision, DraftPolicy, DraftTokenView, register_policy


@register_policy("svip")
class SvipPolicy(DraftPolicy):
    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        p = self.params
        self.h = float(p.h)
        self.gamma = float(p.gamma)
        self.max_draft = int(p.max_draft_tokens)
        self.entropy_stops = 0

    def should_stop(self, entropy_nats: float) -> bool:
        return math.sqrt(self.gamma * max(entropy_nats, 0.0)) > self.h

    def decide(self, view: DraftTokenView) -> Decision:
        stop = self.should_stop(view.entropy_nats)
        d = self.bounded(view, Decision.STOP_AFTER if stop else Decision.CONTINUE, hi=self.max_draft)
        if stop and d is Decision.STOP_AFTER:
            self.entropy_stops += 1
        return d

    def stats(self):
        out = super().stats()
        out["entropy_threshold_nats"] = self.h ** 2 / self.gamma
        out["rounds_stopped_by_entropy"] = self.entropy_stops
        return out
