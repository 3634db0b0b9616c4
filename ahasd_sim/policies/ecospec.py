"""``ecospec``: greedy tree growth penalised by predicted new experts (EcoSpec; reconstruction).

Starting from the root, repeatedly add the frontier node v maximising
P(v) - mu * dT(v) / T_ref, where dT(v) = c1 + the time of v's predicted (layer, expert) items
not yet covered by the selection (c2 each, + an H2D fetch if not resident in the cache) and
T_ref the root-only verification time; stop at ``max_nodes`` or when no score is positive.
Predicted experts come from the predictor model (``moe.predictor_recall``).
"""
from __future__ import annotations

from .base import register_policy
from .tree_base import TreePolicy, item_times, node_items


@register_policy("ecospec")
class EcoSpec(TreePolicy):
    def select(self, view) -> list[int]:
        nodes = [int(v) for v in view.available()]
        items, root = node_items(view, nodes)
        all_items = set(root)
        for s in items.values():
            all_items.update(s)
        times = item_times(view, all_items)
        m = view.costs
        t_ref = m.c0_s + m.c1_s + sum(times[i] for i in root)
        mu = self.params.mu
        children: dict[int, list[int]] = {}
        for v in nodes:
            children.setdefault(int(view.parent[v]), []).append(v)
        covered: set[int] = set()
        frontier = set(children.get(0, ()))
        chosen: list[int] = []
        while frontier and len(chosen) < self.params.max_nodes:
            best, best_score = None, 0.0
            for v in frontier:
                dt = m.c1_s + sum(times[i] for i in items[v] if i not in covered)
                score = float(view.path_prob[v]) - mu * dt / t_ref
                if score > best_score or (best is not None and score == best_score and v < best):
                    best, best_score = v, score
            if best is None:
                break
            chosen.append(best)
            covered.update(items[best])
            frontier.discard(best)
            frontier.update(children.get(best, ()))
        return sorted(chosen)
