"""``expert_budget``: MoE-Spec-style per-layer expert budget (lossless reconstruction).

Nodes are taken in EAGLE order (highest cumulative draft confidence first, parents before
children); a node is kept only if, with it, no layer needs more than
``budget_experts_per_layer`` *predicted* experts that are neither resident nor routed by the root
(copies the draft nodes add). MoE-Spec caps
the experts a layer computes and drops the rest (lossy, changes outputs); a replay cannot
simulate the changed outputs, so the budget here bounds the copies and keeps verification exact.
"""
from __future__ import annotations

import numpy as np

from .base import register_policy
from .tree_base import TreePolicy


@register_policy("expert_budget")
class ExpertBudget(TreePolicy):
    def select(self, view) -> list[int]:
        pred = view.predicted_experts
        L, E = view.resident.shape
        budget = int(self.params.budget_experts_per_layer)
        loaded = np.zeros((L, E), dtype=bool)
        layers = np.arange(L)[:, None]
        loaded[layers, pred[0]] = True
        loaded &= ~view.resident
        count = np.zeros(L, dtype=np.int64)    # the root is verified anyway: the budget is for the draft nodes
        chosen: set[int] = set()
        order = sorted((int(v) for v in view.available()),
                       key=lambda v: (-view.path_prob[v], view.depth[v], v))
        for v in order:
            if len(chosen) >= self.params.max_nodes:
                break
            if int(view.parent[v]) != 0 and int(view.parent[v]) not in chosen:
                continue
            new = np.zeros((L, E), dtype=bool)
            new[layers, pred[v]] = True
            new &= ~view.resident & ~loaded
            add = new.sum(axis=1)
            if (count + add > budget).any():
                continue
            loaded |= new
            count += add
            chosen.add(v)
        return sorted(chosen)
