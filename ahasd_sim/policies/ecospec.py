"""``ecospec``: greedy tree growth penalised by predicted new experts (EcoSpec; reconstruction).

Starting from the root, repeatedly add the frontier node v maximising
P(v) - mu * dT(v) / T_ref, where dT(v) = c1 + the time of v's predicted (layer, expert) items
not yet covered by the selection (c2 each, + an H2D fetch if not resident in the cache) and
T_ref the root-only verification time; stop at ``max_nodes`` or when no score is positive.
Predicted experts come from the predictor model (``moe.predictor_recall``).
"""
from __future__ import annotations

from .base import register_policy
import numpy as np

from .tree_base import TreePolicy, item_matrix


@register_policy("ecospec")
class EcoSpec(TreePolicy):
    def select(self, view) -> list[int]:
        nodes = [int(v) for v in view.available()]
        own, root, times = item_matrix(view, nodes)
        m = view.costs
        t_ref = m.c0_s + m.c1_s + float(times[root].sum())
        mu = self.params.mu
        row = {v: i for i, v in enumerate(nodes)}
        children: dict[int, list[int]] = {}
        for v in nodes:
            children.setdefault(int(view.parent[v]), []).append(v)
        uncovered = np.ones(own.shape[1], dtype=bool)
        frontier = set(children.get(0, ()))
        chosen: list[int] = []
        while frontier and len(chosen) < self.params.max_nodes:
            fr = sorted(frontier)
            rows = [row[v] for v in fr]
            dt = m.c1_s + (own[rows] & uncovered) @ times
            score = np.array([view.path_prob[v] for v in fr]) - mu * dt / t_ref
            j = int(np.argmax(score))          # first maximum: lowest node id on ties
            if score[j] <= 0:
                break
            best = fr[j]
            chosen.append(best)
            uncovered &= ~own[row[best]]
            frontier.discard(best)
            frontier.update(children.get(best, ()))
        return sorted(chosen)
