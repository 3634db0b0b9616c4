"""One round's draft tree and what verifying a subtree of it reveals.

Node 0 is the root: the last committed token (the previous round's correction/bonus token),
whose forward in the verification pass also routes through the experts. Nodes 1..n are draft
tokens; ``parent[v] < v``. ``correct[v]`` is the target's verdict (its greedy token at the
parent's context equals v's token) and ``experts[v, l, :]`` the target's top-k experts of v's
token at layer l -- both are ground truth held by the simulator; policies get a
:class:`TreeView` without them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class DraftTree:
    parent: np.ndarray            # int [n+1]; parent[0] = -1
    q_prob: np.ndarray            # float [n+1]: drafter probability of the node's token; q[0] = 1
    correct: np.ndarray           # bool [n+1]: target verdict (hidden from policies); correct[0] = True
    experts: np.ndarray           # int [n+1, L, k]: target top-k experts per layer (hidden from policies)
    kv_len: int = 0               # context tokens before the root
    index: int = 0                # round index in its trace
    # Drafter-side extras (entropy etc.) may be attached by a loader; policies may read them.
    extras: dict = field(default_factory=dict)
    # Tokens the recorder committed for this round, if known (for cross-checks)
    recorded_accepted: int = -1

    def __post_init__(self):
        n = len(self.parent)
        if n < 1 or int(self.parent[0]) != -1:
            raise ValueError("tree: node 0 must be the root (parent -1)")
        if np.any(self.parent[1:] >= np.arange(1, n)) or np.any(self.parent[1:] < 0):
            raise ValueError("tree: every node's parent must be an earlier node")
        if self.experts.ndim != 3 or self.experts.shape[0] != n:
            raise ValueError(f"tree: experts must be [n_nodes, layers, top_k], got {self.experts.shape}")
        depth = np.zeros(n, dtype=np.int64)
        path = np.ones(n, dtype=float)
        for v in range(1, n):
            depth[v] = depth[self.parent[v]] + 1
            path[v] = path[self.parent[v]] * float(self.q_prob[v])
        object.__setattr__(self, "depth", depth)
        object.__setattr__(self, "path_prob", path)

    @property
    def n_nodes(self) -> int:
        """Draft nodes (root excluded)."""
        return len(self.parent) - 1

    @property
    def n_layers(self) -> int:
        return self.experts.shape[1]

    @property
    def top_k(self) -> int:
        return self.experts.shape[2]

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())


def is_ancestor_closed(parent: np.ndarray, nodes) -> bool:
    s = set(int(v) for v in nodes)
    return all(int(parent[v]) == 0 or int(parent[v]) in s for v in s) and 0 not in s


def accepted_length(tree: DraftTree, nodes) -> int:
    """Tokens accepted when the target verifies the subtree ``nodes`` (root implied): the longest
    root path of selected nodes each of which the target confirms."""
    sel = np.zeros(len(tree.parent), dtype=bool)
    sel[list(nodes)] = True
    sel[0] = True
    children: dict[int, list[int]] = {}
    for v in np.flatnonzero(sel[1:]) + 1:
        children.setdefault(int(tree.parent[v]), []).append(int(v))
    cur, acc = 0, 0
    while True:
        nxt = [c for c in children.get(cur, ()) if tree.correct[c]]
        if not nxt:
            return acc
        cur = nxt[0]  # siblings carry distinct tokens: at most one matches the target
        acc += 1


def expert_union(experts: np.ndarray, nodes) -> list[np.ndarray]:
    """Per layer, the sorted distinct experts routed by the root and ``nodes``."""
    idx = [0, *sorted(int(v) for v in nodes)]
    sub = experts[idx]                               # [m, L, k]
    return [np.unique(sub[:, layer, :]) for layer in range(experts.shape[1])]


@dataclass(frozen=True)
class TreeView:
    """What a tree policy may see: the drafter's tree up to the drafted depth, the routing
    *predicted* for each node (``predicted_experts``; equal to the truth only with recall 1),
    the expert cache's residency and the profiled cost coefficients."""

    parent: np.ndarray
    q_prob: np.ndarray
    path_prob: np.ndarray
    depth: np.ndarray
    drafted_depth: int            # levels drafted so far (nodes with depth <= this are available)
    predicted_experts: np.ndarray  # int [n+1, L, k]
    resident: np.ndarray          # bool [L, E]: expert resident (or in flight) in the GPU cache
    costs: object                 # moe.cost.LinearVerifyModel
    draft_time_s: float           # drafting time spent this round so far
    next_level_draft_s: float     # drafter time of one more level (0 if no more levels exist)
    recorded_depth: int           # deepest level the drafter can produce this round
    now_s: float = 0.0
    union_scale: float = 1.0      # calibrated true / predicted distinct experts a node adds (moe.calibration)
    miss_scale: float = 1.0       # calibrated true / predicted non-resident experts

    def available(self) -> np.ndarray:
        """Node ids (root excluded) drafted so far."""
        return np.flatnonzero(self.depth[1:] <= self.drafted_depth) + 1

    def sibling_rank(self) -> np.ndarray:
        """Rank of each node among its siblings by drafter probability (0 = most likely)."""
        rank = np.zeros(len(self.parent), dtype=np.int64)
        groups: dict[int, list[int]] = {}
        for v in range(1, len(self.parent)):
            groups.setdefault(int(self.parent[v]), []).append(v)
        for kids in groups.values():
            for r, v in enumerate(sorted(kids, key=lambda u: (-self.q_prob[u], u))):
                rank[v] = r
        return rank


