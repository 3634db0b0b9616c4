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
        flow = 0
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


_SCALE_TOTAL = 2**30   # integer capacities: the finite ones sum to at most this (fits int32)


class ClosureInstance:
    """The structure of one closure problem, reduced once and solved for many weightings.

    ``nodes``: candidate node ids (parents precede children; a parent is either a candidate or
    the root 0). ``own``: bool [n, I], the items each node requires. ``item_time``: [I] >= 0.
    Reductions (each keeps the optimum): an item required by a node's ancestor needs no edge
    from the node (selecting a node selects its ancestors); an item required by one node only
    is folded into that node; items with the same set of requiring nodes are merged.
    A solve with node gains g and item price lam maximises
    sum_{v in S} g[v] - lam * sum_{items of S} item_time.
    """

    def __init__(self, nodes, parent, own: np.ndarray, item_time: np.ndarray):
        self.nodes = [int(v) for v in nodes]
        n = len(self.nodes)
        pos = {v: i for i, v in enumerate(self.nodes)}
        self.par = np.array([pos.get(int(parent[v]), -1) for v in self.nodes], dtype=np.int64)
        own = np.asarray(own, dtype=bool)
        t = np.asarray(item_time, dtype=float)
        anc = np.zeros_like(own)
        eff = np.zeros_like(own)
        for i in range(n):
            p = self.par[i]
            inherited = anc[p] if p >= 0 else np.zeros(own.shape[1], dtype=bool)
            eff[i] = own[i] & ~inherited
            anc[i] = inherited | own[i]
        keep = eff.any(axis=0) & (t > 0)
        eff, t = eff[:, keep], t[keep]
        users = eff.sum(axis=0)
        single = users == 1
        # exclusive items folded into their only user
        self.folded_time = eff[:, single].astype(float) @ t[single] if n else np.zeros(0)
        multi = np.flatnonzero(users > 1)
        if multi.size:
            cols = np.packbits(eff[:, multi], axis=0).T           # one row of bytes per shared item
            _, first, inv = np.unique(cols, axis=0, return_index=True, return_inverse=True)
            self.group_time = np.bincount(inv.ravel(), weights=t[multi], minlength=len(first))
            gmat = eff[:, multi[first]]                           # [n, groups]: who needs each group
        else:
            self.group_time = np.zeros(0)
            gmat = np.zeros((n, 0), dtype=bool)
        self.n_groups = gmat.shape[1]
        rows, gcols = np.nonzero(gmat)
        has_par = np.flatnonzero(self.par >= 0)
        self.inf_src = np.concatenate([has_par + 2, rows + 2]).astype(np.int64)
        self.inf_dst = np.concatenate([self.par[has_par] + 2, n + 2 + gcols]).astype(np.int64)
        self.n_vert = n + self.n_groups + 2

    def solve(self, gain: np.ndarray, lam: float, backend: str | None = None) -> tuple[float, list[int]]:
        """(value, chosen node ids) of max sum g - lam * item time over closed sets."""
        n = len(self.nodes)
        if n == 0:
            return 0.0, []
        w = np.asarray(gain, dtype=float) - lam * self.folded_time
        gc = lam * self.group_time
        total = float(np.abs(w).sum() + gc.sum())
        scale = _SCALE_TOTAL / total if total > 0 else 1.0
        wi = np.rint(w * scale).astype(np.int64)
        gi = np.rint(gc * scale).astype(np.int64)
        big = _SCALE_TOTAL + 1
        idx = np.arange(n) + 2
        posm, negm = wi > 0, wi < 0
        src = np.concatenate([np.zeros(posm.sum(), np.int64), idx[negm], np.arange(len(gi)) + n + 2, self.inf_src])
        dst = np.concatenate([idx[posm], np.ones(negm.sum(), np.int64), np.ones(len(gi), np.int64), self.inf_dst])
        cap = np.concatenate([wi[posm], -wi[negm], gi, np.full(len(self.inf_src), big, np.int64)])
        pos_total = int(wi[posm].sum())
        run = _source_side_scipy if (backend or BACKEND) == "scipy" else _source_side_python
        cut, side = run(self.n_vert, src.tolist(), dst.tolist(), cap.tolist())
        chosen = [v for i, v in enumerate(self.nodes) if side[i + 2]]
        return (pos_total - cut) / scale, chosen


