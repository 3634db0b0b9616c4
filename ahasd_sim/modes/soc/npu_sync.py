"""``npu_sync``: speculative decoding on the NPU alone: the drafter's forwards, then the
target's verification pass, one after the other on the NPU (weights streamed from LPDDR5).

The phone's NPU needs no PIM for this; what it pays is the drafter's weights streamed per drafted
token, so it suits a small drafter (``run.drafter: head``, ``lookup``) more than a standalone 7B
model. On a platform without PIM both models must fit ``memory.capacity_gib``.
"""
from __future__ import annotations

from ..base import register_mode
from ..sync import SyncSpeculativeMode


@register_mode("npu_sync")
class NpuSyncMode(SyncSpeculativeMode):
    """Draft on the NPU, then verify on the NPU."""

    required_devices = ("npu",)

    def draft_cost(self, kv_len):
        return self.costs.npu_draft_token(kv_len)

    def verify_cost(self, n_tokens, kv_len):
        return self.costs.verify(n_tokens, kv_len)
