"""Fixed draft length: draft exactly ``k`` tokens per round (standard speculative decoding)."""
from __future__ import annotations

from .base import Decision, DraftPolicy, DraftTokenView, register_policy


@register_policy("fixed")
class FixedPolicy(DraftPolicy):
    """Stop after ``policy.fixed.k`` kept tokens (capped by the round's ``max_tokens``)."""

    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        self.k = int(self.params.k)

    def decide(self, view: DraftTokenView) -> Decision:
        raw = Decision.STOP_AFTER if view.index_in_round + 1 >= self.k else Decision.CONTINUE
        return self.bounded(view, raw)

    def stats(self):
        out = super().stats()
        out["k"] = self.k
        return out
