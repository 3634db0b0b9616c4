"""``operator_sync``: SpecPIM-like operator-level synchronous execution on NPU + PIM.

Every operator runs wholly on the host (the NPU, or the GPU on a GPU + PIM platform such as
SpecPIM's) or on PIM; the mapping is searched once,
offline, for a fixed draft length (``operator_sync.mapping_draft_len``) and kept
when the adaptive policy drafts other lengths. Inside a layer, operators of the
same dependency tier may run concurrently on the two devices; each tier ends
with a barrier, so a tier takes max(host ops, PIM ops) and the faster device
waits (see :mod:`ahasd_sim.modes.costs.operator_sync`).
"""
from __future__ import annotations

from typing import Any

from ..base import register_mode
from ..sync import SyncSpeculativeMode


@register_mode("operator_sync")
class OperatorSyncMode(SyncSpeculativeMode):
    """Draft then verify, each forward split operator-by-operator across NPU and PIM."""

    required_devices = ("pim",)   # plus a host: the NPU, else the GPU (every platform has one)
    uses_pim_placement = True
    pim_overlaps_host = True

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        self.mapping = self.costs.opsync_mapping(ctx.cfg.operator_sync.mapping_draft_len)

    def draft_cost(self, kv_len):
        return self.costs.opsync_forward("draft", 1, kv_len, self.mapping)

    def verify_cost(self, n_tokens, kv_len):
        return self.costs.opsync_forward("target", n_tokens, kv_len, self.mapping)

    def stats(self) -> dict[str, Any]:
        return {"mapping_draft_len": self.ctx.cfg.operator_sync.mapping_draft_len,
                "mapping": {role: dict(m) for role, m in self.mapping.items()}}
