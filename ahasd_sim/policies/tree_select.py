"""Hardware-aware draft-tree selection: one engine, the platform's cost plugged in.

Objective (as SpecFit's, :mod:`ahasd_sim.policies.specfit`): the ancestor-closed subtree S of
the drafted tree maximising expected committed tokens per unit time,

    E(S) / T(S),   E(S) = 1 + sum of the cumulative draft confidences P(v) over S,

with T(S) the round's time. Two exact searches, by what the cost depends on:

* a cost that depends on S only through its SIZE (the mobile SoC: a tree verify on the NPU
  streams the weights once for all nodes, so its time is a function of the node count; on a
  PIM unit holding k input vectors it is a step function, ceil((|S| + 1) / k) weight passes) is
  searched by :func:`best_by_size`: for a fixed size the best subtree is the size's top nodes
  by P (P never grows from parent to child, so they are ancestor-closed), and the best size is
  found by trying every size: exact, O(n log n);
* a cost with per-node items (MoE: the experts a node routes to) is SpecFit's Dinkelbach
  min-cut search (:func:`ahasd_sim.moe.closure.dinkelbach`).

:func:`brute_force` enumerates every ancestor-closed subtree (tests: small trees).
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Sequence

import numpy as np


def ranked_nodes(nodes: Sequence[int], parent: np.ndarray, path_prob: np.ndarray, depth: np.ndarray) -> list[int]:
    """``nodes`` by descending P, parents before children on ties: every prefix is
    ancestor-closed when every node's parent is among ``nodes`` or the root (P(child) <= P(parent))."""
    v = np.asarray(nodes, dtype=np.int64)
    if v.size == 0:
        return []
    order = np.lexsort((v, np.asarray(depth)[v], -np.asarray(path_prob, dtype=float)[v]))
    return v[order].tolist()


def best_by_size(nodes: Sequence[int], parent: np.ndarray, path_prob: np.ndarray, depth: np.ndarray,
                 time_of_size: Callable[[int], float] | Sequence[float], extra_tokens: float = 0.0,
                 max_nodes: int | None = None) -> tuple[float, list[int]]:
    """(best E/T, the subtree) over ancestor-closed subsets of ``nodes`` when T depends only on
    the subtree's node count: ``time_of_size(n)`` (or ``time_of_size[n]``, a sequence covering
    every size) is the round's time with n draft nodes (root excluded). Ties keep the smaller
    tree. ``extra_tokens`` is added to E (the stop rule's bound)."""
    order = ranked_nodes(nodes, parent, path_prob, depth)
    if max_nodes is not None:
        order = order[:max_nodes]
    par = parent.tolist() if isinstance(parent, np.ndarray) else list(parent)
    pp = path_prob.tolist() if isinstance(path_prob, np.ndarray) else list(path_prob)
    t = time_of_size.__getitem__ if not callable(time_of_size) else time_of_size
    chosen: set[int] = set()
    closed: list[int] = []
    for v in order:                       # keep the ancestor-closed prefix (defensive: P is monotone)
        if par[v] == 0 or par[v] in chosen:
            chosen.add(v)
            closed.append(v)
    gain = 1.0 + extra_tokens
    best_ratio, best_n = gain / t(0), 0
    for n, v in enumerate(closed, start=1):
        gain += pp[v]
        r = gain / t(n)
        if r > best_ratio * (1 + 1e-12):
            best_ratio, best_n = r, n
    return best_ratio, sorted(closed[:best_n])


def brute_force(nodes: Sequence[int], parent: np.ndarray, path_prob: np.ndarray,
                time_of_set: Callable[[Sequence[int]], float]) -> tuple[float, list[int]]:
    """Every ancestor-closed subset of ``nodes`` (root implied), for tests on small trees."""
    nodes = [int(v) for v in nodes]
    best = (1.0 / time_of_set([]), [])
    for k in range(1, len(nodes) + 1):
        for sub in combinations(nodes, k):
            s = set(sub)
            if any(int(parent[v]) != 0 and int(parent[v]) not in s for v in s):
                continue
            r = (1.0 + sum(float(path_prob[v]) for v in sub)) / time_of_set(sub)
            if r > best[0] * (1 + 1e-12):
                best = (r, sorted(sub))
    return best
