"""``task_sync``: task-level synchronous speculation on NPU + PIM (the ablation rung between
``operator_sync`` and ``async``).

Each round the drafter runs on its PIM ranks, one forward per token, as in ``async``; then
the NPU verifies the round's drafts in one pass, as in ``async``; nothing overlaps. Against
``operator_sync`` it drops the operator split (each model runs wholly where ``async`` runs
it); against ``async`` it drops the overlap of drafting and verification (no queues, no
look-ahead drafts, no killed drafts). So ``task_sync`` -> ``async`` is what overlapping buys
and ``async`` -> ``ahasd`` what EDC/TVC buy on top.
"""
from __future__ import annotations

from ..base import register_mode
from ..sync import SyncSpeculativeMode


@register_mode("task_sync")
class TaskSyncMode(SyncSpeculativeMode):
    """Draft on PIM, then verify on the NPU, one device at a time."""

    required_devices = ("npu", "pim")
    uses_pim_placement = True

    def draft_cost(self, kv_len):
        return self.costs.draft_token(kv_len)

    def verify_cost(self, n_tokens, kv_len):
        return self.costs.verify(n_tokens, kv_len)
