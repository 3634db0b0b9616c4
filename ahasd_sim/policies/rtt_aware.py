"""Round-trip-aware draft length for split drafting (phone drafts, cloud verifies).

At the start of each round the policy picks the draft length gamma that maximises the
expected tokens committed per unit of round time, from what the phone has measured: the
network round trip R, its drafter's time per token t_d and the cloud's time per verification
t_v (the mode passes them in the round context). With a per-token acceptance alpha (i.i.d.),
a round of gamma drafts commits E(gamma) = (1 - alpha^(gamma+1)) / (1 - alpha) tokens and takes

* gamma t_d + R + t_v without pre-drafting;
* alpha^gamma max(gamma t_d, R + t_v) + (1 - alpha^gamma) (gamma t_d + R + t_v) with it: the
  next window is drafted during the round trip and is kept only when every draft was accepted.

so gamma* = argmax E(gamma) / T(gamma) over the round's bounds (ties: the shorter). This is the
trade-off "Speculation at a Distance" (arXiv 2606.25091) and delay-adaptive speculative decoding
(arXiv 2606.20591) describe: the longer the round trip, the longer the window that amortises it.
alpha is the pooled estimate accepted / (accepted + rejections) over verified rounds, started from
the held-out trace part's acceptance (fit on data the run does not replay) with
``policy.rtt_aware.prior_tokens`` pseudo-tokens of weight. Outside split drafting (no timings in
the round context) it drafts ``policy.rtt_aware.k_without_timing`` tokens.

``policy.rtt_aware.confidence = "entropy"`` (default) applies the same trade-off per token: after
k kept drafts, with a_i = 1 - sqrt(gamma_ent H_i) (AdaEDL's bound) as draft i's acceptance given
the ones before, q = prod a_i and E = 1 + sum of the running products, one more draft is made
while (E + q alpha) / (T + t_d) > E / T, T = k t_d + R + t_v (the serial round time; pre-drafting
is not credited). ``"none"``: the round-level gamma* above.
"""
from __future__ import annotations

import math

from .base import Decision, DraftPolicy, DraftTokenView, RoundContext, VerifyOutcome, register_policy


def expected_committed(alpha: float, gamma: int) -> float:
    """Tokens a round of ``gamma`` i.i.d. drafts commits on average (accepted + the target's own)."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def round_time_s(alpha: float, gamma: int, t_draft_s: float, round_trip_s: float, verify_s: float,
                 predraft: bool = False) -> float:
    """Expected time of a round of ``gamma`` drafts (see the module docstring)."""
    serial = gamma * t_draft_s + round_trip_s + verify_s
    if not predraft:
        return serial
    keep = alpha ** gamma
    return keep * max(gamma * t_draft_s, round_trip_s + verify_s) + (1.0 - keep) * serial


def optimal_draft_length(alpha: float, t_draft_s: float, round_trip_s: float, verify_s: float,
                         lo: int, hi: int, predraft: bool = False) -> int:
    """gamma in [lo, hi] with the most expected committed tokens per second (ties: the shorter)."""
    best, best_rate = lo, -1.0
    for g in range(max(1, lo), max(1, hi) + 1):
        t = round_time_s(alpha, g, t_draft_s, round_trip_s, verify_s, predraft)
        rate = expected_committed(alpha, g) / t if t > 0 else float("inf")
        if rate > best_rate * (1 + 1e-12):
            best, best_rate = g, rate
    return best


@register_policy("rtt_aware")
class RttAwarePolicy(DraftPolicy):
    """Draft length from the measured round trip and drafter/verify times (closed form)."""

    needs_fit_data = True

    def __init__(self, config, rng, fit_data=None):
        super().__init__(config, rng, fit_data)
        p = self.params
        prior = float(p.prior_tokens)
        alpha0 = float(p.alpha_without_fit)
        accept = getattr(fit_data, "accept", None)
        if accept is not None and len(accept):
            import numpy as np
            alpha0 = float(np.mean(np.asarray(accept, dtype=bool)))   # the held-out pair's acceptance
        alpha0 = min(max(alpha0, 1e-6), 1 - 1e-6)
        self.fit_alpha = alpha0
        self.accepted = alpha0 * prior            # pseudo-counts of the held-out fit
        self.rejections = (1.0 - alpha0) * prior
        self.k_without_timing = int(p.k_without_timing)
        self.confidence = str(p.confidence)
        self.gamma_ent = float(config.adaedl.gamma_ent) if self.confidence == "entropy" else 0.0
        self.target = self.k_without_timing
        self.chosen: list[int] = []

    @property
    def alpha(self) -> float:
        tot = self.accepted + self.rejections
        return self.accepted / tot if tot > 0 else self.fit_alpha

    def begin_round(self, ctx: RoundContext) -> int:
        if ctx.round_trip_s is None or ctx.draft_token_s is None or ctx.verify_s is None:
            self.target = self.k_without_timing
        else:
            self.target = optimal_draft_length(self.alpha, ctx.draft_token_s, ctx.round_trip_s, ctx.verify_s,
                                               ctx.min_tokens, ctx.max_tokens, ctx.predraft)
            self.chosen.append(self.target)
        rid = super().begin_round(ctx)
        info = self._current.info                      # per round: a phone and a cloud round may overlap
        info["target"] = self.target
        if self.confidence == "entropy" and ctx.round_trip_s is not None and ctx.draft_token_s is not None \
                and ctx.verify_s is not None:
            info["marginal"] = [ctx.draft_token_s, ctx.round_trip_s + ctx.verify_s, 1.0, 1.0]   # t_d, R + t_v, E, q
        return rid

    def decide(self, view: DraftTokenView) -> Decision:
        rec = self._current
        info = rec.info if rec is not None and not rec.closed else {}
        m = info.get("marginal")
        if m is not None:
            # per-token confidence: this token is accepted (given the ones before) with AdaEDL's bound
            # 1 - sqrt(gamma_ent H); draft one more while it raises expected tokens per round time
            t_d, fixed, e, q = m
            a = 1.0 - math.sqrt(self.gamma_ent * max(view.entropy_nats, 0.0))
            q *= min(1.0, max(0.0, a))
            e += q
            m[2], m[3] = e, q
            t = (view.index_in_round + 1) * t_d + fixed
            raw = Decision.CONTINUE if (e + q * self.alpha) * t > e * (t + t_d) else Decision.STOP_AFTER
            return self.bounded(view, raw)
        target = info.get("target", self.k_without_timing)
        raw = Decision.STOP_AFTER if view.index_in_round + 1 >= target else Decision.CONTINUE
        return self.bounded(view, raw)

    def on_verify(self, outcome: VerifyOutcome):
        rec = super().on_verify(outcome)
        if outcome.n_drafted > 0:
            self.accepted += outcome.n_accepted
            self.rejections += 1 if outcome.n_accepted < outcome.n_drafted else 0
        return rec

    def stats(self):
        out = super().stats()
        out["alpha_fit"] = self.fit_alpha
        out["alpha_final"] = self.alpha
        if self.chosen:
            out["mean_chosen_draft_length"] = sum(self.chosen) / len(self.chosen)
        return out
