"""``no_draft``: autoregressive decoding of the MoE target in mode ``moe_offload`` -- no drafter
forward, each round verifies the root alone (one decode step: dense part + its top-k experts per
layer, copies for the missing ones) and commits one token."""
from __future__ import annotations

from typing import ClassVar

from .base import register_policy
from .tree_base import TreePolicy


@register_policy("no_draft")
class NoDraft(TreePolicy):
    drafts: ClassVar[bool] = False

    def continue_drafting(self, view) -> bool:
        return False

    def select(self, view) -> list[int]:
        return []
