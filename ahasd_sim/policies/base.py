"""Drafting-policy interface.

A policy decides how many tokens the drafter proposes per round. It only sees
what a real system could see at run time: the drafter's probabilities and
entropies of tokens already drafted (:class:`DraftTokenView`), past verification
outcomes (:class:`VerifyOutcome`) and simulated time. Target tokens and
per-token acceptance flags are never passed to a policy.

Contract with the modes
-----------------------
* ``begin_round(ctx)`` once per drafting round (batch), before its first
  ``decide``. (If a mode forgets, the first ``decide`` opens a round with the
  policy config's ``min_tokens``/``max_tokens``.)
* ``decide(view)`` after every drafter forward of the round, in order
  (``view.index_in_round`` = 0, 1, ...). The round ends at the first
  ``STOP_AFTER`` / ``STOP_DISCARD``. Decisions already respect
  ``ctx.min_tokens`` / ``ctx.max_tokens`` (see :meth:`DraftPolicy.bounded`).
* ``on_verify(outcome)`` once per verified round, in the order the rounds were
  begun. Rounds may overlap (several begun before the first is verified), and a
  round may never be verified (killed by an earlier rejection, abandoned at a
  rollback, or ended by a discarded first token): such rounds are simply never
  reported.
* Attribution of an outcome to its round (needed by learning policies, e.g. the
  bandit's arm): ``begin_round`` returns a round id; a mode that passes it back
  as ``VerifyOutcome.round_id`` gets exact attribution. Without it the base class
  matches the pending round with ``kept == n_drafted`` that began at (or first
  after) ``now_s - round_time_s``, falling back to the oldest pending round with
  that length. Pending rounds older than the matched one are dropped (dead).
"""
from __future__ import annotations

import collections
import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np


class Decision(enum.Enum):
    """What to do after the drafter produced the distribution for the next token."""

    CONTINUE = "continue"        # keep this token, draft another
    STOP_AFTER = "stop_after"    # keep this token, end the round (SVIP, SpecDec++, fixed k)
    STOP_DISCARD = "stop_discard"  # drop this token (forward spent), end the round (AdaEDL)


# Module-level aliases for the per-token hot paths: reading an Enum member through its class
# costs ~0.1 us in CPython 3.11 (a local/global name ~0.01 us); policies call bounded() per token.
CONTINUE, STOP_AFTER, STOP_DISCARD = Decision.CONTINUE, Decision.STOP_AFTER, Decision.STOP_DISCARD


@dataclass(frozen=True, slots=True)
class DraftTokenView:
    """What the drafter knows about the token it just produced (no target info)."""

    index_in_round: int      # 0 for the first token of the round
    entropy_nats: float      # entropy of the drafter distribution this token is drawn from
    p_token: float           # drafter probability of the proposed token
    p_top1: float            # drafter probability of its most likely token
    topk_p: tuple[float, ...] = ()  # drafter top-k probabilities (descending), may be empty
    now_s: float = 0.0       # simulated time


@dataclass(frozen=True, slots=True)
class VerifyOutcome:
    """Result of verifying one round (batch) of drafts, revealed by the target.

    Only aggregate counts: which positions were accepted, and the target's
    tokens, stay hidden.
    """

    n_drafted: int           # tokens the round proposed (discarded forwards excluded)
    n_accepted: int          # of those, accepted by the target
    n_committed: int         # tokens committed for this round (accepted + correction/bonus)
    round_time_s: float      # simulated time from round start to its verification
    now_s: float
    round_id: int | None = None  # id returned by begin_round (optional, exact attribution)


def _view_builder():
    s_i, s_h, s_p, s_p1, s_k, s_now = (DraftTokenView.__dict__[f].__set__ for f in DraftTokenView.__dataclass_fields__)
    new = object.__new__

    def new_view(index_in_round: int, entropy_nats: float, p_token: float, p_top1: float,
                 topk_p: tuple[float, ...], now_s: float) -> DraftTokenView:
        """``DraftTokenView(...)`` with every field given, built once per drafted token."""
        v = new(DraftTokenView)
        s_i(v, index_in_round)
        s_h(v, entropy_nats)
        s_p(v, p_token)
        s_p1(v, p_top1)
        s_k(v, topk_p)
        s_now(v, now_s)
        return v
    return new_view


