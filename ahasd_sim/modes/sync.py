"""Synchronous draft-then-verify rounds, shared by ``gpu_only`` and ``operator_sync``.

Each round: the policy drafts tokens one forward at a time, then the target
verifies them in one pass; devices alternate, nothing overlaps. Subclasses only
say what a drafter forward and a verification pass cost and which devices they
occupy.
"""
from __future__ import annotations

from ..policies.base import STOP_AFTER, STOP_DISCARD, VerifyOutcome
from .base import Mode, TaskCost


class SyncSpeculativeMode(Mode):
    """Draft k (policy-chosen), verify, repeat."""

    def draft_cost(self, kv_len: int) -> TaskCost:
        raise NotImplementedError

    def verify_cost(self, n_tokens: int, kv_len: int) -> TaskCost:
        raise NotImplementedError

    def start(self):
        self.env.process(self._loop())
        return self.done

    def _loop(self):
        # per drafted token: Decision members through module aliases (an Enum class attribute
        # read costs ~0.1 us in CPython 3.11), replay through a local
        replay = self.replay
        ctr = self.col.counters
        yield from self.prefill(0)
        while not self.done.triggered:
            yield from self.prefill_if_prompt_start()
            start_pos = self.committed
            round_start = self.env.now
            round_id = self.policy.begin_round(self.round_context())
            drafted = 0
            pos = start_pos
            while True:
                view = replay.view(pos, start_pos, drafted, self.env.now)
                if view is None:      # past the end of the replayed slice
                    break
                ran = self.drafter_forward_needed(pos)
                if ran:
                    t0 = yield from self.run_task(self.draft_cost(replay.kv_len_at(pos)), "draft")
                    if self.col.keep_events:
                        self.col.event(t0, "draft_token", position=pos, duration_s=self.env.now - t0)
                decision = self.policy.decide(view)
                self.note_drafter_forward(pos, self.gen, decision is STOP_DISCARD, ran)
                if decision is STOP_DISCARD:
                    ctr.discarded_draft_forwards += 1
                    break
                ctr.drafted_tokens += 1
                if replay.is_off_path(pos, start_pos):
                    ctr.offpath_drafted_tokens += 1
                    if replay.is_synthetic(pos, start_pos):
                        ctr.offpath_synthetic_tokens += 1
                drafted += 1
                pos += 1
                if decision is STOP_AFTER or drafted >= self.max_round_tokens:
                    break
            self.frontier = start_pos + drafted
            t0 = yield from self.run_task(self.verify_cost(drafted + 1, self.replay.kv_len_at(start_pos)), "verify")
            ctr.verifications += 1
            new_c = self.verify_span(start_pos, drafted)
            self.col.event(t0, "verify", position=start_pos, n_tokens=drafted,
                           accepted=new_c - start_pos - 1, duration_s=self.env.now - t0)
            accepted_before = ctr.accepted_tokens
            self.resolve(new_c)
            acc = ctr.accepted_tokens - accepted_before
            self.policy.on_verify(VerifyOutcome(drafted, acc, min(new_c, self.n_tokens) - start_pos,
                                                self.env.now - round_start, self.env.now, round_id=round_id))
