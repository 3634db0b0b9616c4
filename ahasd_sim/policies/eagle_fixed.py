"""``eagle_fixed``: a static tree shape (EAGLE-1 style); at depth d each kept node keeps its
``branching[d-1]`` most likely children. Drafts exactly ``len(branching)`` levels."""
from __future__ import annotations

from .base import register_policy
from .tree_base import TreePolicy


@register_policy("eagle_fixed")
class EagleFixed(TreePolicy):
    def max_depth(self) -> int:
        return len(self.params.branching)

    def select(self, view) -> list[int]:
        rank = view.sibling_rank()
        br = self.params.branching
        kept: set[int] = set()
        for v in sorted(view.available(), key=lambda u: (view.depth[u], u)):
            d = int(view.depth[v])
            if d > len(br) or rank[v] >= br[d - 1]:
                continue
            if int(view.parent[v]) == 0 or int(view.parent[v]) in kept:
                kept.add(int(v))
        return sorted(kept)