def _outcome_builder():
    s_n, s_a, s_c, s_t, s_now, s_id = (VerifyOutcome.__dict__[f].__set__ for f in VerifyOutcome.__dataclass_fields__)
    new = object.__new__

    def new_outcome(n_drafted: int, n_accepted: int, n_committed: int, round_time_s: float, now_s: float,
                    round_id: int | None) -> VerifyOutcome:
        """``VerifyOutcome(...)`` with every field given."""
        o = new(VerifyOutcome)
        s_n(o, n_drafted)
        s_a(o, n_accepted)
        s_c(o, n_committed)
        s_t(o, round_time_s)
        s_now(o, now_s)
        s_id(o, round_id)
        return o
    return new_outcome


# The frozen, slotted dataclasses above set each field through object.__setattr__ in __init__;
# these build the same objects by filling the slots directly (a fraction of the cost), for the
# paths that make one per drafted token or verified round.
new_view = _view_builder()
new_outcome = _outcome_builder()


@dataclass(slots=True)
class RoundContext:
    """Context at the start of a drafting round."""

    now_s: float
    min_tokens: int
    max_tokens: int
    # split drafting (mobile-cloud) only, what the phone has measured: None elsewhere
    round_trip_s: float | None = None     # network round trip of a verification (no cloud time)
    draft_token_s: float | None = None    # one drafter forward
    verify_s: float | None = None         # the cloud's time for one verification (queueing included)
    predraft: bool = False                # the next window is drafted while the verdict is in flight


@dataclass(slots=True)
class RoundRecord:
    """Book-keeping of one begun, not yet verified round (policy-private)."""

    index: int                      # 0-based count of rounds begun by this policy
    ctx: RoundContext
    kept: int = 0                   # tokens kept so far
    closed: bool = False            # a stop decision has been returned
    info: dict[str, Any] = field(default_factory=dict)  # per-policy data (e.g. bandit arm)


