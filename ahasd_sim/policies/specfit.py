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

``expert_term: false`` (ablation): the per-item expert costs are dropped and each node costs the
per-node slope b of T = a + b (|S|+1), fitted by least squares on the (nodes, verification time)
of the rounds verified so far (before two distinct sizes: the profile with one new non-resident
expert per layer per node) -- the same objective, blind to which experts a node routes to.
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
        self._obs: list[tuple[int, float]] = []   # (tokens verified, verification time), expert_term off
        # speculation gate: EMAs of the speculative and the autoregressive rate (tokens / s)
        self._spec_rate = self._ar_rate = None
        self._gated_rounds = 0
        self._round_draft_s = 0.0
        self.gated = 0

    def _blind_costs(self, view) -> tuple[float, float]:
        """(a, b) of T_verify = a + b * tokens: least squares on the rounds so far, else the profile."""
        ns = {n for n, _ in self._obs}
        if len(ns) >= 2:
            x = np.array([n for n, _ in self._obs], dtype=float)
            y = np.array([t for _, t in self._obs])
            b, a = np.polyfit(x, y, 1)
            if b > 0:
                return float(a), float(b)
        m = view.costs
        L = view.resident.shape[0]
        miss = 1.0 - float(view.resident.mean())
        per_layer = m.c2_s + miss * m.fetch_s
        k = view.predicted_experts.shape[2]
        return m.c0_s + L * k * per_layer, m.c1_s + L * per_layer

    def _solve(self, view, extra_tokens: float = 0.0, extra_time_s: float = 0.0):
        nodes = top_by_confidence(view, view.available(), self.params.max_nodes)
        pp = np.array([view.path_prob[v] for v in nodes], dtype=float)
        if not self.params.expert_term:
            a, b = self._blind_costs(view)
            own = np.zeros((len(nodes), 0), dtype=bool)
            ratio, sel, it = dinkelbach(nodes, view.parent, pp, own, np.zeros(0), 1.0 + extra_tokens,
                                        view.draft_time_s + a + b + extra_time_s, b, tol=self.params.tolerance)
            self.dinkelbach_iterations.append(it)
            return ratio, sel
        own, root, times = item_matrix(view, nodes)
        m = view.costs
        multi = getattr(m, "multi_token_s", 0.0)
        base_time = view.draft_time_s + m.c0_s + m.c1_s + float(times[root].sum()) + extra_time_s
        ratio, sel, it = dinkelbach(nodes, view.parent, pp, own, times, 1.0 + extra_tokens, base_time + multi,
                                    m.c1_s, tol=self.params.tolerance)
        self.dinkelbach_iterations.append(it)
        if multi > 0 and extra_tokens == 0:    # the root alone skips the multi-token step cost
            alone = 1.0 / base_time
            if alone >= ratio:
                return alone, []
        return ratio, sel

    def wants_draft(self, view) -> bool:
        if not self.params.speculation_gate:
            return True
        if self._ar_rate is None:          # no root-only round yet: the cost model's root-only time
            own, root, times = item_matrix(view, [])
            m = view.costs
            ar = 1.0 / (m.c0_s + m.c1_s + float(times[root].sum()))
        else:
            ar = self._ar_rate
        if self._spec_rate is None or self._spec_rate >= ar or self._gated_rounds >= self.params.gate_probe_rounds:
            self._gated_rounds = 0
            return True
        self._gated_rounds += 1
        self.gated += 1
        self._best, self._solved = [], view
        return False

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
        self._round_draft_s = view.draft_time_s
        if self._solved is not view:
            _, self._best = self._solve(view)
            self._solved = view
        return list(self._best)

    def on_tree_verified(self, n_selected: int, n_accepted: int, levels: int, verify_s: float = 0.0) -> None:
        super().on_tree_verified(n_selected, n_accepted, levels, verify_s)
        if verify_s > 0:
            self._obs.append((n_selected + 1, float(verify_s)))
            rate = (n_accepted + 1) / (self._round_draft_s + verify_s)
            a = self.params.gate_ema
            if levels == 0:
                self._ar_rate = rate if self._ar_rate is None else (1 - a) * self._ar_rate + a * rate
            else:
                self._spec_rate = rate if self._spec_rate is None else (1 - a) * self._spec_rate + a * rate

    def stats(self):
        out = super().stats()
        out["stops_by_rule"] = self.stops_by_rule
        out["gated_rounds"] = self.gated
        it = self.dinkelbach_iterations
        out["mean_dinkelbach_iterations"] = sum(it) / len(it) if it else 0.0
        return out
