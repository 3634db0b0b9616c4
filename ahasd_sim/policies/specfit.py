"""``specfit``: verify the ancestor-closed subtree that maximises predicted throughput
E(S) / T(S) (SpecFit; reconstruction, see ``docs/moe_offload.md``).

E(S) = 1 + sum of cumulative draft confidences P(v) over S. T(S) = drafting time so far +
c0 + c1 (|S| + 1) + sum over layers of c2 |U_l| + fetch x |U_l not resident|, with U_l the union
of the *predicted* experts of S and the root (the policy never sees recorded routing), c0..c2
and fetch profiled from the simulator's cost model, residency from the expert cache. Exact
search: Dinkelbach + one min-cut per iteration (:mod:`ahasd_sim.moe.closure`; checked against
brute force in the tests). Stop rule: after each level, the optimistic bound for one more
level -- max over S of (E(S) + sum of P over the last level) / (T(S) + one more draft level) --
is computed exactly the same way; drafting stops when it cannot beat the incumbent.
Candidates beyond ``max_nodes`` (lowest confidence first) are not considered.
"""
from __future__ import annotations

from ..moe.closure import dinkelbach
from .base import register_policy
import numpy as np

from .tree_base import TreePolicy, item_matrix, top_by_confidence


@register_policy("specfit")
class SpecFit(TreePolicy):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.stops_by_rule = 0
        self.dinkelbach_iterations: list[int] = []
        self._best: list[int] = []
        self._solved = None   # the view _best was computed for

    def _solve(self, view, extra_tokens: float = 0.0, extra_time_s: float = 0.0):
        nodes = top_by_confidence(view, view.available(), self.params.max_nodes)
        own, root, times = item_matrix(view, nodes)
        m = view.costs
        base_time = view.draft_time_s + m.c0_s + m.c1_s + float(times[root].sum()) + extra_time_s
        pp = np.array([view.path_prob[v] for v in nodes], dtype=float)
        ratio, sel, it = dinkelbach(nodes, view.parent, pp, own, times, 1.0 + extra_tokens, base_time,
                                    m.c1_s, tol=self.params.tolerance)
        self.dinkelbach_iterations.append(it)
        return ratio, sel

    def continue_drafting(self, view) -> bool:
        ratio, self._best = self._solve(view)
        self._solved = view
        if view.drafted_depth >= self.max_depth() or view.drafted_depth >= view.recorded_depth:
            return False
        if not self.params.stop_rule:
            return True
        frontier = [v for v in view.available() if view.depth[v] == view.drafted_depth]
        gain = float(sum(view.path_prob[v] for v in frontier))
        bound, _ = self._solve(view, gain, view.next_level_draft_s)
        self.dinkelbach_iterations.pop()
        if bound <= ratio:
            self.stops_by_rule += 1
            return False
        return True

    def select(self, view) -> list[int]:
        if self._solved is not view:
            _, self._best = self._solve(view)
            self._solved = view
        return list(self._best)

    def stats(self):
        out = super().stats()
        out["stops_by_rule"] = self.stops_by_rule
        it = self.dinkelbach_iterations
        out["mean_dinkelbach_iterations"] = sum(it) / len(it) if it else 0.0
        return out
