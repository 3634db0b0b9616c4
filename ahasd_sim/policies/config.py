"""The ``policy`` config section: global draft-length bounds plus one sub-section per policy.

Defaults and sources follow references.md (drafting algorithms).
Evidence tags in ``source``: [P] paper, [C] authors' code, [3] third-party
reimplementation, [R] our reconstruction/choice.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..config.fields import param
from ..config.registry import config_section

SPECDECPP_SRC = "https://arxiv.org/abs/2405.19715 ; https://github.com/Kaffaljidhmah2/SpecDec_pp"
SVIP_SRC = "https://aclanthology.org/2025.emnlp-main.844 ; https://github.com/Geralt-Targaryen/SVIP"
ADAEDL_SRC = "https://arxiv.org/abs/2410.18351"
BANDIT_SRC = "https://openreview.net/forum?id=ghkWIlliZ8 (arXiv 2505.15141) ; https://github.com/sail-sg/BanditSpec"
SD_SRC = "https://arxiv.org/abs/2211.17192 ; https://arxiv.org/abs/2302.01318"

#: feature names understood by the SpecDec++ acceptance predictor
SPECDECPP_FEATURES = ("entropy", "p_token", "p_top1", "top2_margin", "log_p_token", "log_p_top1",
                      "index_in_round")


def _section(cls: type, doc: str):
    """A nested sub-section field (a dataclass built from its own defaults)."""
    return dataclasses.field(default_factory=cls, metadata={"doc": doc, "unit": None, "source": None,
                                                            "ge": None, "gt": None, "le": None,
                                                            "lt": None, "choices": None})


_LAMBDA_RANGE = "a threshold on the stop bound 1 - sqrt(gamma_ent*H), which is at most 1; the paper uses 0.3-0.9"

@dataclass
class FixedParams:
    """Fixed draft length (standard speculative decoding)."""

    k: int = param(4, doc="draft tokens per round", unit="tokens", ge=1,
                   source="[R] common default; " + SD_SRC)


@dataclass
class SvipParams:
    """SVIP: stop after sampling a token whose draft entropy is too high (token kept)."""

    h: float = param(0.3, doc="threshold on sqrt(gamma*H); stop when exceeded", ge=0,
                     source="[C] " + SVIP_SRC)
    gamma: float = param(0.15, doc="scale in sqrt(gamma*H) (default pair <=> stop if H > 0.6 nats)",
                         gt=0, source="[C] " + SVIP_SRC)
    max_draft_tokens: int = param(40, doc="hard cap of draft tokens per round (global max_tokens may be lower)",
                                  unit="tokens", ge=1, source="[C] " + SVIP_SRC)


@dataclass
class AdaEdlParams:
    """AdaEDL: entropy lower bound on acceptance, 1 - sqrt(gamma_ent*H) < lambda -> stop before sampling."""

    gamma_ent: float = param(0.2, doc="scale in the bound 1 - sqrt(gamma_ent*H)", gt=0,
                             source="[P]/[3] " + ADAEDL_SRC)
    beta1: float = param(0.5, doc="EMA factor of the acceptance-rate estimate AR", ge=0, le=1,
                         source="[3] " + ADAEDL_SRC)
    beta2: float = param(0.9, doc="EMA factor of the threshold lambda", ge=0, le=1,
                         source="[3] " + ADAEDL_SRC)
    eps: float = param(0.01, doc="step of the threshold update", ge=0, source="[3] " + ADAEDL_SRC)
    alpha_target: float = param(0.9, doc="target acceptance rate; AR below it raises lambda", ge=0, le=1,
                                source="[3] " + ADAEDL_SRC)
    lambda0: float = param(0.5, doc="initial threshold (0.5 <=> stop if H > 1.25 nats with gamma_ent 0.2)",
                           ge=0.0, le=1.0, bound_reason=_LAMBDA_RANGE, low_reason=_LAMBDA_RANGE,
                           source="[P] paper uses 0.5-0.7, sweeps 0.3-0.9; " + ADAEDL_SRC)
    full_length: str = param("max", doc="meaning of L in the rule 'lambda - eps elif n_acc != L': "
                                        "'max' = the round's max draft length, 'drafted' = tokens drafted",
                             choices=("max", "drafted"),
                             source="[R] ambiguity noted in references.md#adaedl")
    ar_init: float = param(0.9, doc="initial value of the acceptance-rate EMA AR", ge=0, le=1,
                           source="[R] not specified; equal to alpha_target (neutral start)")
    lambda_min: float = param(0.0, doc="lower clip of lambda", source="[R]", ge=0.0, le=1.0,
                              bound_reason=_LAMBDA_RANGE, low_reason=_LAMBDA_RANGE)
    lambda_max: float = param(1.0, doc="upper clip of lambda (the bound is <= 1)", source="[R]", ge=0.0, le=1.0,
                              bound_reason=_LAMBDA_RANGE, low_reason=_LAMBDA_RANGE)

    def validate(self) -> None:
        if not self.lambda_min <= self.lambda0 <= self.lambda_max:
            raise ValueError(f"need lambda_min <= lambda0 <= lambda_max, got "
                             f"{self.lambda_min} / {self.lambda0} / {self.lambda_max}")


@dataclass
class SpecDecPPParams:
    """SpecDec++: stop after k tokens when 1 - prod(a_hat_i) > h, a_hat from an acceptance predictor."""

    h: float = param(0.3, doc="threshold on P(at least one current draft rejected)", ge=0, le=1,
                     source="[C] " + SPECDECPP_SRC)
    k_min: int = param(2, doc="never stop before this many draft tokens", unit="tokens", ge=1,
                       source="[C] " + SPECDECPP_SRC)
    k_max: int = param(20, doc="hard cap of draft tokens per round (global max_tokens may be lower)",
                       unit="tokens", ge=1, source="[C] " + SPECDECPP_SRC)
    one_step_lag: bool = param(False, doc="official-code lag: the decision after token k uses prod_{i<k}",
                               source="[C] " + SPECDECPP_SRC)
    features: list[str] = param(["entropy", "p_token", "p_top1", "top2_margin"],
                                length=(1, len(SPECDECPP_FEATURES)),
                                doc="drafter features of the logistic acceptance predictor; one of "
                                    + ", ".join(SPECDECPP_FEATURES)
                                    + " (index_in_round only if the fit data has that column)",
                                source="[R] stand-in for the paper's acceptance head on the hidden state")
    l2: float = param(1.0, doc="L2 penalty on the standardised coefficients (intercept not penalised)",
                      ge=0, source="[R]")
    min_fit_positions: int = param(200, doc="held-out trace positions required to fit the predictor",
                                   unit="positions", ge=1, source="[R]")
    max_iter: int = param(100, doc="Newton/IRLS iterations at most", ge=1, source="[R]")
    tol: float = param(1e-8, doc="IRLS stops when the largest coefficient change is below this", gt=0,
                       source="[R]")

    def validate(self) -> None:
        if self.k_min > self.k_max:
            raise ValueError(f"k_min ({self.k_min}) must be <= k_max ({self.k_max})")
        if not self.features:
            raise ValueError("features must not be empty")
        for f in self.features:
            if f not in SPECDECPP_FEATURES:
                from ..config.errors import did_you_mean
                raise ValueError(f"unknown feature '{f}'{did_you_mean(f, SPECDECPP_FEATURES)}; "
                                 f"valid: {', '.join(SPECDECPP_FEATURES)}")
        if len(set(self.features)) != len(self.features):
            raise ValueError("features must not repeat")


@dataclass
class BanditSpecParams:
    """BanditSpec: each arm is a draft length; UCBSpec or EXP3Spec picks one per round."""

    arms: list[int] = param([1, 2, 3, 4], doc="draft lengths, one arm each", unit="tokens",
                            length=(1, 256), item_ge=1, item_le=1024,
                            source="[C] " + BANDIT_SRC)
    algorithm: str = param("ucb", doc="UCBSpec ('ucb') or EXP3Spec ('exp3')", choices=("ucb", "exp3"),
                           source="[P] " + BANDIT_SRC)
    delta: float = param(0.5, doc="confidence parameter in the UCB radius", gt=0, lt=1,
                         source="[P] " + BANDIT_SRC)
    warmup_rounds: int = param(7, doc="round-robin rounds before the bandit rule (unpulled arms are "
                                      "always tried first anyway)", unit="rounds", ge=0,
                               source="[C] " + BANDIT_SRC)
    reward: str = param("throughput",
                        doc="'throughput': n_committed / round_time_s (tokens/s), UCB radius scaled by half "
                            "the observed reward range; 'tokens': n_committed, radius scale max(arms)/2",
                        choices=("throughput", "tokens"),
                        source="[C] throughput reward / [P] tokens reward; " + BANDIT_SRC)

    def validate(self) -> None:
        if not self.arms:
            raise ValueError("arms must not be empty")
        if any(a < 1 for a in self.arms):
            raise ValueError(f"arms must be draft lengths >= 1, got {self.arms}")
        if len(set(self.arms)) != len(self.arms):
            raise ValueError(f"arms must not repeat, got {self.arms}")


@dataclass
class RttAwareParams:
    """Round-trip-aware split draft length: argmax of expected tokens per round time (closed form)."""

    prior_tokens: float = param(64.0, doc="weight, in pseudo-tokens, of the held-out trace part's acceptance in "
                                "the acceptance estimate (observed verdicts add to it)", unit="tokens", ge=0,
                                source="[R] assumption: about four rounds of 16 drafts")
    alpha_without_fit: float = param(0.7, doc="per-token acceptance assumed when no held-out trace part is given",
                                     gt=0, lt=1, source="[R] assumption (hyco.prior_acceptance's default)")
    k_without_timing: int = param(4, doc="draft length when the mode measures no round trip (not split drafting)",
                                  unit="tokens", ge=1, source="[R] policy.fixed.k's default")
    confidence: str = param("entropy", doc="none: each round drafts the closed-form length of the pooled acceptance; "
                            "entropy: per token, keep drafting while one more token raises the expected tokens per "
                            "round time, each token's acceptance taken from AdaEDL's bound 1 - sqrt(gamma_ent H) "
                            "(policy.adaedl.gamma_ent)", choices=("none", "entropy"),
                            source="[R] one-step look-ahead on the closed form; bound from AdaEDL, arXiv 2410.18351")


@config_section("policy")
@dataclass
class PolicyConfig:
    """Drafting policies: global bounds and per-policy parameters."""

    min_tokens: int = param(1, doc="fewest draft tokens kept per round (all policies)", unit="tokens",
                            ge=1, source="[R]")
    max_tokens: int = param(16, doc="most draft tokens per round (all policies; modes may cap lower, "
                                    "e.g. queue/verification limits)", unit="tokens", ge=1,
                            source="[R] gamma* search range 1..16 in references.md#speculative-sampling")
    fixed: FixedParams = _section(FixedParams, "fixed draft length")
    svip: SvipParams = _section(SvipParams, "SVIP entropy stopping")
    adaedl: AdaEdlParams = _section(AdaEdlParams, "AdaEDL entropy lower bound with adaptive threshold")
    specdecpp: SpecDecPPParams = _section(SpecDecPPParams, "SpecDec++ acceptance-predictor threshold")
    banditspec: BanditSpecParams = _section(BanditSpecParams, "BanditSpec draft-length bandit")
    rtt_aware: RttAwareParams = _section(RttAwareParams, "round-trip-aware split draft length (mobile-cloud)")

    def validate(self) -> None:
        if self.min_tokens > self.max_tokens:
            raise ValueError(f"min_tokens ({self.min_tokens}) must be <= max_tokens ({self.max_tokens})")
