"""Trace replay: the simulator's cursor into a real token-level trace.

The replay owns the ground truth (acceptance flags, target tokens) and hands
policies only :class:`~ahasd_sim.policies.base.DraftTokenView` objects built
from drafter-side columns. Positions index the concatenation of the trace's
prompts (``Trace.take``); position ``p`` is the p-th generated token.

Draft chains: after every rollback the drafter starts a chain at the committed
position ``c``. Inside the chain, position ``p`` is *on-path* while no earlier
position ``c <= q < p`` has ``accept[q] == False``. The first wrong position
``q`` is still drafted from the correct prefix (its view comes from the trace
row); positions after it are *off-path* and their views come from the drafter's
recorded free-running rollout after its wrong token at ``q``. When a chain needs
more off-path tokens than were recorded (any recorded rollout length works), the
drafter keeps drafting with a clearly labelled *synthetic* fallback: the tokens are
known to be rejected (they follow a wrong token), and their drafter-side entropy and
probability are drawn, with the run's seed, from the same trace's recorded off-path
values at that depth (the deepest recorded depth beyond it). Such drafts are counted
in ``offpath_synthetic_tokens``; :meth:`is_synthetic` tells them apart.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..policies.base import DraftTokenView, new_view


def _tables(trace) -> dict:
    """The replay tables of ``trace`` (read-only: shared by every replay of that trace)."""
    t = SimpleNamespace()
    n = len(trace)
    t.accept = np.asarray(trace.accept, dtype=bool)
    t.kv_len = (np.asarray(trace.prompt_len, dtype=np.int64)
                + np.asarray(trace.pos_in_response, dtype=np.int64))
    topk = np.asarray(trace.topk_p, dtype=float)
    # Python scalars/tuples once, so building a view per drafted token stays cheap.
    t._topk = [tuple(row) for row in topk.tolist()] if topk.ndim == 2 else [()] * n
    t._H_list = np.asarray(trace.drf_H, dtype=float).tolist()
    t._p_tok_list = np.asarray(trace.drf_p_tok, dtype=float).tolist()
    t._p_top1_list = np.asarray(trace.drf_p_top1, dtype=float).tolist()
    t._ro_off = np.asarray(trace.rollout_offset, dtype=np.int64)
    t._ro_len = np.asarray(trace.rollout_len, dtype=np.int64)
    t._ro_H = np.asarray(trace.rollout_H, dtype=float)
    t._ro_p = np.asarray(trace.rollout_p, dtype=float)
    # next_wrong[p] = smallest q >= p with accept[q] False (n if none)
    idx = np.where(~t.accept, np.arange(n), n)
    t.next_wrong = np.minimum.accumulate(idx[::-1])[::-1] if n else idx
    t._next_wrong_list = t.next_wrong.tolist()
    t._kv_list = t.kv_len.tolist()
    t.n_positions = n
    # prompt boundaries inside the slice: a response starts where pos_in_response == 0
    pir = np.asarray(trace.pos_in_response, dtype=np.int64)
    starts = np.nonzero(pir == 0)[0].tolist()
    if not starts or starts[0] != 0:
        starts = [0, *starts]
    t.prompt_starts = starts
    ends = starts[1:] + [n]
    t._prompt_end_list = np.repeat(ends, np.diff([*starts, n])).tolist() if n else []
    t._prompt_start_set = set(starts)
    t._prompt_len = np.asarray(trace.prompt_len, dtype=np.int64).tolist()
    # Off-path values per rollout depth (for the synthetic fallback beyond the recording).
    t._depth_pool: list[np.ndarray] = []
    if t._ro_len.size and int(t._ro_len.max()) > 0:
        for d in range(int(t._ro_len.max())):
            rows = np.nonzero(t._ro_len > d)[0]
            t._depth_pool.append(t._ro_off[rows] + d)
    # Python lists of the rollout columns: view() reads them per drafted off-path token, and
    # a list lookup is several times cheaper than a numpy scalar (same values: tolist()).
    t._ro_off_list = t._ro_off.tolist()
    t._ro_len_list = t._ro_len.tolist()
    t._ro_H_list = t._ro_H.tolist()
    t._ro_p_list = t._ro_p.tolist()
    return vars(t)


class TraceReplay:
    """Read-only view of the positions a run replays, with chain bookkeeping."""

    def __init__(self, trace, n_tokens: int, seed: int = 0):
        self.trace = trace
        self.n_tokens = int(n_tokens)
        self.seed = int(seed)
        # What depends on the trace alone is built once per trace object and shared by every run
        # (and window) replaying it: the per-run state is the synthetic fallback's draws below.
        static = trace.__dict__.get("_replay_tables")
        if static is None:
            static = trace.__dict__["_replay_tables"] = _tables(trace)
        self.__dict__.update(static)
        self._synth_rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0FF9A7]))
        self._synth: dict[tuple[int, int], tuple[float, float]] = {}

    def _synthetic(self, q: int, j: int) -> tuple[float, float]:
        """(entropy, p) of the j-th off-path token after the wrong token at ``q`` when it was not
        recorded: drawn (seeded, fixed per (q, j)) from the trace's off-path values at depth j."""
        key = (q, j)
        v = self._synth.get(key)
        if v is None:
            if self._depth_pool:
                pool = self._depth_pool[min(j, len(self._depth_pool) - 1)]
                k = int(pool[int(self._synth_rng.integers(pool.size))])
                v = (self._ro_H_list[k], self._ro_p_list[k])
            else:   # the trace recorded no rollout at all: use the drafter's own mean values
                v = (float(np.mean(self._H_list)) if self._H_list else 0.0, 0.0)
            self._synth[key] = v
        return v

    def prompt_end(self, pos: int) -> int:
        """End (exclusive) of the prompt's response that position ``pos`` belongs to."""
        n = self.n_positions
        if not n:
            return 0
        return self._prompt_end_list[pos if pos < n else n - 1]     # min(pos, n - 1)

    def is_prompt_start(self, pos: int) -> bool:
        return pos in self._prompt_start_set

    def prompt_len_at(self, pos: int) -> int:
        """Prompt tokens (prefill length) of the prompt that position ``pos`` answers."""
        return self._prompt_len[min(pos, self.n_positions - 1)]

    def kv_len_at(self, pos: int) -> int:
        return self._kv_list[pos] if pos < self.n_positions else self._kv_list[self.n_positions - 1]

    def first_wrong(self, chain_start: int) -> int:
        if chain_start >= self.n_positions:
            return self.n_positions
        return self._next_wrong_list[chain_start]

    def accepted_run(self, start: int, n: int) -> int:
        """Number of consecutive accepted drafts from ``start``, capped at ``n``."""
        q = self.first_wrong(start) - start     # max(0, min(n, q - start)) as comparisons
        if q > n:
            q = n
        return q if q > 0 else 0

    def commit_point(self, start: int, n: int) -> int:
        """Committed point after a target pass over drafts [start, start + n): the accepted run
        plus the target's own token (correction or bonus), never past the prompt's last token."""
        return min(start + self.accepted_run(start, n) + 1, self.prompt_end(start))

    def chain_bounds(self, chain_start: int) -> tuple[int, int, int, int]:
        """(end, first_wrong, rollout_offset, rollout_len) of a draft chain starting at
        ``chain_start``, for hot loops that build :meth:`view` themselves:

        * from ``end`` on, :meth:`view` is None (the slice or the prompt ends);
        * a position ``p <= first_wrong`` is on-path: ``new_view(i, H[p], p_tok[p], p_top1[p],
          topk[p], now)`` with the columns of :meth:`on_path_columns`;
        * the j-th position after it (``j = p - first_wrong - 1 < rollout_len``) is the recorded
          rollout's: with ``k = rollout_offset + j`` and the columns of :meth:`rollout_columns`,
          ``new_view(i, rH[k], rp[k], rp[k], (), now)``; beyond the rollout, call :meth:`view`."""
        n = self.n_positions
        if chain_start >= n:
            return n, n, 0, 0
        q = self._next_wrong_list[chain_start]
        if q >= n:
            return self._prompt_end_list[chain_start], q, 0, 0
        return self._prompt_end_list[chain_start], q, self._ro_off_list[q], self._ro_len_list[q]

    def on_path_columns(self) -> tuple[list, list, list, list]:
        """Entropy, p(token), p(top-1) and top-k probabilities per position (see :meth:`chain_bounds`)."""
        return self._H_list, self._p_tok_list, self._p_top1_list, self._topk

    def kv_lengths(self) -> list[int]:
        """KV length per position (:meth:`kv_len_at` without the clamp past the end, for hot loops)."""
        return self._kv_list

    def rollout_columns(self) -> tuple[list, list]:
        """Entropy and p(token) of the recorded off-path rollout tokens (see :meth:`chain_bounds`)."""
        return self._ro_H_list, self._ro_p_list

    def view(self, pos: int, chain_start: int, index_in_round: int, now_s: float) -> DraftTokenView | None:
        """The drafter-visible view of the token drafted at ``pos`` in a chain (None past the slice)."""
        if pos >= self.n_positions or pos >= self._prompt_end_list[chain_start]:
            return None          # past the slice, or a draft chain would cross into the next prompt
        q = self._next_wrong_list[chain_start]   # first_wrong(chain_start): chain_start <= pos < n
        if pos <= q:
            return new_view(index_in_round, self._H_list[pos], self._p_tok_list[pos],
                            self._p_top1_list[pos], self._topk[pos], now_s)
        j = pos - q - 1
        if j >= self._ro_len_list[q]:
            h, p = self._synthetic(q, j)
            return new_view(index_in_round, h, p, p, (), now_s)
        k = self._ro_off_list[q] + j
        p = self._ro_p_list[k]
        return new_view(index_in_round, self._ro_H_list[k], p, p, (), now_s)

    def is_synthetic(self, pos: int, chain_start: int) -> bool:
        """True if the draft at ``pos`` lies beyond the recorded off-path rollout (fallback)."""
        q = self.first_wrong(chain_start)
        return pos > q and pos - q - 1 >= self._ro_len_list[q] if q < self.n_positions else False

    def is_off_path(self, pos: int, chain_start: int) -> bool:
        return pos > self.first_wrong(chain_start)

    def target_tokens(self, n: int) -> np.ndarray:
        return np.asarray(self.trace.tgt_tok[:n])