def accepted_path(tree: DraftTree, nodes=None) -> list[int]:
    """Node ids of the accepted path when the target verifies ``nodes`` (all nodes if None):
    the root path :func:`accepted_length` counts, in order."""
    n = len(tree.parent)
    sel = np.ones(n, dtype=bool) if nodes is None else np.zeros(n, dtype=bool)
    if nodes is not None:
        sel[list(nodes)] = True
    children: dict[int, list[int]] = {}
    for v in np.flatnonzero(sel[1:]) + 1:
        children.setdefault(int(tree.parent[v]), []).append(int(v))
    cur, path = 0, []
    while True:
        nxt = [c for c in children.get(cur, ()) if tree.correct[c]]
        if not nxt:
            return path
        cur = nxt[0]
        path.append(cur)


def reroot(tree: DraftTree, u: int, committed: int) -> DraftTree:
    """The draft tree of the pass that follows committing ``committed`` tokens of this round, the
    last of which is node ``u`` (an accepted node): u's subtree with u as the root. Draft
    probabilities below u are the drafter's at u's context (drafting is causal along a path), so
    the subtree is the tree a drafter grows from u, cut to the recorded depth."""
    if u == 0:
        return tree
    n = len(tree.parent)
    keep = np.zeros(n, dtype=bool)
    keep[u] = True
    for v in range(u + 1, n):
        keep[v] = keep[tree.parent[v]]
    idx = np.flatnonzero(keep)
    new_id = np.full(n, -1, dtype=np.int64)
    new_id[idx] = np.arange(len(idx))
    parent = new_id[tree.parent[idx]]
    parent[0] = -1
    q = tree.q_prob[idx].astype(float)
    q[0] = 1.0
    correct = tree.correct[idx].copy()
    correct[0] = True
    extras = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape[:1] == (n,) else v) for k, v in tree.extras.items()}
    if "n_commit_recorded" in extras:
        extras["n_commit_recorded"] = int(extras["n_commit_recorded"]) - committed
    return DraftTree(parent=parent, q_prob=q, correct=correct, experts=tree.experts[idx],
                     kv_len=tree.kv_len + committed, index=tree.index, extras=extras,
                     recorded_accepted=max(-1, tree.recorded_accepted - committed) if tree.recorded_accepted >= 0 else -1)
