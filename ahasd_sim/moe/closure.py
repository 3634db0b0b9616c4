"""Max-weight closure by one s-t min-cut (Picard 1976), and SpecFit's Dinkelbach search.

Closure problem: pick a set of tree nodes S (ancestor-closed: a node needs its parent) and the
items it requires ((layer, expert) pairs), maximising sum of node weights minus item costs.
Network: source -> node (weight if > 0), node -> sink (-weight if < 0), item -> sink (cost),
node -> parent and node -> item with infinite capacity; the optimal S is the source side of a
minimum cut. Items needed by one candidate node only are folded into that node's weight.

Dinkelbach (1967) for max E(S)/T(S) with E, T > 0: lambda_0 = ratio of the root-only tree;
repeat S = argmax E(S) - lambda T(S) (one closure), lambda = E(S)/T(S), until the maximum is
<= tolerance. It converges superlinearly to the exact optimum (finite set of subtrees).
"""
from __future__ import annotations

from collections import deque

import numpy as np

INF = float("inf")


class _Dinic:
    def __init__(self, n: int):
        self.n = n
        self.g: list[list[int]] = [[] for _ in range(n)]
        self.to: list[int] = []
        self.cap: list[float] = []

    def add(self, u: int, v: int, c: float) -> None:
        self.g[u].append(len(self.to)); self.to.append(v); self.cap.append(c)
        self.g[v].append(len(self.to)); self.to.append(u); self.cap.append(0.0)

    def maxflow(self, s: int, t: int, eps: float = 1e-15) -> float:
        flow = 0.0
        to, cap, g = self.to, self.cap, self.g
        while True:
            level = [-1] * self.n
            level[s] = 0
            q = deque([s])
            while q:
                u = q.popleft()
                for e in g[u]:
                    if cap[e] > eps and level[to[e]] < 0:
                        level[to[e]] = level[u] + 1
                        q.append(to[e])
            if level[t] < 0:
                return flow
            it = [0] * self.n

            def dfs(u: int, f: float) -> float:
                if u == t:
                    return f
                while it[u] < len(g[u]):
                    e = g[u][it[u]]
                    v = to[e]
                    if cap[e] > eps and level[v] == level[u] + 1:
                        d = dfs(v, min(f, cap[e]))
                        if d > eps:
                            cap[e] -= d
                            cap[e ^ 1] += d
                            return d
                    it[u] += 1
                return 0.0

            while True:
                f = dfs(s, INF)
                if f <= eps:
                    break
                flow += f

    def source_side(self, s: int, eps: float = 1e-15) -> list[bool]:
        seen = [False] * self.n
        seen[s] = True
        q = deque([s])
        while q:
            u = q.popleft()
            for e in self.g[u]:
                if self.cap[e] > eps and not seen[self.to[e]]:
                    seen[self.to[e]] = True
                    q.append(self.to[e])
        return seen


def max_closure(nodes: list[int], parent: np.ndarray, weight: dict[int, float],
                items_of: dict[int, list], item_cost: dict) -> tuple[float, list[int]]:
    """Best ancestor-closed subset of ``nodes`` (their parents are in ``nodes`` or are the root 0).

    Value = sum of weight[v] over S - sum of item_cost[i] over items required by S.
    Returns (value, S sorted)."""
    if not nodes:
        return 0.0, []
    users: dict = {}
    for v in nodes:
        for it in items_of.get(v, ()):
            users.setdefault(it, []).append(v)
    w = dict(weight)
    shared = []
    for it, us in users.items():
        if len(us) == 1:
            w[us[0]] -= item_cost[it]        # exclusive item: folded into its only user
        elif item_cost[it] > 0:
            shared.append(it)
    idx = {v: i + 2 for i, v in enumerate(nodes)}
    item_idx = {it: len(nodes) + 2 + j for j, it in enumerate(shared)}
    net = _Dinic(len(nodes) + len(shared) + 2)
    S, T = 0, 1
    pos = 0.0
    for v in nodes:
        wv = w[v]
        if wv > 0:
            net.add(S, idx[v], wv)
            pos += wv
        elif wv < 0:
            net.add(idx[v], T, -wv)
        p = int(parent[v])
        if p != 0:
            net.add(idx[v], idx[p], INF)
    for it in shared:
        net.add(item_idx[it], T, item_cost[it])
        for v in users[it]:
            net.add(idx[v], item_idx[it], INF)
    cut = net.maxflow(S, T)
    side = net.source_side(S)
    chosen = sorted(v for v in nodes if side[idx[v]])
    return pos - cut, chosen


def subtree_value(nodes, parent, gain: dict, items_of: dict, item_cost: dict) -> float:
    covered = set()
    for v in nodes:
        covered.update(items_of.get(v, ()))
    return sum(gain[v] for v in nodes) - sum(item_cost[i] for i in covered)


def dinkelbach(nodes: list[int], parent: np.ndarray, path_prob: dict[int, float], items_of: dict[int, list],
               item_time: dict, base_tokens: float, base_time_s: float, per_node_s: float,
               tol: float = 1e-9, max_iter: int = 50) -> tuple[float, list[int], int]:
    """max over ancestor-closed S of (base_tokens + sum P(v)) / (base_time + per_node*|S| + item times).

    ``items_of[v]``: items v adds (those already paid by the root must be left out; their time
    belongs in ``base_time_s``). Returns (best ratio, S, iterations)."""
    def ratio(sel):
        covered = set()
        for v in sel:
            covered.update(items_of.get(v, ()))
        e = base_tokens + sum(path_prob[v] for v in sel)
        t = base_time_s + per_node_s * len(sel) + sum(item_time[i] for i in covered)
        return e / t

    best_s: list[int] = []
    lam = ratio(best_s)
    for it in range(1, max_iter + 1):
        weight = {v: path_prob[v] - lam * per_node_s for v in nodes}
        cost = {i: lam * c for i, c in item_time.items()}
        val, sel = max_closure(nodes, parent, weight, items_of, cost)
        # F(lam) = max_S E(S) - lam*T(S) = (base_tokens - lam*base_time) + closure value; F = 0 at optimum
        f = base_tokens - lam * base_time_s + val
        if f <= tol * max(1.0, base_tokens) or not sel:
            return lam, best_s, it
        new = ratio(sel)
        if new <= lam * (1 + 1e-15):
            return lam, best_s, it
        lam, best_s = new, sel
    return lam, best_s, max_iter
