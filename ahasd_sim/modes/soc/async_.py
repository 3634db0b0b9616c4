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

from typing import Any, NamedTuple

import numpy as np
import simpy
from simpy.events import PENDING

from ...hw.sharing import FluidShare
from ...policies.base import Decision, RoundContext, new_view
from ..base import Batch, Mode, TaskCost, register_mode
from ..fastq import FastLock, FastStore


class Feedback(NamedTuple):
    """A verdict posted to the feedback queue (the drafter polls the generation counter)."""

    gen: int
    committed: int
    restart: bool


class BoundedQueue(FastStore):
    """A bounded FIFO with occupancy statistics; producers block when it is full.

    SimPy ``Store`` semantics through :class:`~ahasd_sim.modes.fastq.FastStore` (same event
    order, fewer events); ``put`` and ``get`` are generators (``yield from``), ``try_put`` a
    plain call that puts unless the producer would block."""

    def __init__(self, env: simpy.Environment, capacity: int, name: str):
        super().__init__(env, capacity)
        self.name = name
        self.full_block_s = 0.0

    def put(self, item):
        t0 = self.env._now
        if (yield from super().put(item)):   # full: the producer blocked until a consumer popped
            self.full_block_s += self.env._now - t0

    def stats(self) -> dict[str, Any]:
        return {"capacity": self.capacity, "pushes": self.pushes, "max_occupancy": self.max_occupancy,
                "producer_blocked_s": self.full_block_s}


