"""``autoregressive``: the target alone, one token per forward (no speculation)."""
from __future__ import annotations

from ..base import register_mode
from ..sync import SyncSpeculativeMode


@register_mode("autoregressive")
class AutoregressiveMode(SyncSpeculativeMode):
    """Plain decoding on one device (GPU if present, else NPU; ``baseline.device``)."""

    loads_drafter = False
    uses_baseline_device = True

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        self.max_round_tokens = 0   # no drafts: every round is one target forward

    def draft_cost(self, kv_len):  # pragma: no cover - never called with max_round_tokens 0
        raise AssertionError("autoregressive mode does not draft")

    def verify_cost(self, n_tokens, kv_len):
        return self.costs.target_forward(n_tokens, kv_len)

    def prefill_costs(self, prompt_len):
        return [("prefill_target", self.costs.baseline_prefill(prompt_len))]

    def _loop(self):
        ctr = self.col.counters
        yield from self.prefill(0)
        while not self.done.triggered:
            yield from self.prefill_if_prompt_start()
            pos = self.committed
            t0 = yield from self.run_task(self.verify_cost(1, self.replay.kv_len_at(pos)), "decode")
            ctr.verifications += 1
            if self.col.keep_events:
                self.col.event(t0, "decode", position=pos, n_tokens=0, accepted=0, duration_s=self.env.now - t0)
            self.resolve(pos + 1)
