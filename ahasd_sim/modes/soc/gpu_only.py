"""``gpu_only``: draft and verify alternate on one GPU (the paper's GPU-only baseline)."""
from __future__ import annotations

from ..base import register_mode
from ..sync import SyncSpeculativeMode


@register_mode("gpu_only")
class GpuOnlyMode(SyncSpeculativeMode):
    """Synchronous speculative decoding with both models on the GPU."""

    required_devices = ("gpu",)

    def prefill_costs(self, prompt_len):
        return [("prefill_target", self.costs.gpu_prefill("target", prompt_len)),
                ("prefill_draft", self.costs.gpu_prefill("draft", prompt_len))]

    def draft_cost(self, kv_len):
        return self.costs.gpu_draft_token(kv_len)

    def verify_cost(self, n_tokens, kv_len):
        return self.costs.gpu_verify(n_tokens, kv_len)
