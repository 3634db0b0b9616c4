"""``ahasd``: task-level asynchronous execution + EDC + TVC (+ AAU and GTS in hardware).

After each drafted batch, EDC predicts whether more look-ahead is worthwhile.
If not, TVC checks whether PIM can pre-verify the earliest unverified tokens
(outside the NPU's in-flight batch) on the target-weight ranks and still draft
one more batch before the NPU finishes; if ``L_pv < 1`` the drafter drafts one
more batch and asks again. With EDC alone the drafter waits for the next
feedback. Pre-verification follows modeling.md decision 5 (A): accepted
tokens are committed (the NPU skips them); a mismatch commits the correction
and rolls back, earlier than the NPU would have.

AAU and GTS are hardware (``pim.aau.enabled``, ``pim.gts.enabled``): the cost
model routes nonlinear ops and prices rank switches accordingly.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .async_ import AsyncMode
from .base import Batch, register_mode
from .controls.edc import EntropyHistoryControl
from .controls.tvc import TimeAwarePreverifyControl


@dataclass
class _Preverify:
    start: int
    length: int
    gen: int
    new_committed: int
    early_rejection: bool


@register_mode("ahasd")
class AhasdMode(AsyncMode):
    """Async drafting with entropy-history drafting control and time-aware pre-verification."""

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        a = self.acfg
        self.edc = EntropyHistoryControl(a.edc_config) if a.edc else None
        self.tvc = None
        if a.tvc:
            t = a.tvc_config
            kv, ld = t.preload_kv_len, t.preload_draft_len
            self.tvc = TimeAwarePreverifyControl(
                t,
                preload_npu_ns=self.costs.verify(ld + 1, kv).duration_s * 1e9, preload_kv_len=kv,
                preload_draft_ns=self.costs.draft_token(kv).duration_s * ld * 1e9, preload_draft_len=ld,
                preload_pv_ns=self.costs.preverify(ld, kv).duration_s * 1e9, preload_pv_len=ld)
        self.pv_running = None          # SimPy event while a pre-verification runs
        self.pv_pending: _Preverify | None = None

    # ------------------------------------------------------------ EDC/TVC
    def _control(self, cfg, label: str) -> float:
        """Charge one EDC/TVC decision's energy; return its latency (s)."""
        self.col.energy("ctrl", cfg.decision_energy_nj * 1e-9, label)
        return cfg.decision_latency_ns * 1e-9

    def after_batch(self, batch: Batch):
        if self.edc is None:
            return
        live = len(self.batches)  # pending batches of the current generation (see Mode.resolve)
        cont, idx, bucket = self.edc.predict(batch.mean_entropy_nats, live)
        batch.edc_index, batch.edc_bucket, batch.edc_continue = idx, bucket, cont
        # The control CPU's decision latency delays the drafter; both decisions are charged
        # in one step (they are sequential and take ~100 ns against ~ms-long tasks).
        latency = self._control(self.acfg.edc_config, "edc")
        if not cont and self.tvc is not None and self.verify_in_flight is None and self.unverified.items:
            # An idle NPU takes the batch just queued at this very instant; let it do so before
            # TVC looks at the in-flight verification (the decision itself takes ~100 ns).
            yield self.env.timeout(0)
        l_pv = 0
        consult_tvc = (not cont and self.tvc is not None and self.verify_in_flight is not None
                       and self.pv_pending is None)
        if consult_tvc:
            latency += self._control(self.acfg.tvc_config, "tvc")
            v_start, v_n, v_t0 = self.verify_in_flight
            l_pv = self.tvc.decide(self.env.now + latency - v_t0, self.replay.kv_len_at(v_start))
            # The NPU's pass over [v_start, v_start + v_n) also yields the target's token at
            # v_start + v_n (the bonus), which checks the draft there. A PIM pass fed with the
            # drafts from that position on checks the drafts *after* it, so pre-verification
            # covers [v_start + v_n + 1, ... + L_pv) and is conditional on the NPU accepting
            # everything up to and including the bonus position.
            pv_start = v_start + v_n + 1
            l_pv = min(l_pv, self.frontier - pv_start)
        self.drafter_delay_s += latency   # paid before the drafter's next task starts
        if cont:
            return
        if consult_tvc:
            if l_pv >= 1 and self.verify_in_flight is not None and self.pv_pending is None:
                yield from self._preverify(pv_start, l_pv)
            return  # L_pv < 1: draft exactly one more batch, then ask again
        if self.tvc is not None and self.verify_in_flight is None:
            return  # the NPU is about to take the queued batch: keep drafting
        yield from self._wait_feedback()

    def _preverify(self, start: int, length: int):
        st = self.tvc.stats
        st.inserted += 1
        st.tokens_preverified += length
        gen = self.gen
        self.pv_running = self.env.event()
        kv = self.replay.kv_len_at(start)
        yield from self.run_task(self.costs.gts_switch(), "gts_switch", delay_s=self.take_drafter_delay())
        t0 = yield from self.run_task(self.costs.preverify(length, kv), "preverify")
        self.tvc.record_preverify(self.env.now - t0, length)
        yield from self.run_task(self.costs.gts_switch(), "gts_switch")
        a = self.replay.accepted_run(start, length)
        result = _Preverify(start, length, gen, start + a + (1 if a < length else 0), a < length)
        self.col.event(t0, "preverify", position=start, n_tokens=length, accepted=a,
                       duration_s=self.env.now - t0)
        ev, self.pv_running = self.pv_running, None
        ev.succeed()
        if self.committed >= start:
            yield from self._apply_preverify(result)
        else:
            self.pv_pending = result   # the NPU is still verifying the tokens before it

    def _apply_preverify(self, r: _Preverify):
        st = self.tvc.stats
        if r.gen != self.gen or self.committed < r.start or r.new_committed <= self.committed:
            st.wasted += 1
            return
        before = self.committed
        restart = self.resolve(r.new_committed)
        st.successful += 1
        st.tokens_committed += max(0, min(self.committed, r.start + r.length) - max(before, r.start))
        if r.early_rejection:
            st.early_rejections += 1
        yield from self._signal_feedback(restart)

    def before_verify(self):
        if self.pv_running is not None and self.tvc is not None:
            t0 = self.env.now
            yield self.pv_running
            self.tvc.stats.npu_wait_for_preverify_s += self.env.now - t0

    def after_commit(self):
        if self.pv_pending is not None:
            r, self.pv_pending = self.pv_pending, None
            yield from self._apply_preverify(r)

    # ------------------------------------------------------------ learning hooks
    def on_batch_resolved(self, batch: Batch, n_accepted: int, fully_accepted: bool, killed: bool) -> None:
        if self.edc is not None and batch.edc_index >= 0:
            self.edc.resolve(batch.edc_index, batch.edc_bucket, batch.edc_continue, fully_accepted, killed)

    def on_batches_changed(self) -> None:
        if self.edc is not None:   # decision 3: LLR = min(7, live unverified batches) on every event
            self.edc.set_live_batches(len(self.batches))

    def on_batch_drafted(self, batch: Batch, draft_time_s: float) -> None:
        if self.tvc is not None:
            self.tvc.record_draft(draft_time_s, batch.length)

    def on_verified(self, npu_time_s: float, kv_len: int) -> None:
        if self.tvc is not None:
            self.tvc.record_npu(npu_time_s, kv_len)

    def stats(self) -> dict[str, Any]:
        out = super().stats()
        if self.edc is not None:
            s = self.edc.stats
            out["edc"] = {**asdict(s), "prediction_accuracy": s.accuracy}
        if self.tvc is not None:
            out["tvc"] = asdict(self.tvc.stats)
        return out