class DraftPolicy:
    """Base class; subclasses register with ``@register_policy("name")``.

    Lifecycle per round: ``begin_round`` -> ``decide`` after every drafter
    forward -> (later) ``on_verify`` with the outcome. ``rng`` is the run's
    seeded generator. ``config`` is the whole ``policy`` config section
    (:class:`~ahasd_sim.policies.config.PolicyConfig`: global ``min_tokens`` /
    ``max_tokens`` plus one sub-section per policy); ``self.params`` is the
    policy's own sub-section (``config.<name>``) when it exists.
    ``fit_data`` is only used by policies with ``needs_fit_data = True``.
    """

    name: ClassVar[str] = "base"
    needs_fit_data: ClassVar[bool] = False

    def __init__(self, config: Any, rng: np.random.Generator, fit_data: Any = None):
        self.config = config
        self.rng = rng
        self.params = getattr(config, self.name, None) if config is not None else None
        self.round_lengths: list[int] = []
        self.accepted_lengths: list[int] = []
        self.committed_lengths: list[int] = []
        self.discarded_tokens = 0
        self._rounds_begun = 0
        self._pending: collections.deque[RoundRecord] = collections.deque()
        self._current: RoundRecord | None = None
        self._ctx = self.default_context()

    # ------------------------------------------------------------ rounds
    def default_context(self, now_s: float = 0.0) -> RoundContext:
        lo = int(getattr(self.config, "min_tokens", 1))
        hi = int(getattr(self.config, "max_tokens", 16))
        return RoundContext(now_s=now_s, min_tokens=lo, max_tokens=hi)

    #: pending (begun, unverified) rounds kept at most; older ones are dropped as dead
    MAX_PENDING: ClassVar[int] = 1024

    def begin_round(self, ctx: RoundContext) -> int:
        """Open a round; returns its id (pass it back as ``VerifyOutcome.round_id``)."""
        self._ctx = ctx
        index = self._rounds_begun
        rec = RoundRecord(index, ctx, 0, False, {})
        self._rounds_begun = index + 1
        pending = self._pending
        pending.append(rec)
        if len(pending) > self.MAX_PENDING:
            while len(pending) > self.MAX_PENDING:
                pending.popleft()
        self._current = rec
        return index

    def current_round(self, now_s: float = 0.0) -> RoundRecord:
        """The open round; opens one with the default context if none is open."""
        if self._current is None or self._current.closed:
            self.begin_round(self.default_context(now_s))
        assert self._current is not None
        return self._current

    def bounded(self, view: DraftTokenView, decision: Decision,
                lo: int | None = None, hi: int | None = None) -> Decision:
        """Apply the round's token bounds to a policy's raw ``decision``.

        Effective bounds: ``max(ctx.min_tokens, lo)`` kept tokens at least and
        ``min(ctx.max_tokens, hi)`` at most; the maximum wins if they conflict.
        A stop that would leave fewer than the minimum kept tokens becomes
        ``CONTINUE`` (or ``STOP_AFTER`` when keeping this token reaches the
        minimum); ``CONTINUE`` at the maximum becomes ``STOP_AFTER``. Also
        records the decision in the round's book-keeping, so every policy's
        ``decide`` should return through this method.
        """
        rec = self._current
        if rec is None or rec.closed:       # current_round(), inlined for the open-round case
            rec = self.current_round(view.now_s)
        ctx = rec.ctx
        # max()/min() written as comparisons (the same values; this runs once per drafted token)
        min_k = ctx.min_tokens if lo is None else max(ctx.min_tokens, lo)
        max_k = ctx.max_tokens if hi is None else min(ctx.max_tokens, hi)
        if 0 > max_k:
            max_k = 0
        if max_k < min_k:
            min_k = max_k
        i = view.index_in_round
        if i >= max_k:                       # beyond the cap (should not be asked)
            decision = STOP_DISCARD
        else:
            if decision is STOP_DISCARD and i < min_k:
                decision = STOP_AFTER
            if decision is STOP_AFTER and i + 1 < min_k:
                decision = CONTINUE
            if decision is CONTINUE and i + 1 >= max_k:
                decision = STOP_AFTER
        if decision is STOP_DISCARD:
            self.discarded_tokens += 1
            rec.kept = i
        else:
            rec.kept = i + 1
        if decision is not CONTINUE:
            rec.closed = True
        return decision

    # ------------------------------------------------------------ interface
    def decide(self, view: DraftTokenView) -> Decision:  # pragma: no cover - abstract
        raise NotImplementedError

    def on_verify(self, outcome: VerifyOutcome) -> RoundRecord | None:
        """Record ``outcome``; return the pending round it belongs to (None if unknown)."""
        self.round_lengths.append(outcome.n_drafted)
        self.accepted_lengths.append(outcome.n_accepted)
        self.committed_lengths.append(outcome.n_committed)
        return self._match_round(outcome)

    def _match_round(self, outcome: VerifyOutcome) -> RoundRecord | None:
        pending = self._pending
        match: RoundRecord | None = None
        if outcome.round_id is not None:
            # pending holds consecutive indices (appended in order, removed from the left only):
            # look the round up by offset; scan only if that does not hit it
            rid = outcome.round_id
            k = rid - pending[0].index if pending else -1
            if 0 <= k < len(pending) and pending[k].index == rid:
                match = pending[k]
            else:
                match = next((r for r in pending if r.index == rid), None)
        else:
            same = [r for r in pending if r.kept == outcome.n_drafted]
            start = outcome.now_s - outcome.round_time_s
            tol = 1e-9 * max(1.0, abs(outcome.now_s))
            after = [r for r in same if r.ctx.now_s >= start - tol]
            if after:
                match = min(after, key=lambda r: (r.ctx.now_s, r.index))
            elif same:
                match = same[0]
        if match is None:
            return None
        while pending and pending[0] is not match:   # older rounds were never verified: dead
            pending.popleft()
        pending.popleft()
        if self._current is match and not match.closed:
            match.closed = True
        return match

    def stats(self) -> dict[str, Any]:
        """Per-policy statistics (mean draft length, histogram, acceptance)."""
        lengths = np.asarray(self.round_lengths, dtype=float)
        acc = np.asarray(self.accepted_lengths, dtype=float)
        com = np.asarray(self.committed_lengths, dtype=float)
        hist = np.bincount(lengths.astype(int)) if lengths.size else np.zeros(0, int)
        return {
            "rounds": int(lengths.size),
            "mean_draft_length": float(lengths.mean()) if lengths.size else 0.0,
            "draft_length_histogram": {str(i): int(c) for i, c in enumerate(hist) if c},
            # accepted / drafted over the policy's *resolved* rounds (killed look-ahead rounds are
            # not resolved); summary.json's acceptance_rate also counts killed drafts
            "round_acceptance_rate": float(acc.sum() / lengths.sum()) if lengths.sum() else 0.0,
            "mean_accepted_length": float(acc.mean()) if acc.size else 0.0,
            "mean_committed_per_round": float(com.mean()) if com.size else 0.0,
            "discarded_tokens": int(self.discarded_tokens),
        }


POLICIES: dict[str, type[DraftPolicy]] = {}


def register_policy(name: str):
    def deco(cls: type[DraftPolicy]) -> type[DraftPolicy]:
        cls.name = name
        POLICIES[name] = cls
        return cls

    return deco
