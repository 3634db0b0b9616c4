"""BanditSpec (Hou et al., ICML 2025): a bandit over draft lengths.

Each arm is a draft length ``gamma`` (``policy.banditspec.arms``). At ``begin_round`` the
policy picks an arm: round-robin for ``warmup_rounds`` rounds (official code: 7), then

* **UCBSpec**: ``argmax_i mu_i + cr_i``,
  ``cr_i = s * sqrt(((1+n_i)/n_i^2) * (1 + 2 ln(K t^2 sqrt(1+n_i) / delta)))``,
  unpulled arms first (ties -> lowest index). In the paper the reward is the committed
  tokens ``Y in [1, L+1]`` and ``s = L/2``. With the official code's reward, throughput
  ``n_committed / round_time_s`` (tokens/s, ``reward = "throughput"``), ``s`` is half the
  observed reward range (max - min so far), i.e. the same radius on min-max normalised
  rewards.
* **EXP3Spec**: loss ``Z_i = 1{i=I_t} * l_t / p_i`` with ``l_t`` the reward normalised to
  a loss in ``[0, 1]`` (paper: ``(L+1-y)/L``), ``eta_t = sqrt(ln K / (t K))``,
  ``p_i ~ exp(-eta_t * sum Z_i)``; the arm is drawn with the run's RNG.

The round then drafts exactly the chosen number of tokens (within the round's bounds).
Rewards are attributed to the round's arm through the base class's FIFO of pending rounds,
so overlapping (asynchronous) rounds are handled.
"""
from __future__ import annotations

import math

import numpy as np

from .base import Decision, DraftPolicy, DraftTokenView, RoundContext, VerifyOutcome, register_policy


@register_policy("banditspec")
class BanditSpecPolicy(DraftPolicy):
    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        p = self.params
        self.arms = [int(a) for a in p.arms]
        self.K = len(self.arms)
        self.algorithm = str(p.algorithm)
        self.delta = float(p.delta)
        self.warmup_rounds = int(p.warmup_rounds)
        self.reward_kind = str(p.reward)
        self.pulls = np.zeros(self.K, dtype=int)          # arm chosen at begin_round
        self.n = np.zeros(self.K, dtype=int)              # rewards observed
        self.reward_sum = np.zeros(self.K)
        self.loss_sum = np.zeros(self.K)                  # EXP3 importance-weighted losses
        self.r_min = math.inf
        self.r_max = -math.inf
        self.t = 0                                         # rounds begun
        self.invalid_outcomes = 0
        self.arm_sequence: list[int] = []

    # ------------------------------------------------------------ selection
    def radius_scale(self) -> float:
        if self.reward_kind == "tokens":
            return max(self.arms) / 2.0
        if not math.isfinite(self.r_max):
            return 1.0
        span = self.r_max - self.r_min
        return (span if span > 0 else max(abs(self.r_max), 1e-12)) / 2.0

    def ucb_index(self, t: int) -> np.ndarray:
        idx = np.full(self.K, np.inf)
        s = self.radius_scale()
        for i in range(self.K):
            n = int(self.n[i])
            if n == 0:
                continue
            mu = self.reward_sum[i] / n
            log_term = math.log(self.K * t * t * math.sqrt(1 + n) / self.delta)
            idx[i] = mu + s * math.sqrt(((1 + n) / n ** 2) * (1 + 2 * log_term))
        return idx

    def exp3_probs(self, t: int) -> np.ndarray:
        eta = math.sqrt(math.log(self.K) / (t * self.K)) if self.K > 1 else 0.0
        z = -eta * self.loss_sum
        z -= z.max()
        w = np.exp(z)
        return w / w.sum()

    def choose_arm(self) -> int:
        t = self.t + 1
        if self.t < self.warmup_rounds:
            return self.t % self.K
        if self.algorithm == "ucb":
            idx = self.ucb_index(t)
            return int(np.argmax(idx))          # first maximum: inf (unpulled) first, ties -> lowest
        probs = self.exp3_probs(t)
        return int(self.rng.choice(self.K, p=probs))

    def begin_round(self, ctx: RoundContext) -> None:
        super().begin_round(ctx)
        arm = self.choose_arm()
        prob = 1.0 / self.K
        if self.algorithm == "exp3" and self.t >= self.warmup_rounds:
            prob = float(self.exp3_probs(self.t + 1)[arm])
        self.t += 1
        self.pulls[arm] += 1
        self.arm_sequence.append(arm)
        assert self._current is not None
        self._current.info["arm"] = arm
        self._current.info["prob"] = prob

    # ------------------------------------------------------------ rounds
    def decide(self, view: DraftTokenView) -> Decision:
        rec = self.current_round(view.now_s)
        gamma = self.arms[rec.info["arm"]]
        raw = Decision.STOP_AFTER if view.index_in_round + 1 >= gamma else Decision.CONTINUE
        return self.bounded(view, raw)

    def reward_of(self, outcome: VerifyOutcome) -> float | None:
        if self.reward_kind == "tokens":
            return float(outcome.n_committed)
        if outcome.round_time_s <= 0 or not math.isfinite(outcome.round_time_s):
            return None
        return float(outcome.n_committed) / float(outcome.round_time_s)

    def on_verify(self, outcome: VerifyOutcome):
        rec = super().on_verify(outcome)
        if rec is None or "arm" not in rec.info:
            return rec
        r = self.reward_of(outcome)
        if r is None:
            self.invalid_outcomes += 1
            return rec
        arm = rec.info["arm"]
        self.n[arm] += 1
        self.reward_sum[arm] += r
        self.r_min = min(self.r_min, r)
        self.r_max = max(self.r_max, r)
        if self.algorithm == "exp3":
            if self.reward_kind == "tokens":
                L = max(self.arms)
                loss = (L + 1 - r) / L
            else:
                span = self.r_max - self.r_min
                loss = (self.r_max - r) / span if span > 0 else 0.0
            loss = min(max(loss, 0.0), 1.0)
            self.loss_sum[arm] += loss / max(rec.info.get("prob", 1.0 / self.K), 1e-12)
        return rec

    def stats(self):
        out = super().stats()
        means = np.where(self.n > 0, self.reward_sum / np.maximum(self.n, 1), 0.0)
        out["algorithm"] = self.algorithm
        out["reward"] = self.reward_kind
        out["arms"] = list(self.arms)
        out["arm_pulls"] = {str(a): int(c) for a, c in zip(self.arms, self.pulls)}
        out["arm_mean_reward"] = {str(a): float(m) for a, m in zip(self.arms, means)}
        out["best_arm"] = int(self.arms[int(np.argmax(self.pulls))]) if self.t else None
        if self.algorithm == "exp3" and self.t:
            out["arm_probabilities"] = {str(a): float(p) for a, p in
                                        zip(self.arms, self.exp3_probs(self.t + 1))}
        out["invalid_outcomes"] = self.invalid_outcomes
        return out