@register_mode("async")
class AsyncMode(Mode):
    """Task-level asynchronous execution: PIM drafts, NPU verifies, no controls."""

    required_devices = ("npu", "pim")
    uses_pim_placement = True
    pim_overlaps_host = True

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        acfg = ctx.cfg.ahasd
        self.acfg = acfg
        self.unverified = BoundedQueue(env, acfg.unverified_queue_batches, "unverified_draft")
        self.feedback = BoundedQueue(env, acfg.feedback_queue_entries, "feedback")
        self.npu = FastLock(env)
        self.verify_in_flight: tuple[int, int, float, float] | None = None  # (start, n, t_start, planned end)
        self.drafter_stall_s = 0.0
        self.queue_ops = 0             # pushes + pops of all queues (energy charged in finalize)
        self.drafter_delay_s = 0.0     # control-CPU latency the drafter still has to wait
        self.feedback_latency_s = acfg.feedback_latency_ns * 1e-9
        self._gen_changed_s = 0.0      # when the current generation started (rollback time)
        # Shared-rank contention: NPU passes and PIM tasks are flows of one processor-sharing
        # model (hw/sharing.py), their rates recomputed whenever one starts or ends (no stretch
        # factor fixed at a task's start: time is lost only while tasks really overlap).
        self.flow_specs = self.costs.sharing_specs()
        self.share = FluidShare(env) if self.flow_specs is not None else None
        self.verify_flow = None        # the NPU pass in flight, as a flow (with contention)
        self.record_verify_progress = False   # keep each pass's progress curve (KV ledger)

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

    def _post_feedback(self, restart: bool) -> bool:
        """:meth:`_signal_feedback` (by the verifier) as a plain call when the queue has room;
        False, having done nothing, otherwise."""
        if not self.feedback.try_put(Feedback(self.gen, self.committed, restart)):
            return False
        self.queue_ops += 1
        return True

    def _drain_feedback(self):
        feedback = self.feedback
        while feedback.items:
            if feedback.try_get() is None:     # a plain call unless the get must yield
                yield from feedback.get()
            self.queue_ops += 1

    def _drafter(self):
        # Runs once per drafted token: the objects it reads every iteration are bound to locals
        # (they are never rebound during a run; the queue's item list is the store's own list),
        # and the per-token helpers of Mode (drafter_forward_needed, note_drafter_forward,
        # task_if_next) are inlined with the same effects, in the same order.
        env, replay, policy, costs, done = self.env, self.replay, self.policy, self.costs, self.done
        feedback_items = self.feedback.items
        unverified = self.unverified
        decide, begin_round = policy.decide, policy.begin_round
        view_at, draft_token, kv_list = replay.view, costs.draft_token, replay.kv_lengths()
        # draft_token's memo, read directly (a miss calls draft_token; a cost model without one
        # is asked every time)
        draft_at = getattr(costs, "draft_costs_by_kv", {})
        last_kv = len(kv_list) - 1
        task, took = self.col.task, self.col.task_took
        share = self.share
        draft_spec = self.flow_specs["draft"] if share is not None else None
        share_pairs = share._pairs if share is not None else None
        STOP_DISCARD, CONTINUE = Decision.STOP_DISCARD, Decision.CONTINUE
        ctr = self.col.counters
        min_round, max_round = self.min_round_tokens, self.max_round_tokens
        my_gen = self.gen
        chain_start = self.committed
        # chain_end: no draft from there on; drafts after chain_wrong are off-path
        chain_end, chain_wrong, ro_off, ro_len = replay.chain_bounds(chain_start)
        col_H, col_p_tok, col_p_top1, col_topk = replay.on_path_columns()
        ro_H, ro_p = replay.rollout_columns()
        pos = self.committed
        round_tokens: list[float] = []   # entropies of the kept tokens of the current round
        round_start = env._now
        round_id = begin_round(RoundContext(env._now, min_round, max_round))
        while done._value is PENDING:    # not done.triggered
            if feedback_items:
                yield from self._drain_feedback()
            if my_gen != self.gen:
                if env._now < self._gen_changed_s + self.feedback_latency_s:
                    # a rollback is posted but the control CPU has not polled it yet
                    yield env.timeout(self._gen_changed_s + self.feedback_latency_s - env._now)
                # rollback seen (the control CPU polls the feedback queue): restart the chain
                my_gen = self.gen
                chain_start = pos = self.committed
                chain_end, chain_wrong, ro_off, ro_len = replay.chain_bounds(chain_start)
                round_tokens = []
                round_start = env._now
                round_id = begin_round(RoundContext(env._now, min_round, max_round))
            # replay.view(pos, chain_start, len(round_tokens), env.now), built here for on-path
            # and recorded off-path positions (see TraceReplay.chain_bounds)
            if pos >= chain_end:
                view = None
            elif pos <= chain_wrong:
                view = new_view(len(round_tokens), col_H[pos], col_p_tok[pos], col_p_top1[pos], col_topk[pos],
                                env._now)
            elif pos - chain_wrong - 1 < ro_len:
                k = ro_off + pos - chain_wrong - 1
                view = new_view(len(round_tokens), ro_H[k], ro_p[k], ro_p[k], (), env._now)
            else:
                view = view_at(pos, chain_start, len(round_tokens), env._now)
            if view is None:              # past the end of the replayed slice: nothing left to draft
                if round_tokens:
                    yield from self._push_batch(chain_start, pos, round_tokens, round_start, my_gen, round_id)
                    round_tokens = []
                    round_start = env._now
                    round_id = begin_round(RoundContext(env._now, min_round, max_round))
                yield from self._wait_feedback()
                continue
            key = (my_gen, pos)
            if self._held_forward == key:     # drafter_forward_needed: the logits are kept
                self._held_forward = None
                ctr.reused_drafter_forwards += 1
                ran = False
            else:
                ran = True
                kv = kv_list[pos] if pos <= last_kv else kv_list[last_kv]   # replay.kv_len_at(pos)
                cost = draft_at.get(kv)
                if cost is None:
                    cost = draft_token(kv)
                delay, self.drafter_delay_s = self.drafter_delay_s, 0.0   # take_drafter_delay()
                now = env._now
                d = cost.duration_s
                # task_if_next(cost, "draft", delay), inlined: done at once when nothing else
                # happens before it ends; with contention modelled, only if no NPU pass is in
                # flight (else the forward is a flow sharing the ranks with it)
                if d > 0 or delay > 0:
                    t = now + (delay + d)
                    q = env._queue
                    if share is not None and self.verify_flow is not None:
                        # an NPU pass is in flight: the forward is a flow next to it; done at once
                        # (clock advanced) when nothing else happens before it ends
                        if (q and q[0][0] <= now + delay) or d <= 0:
                            yield from self.run_shared(cost, "draft", delay_s=delay)
                        else:
                            env._now = now = now + delay
                            # b = share.beside(draft_spec, d): next to the NPU pass alone,
                            # inlined for a cached pair of kinds (the per-token path)
                            b = None
                            act = share.active
                            if len(act) == 1:
                                g = act[0]
                                pair = share_pairs.get(draft_spec)
                                if pair is None or pair[0] is not g.spec:
                                    b = share.beside(draft_spec, d)    # fills the pair cache
                                else:
                                    t = now + d / pair[2]
                                    if g.done + g.rate * (now - g.t) + pair[1] * (t - now) < g.work:
                                        b = (t, g, pair[1])
                            if b is not None and q and q[0][0] <= b[0] and share.drop_early_timer(b[1], b[0]):
                                if q and q[0][0] <= b[0]:          # something else comes first
                                    share.rearm(b[1])
                            if b is not None and not (q and q[0][0] <= b[0]):
                                env._now = b[0]
                                share.commit_beside(b[1], b[2], now, b[0], draft_spec, d)
                            else:
                                flow = share.start(draft_spec, d, wait=False)
                                t = share.projected_end(flow)
                                if q and q[0][0] <= t:
                                    token = object()
                                    self.col.in_flight[token] = (now, cost.busy_s)
                                    yield share.attach(flow)
                                    del self.col.in_flight[token]
                                else:
                                    env._now = t
                                    share.finish_now(flow)
                            took(cost, "draft", now, env._now - now)
                    elif q and q[0][0] <= t:
                        if share is None:
                            yield from self.run_task(cost, "draft", delay_s=delay)
                        else:
                            yield from self.run_shared(cost, "draft", delay_s=delay)
                    else:
                        env._now = t
                        task(cost, "draft", now + delay)
                else:
                    task(cost, "draft", now + delay)
                if done._value is not PENDING:
                    return
                if my_gen != self.gen:    # the chain was rolled back while this forward ran
                    ctr.drafter_forwards += 1             # note_drafter_forward(pos, my_gen)
                    if self._last_forward == key:
                        ctr.duplicate_drafter_forwards += 1
                    self._last_forward = key
                    self._held_forward = None
                    ctr.drafted_tokens += 1
                    ctr.killed_tokens += 1
                    continue
            decision = decide(view)
            if ran:                       # note_drafter_forward(pos, my_gen, discarded, ran)
                ctr.drafter_forwards += 1
                if self._last_forward == key:
                    ctr.duplicate_drafter_forwards += 1
                self._last_forward = key
            if decision is STOP_DISCARD:
                self._held_forward = key
                ctr.discarded_draft_forwards += 1
            else:
                self._held_forward = None
                ctr.drafted_tokens += 1
                if pos > chain_wrong:     # replay.is_off_path(pos, chain_start)
                    ctr.offpath_drafted_tokens += 1
                    if pos - chain_wrong - 1 >= ro_len:   # replay.is_synthetic(pos, chain_start)
                        ctr.offpath_synthetic_tokens += 1
                round_tokens.append(view.entropy_nats)
                pos += 1
                self.frontier = pos
                if decision is CONTINUE and len(round_tokens) < max_round:
                    continue
            if not round_tokens:          # a policy discarded the first token: draft again
                round_id = begin_round(RoundContext(env._now, min_round, max_round))
                continue
            # _push_batch, with the queue put as a plain call unless the queue is full
            batch = Batch(pos - len(round_tokens), len(round_tokens), my_gen, round_start,
                          sum(round_tokens) / len(round_tokens), -1, 0, True, round_id)
            self.on_batch_drafted(batch, env._now - round_start)
            if not unverified.try_put(batch):
                yield from unverified.put(batch)
            batch = self._batch_queued(batch)
            round_tokens = []
            if batch is not None:
                wait = self.after_batch(batch)
                if wait is not None:
                    yield from wait
            round_start = env._now
            round_id = begin_round(RoundContext(env._now, min_round, max_round))

    def _push_batch(self, chain_start: int, pos: int, entropies: list[float], round_start: float, gen: int,
                    round_id: int | None = None):
        """Queue the round that ends at ``pos`` (a generator: blocks while the queue is full);
        returns the batch, or None if the chain was rolled back meanwhile."""
        batch = Batch(pos - len(entropies), len(entropies), gen, round_start, sum(entropies) / len(entropies),
                      round_id=round_id)
        self.on_batch_drafted(batch, self.env.now - round_start)
        if not self.unverified.try_put(batch):    # plain call unless the queue is full
            yield from self.unverified.put(batch)
        return self._batch_queued(batch)

    def _batch_queued(self, batch: Batch) -> Batch | None:
        """Book a batch just queued; None if its chain was rolled back while it waited."""
        self.queue_ops += 1
        live = batch.gen == self.gen
        if live:
            self.batches.append(batch)
        if self.col.keep_events:
            self.col.events.append({"time_s": self.env._now, "event": "batch_pushed", "position": batch.start,
                                    "n_tokens": batch.length, "mean_entropy_nats": batch.mean_entropy_nats})
        return batch if live else None

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
        unverified = self.unverified
        items = unverified.items
        taken_end = self.committed
        cap = self.acfg.max_verify_tokens
        while True:
            if not items:
                if taken_end > self.committed:
                    return taken_end
                t0 = self.env.now
                item = yield from unverified.get()
                ctr.npu_idle_draft_exhausted_s += self.env.now - t0
            else:
                nxt = items[0]
                live = nxt.gen == self.gen and nxt.end > self.committed
                if live and taken_end > self.committed and nxt.end - self.committed > cap:
                    return taken_end
                item = unverified.try_get()        # a plain call unless the get must yield
                if item is None:
                    item = yield from unverified.get()
            self.queue_ops += 1
            if item.gen != self.gen or item.end <= self.committed:
                continue  # killed by a rollback (already counted) or committed by pre-verification
            taken_end = max(taken_end, item.end)
            if taken_end - self.committed >= cap:
                return taken_end

    def _verifier(self):
        ctr = self.col.counters
        npu = {"npu": self.npu}
        while not self.done.triggered:
            # the hooks return None (nothing to wait for: the common case) or a generator
            wait = self.before_verify()
            if wait is not None:
                yield from wait
            end = yield from self._collect_batches()
            wait = self.before_verify()       # a pre-verification may have started meanwhile
            if wait is not None:
                yield from wait
            start = self.committed
            n = end - start
            if n <= 0:
                continue
            kv = self.replay.kv_len_at(start)
            cost = self.costs.verify(n + 1, kv)
            self.verify_in_flight = (start, n, self.env.now, self.env.now + cost.duration_s)
            if self.share is None:
                self.on_verify_start(start, n, self.env.now, cost, None)
                t0 = yield from self.run_task(cost, "verify", npu)
            else:
                # the NPU's reads share the ranks with PIM work (drafts, pre-verifications)
                t0 = yield from self.run_shared(cost, "verify", npu, record=self.record_verify_progress)
            self.verify_flow = None
            self.verify_in_flight = None
            ctr.verifications += 1
            self.on_verified(self.env.now - t0, kv)
            new_c = self.verify_span(start, n)
            if self.col.keep_events:
                self.col.events.append({"time_s": t0, "event": "verify", "position": start, "n_tokens": n,
                                        "accepted": new_c - start - 1, "duration_s": self.env._now - t0})
            restart = self.resolve(new_c)
            then = self.after_commit()
            if then is not None:
                yield from then
            if self.prompt_starts_at_commit():
                yield from self.prefill(self.committed, npu)   # the drafter is idle: no drafts
            if not self._post_feedback(restart):
                yield from self._signal_feedback(restart)

    def run_shared(self, cost: TaskCost, label: str, resources=None, delay_s: float = 0.0, record: bool = False):
        """:meth:`run_task` for a task on the shared ranks: after ``delay_s`` it runs as a flow of
        the processor-sharing model (``self.share``) until its work is done, however the rates
        change meanwhile. Dynamic energy and bytes are the task's own; its duration (and each
        device's busy time, in proportion) is the time it actually took. A generator returning
        the start time; the flow of an NPU pass is ``self.verify_flow`` while it runs."""
        reqs = None
        if resources:
            reqs = []
            for res in resources.values():
                req = yield from res.acquire()
                reqs.append((res, req))
        env = self.env
        if delay_s > 0:
            yield env.timeout(delay_s)
        start = env._now
        flow = self.share.start(self.flow_specs[label], cost.duration_s, record=record)
        if label == "verify":
            self.verify_flow = flow
            self.on_verify_start(*self.verify_in_flight[:2], start, cost, flow)
        token = object()
        self.col.in_flight[token] = (start, cost.busy_s)
        yield flow.event
        del self.col.in_flight[token]
        self.col.task_took(cost, label, start, env._now - start)
        if reqs:
            for res, req in reqs:
                res.release(req)
        return start

    @staticmethod
    def as_run(cost: TaskCost, took_s: float) -> TaskCost:
        """``cost`` as it ran, taking ``took_s``: the same energy and bytes, the time changed."""
        alone = cost.duration_s
        if took_s == alone:
            return cost
        r = took_s / alone if alone > 0 else 1.0
        return TaskCost(took_s, cost.energy_j, {dev: b * r for dev, b in cost.busy_s.items()}, cost.offchip_bytes)

    def resolve(self, new_committed: int) -> bool:
        gen = self.gen
        restart = super().resolve(new_committed)
        if self.gen != gen:
            self._gen_changed_s = self.env.now
        return restart

    # ------------------------------------------------------------ hooks for ahasd
    def on_verify_start(self, start: int, n: int, t0: float, cost, flow) -> None:
        """An NPU pass over drafts [start, start + n) starts at ``t0`` (``flow``: its flow in the
        sharing model, None without contention)."""
        pass

    def after_batch(self, batch: Batch):
        """Called by the drafter after each batch is queued: returns None to keep drafting, or a
        generator the drafter runs first (``yield from``; a plain call in the common case
        saves a generator per batch). Async: keep drafting."""
        return None

    def before_verify(self):
        """Before the verifier takes drafts: None, or a generator to wait on first."""
        return None

    def after_commit(self):
        """After a verification committed: None, or a generator to run first."""
        return None

    def on_batch_drafted(self, batch: Batch, draft_time_s: float) -> None:
        pass

    def on_verified(self, npu_time_s: float, kv_len: int) -> None:
        pass

    def finalize(self) -> None:
        self.col.energy("ctrl", self.queue_ops * self.acfg.queue_op_energy_pj * 1e-12, "queue")

    def stats(self) -> dict[str, Any]:
        return {"queue_ops": self.queue_ops, "queues": {"unverified_draft": self.unverified.stats(), "feedback": self.feedback.stats()},
                "drafter_stall_s": self.drafter_stall_s,
                "shared_rank_contention": self.contention_stats()}

    def contention_stats(self) -> dict[str, Any]:
        """Time lost to shared-rank contention (beyond each task's stand-alone time) per device,
        and how many tasks of each kind were slowed (hw/sharing.py)."""
        share = self.share
        lost = share.lost_s if share is not None else {}
        slowed = share.contended if share is not None else {}
        return {"model": "processor sharing, weighted max-min" if share is not None else "off",
                "host_weight": self.costs.host_share if share is not None else None,
                "lost_s": {"npu": lost.get("verify", 0.0), "pim": lost.get("draft", 0.0) + lost.get("preverify", 0.0)},
                "contended_verifications": slowed.get("verify", 0),
                "contended_drafts": slowed.get("draft", 0),
                "contended_preverifications": slowed.get("preverify", 0)}
