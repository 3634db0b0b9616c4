"""The routing predictor a tree policy sees (EcoSpec's lightweight predictor; SpecFit's routing
estimate), modelled by its per-layer top-k recall r.

Each of a node's true top-k experts in a layer is kept with probability r; a missed one is
replaced by a uniformly drawn expert outside the true set (a false positive). r = 1 is an
oracle. Draws come from the run's seeded generator, so a run is reproducible. Routing is never
invented for the simulation itself: verification always uses the recorded routing.
"""
from __future__ import annotations

import numpy as np


class RecallPredictor:
    def __init__(self, recall: float, n_experts: int, rng: np.random.Generator):
        if not 0.0 <= recall <= 1.0:
            raise ValueError(f"predictor recall must be in [0, 1], got {recall}")
        self.recall = float(recall)
        self.n_experts = int(n_experts)
        self.rng = rng

    def predict(self, experts: np.ndarray) -> np.ndarray:
        """Predicted [n, L, k] expert ids for true ids ``experts`` [n, L, k]."""
        if self.recall >= 1.0:
            return experts
        miss = self.rng.random(experts.shape) >= self.recall
        out = experts.copy()
        if not miss.any():
            return out
        E = self.n_experts
        # A false positive: a random expert outside the true set of that (node, layer).
        idx = np.argwhere(miss)
        draws = self.rng.integers(0, E, size=len(idx))
        for (v, layer, j), e in zip(idx.tolist(), draws.tolist()):
            true = experts[v, layer]
            while e in true:
                e = (e + 1) % E
            out[v, layer, j] = e
        return out


class LearnedPredictor:
    """Routing predictor learned from held-out rounds (the profile rounds, never replayed when the
    profile does not overlap the replay: ``mode_stats.profile.overlaps_replay``).

    Per layer, a node's predicted experts are the top-k of
    ``counts[token, l] + w_recent * recent[l] + w_pop * popularity[l]``: how often the target
    routed that drafter token to each expert in the profile rounds, the decayed routing of the
    tokens this run already verified (temporal locality), and the layer's popularity (unseen
    tokens). Inputs: the draft tokens (the drafter's output) and verified routing only -- never the
    target's routing of a node it has not verified (tested).

    ``next_layer_guess``: the experts of layer l+1 guessed from each token's layer-l routing by the
    profile's layer-to-layer transition counts (Pre-gated-MoE / gate-input style), used by
    ``moe.overlap: next_layer``.
    """

    def __init__(self, tokens: np.ndarray, routing: np.ndarray, n_experts: int, w_recent: float = 0.5,
                 w_pop: float = 0.05, recent_decay: float = 0.9):
        routing = np.asarray(routing, dtype=np.int64)        # [m, L, k] held-out routing
        tokens = np.asarray(tokens, dtype=np.int64)          # [m]
        m, L, k = routing.shape
        self.L, self.E, self.k = L, int(n_experts), k
        self.pop = np.zeros((L, self.E))
        for layer in range(L):
            self.pop[layer] = np.bincount(routing[:, layer].ravel(), minlength=self.E)[:self.E]
        self.pop /= max(1.0, float(m))
        self.by_token: dict[int, np.ndarray] = {}
        for t in np.unique(tokens):
            sel = routing[tokens == t]                       # [c, L, k]
            c = np.zeros((L, self.E))
            for layer in range(L):
                c[layer] = np.bincount(sel[:, layer].ravel(), minlength=self.E)[:self.E]
            self.by_token[int(t)] = c / len(sel)
        self.trans = np.zeros((max(L - 1, 0), self.E, self.E))
        for layer in range(L - 1):
            a, b = routing[:, layer], routing[:, layer + 1]
            np.add.at(self.trans[layer], (np.repeat(a, k, axis=1).ravel(), np.tile(b, (1, k)).ravel()), 1.0)
        self.recent = np.zeros((L, self.E))
        self.w_recent, self.w_pop, self.decay = float(w_recent), float(w_pop), float(recent_decay)
        self.recall = float("nan")                           # not a parameter: measured (stats)
        self.hits = self.total = 0
        self.union_hits = self.union_pred = self.union_true = 0

    def predict_tokens(self, tokens) -> np.ndarray:
        """Predicted [n, L, k] expert ids for draft tokens ``tokens`` [n]."""
        base = self.w_recent * self.recent + self.w_pop * self.pop
        out = np.empty((len(tokens), self.L, self.k), dtype=np.int64)
        for i, t in enumerate(tokens):
            c = self.by_token.get(int(t))
            score = base if c is None else c + base
            out[i] = np.argsort(-score, axis=1, kind="stable")[:, :self.k]
        return out

    def observe_verified(self, routing: np.ndarray) -> None:
        """Routing [m, L, k] of tokens the target has verified (committed): the recent term."""
        self.recent *= self.decay
        r = np.asarray(routing, dtype=np.int64)
        for layer in range(self.L):
            self.recent[layer] += np.bincount(r[:, layer].ravel(), minlength=self.E)[:self.E] / max(1, len(r))

    def score(self, pred: np.ndarray, true: np.ndarray) -> None:
        """Book recall (per node and layer: |pred & true| / k) and union precision/recall for one pass."""
        pred = np.asarray(pred, dtype=np.int64)
        true = np.asarray(true, dtype=np.int64)
        # top-k ids are distinct per (node, layer): matches = |pred & true| (vectorised)
        self.hits += int((pred[:, :, :, None] == true[:, :, None, :]).any(axis=3).sum())
        self.total += int(true.shape[0] * true.shape[1] * self.k)
        lay = np.arange(self.L)[None, :, None]
        mp = np.zeros((self.L, self.E), dtype=bool)
        mt = np.zeros((self.L, self.E), dtype=bool)
        mp[np.broadcast_to(lay, pred.shape), pred] = True
        mt[np.broadcast_to(lay, true.shape), true] = True
        self.union_hits += int((mp & mt).sum())
        self.union_pred += int(mp.sum())
        self.union_true += int(mt.sum())

    def next_layer_guess(self, layer_routing: np.ndarray, layer: int) -> set[int]:
        """Union of the per-token top-k guesses for layer ``layer + 1`` from layer ``layer``'s routing."""
        rows = np.asarray(layer_routing, dtype=np.int64)
        if rows.size == 0:
            return set()
        s = self.trans[layer][rows].sum(axis=1) + self.w_pop * self.pop[layer + 1]     # [m, E]
        return set(np.argsort(-s, axis=1, kind="stable")[:, :self.k].ravel().tolist())

    def stats(self) -> dict:
        return {"kind": "learned", "node_recall": self.hits / self.total if self.total else 0.0,
                "union_recall": self.union_hits / self.union_true if self.union_true else 0.0,
                "union_precision": self.union_hits / self.union_pred if self.union_pred else 0.0,
                "train_tokens_seen": len(self.by_token)}
