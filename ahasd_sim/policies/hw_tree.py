"""``hw_tree``: hardware-aware draft-tree selection on the mobile SoC.

After each drafted level it selects the ancestor-closed subtree maximising expected committed
tokens per unit time (:func:`~ahasd_sim.policies.tree_select.best_by_size`, exact) under the
platform's cost: drafting time so far + the verification pass of n nodes as the SoC's cost
model gives it (``view.costs.verify_s(n)``: one weight stream on the NPU; ceil((n + 1) / k)
weight passes on a PIM unit holding k vectors, a step function). Before the search, nodes below
``soc_tree.min_path_prob`` are pruned (LP-Spec-like: a node that is almost never accepted is
not worth a slot of the PIM's k vectors). Stop rule (SpecFit's): draft one more level only if
the optimistic bound, every node of the last level's children accepted for the next level's
drafting time, beats the best tree so far.
"""
from __future__ import annotations

from typing import Any

from .base import register_policy
from .tree_base import TreePolicy
from .tree_select import best_by_size


@register_policy("hw_tree")
class HwTree(TreePolicy):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.stops_by_rule = 0
        self._best: list[int] = []
        self._solved = None

    def configure(self, tree_cfg) -> None:
        """Parameters from the ``soc_tree`` section (the SoC tree modes pass it)."""
        self.params = tree_cfg

    def _candidates(self, view):
        thr = float(self.params.min_path_prob)
        return [int(v) for v in view.available() if view.path_prob[v] >= thr]

    def _solve(self, view, extra_tokens: float = 0.0, extra_time_s: float = 0.0):
        base = view.draft_time_s + extra_time_s
        cand = self._candidates(view)
        verify = view.costs.verify_s_upto(min(len(cand), int(self.params.max_nodes)))
        return best_by_size(cand, view.parent, view.path_prob, view.depth, [base + v for v in verify],
                            extra_tokens, int(self.params.max_nodes))

    def continue_drafting(self, view) -> bool:
        ratio, self._best = self._solve(view)
        self._solved = view
        if view.drafted_depth >= self.max_depth() or view.drafted_depth >= view.recorded_depth:
            return False
        frontier = [v for v in view.available() if view.depth[v] == view.drafted_depth]
        gain = float(sum(view.path_prob[v] for v in frontier))
        bound, _ = self._solve(view, gain, view.next_level_draft_s)
        if bound <= ratio:
            self.stops_by_rule += 1
            return False
        return True

    def select(self, view) -> list[int]:
        if self._solved is not view:
            _, self._best = self._solve(view)
            self._solved = view
        return list(self._best)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        out["stops_by_rule"] = self.stops_by_rule
        return out
