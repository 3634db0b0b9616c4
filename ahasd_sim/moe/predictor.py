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