def _source_side_python(n_vert, src, dst, cap):
    net = _Dinic(n_vert)
    for a, b, c in zip(src, dst, cap):
        if c > 0:
            net.add(a, b, c)
    cut = net.maxflow(0, 1, eps=0)
    return cut, net.source_side(0, eps=0)


def _source_side_scipy(n_vert, src, dst, cap):
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow
    c = coo_matrix((np.asarray(cap, dtype=np.int32), (np.asarray(src), np.asarray(dst))),
                   shape=(n_vert, n_vert)).tocsr()
    res = maximum_flow(c, 0, 1, method="dinic")
    resid = (c - res.flow).tocsr()
    resid.data[resid.data < 0] = 0
    resid.eliminate_zeros()
    order = breadth_first_order(resid, 0, directed=True, return_predecessors=False)
    side = [False] * n_vert
    for u in order.tolist():
        side[u] = True
    return int(res.flow_value), side


def _have_scipy() -> bool:
    try:
        import scipy.sparse.csgraph  # noqa: F401
        return True
    except ImportError:
        return False


BACKEND = "scipy" if _have_scipy() else "python"


def _matrix(nodes, items_of, item_cost):
    keys = sorted({i for v in nodes for i in items_of.get(v, ())})
    col = {k: j for j, k in enumerate(keys)}
    own = np.zeros((len(nodes), len(keys)), dtype=bool)
    for r, v in enumerate(nodes):
        for i in items_of.get(v, ()):
            own[r, col[i]] = True
    return own, np.array([item_cost[k] for k in keys], dtype=float)


def max_closure(nodes: list[int], parent: np.ndarray, weight: dict[int, float],
                items_of: dict[int, list], item_cost: dict, backend: str | None = None) -> tuple[float, list[int]]:
    """Best ancestor-closed subset of ``nodes`` (parents in ``nodes`` or the root 0): maximises
    sum of weight[v] over S - sum of item_cost[i] over the items S requires.

    Solved on integer capacities (2^30 units for the whole instance: exact to ~1e-9 of its
    total weight). S is the minimal minimum cut (vertices reachable from the source in the
    residual graph), which does not depend on the max-flow algorithm, so the scipy (C) and the
    pure-Python backend return the same set. Returns (value, S sorted)."""
    nodes = sorted(int(v) for v in nodes)
    own, t = _matrix(nodes, items_of, item_cost)
    inst = ClosureInstance(nodes, parent, own, t)
    val, sel = inst.solve(np.array([weight[v] for v in nodes], dtype=float), 1.0, backend)
    return val, sorted(sel)


def dinkelbach(nodes, parent, path_prob: np.ndarray, own: np.ndarray, item_time: np.ndarray,
               base_tokens: float, base_time_s: float, per_node_s: float, tol: float = 1e-9,
               max_iter: int = 50, backend: str | None = None) -> tuple[float, list[int], int]:
    """max over ancestor-closed S of (base_tokens + sum_{v in S} P(v)) /
    (base_time + per_node * |S| + time of the items S requires).

    ``path_prob``/``own`` rows follow ``nodes``; items already paid by the root must be left out
    (their time belongs in ``base_time_s``). Returns (best ratio, S, iterations)."""
    nodes = [int(v) for v in nodes]
    inst = ClosureInstance(nodes, parent, own, item_time)
    pp = np.asarray(path_prob, dtype=float)
    row = {v: i for i, v in enumerate(nodes)}
    t_items = np.asarray(item_time, dtype=float)

    def ratio(sel):
        if not sel:
            return base_tokens / base_time_s
        rows = [row[v] for v in sel]
        covered = own[rows].any(axis=0)
        e = base_tokens + pp[rows].sum()
        t = base_time_s + per_node_s * len(sel) + float(t_items[covered].sum())
        return e / t

    best_s: list[int] = []
    lam = ratio(best_s)
    for it in range(1, max_iter + 1):
        val, sel = inst.solve(pp - lam * per_node_s, lam, backend)
        # F(lam) = max_S E(S) - lam*T(S) = (base_tokens - lam*base_time) + closure value; F = 0 at optimum
        f = base_tokens - lam * base_time_s + val
        if f <= tol * max(1.0, base_tokens) or not sel:
            return lam, sorted(best_s), it
        new = ratio(sel)
        if new <= lam * (1 + 1e-12):
            return lam, sorted(best_s), it
        lam, best_s = new, sel
    return lam, sorted(best_s), max_iter
