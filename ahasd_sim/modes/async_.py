"""``async``: naive task-level asynchronous drafting (AMUSD-like, the paper's "NPU+PIM").

The drafter runs continuously on PIM, pushing each round (batch) into the
bounded unverified-draft queue and immediately drafting the next batch on top
of its own unverified tokens (look-ahead). The verifier (NPU) takes every
pending batch (up to ``ahasd.max_verify_tokens``) in one pass. The first
rejection commits the correction token, kills every later draft and restarts
the drafter; feedback returns through the bounded feedback queue.

``ahasd`` extends this class through :meth:`after_batch` (EDC/TVC) only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import simpy

from ..policies.base import Decision
from .base import Batch, Mode, TaskCost, register_mode
from .costs import scaled
from .fastq import FastLock, FastStore


@dataclass(frozen=True)
class Feedback:
    gen: int
    committed: int
    restart: bool


class BoundedQueue:
    """A bounded FIFO with occupancy statistics; producers block when it is full.

    SimPy ``Store`` semantics through :class:`~ahasd_sim.modes.fastq.FastStore` (same event
    order, fewer events); ``put`` and ``get`` are generators (``yield from``)."""

    def __init__(self, env: simpy.Environment, capacity: int, name: str):
        self.env = env
        self.store = FastStore(env, capacity)
        self.name = name
        self.capacity = capacity
        self.pushes = 0
        self.max_occupancy = 0
        self.full_block_s = 0.0

    def put(self, item):
        t0 = self.env.now
        if (yield from self.store.put(item)):   # full: the producer blocked until a consumer popped
            self.full_block_s += self.env.now - t0
        self.pushes += 1
        n = len(self.store.items)
        if n > self.max_occupancy:
            self.max_occupancy = n

    def try_put(self, item) -> bool:
        """:meth:`put` as a plain call when the producer would not block (see
        :meth:`FastStore.try_put`); False, having done nothing, otherwise."""
        if not self.store.try_put(item):
            return False
        self.pushes += 1
        n = len(self.store.items)
        if n > self.max_occupancy:
            self.max_occupancy = n
        return True

    def get(self):
        """Generator returning the oldest item (blocks while empty)."""
        return self.store.get()

    @property
    def items(self) -> list:
        return self.store.items

    def stats(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "pushes": self.pushes, "max_occupancy": self.max_occupancy,
                "producer_blocked_s": self.full_block_s}


@register_mode("async")
class AsyncMode(Mode):
    """Task-level asynchronous execution: PIM drafts, NPU verifies, no controls."""

    required_devices = ("npu", "pim")

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        acfg = ctx.cfg.ahasd
        self.acfg = acfg
        self.unverified = BoundedQueue(env, acfg.unverified_queue_batches, "unverified_draft")
        self.feedback = BoundedQueue(env, acfg.feedback_queue_entries, "feedback")
        self.npu = FastLock(env)
        self.verify_in_flight: tuple[int, int, float] | None = None  # (start, n, t_start)
        self.drafter_stall_s = 0.0
        self.queue_ops = 0             # pushes + pops of all queues (energy charged in finalize)
        self.drafter_delay_s = 0.0     # control-CPU latency the drafter still has to wait
        self.feedback_latency_s = acfg.feedback_latency_ns * 1e-9
        self._gen_changed_s = 0.0      # when the current generation started (rollback time)
        self._pim_busy_until_s = -1.0  # end of the PIM task running now (contention)
        self._verify_stretch = self.costs.verify_stretch_while_drafting()
        self._draft_stretch = self.costs.draft_stretch_while_verifying()
        self.contended_verifications = 0
        self.contended_drafts = 0

    # ------------------------------------------------------------ processes
    def start(self):
        self.env.process(self._boot())
        return self.done

    def _boot(self):
        yield from self.prefill(0, {"npu": self.npu})
        self.env.process(self._drafter())
        self.env.process(self._verifier())

    def _signal_feedback(self, restart: bool, by_drafter: bool = False):
        """Post a verdict to the feedback queue.  ``by_drafter``: the drafter's own process posts
        it (a pre-verification result): it is also the queue's only reader, so with the queue
        full it reads the pending entries first instead of waiting for itself (a deadlock)."""
        if by_drafter and len(self.feedback.items) >= self.feedback.capacity:
            yield from self._drain_feedback()
        fb = Feedback(self.gen, self.committed, restart)
        if not self.feedback.try_put(fb):         # plain call unless the queue is full
            yield from self.feedback.put(fb)
        self.queue_ops += 1

    def _drain_feedback(self):
        while self.feedback.items:
            yield from self.feedback.get()
            self.queue_ops += 1

    def _drafter(self):
        # Runs once per drafted token: the objects it reads every iteration are bound to locals
        # (they are never rebound during a run; the queue's item list is the store's own list).
        env, replay, policy, costs, done = self.env, self.replay, self.policy, self.costs, self.done
        feedback_items = self.feedback.items
        STOP_DISCARD, CONTINUE = Decision.STOP_DISCARD, Decision.CONTINUE
        ctr = self.col.counters
        my_gen = self.gen
        chain_start = self.committed
        chain_wrong = replay.first_wrong(chain_start)   # drafts after it are off-path
        pos = self.committed
        round_tokens: list[float] = []   # entropies of the kept tokens of the current round
        round_start = env.now
        round_id = policy.begin_round(self.round_context())
        while not done.triggered:
            if feedback_items:
                yield from self._drain_feedback()
            if my_gen != self.gen and env.now < self._gen_changed_s + self.feedback_latency_s:
                # a rollback is posted but the control CPU has not polled it yet
                yield env.timeout(self._gen_changed_s + self.feedback_latency_s - env.now)
            if my_gen != self.gen:
                # rollback seen (the control CPU polls the feedback queue): restart the chain
                my_gen = self.gen
                chain_start = pos = self.committed
                chain_wrong = replay.first_wrong(chain_start)
                round_tokens = []
                round_start = env.now
                round_id = policy.begin_round(self.round_context())
            view = replay.view(pos, chain_start, len(round_tokens), env.now)
            if view is None:              # past the end of the replayed slice: nothing left to draft
                if round_tokens:
                    yield from self._push_batch(chain_start, pos, round_tokens, round_start, my_gen, round_id)
                    round_tokens = []
                    round_start = env.now
                    round_id = policy.begin_round(self.round_context())
                yield from self._wait_feedback()
                continue
            ran = self.drafter_forward_needed(pos, my_gen)
            if ran:
                cost = costs.draft_token(replay.kv_len_at(pos))
                if self.verify_in_flight is not None and self._draft_stretch != 1.0:
                    cost = scaled(cost, self._draft_stretch)   # the NPU streams from shared ranks
                    self.contended_drafts += 1
                delay, self.drafter_delay_s = self.drafter_delay_s, 0.0   # take_drafter_delay()
                self._pim_busy_until_s = env.now + delay + cost.duration_s
                if not self.task_if_next(cost, "draft", delay):
                    yield from self.run_task(cost, "draft", delay_s=delay)
                if done.triggered:
                    return
                if my_gen != self.gen:    # the chain was rolled back while this forward ran
                    self.note_drafter_forward(pos, my_gen)
                    ctr.drafted_tokens += 1
                    ctr.killed_tokens += 1
                    continue
            decision = policy.decide(view)
            self.note_drafter_forward(pos, my_gen, decision is STOP_DISCARD, ran)
            if decision is STOP_DISCARD:
                ctr.discarded_draft_forwards += 1
            else:
                ctr.drafted_tokens += 1
                if pos > chain_wrong:     # replay.is_off_path(pos, chain_start)
                    ctr.offpath_drafted_tokens += 1
                    if replay.is_synthetic(pos, chain_start):
                        ctr.offpath_synthetic_tokens += 1
                round_tokens.append(view.entropy_nats)
                pos += 1
                self.frontier = pos
            end_round = (decision is not CONTINUE) or len(round_tokens) >= self.max_round_tokens
            if not end_round:
                continue
            if not round_tokens:          # a policy discarded the first token: draft again
                round_id = policy.begin_round(self.round_context())
                continue
            batch = yield from self._push_batch(chain_start, pos, round_tokens, round_start, my_gen, round_id)
            round_tokens = []
            if batch is not None:
                yield from self.after_batch(batch)
            round_start = env.now
            round_id = policy.begin_round(self.round_context())

    def _push_batch(self, chain_start: int, pos: int, entropies: list[float], round_start: float, gen: int,
                    round_id: int | None = None):
        batch = Batch(pos - len(entropies), len(entropies), gen, round_start, sum(entropies) / len(entropies),
                      round_id=round_id)
        self.on_batch_drafted(batch, self.env.now - round_start)
        if not self.unverified.try_put(batch):    # plain call unless the queue is full
            yield from self.unverified.put(batch)
        self.queue_ops += 1
        if gen == self.gen:
            self.batches.append(batch)
        self.col.events.append({"time_s": self.env.now, "event": "batch_pushed", "position": batch.start,
                                "n_tokens": batch.length, "mean_entropy_nats": batch.mean_entropy_nats})
        return batch if gen == self.gen else None

    def take_drafter_delay(self) -> float:
        """Pending control latency, folded into the drafter's next task (one event, not two)."""
        d, self.drafter_delay_s = self.drafter_delay_s, 0.0
        return d

    def _wait_feedback(self):
        """Block the drafter until the verifier reports something."""
        t0 = self.env.now
        yield from self.feedback.get()
        self.queue_ops += 1
        if self.feedback_latency_s > 0:        # the control CPU sees it at its next poll
            yield self.env.timeout(self.feedback_latency_s)
        waited = self.env.now - t0
        self.drafter_stall_s += waited
        self.drafter_delay_s = max(0.0, self.drafter_delay_s - waited)  # latency overlapped the wait

    def _collect_batches(self):
        """Take pending live batches (up to the verification cap); return the end position.

        Blocks while no live draft is pending; that wait is NPU idle time caused
        by draft exhaustion.
        """
        ctr = self.col.counters
        taken_end = self.committed
        cap = self.acfg.max_verify_tokens
        while True:
            if not self.unverified.items:
                if taken_end > self.committed:
                    return taken_end
                t0 = self.env.now
                item = yield from self.unverified.get()
                ctr.npu_idle_draft_exhausted_s += self.env.now - t0
            else:
                nxt = self.unverified.items[0]
                live = nxt.gen == self.gen and nxt.end > self.committed
                if live and taken_end > self.committed and nxt.end - self.committed > cap:
                    return taken_end
                item = yield from self.unverified.get()
            self.queue_ops += 1
            if item.gen != self.gen or item.end <= self.committed:
                continue  # killed by a rollback (already counted) or committed by pre-verification
            taken_end = max(taken_end, item.end)
            if taken_end - self.committed >= cap:
                return taken_end

    def _verifier(self):
        ctr = self.col.counters
        while not self.done.triggered:
            yield from self.before_verify()
            end = yield from self._collect_batches()
            yield from self.before_verify()       # a pre-verification may have started meanwhile
            start = self.committed
            n = end - start
            if n <= 0:
                continue
            kv = self.replay.kv_len_at(start)
            cost = self.costs.verify(n + 1, kv)
            if self._verify_stretch != 1.0 and self.pim_active():
                cost = scaled(cost, self._verify_stretch)   # PIM computes on ranks holding target weights
                self.contended_verifications += 1
            self.verify_in_flight = (start, n, self.env.now, self.env.now + cost.duration_s)
            self.on_verify_start(start, n, self.env.now, cost)
            t0 = yield from self.run_task(cost, "verify", {"npu": self.npu})
            extra = self.verify_extra_s(t0, self.env.now)
            if extra > 0:      # the NPU's reads were slowed by PIM work on the same ranks
                self.contended_verifications += 1
                yield from self.run_task(TaskCost(extra, {}, {"npu": extra}), "verify", {"npu": self.npu})
            self.verify_in_flight = None
            ctr.verifications += 1
            self.on_verified(self.env.now - t0, kv)
            new_c = self.verify_span(start, n)
            self.col.event(t0, "verify", position=start, n_tokens=n, accepted=new_c - start - 1,
                           duration_s=self.env.now - t0)
            restart = self.resolve(new_c)
            yield from self.after_commit()
            yield from self.prefill_if_prompt_start({"npu": self.npu})   # the drafter is idle: no drafts
            yield from self._signal_feedback(restart)

    def pim_active(self) -> bool:
        """Whether a PIM task (a drafter forward) is running now."""
        return self.env.now < self._pim_busy_until_s

    def resolve(self, new_committed: int) -> bool:
        gen = self.gen
        restart = super().resolve(new_committed)
        if self.gen != gen:
            self._gen_changed_s = self.env.now
        return restart

    # ------------------------------------------------------------ hooks for ahasd
    def on_verify_start(self, start: int, n: int, t0: float, cost) -> None:
        pass

    def verify_extra_s(self, t0: float, t1: float) -> float:
        return 0.0

    def after_batch(self, batch: Batch):
        """Called by the drafter after each batch is queued. Async: keep drafting."""
        return
        yield  # pragma: no cover - makes this a generator

    def before_verify(self):
        return
        yield  # pragma: no cover

    def after_commit(self):
        return
        yield  # pragma: no cover

    def on_batch_drafted(self, batch: Batch, draft_time_s: float) -> None:
        pass

    def on_verified(self, npu_time_s: float, kv_len: int) -> None:
        pass

    def finalize(self) -> None:
        self.col.energy("ctrl", self.queue_ops * self.acfg.queue_op_energy_pj * 1e-12, "queue")

    def stats(self) -> dict[str, Any]:
        return {"queue_ops": self.queue_ops, "queues": {"unverified_draft": self.unverified.stats(), "feedback": self.feedback.stats()},
                "drafter_stall_s": self.drafter_stall_s,
                "shared_rank_contention": {"verify_stretch": self._verify_stretch, "draft_stretch": self._draft_stretch,
                                           "contended_verifications": self.contended_verifications,
                                           "contended_drafts": self.contended_drafts}}
