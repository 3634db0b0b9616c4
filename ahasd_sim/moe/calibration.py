"""Online calibration of the expert-cost estimate a tree policy uses (``moe.cost_calibration``).

A routing predictor that under-sizes the per-layer expert unions of a tree (a popularity-biased
predictor puts several nodes on the same few experts) makes experts look cheap: SpecFit and
EcoSpec then verify too many nodes. The calibrator compares, after every verification pass,
the predicted and the true routing of the tokens that pass **verified** (the root and the
selected nodes -- never an unverified node) and keeps two decayed ratio estimators:

* ``union_scale`` = sum(|U_true| - k) / sum(|U_pred| - k) over layers and passes: distinct
  experts the selected nodes truly add beyond the root's k, per predicted one (the root's own k
  are exact);
* ``miss_scale`` = sum(true non-resident experts of U_true) / sum(predicted non-resident of
  U_pred), residency as the policy saw it before the pass.

Policies scale a node's own predicted items' expert compute by ``union_scale`` and every
predicted non-resident item's copy by ``miss_scale``, so the expected union cost is
c2 (k + union_scale (|U_pred| - k)) + fetch x miss_scale x misses_pred. Each pass's sums decay
by 0.5 ** (1 / half_life_passes) (routing drifts with the text). Until a pass with selected
nodes is seen the scales are 1 (the predictor's own estimate).
"""
from __future__ import annotations

import numpy as np


class UnionCalibrator:
    def __init__(self, top_k: int, half_life_passes: float = 64.0):
        self.k = int(top_k)
        self.decay = 0.5 ** (1.0 / max(float(half_life_passes), 1e-9))
        self.u_true = self.u_pred = 0.0
        self.m_true = self.m_pred = 0.0
        self.passes = 0

    @property
    def union_scale(self) -> float:
        return self.u_true / self.u_pred if self.u_pred > 0 else 1.0

    @property
    def miss_scale(self) -> float:
        return self.m_true / self.m_pred if self.m_pred > 0 else 1.0

    def observe(self, pred_rows: np.ndarray, true_rows: np.ndarray, resident: np.ndarray) -> None:
        """One verification pass over tokens ``[root, selected...]``: their predicted and true
        routing [m, L, k] and the residency [L, E] the policy saw."""
        pred_rows = np.asarray(pred_rows, dtype=np.int64)
        true_rows = np.asarray(true_rows, dtype=np.int64)
        L = true_rows.shape[1]
        self.u_true *= self.decay
        self.u_pred *= self.decay
        self.m_true *= self.decay
        self.m_pred *= self.decay
        self.passes += 1
        for layer in range(L):
            up, ut = np.unique(pred_rows[:, layer]), np.unique(true_rows[:, layer])
            if len(true_rows) > 1:
                self.u_pred += len(up) - self.k
                self.u_true += len(ut) - self.k
            self.m_pred += int((~resident[layer, up]).sum())
            self.m_true += int((~resident[layer, ut]).sum())

    def expected_union(self, pred_rows: np.ndarray) -> float:
        """Calibrated expected sum over layers of |U_true| for tokens with routing ``pred_rows``."""
        pred_rows = np.asarray(pred_rows, dtype=np.int64)
        tot = 0.0
        for layer in range(pred_rows.shape[1]):
            u = len(np.unique(pred_rows[:, layer]))
            tot += self.k + self.union_scale * (u - self.k) if len(pred_rows) > 1 else u
        return tot

    def stats(self) -> dict:
        return {"union_scale": self.union_scale, "miss_scale": self.miss_scale, "passes": self.passes}
