"""SpecDec++ (Huang, Guo, Wang; COLM 2025): threshold stopping on predicted acceptance.

The paper trains an acceptance head on the drafter's hidden state. The simulator has no
hidden states, so the predictor is a small L2-regularised logistic model over drafter
features a real system can see (entropy, token/top-1 probability, top-2 margin, ...), fitted
with Newton/IRLS in numpy on a **held-out** part of the trace (label: the trace's ``accept``
flag). Stop after k tokens if ``1 - prod_{i<=k} a_hat_i > h``, with ``k`` in
``[k_min, k_max]``; with ``one_step_lag`` the decision after token k uses ``prod_{i<k}``
(the official code's lag).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..config.errors import InputError
from .base import Decision, DraftPolicy, DraftTokenView, register_policy
from .config import SPECDECPP_FEATURES

_EPS_P = 1e-12


def _view_margin(view: DraftTokenView) -> float:
    if len(view.topk_p) >= 2:
        return float(view.topk_p[0]) - float(view.topk_p[1])
    # No top-k: the second probability is at most min(p_top1, 1 - p_top1).
    return float(view.p_top1) - min(float(view.p_top1), 1.0 - float(view.p_top1))


def view_features(view: DraftTokenView, names: Sequence[str]) -> np.ndarray:
    """Feature vector of one drafted token (policy-visible fields only)."""
    vals = []
    for n in names:
        if n == "entropy":
            vals.append(float(view.entropy_nats))
        elif n == "p_token":
            vals.append(float(view.p_token))
        elif n == "p_top1":
            vals.append(float(view.p_top1))
        elif n == "top2_margin":
            vals.append(_view_margin(view))
        elif n == "log_p_token":
            vals.append(math.log(max(float(view.p_token), _EPS_P)))
        elif n == "log_p_top1":
            vals.append(math.log(max(float(view.p_top1), _EPS_P)))
        elif n == "index_in_round":
            vals.append(float(view.index_in_round))
        else:  # pragma: no cover - validated by the config
            raise ValueError(f"unknown feature '{n}'")
    return np.asarray(vals, dtype=float)


def trace_features(data: Any, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """(X, y) from a trace-like object with columns drf_H, drf_p_tok, drf_p_top1, topk_p, accept."""

    def col(name: str) -> np.ndarray:
        try:
            return np.asarray(getattr(data, name))
        except (AttributeError, KeyError):
            raise InputError(f"specdecpp: fit data has no column '{name}' (needed for its features)") from None

    cols = []
    for n in names:
        if n == "entropy":
            cols.append(col("drf_H").astype(float))
        elif n == "p_token":
            cols.append(col("drf_p_tok").astype(float))
        elif n == "p_top1":
            cols.append(col("drf_p_top1").astype(float))
        elif n == "top2_margin":
            topk = col("topk_p").astype(float)
            if topk.ndim != 2 or topk.shape[1] < 2:
                raise InputError("specdecpp: fit data column 'topk_p' must be (n, K) with K >= 2")
            cols.append(topk[:, 0] - topk[:, 1])
        elif n == "log_p_token":
            cols.append(np.log(np.maximum(col("drf_p_tok").astype(float), _EPS_P)))
        elif n == "log_p_top1":
            cols.append(np.log(np.maximum(col("drf_p_top1").astype(float), _EPS_P)))
        elif n == "index_in_round":
            cols.append(col("index_in_round").astype(float))
        else:
            raise InputError(f"specdecpp: unknown feature '{n}'; valid: {', '.join(SPECDECPP_FEATURES)}")
    X = np.column_stack(cols) if cols else np.zeros((0, 0))
    y = col("accept").astype(bool).astype(float)
    if X.shape[0] != y.shape[0]:
        raise InputError(f"specdecpp: fit data columns differ in length ({X.shape[0]} vs {y.shape[0]})")
    return X, y


class LogisticAcceptancePredictor:
    """L2-regularised logistic regression fitted by Newton/IRLS (deterministic).

    Features are standardised with the fit data's mean/std; the intercept is not
    penalised. ``coef`` is in raw feature units (sign = direction of the effect).
    """

    def __init__(self, feature_names: Sequence[str], l2: float = 1.0, max_iter: int = 100,
                 tol: float = 1e-8):
        self.feature_names = list(feature_names)
        self.l2 = float(l2)
        self.max_iter = int(max_iter)
        self.tol = float(tol)
        self.mean = np.zeros(len(self.feature_names))
        self.std = np.ones(len(self.feature_names))
        self.w = np.zeros(len(self.feature_names) + 1)  # [intercept, standardised coefs]
        self.fit_info: dict[str, Any] = {}

    def fit(self, X: np.ndarray, y: np.ndarray) -> "LogisticAcceptancePredictor":
        X = np.asarray(X, dtype=float)
        y = np.asarray(y, dtype=float)
        if not np.all(np.isfinite(X)):
            raise InputError("specdecpp: fit data features contain NaN or infinite values")
        self.mean = X.mean(axis=0)
        std = X.std(axis=0)
        self.std = np.where(std > 1e-12, std, 1.0)
        Z = np.column_stack([np.ones(len(X)), (X - self.mean) / self.std])
        d = Z.shape[1]
        pen = np.full(d, self.l2)
        pen[0] = 0.0
        w = np.zeros(d)
        base = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
        w[0] = math.log(base / (1 - base))
        it = 0
        converged = False
        for it in range(1, self.max_iter + 1):
            p = 1.0 / (1.0 + np.exp(-(Z @ w)))
            g = Z.T @ (y - p) - pen * w
            W = p * (1 - p)
            H = (Z * W[:, None]).T @ Z + np.diag(pen) + 1e-9 * np.eye(d)
            step = np.linalg.solve(H, g)
            w = w + step
            if float(np.max(np.abs(step))) < self.tol:
                converged = True
                break
        self.w = w
        p = self.predict_matrix(X)
        ll = -np.mean(y * np.log(np.maximum(p, 1e-15)) + (1 - y) * np.log(np.maximum(1 - p, 1e-15)))
        self.fit_info = {"n": int(len(y)), "accept_rate": float(y.mean()), "iterations": it,
                         "converged": converged, "log_loss": float(ll),
                         "accuracy": float(np.mean((p >= 0.5) == (y >= 0.5)))}
        return self

    @property
    def intercept(self) -> float:
        return float(self.w[0] - np.sum(self.w[1:] * self.mean / self.std))

    @property
    def coef(self) -> dict[str, float]:
        return {n: float(c) for n, c in zip(self.feature_names, self.w[1:] / self.std)}

    def predict_matrix(self, X: np.ndarray) -> np.ndarray:
        z = self.w[0] + ((np.asarray(X, dtype=float) - self.mean) / self.std) @ self.w[1:]
        return 1.0 / (1.0 + np.exp(-z))

    def predict_view(self, view: DraftTokenView) -> float:
        x = view_features(view, self.feature_names)
        z = float(self.w[0] + np.dot((x - self.mean) / self.std, self.w[1:]))
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


@register_policy("specdecpp")
class SpecDecPPPolicy(DraftPolicy):
    """``fit_data``: a held-out trace part (or an already fitted object with ``predict_view``)."""

    needs_fit_data = True

    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        p = self.params
        self.h = float(p.h)
        self.k_min = int(p.k_min)
        self.k_max = int(p.k_max)
        self.one_step_lag = bool(p.one_step_lag)
        if fit_data is not None and callable(getattr(fit_data, "predict_view", None)):
            self.predictor = fit_data
        else:
            n = 0 if fit_data is None else len(fit_data)
            if fit_data is None or n < int(p.min_fit_positions):
                got = "none" if fit_data is None else f"only {n} positions"
                raise InputError(
                    f"policy 'specdecpp' needs a held-out trace part with at least {p.min_fit_positions} "
                    f"positions to fit its acceptance predictor (got {got}); a held-out trace part is required")
            X, y = trace_features(fit_data, p.features)
            if y.min() == y.max():
                raise InputError("specdecpp: the held-out trace part has only "
                                 + ("accepted" if y[0] else "rejected")
                                 + " positions; cannot fit the acceptance predictor")
            self.predictor = LogisticAcceptancePredictor(p.features, p.l2, p.max_iter, p.tol).fit(X, y)
        self._prod = 1.0
        self._pred_sum = 0.0
        self._pred_n = 0
        self.threshold_stops = 0

    def predict(self, view: DraftTokenView) -> float:
        return float(self.predictor.predict_view(view))

    def decide(self, view: DraftTokenView) -> Decision:
        if view.index_in_round == 0:
            self._prod = 1.0
        a_hat = self.predict(view)
        self._pred_sum += a_hat
        self._pred_n += 1
        before = self._prod
        self._prod *= a_hat
        used = before if self.one_step_lag else self._prod
        stop = 1.0 - used > self.h
        d = self.bounded(view, Decision.STOP_AFTER if stop else Decision.CONTINUE,
                         lo=self.k_min, hi=self.k_max)
        if stop and d is Decision.STOP_AFTER:
            self.threshold_stops += 1
        return d

    def stats(self):
        out = super().stats()
        out["mean_predicted_acceptance"] = self._pred_sum / self._pred_n if self._pred_n else 0.0
        out["rounds_stopped_by_threshold"] = self.threshold_stops
        if isinstance(self.predictor, LogisticAcceptancePredictor):
            out["predictor"] = {"features": list(self.predictor.feature_names),
                                "coef": self.predictor.coef, "intercept": self.predictor.intercept,
                                **self.predictor.fit_info}
        return out
