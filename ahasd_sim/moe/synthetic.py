"""Synthetic expert routing for a MoE target whose routing was not recorded (``moe.routing:
synthetic``): the tree trace's trees (shapes, draft probabilities, verdicts, tokens) with every
node's top-k experts drawn for the target's layer / expert / top-k shape. Every report of such a
run says the routing is synthetic.

Statistics (parameters, swept by ``scripts/moe_study.py``):

* **balance**: per layer a fixed popularity, Zipf over a random expert order,
  w_i ~ (rank_i + 1) ** -zipf_s (0 = perfectly balanced);
* **locality**: each of a token's k experts at a layer is, with probability ``locality``, one of
  the previous token's experts at that layer (the previous token: the node's parent in the draft
  tree; for a round's root, the last accepted token of the round before) -- consecutive-token
  expert reuse;
* **union growth** follows from both: siblings share their parent's kept experts, and the rest
  are drawn by popularity, so a tree's per-layer union grows sub-linearly with its nodes.

Sampling without replacement by Gumbel top-k (kept experts forced in), one seeded generator for
the whole trace, so every run of a configuration sees the same routing.
"""
from __future__ import annotations

import numpy as np

_CACHE: dict[tuple, object] = {}


def synthetic_trace(tt, n_layers: int, n_experts: int, top_k: int, locality: float, zipf_s: float, seed: int):
    """A copy of tree trace ``tt`` whose ``node_moe_ids`` are synthetic [nodes, n_layers, top_k]."""
    from ..traces.tree import TreeTrace
    key = (id(tt), tt.path, n_layers, n_experts, top_k, float(locality), float(zipf_s), int(seed))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    ids = synthetic_routing(tt, n_layers, n_experts, top_k, locality, zipf_s, seed)
    cols = dict(tt.columns)
    cols["node_moe_ids"] = ids
    header = dict(tt.header)
    header["moe"] = {**tt.header.get("moe", {}), "n_experts": int(n_experts), "k": int(top_k),
                     "label": f"synthetic routing (locality {locality}, Zipf s {zipf_s}, seed {seed}) on the "
                              f"trees of {tt.header.get('moe', {}).get('label', tt.path)}"}
    out = TreeTrace(cols, header, tt.path)
    if len(_CACHE) > 8:
        _CACHE.clear()
    _CACHE[key] = out
    return out


def popularity_weights(n_experts: int, zipf_s: float, rng: np.random.Generator) -> np.ndarray:
    """One layer's expert probabilities: Zipf(s) over a random order of the experts."""
    w = (np.arange(n_experts) + 1.0) ** -float(zipf_s)
    out = np.empty(n_experts)
    out[rng.permutation(n_experts)] = w / w.sum()
    return out


def synthetic_routing(tt, L: int, E: int, k: int, locality: float, zipf_s: float, seed: int) -> np.ndarray:
    if not 0 < k <= E:
        raise ValueError(f"top-k {k} must be in 1..{E}")
    rng = np.random.default_rng([int(seed), 0x5EED])
    logw = np.log(np.stack([popularity_weights(E, zipf_s, rng) for _ in range(L)])).astype(np.float32)   # [L, E]
    n_nodes = int(tt.columns["node_tok"].shape[0])
    ids = np.zeros((n_nodes, L, k), dtype=np.int64)
    parent = tt.columns["node_parent"].astype(np.int64)
    off = tt.columns["round_node_offset"].astype(np.int64)
    cnt = tt.columns["round_n_nodes"].astype(np.int64)
    acc = tt.columns["node_accept"].astype(bool)
    prev = -1                                  # global id of the token before this round's root
    for r in range(len(tt)):
        o, n = int(off[r]), int(cnt[r])
        par = parent[o:o + n]
        depth = np.zeros(n, dtype=np.int64)
        for j in range(1, n):
            depth[j] = depth[par[j]] + 1
        for d in range(int(depth.max()) + 1):
            loc = np.flatnonzero(depth == d)
            g = o + loc
            pred = np.full(len(loc), prev) if d == 0 else o + par[loc]
            u = rng.random((len(loc), L, E), dtype=np.float32)
            np.maximum(u, np.float32(1e-30), out=u)
            score = logw[None] - np.log(-np.log(u))                 # + Gumbel(0, 1) noise
            if locality > 0 and (pred >= 0).all():
                keep = rng.random((len(loc), L, k)) < locality
                src = ids[pred]                                    # [m, L, k]
                m_i, l_i, _ = np.nonzero(keep)
                score[m_i, l_i, src[keep]] = np.inf
            ids[g] = np.argpartition(-score, k - 1, axis=2)[:, :, :k]
        # the next root follows the last accepted token of this round (or this root)
        good = np.zeros(n, dtype=bool)
        good[0] = True
        last = 0
        for j in range(1, n):
            good[j] = acc[o + j] and good[par[j]]
            if good[j] and depth[j] > depth[last]:
                last = j
        prev = o + last
    return ids
