"""``eagle_dynamic``: EAGLE-2/3 reranking -- verify the ``total_nodes`` drafted nodes of highest
cumulative draft confidence (acceptance-maximising, blind to expert costs)."""
from __future__ import annotations

from .base import register_policy
from .tree_base import TreePolicy, top_by_confidence


@register_policy("eagle_dynamic")
class EagleDynamic(TreePolicy):
    def select(self, view) -> list[int]:
        return top_by_confidence(view, view.available(), self.params.total_nodes)
