"""``ahasd``: task-level asynchronous execution + EDC + TVC (+ AAU and GTS in hardware).

After each drafted batch, EDC predicts whether more look-ahead is worthwhile.
If not, TVC checks whether PIM can pre-verify the earliest unverified tokens
(outside the NPU's in-flight batch) on the target-weight ranks and still draft
one more batch before the NPU finishes; if ``L_pv < 1`` the drafter drafts one
more batch and asks again. With EDC alone the drafter waits for the next
feedback. Pre-verification follows modeling.md decision 5 (A): accepted
tokens are committed (the NPU skips them); a mismatch commits the correction
and rolls back, earlier than the NPU would have.

Pre-verification never reads target KV before the task that writes it has ended
(``ahasd.preverify_kv``): ``recompute`` rebuilds the KV of the NPU's in-flight tokens on
PIM (TVC charges it), ``wait`` starts PIM only once the NPU pass has ended, and
``layer_pipelined`` trails the NPU layer by layer. Every KV read of a pre-verification is
checked against the NPU pass writing it (:class:`KvLedger`, ``mode_stats.kv_causality``).

AAU and GTS are hardware (``pim.aau.enabled``, ``pim.gts.enabled``): the cost
model routes nonlinear ops and prices rank switches accordingly.
"""
from __future__ import annotations

import bisect
import itertools
from dataclasses import asdict, dataclass
from typing import Any

from .async_ import AsyncMode
from .base import Batch, TaskCost, register_mode
from .costs import scaled
from .controls.edc import EntropyHistoryControl
from .controls.tvc import TimeAwarePreverifyControl


@dataclass
class _Preverify:
    start: int
    length: int
    gen: int
    new_committed: int
    early_rejection: bool


class KvLedger:
    """Target-KV writes of NPU passes and reads of pre-verifications, per layer, for a causality check.

    An NPU pass over drafts [start, start + n) writes the KV of positions [start - 1, start + n)
    (its n + 1 input tokens), layer l finishing at ``t0 + (l + 1) * layer_s``. A pre-verification
    reads, at layer l and time ``reads[l]``, the KV of every position before its first own input
    token (``need_hi``) except those it computes itself (from ``own_lo``)."""

    def __init__(self):
        self.writes: list[tuple[int, int, float, float, int]] = []   # (lo, hi, t0, layer_s, layers)
        self.reads: list[tuple[int, int, list[float]]] = []          # (need_hi, own_lo, per-layer read time)

    def write(self, lo: int, hi: int, t0: float, layer_s: float, layers: int) -> None:
        self.writes.append((lo, hi, t0, layer_s, layers))

    def read(self, need_hi: int, own_lo: int, layer_read_s: list[float]) -> None:
        self.reads.append((need_hi, own_lo, layer_read_s))

    def violations(self) -> int:
        """Pre-verification layer reads that happened before the NPU pass writing that KV had
        finished that layer (0 for a causal schedule)."""
        bad = 0
        eps = 1e-12
        starts = [w[2] for w in self.writes]          # NPU passes are sequential: sorted by start
        for need_hi, own_lo, reads in self.reads:
            hi = min(need_hi, own_lo)
            # only passes that started before the first read and may still be writing matter: the
            # last two such passes (earlier ones ended before a later pass started)
            k = bisect.bisect_right(starts, reads[0] + eps)
            limits = None
            r0 = reads[0]
            first_limit = r0 + eps * (r0 if r0 > 1.0 else 1.0)
            for lo_w, hi_w, t0, layer_s, layers in self.writes[max(0, k - 2):k]:
                if lo_w >= hi:                          # not needed
                    continue
                if t0 + layers * layer_s <= first_limit:
                    continue    # every layer written before the first read (reads never go back)
                if limits is None:    # each layer's read time plus the tolerance eps * max(1, t)
                    limits = [t + eps * (t if t > 1.0 else 1.0) for t in reads]
                for layer, limit in enumerate(limits[:layers]):
                    if t0 + (layer + 1) * layer_s > limit:
                        bad += 1
                        break
        return bad


@register_mode("ahasd")
class AhasdMode(AsyncMode):
    """Async drafting with entropy-history drafting control and time-aware pre-verification."""

    def __init__(self, env, ctx):
        super().__init__(env, ctx)
        a = self.acfg
        self.edc = EntropyHistoryControl(a.edc_config) if a.edc else None
        # one EDC/TVC decision's (energy J, latency s), read once per run
        self._edc_cost = (a.edc_config.decision_energy_nj * 1e-9, a.edc_config.decision_latency_ns * 1e-9)
        self._tvc_cost = (a.tvc_config.decision_energy_nj * 1e-9, a.tvc_config.decision_latency_ns * 1e-9)
        self._ctrl_energy_j = self.col.dynamic_energy_j                # the collector's own tables
        self._ctrl_energy_by_label_j = self.col.dynamic_energy_by_label_j
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
        self.kv_policy = a.preverify_kv
        # pre-verification overlapping the NPU pass reads target ranks the NPU streams from
        share = self._host_share = self.costs.host_share
        self._pv_stretch = 1.0 / (1.0 - share) if share < 1.0 else 1.0
        self.kv_ledger = KvLedger()
        self.pv_recomputed_tokens = 0   # in-flight tokens whose KV PIM rebuilt (recompute)
        self.pv_wait_s = 0.0            # PIM held in target mode waiting for the NPU's KV
        self.edc_idle_waits = 0
        # PIM pre-verification work on the target's ranks (contention), known when it starts
        self._pv_intervals: list[tuple[float, float]] = []

    # ------------------------------------------------------------ EDC/TVC
    def _decision(self, cost: tuple[float, float], label: str) -> float:
        """Charge one EDC/TVC decision's energy (``cost``: energy J, latency s); return its latency."""
        energy_j, latency_s = cost
        # Collector.energy("ctrl", energy_j, label), inlined (energy_j >= 0: the config says so)
        self._ctrl_energy_j["ctrl"] += energy_j
        self._ctrl_energy_by_label_j[("ctrl", label)] += energy_j
        return latency_s

    def after_batch(self, batch: Batch):
        """EDC's prediction, then (on a stop) TVC's decision: None to keep drafting, else a
        generator (a pre-verification or a wait for feedback) the drafter runs first."""
        if self.edc is None:
            return None
        live = len(self.batches)  # pending batches of the current generation (see Mode.resolve)
        cont, idx, bucket = self.edc.predict(batch.mean_entropy_nats, live)
        batch.edc_index, batch.edc_bucket, batch.edc_continue = idx, bucket, cont
        # The control CPU's decision latency delays the drafter; both decisions are charged
        # in one step (they are sequential and take ~100 ns against ~ms-long tasks).
        latency = self._decision(self._edc_cost, "edc")
        if not cont and self.tvc is not None and self.verify_in_flight is None and self.unverified.items:
            # An idle NPU takes the batch just queued at this very instant; let it do so before
            # TVC looks at the in-flight verification (the decision itself takes ~100 ns).
            return self._after_npu_took_batch(latency)
        return self._after_edc(cont, latency)

    def _after_npu_took_batch(self, latency: float):
        yield self.env.timeout(0)
        then = self._after_edc(False, latency)
        if then is not None:
            yield from then

    def _after_edc(self, cont: bool, latency: float):
        """TVC's part of :meth:`after_batch` (None, or the generator to run)."""
        l_pv = 0
        consult_tvc = (not cont and self.tvc is not None and self.verify_in_flight is not None
                       and self.pv_pending is None)
        if consult_tvc:
            latency += self._decision(self._tvc_cost, "tvc")
            v_start, v_n, v_t0, _v_end = self.verify_in_flight
            # recompute: PIM must also rebuild the KV of the NPU's n + 1 in-flight input tokens
            extra = v_n + 1 if self.kv_policy == "recompute" else 0
            l_pv = self.tvc.decide(self.env.now + latency - v_t0, self.replay.kv_len_at(v_start),
                                   extra_tokens=extra)
            # The NPU's pass over [v_start, v_start + v_n) also yields the target's token at
            # v_start + v_n (the bonus), which checks the draft there. A PIM pass fed with the
            # drafts from that position on checks the drafts *after* it, so pre-verification
            # covers [v_start + v_n + 1, ... + L_pv) and is conditional on the NPU accepting
            # everything up to and including the bonus position.
            pv_start = v_start + v_n + 1
            l_pv = min(l_pv, self.frontier - pv_start, self._preverify_queue_tokens(pv_start),
                       self.replay.prompt_end(v_start) - pv_start)      # never into the next prompt
        self.drafter_delay_s += latency   # paid before the drafter's next task starts
        if cont:
            return None
        if consult_tvc:
            if l_pv >= 1 and self.verify_in_flight is not None and self.pv_pending is None:
                return self._preverify(pv_start, l_pv)
            if self.acfg.edc_stop == "draft_one_more":
                return None  # L_pv < 1: draft exactly one more batch, then ask again
            self.edc_idle_waits += 1
            return self._wait_feedback()
        if self.tvc is not None and self.verify_in_flight is None:
            return None  # the NPU is about to take the queued batch: keep drafting
        if self.tvc is None and self.acfg.edc_stop == "draft_one_more":
            # EDC alone follows the same stop semantics as with TVC (issue 23: an ablation rung
            # changes one switch): draft one more batch, then ask again
            return None
        self.edc_idle_waits += 1
        return self._wait_feedback()

    def _preverify_queue_tokens(self, pv_start: int) -> int:
        """Tokens from ``pv_start`` that the pre-verification queue can mark: those of the first
        ``preverify_queue_entries`` pending batches that reach past ``pv_start``."""
        cap = self.acfg.preverify_queue_entries
        end = pv_start
        for b in self.batches:
            if b.end > pv_start:
                end = b.end
                cap -= 1
                if cap == 0:
                    break
        return end - pv_start

    def _preverify(self, start: int, length: int):
        st = self.tvc.stats
        st.inserted += 1
        st.tokens_preverified += length
        gen = self.gen
        self.pv_running = self.env.event()
        v_start, v_n, v_t0, v_end = self.verify_in_flight
        yield from self.run_task(self.costs.gts_switch(), "gts_switch", delay_s=self.take_drafter_delay())
        own_lo = start - 1          # the pass computes the KV of its own input tokens [start - 1, ...)
        if self.kv_policy == "recompute":
            # rebuild the in-flight tokens' KV [v_start - 1, start - 1) too: n + 1 + L tokens
            own_lo = v_start - 1
            n_tok = length + (start - v_start)
            self.pv_recomputed_tokens += start - v_start
            cost = self._pv_cost(n_tok, self.replay.kv_len_at(v_start))
            t0 = self.env.now
            reads = self._layer_reads(t0, n_tok, self.replay.kv_len_at(v_start), None)
            # registered before it runs: the NPU pass in flight may end first and must see it
            self._pv_intervals.append((t0, t0 + cost.duration_s))
            yield from self.run_task(cost, "preverify")
        elif self.kv_policy == "wait":
            hold = max(0.0, v_end - self.env.now)
            self.pv_wait_s += hold          # PIM gated to the target's ranks, idle until the KV exists
            kv = self.replay.kv_len_at(start)
            cost = self.costs.preverify(length, kv)
            t0 = self.env.now + hold
            reads = self._layer_reads(t0, length, kv, None)
            yield from self.run_task(cost, "preverify", delay_s=hold)
        else:                               # layer_pipelined
            kv = self.replay.kv_len_at(start)
            n_l, npu_layer, npu_head = self.costs.layer_split("verify", v_n + 1, self.replay.kv_len_at(v_start))
            r = (v_end - v_t0) / (n_l * npu_layer + npu_head)      # this pass's actual (stretched) timing
            npu_done = [v_t0 + (i + 1) * npu_layer * r for i in range(n_l)]
            base = self._pv_cost(length, kv)
            t0 = self.env.now
            reads = self._layer_reads(t0, length, kv, npu_done)
            n_p, pv_layer, pv_head = self.costs.layer_split("preverify", length, kv)
            q = base.duration_s / (n_p * pv_layer + pv_head)
            span = max(base.duration_s, reads[-1] + (pv_layer + pv_head) * q - t0)
            self.pv_wait_s += span - base.duration_s   # PIM in target mode, idle between layers
            cost = TaskCost(span, base.energy_j, base.busy_s, base.offchip_bytes)
            # PIM works (on the shared ranks) only during its layers and idles between them,
            # waiting for the NPU's next layer: registered before it runs, as above, and
            # recorded over those layers (PIM is held in target mode for the whole span)
            layers = [(a, a + pv_layer * q) for a in reads[:-1]]
            layers.append((reads[-1], reads[-1] + (pv_layer + pv_head) * q))
            self._pv_intervals += layers
            started_s = yield from self.run_task(TaskCost(span, {}, {}), "preverify")
            self.col.task_over(cost, "preverify", started_s, layers)
        self.kv_ledger.read(start - 1, own_lo, reads)
        self.tvc.record_preverify(cost.duration_s, length + (start - v_start if self.kv_policy == "recompute" else 0))
        yield from self.run_task(self.costs.gts_switch(), "gts_switch")
        a = self.replay.accepted_run(start, length)
        result = _Preverify(start, length, gen, start + a + (1 if a < length else 0), a < length)
        self.col.event(t0, "preverify", position=start, n_tokens=length, accepted=a,
                       duration_s=self.env.now - t0)
        ev, self.pv_running = self.pv_running, None
        ev.succeed()
        if self.committed >= start:
            yield from self._apply_preverify(result, by_drafter=True)
        else:
            self.pv_pending = result   # the NPU is still verifying the tokens before it

    def _pv_cost(self, n_tokens: int, kv: int) -> TaskCost:
        """Pre-verification cost; slowed while the NPU streams from the same (target) ranks."""
        cost = self.costs.preverify(n_tokens, kv)
        stretch = self._pv_stretch
        if stretch != 1.0 and self.kv_policy != "wait":
            cost = scaled(cost, stretch)
        return cost

    def _layer_reads(self, t0: float, n_tokens: int, kv: int, npu_layer_done: list[float] | None) -> list[float]:
        """Start time of each target layer of a pre-verification starting at ``t0``; with
        ``npu_layer_done`` a layer waits until the NPU has written that layer's KV."""
        n_l, layer_s, head_s = self.costs.layer_split("preverify", n_tokens, kv)
        layer_s *= self._pv_cost(n_tokens, kv).duration_s / (n_l * layer_s + head_s)
        if npu_layer_done is None and n_l > 0:     # the same sequential sums as the loop below
            return list(itertools.accumulate(itertools.repeat(layer_s, n_l - 1), initial=t0))
        out, t = [], t0
        n_done = len(npu_layer_done) if npu_layer_done is not None else 0
        for i in range(n_l):
            if i < n_done:
                done_s = npu_layer_done[i]
                if done_s > t:           # t = max(t, done_s)
                    t = done_s
            out.append(t)
            t += layer_s
        return out

    def verify_extra_s(self, t0: float, t1: float) -> float:
        """NPU time lost to pre-verifications computing on the target ranks during [t0, t1): the
        NPU's reads progressed at the host's share of those ranks' time while they overlapped."""
        share = self._host_share
        intervals = self._pv_intervals
        if share >= 1.0 or not intervals:
            return 0.0
        # sum(max(0, min(t1, b) - max(t0, a))) over the intervals, as comparisons: intervals that
        # do not overlap add 0.0, which leaves a float sum unchanged
        overlap = 0.0
        keep = []
        for iv in intervals:
            a, b = iv
            if b > t1:
                keep.append(iv)
                if a < t1:
                    overlap += t1 - (t0 if t0 > a else a)
            elif b > t0 and b > a:
                overlap += b - (t0 if t0 > a else a)
        self._pv_intervals = keep
        return overlap * (1.0 - share)

    def on_verify_start(self, start: int, n: int, t0: float, cost) -> None:
        n_l, layer_s, head_s = self.costs.layer_split("verify", n + 1, self.replay.kv_len_at(start))
        # the pass's layers take their share of its actual (possibly contended) duration
        self.kv_ledger.write(start - 1, start + n, t0, layer_s * cost.duration_s / (n_l * layer_s + head_s), n_l)

    def finalize(self) -> None:
        super().finalize()
        self.kv_violations = self.kv_ledger.violations()

    def _apply_preverify(self, r: _Preverify, by_drafter: bool = False):
        st = self.tvc.stats
        if r.gen != self.gen or self.committed < r.start or r.new_committed <= self.committed:
            st.wasted += 1
            return
        before = self.committed
        self.resolving_preverify = True
        restart = self.resolve(r.new_committed)
        self.resolving_preverify = False
        st.successful += 1
        st.tokens_committed += max(0, min(self.committed, r.start + r.length) - max(before, r.start))
        if r.early_rejection:
            st.early_rejections += 1
        yield from self._signal_feedback(restart, by_drafter)

    def before_verify(self):
        if self.pv_running is not None and self.tvc is not None:
            return self._wait_for_preverify()
        return None

    def _wait_for_preverify(self):
        t0 = self.env.now
        yield self.pv_running
        self.tvc.stats.npu_wait_for_preverify_s += self.env.now - t0

    def after_commit(self):
        if self.pv_pending is not None:
            r, self.pv_pending = self.pv_pending, None
            return self._apply_preverify(r)
        return None

    # ------------------------------------------------------------ learning hooks
    def on_batch_resolved(self, batch: Batch, n_accepted: int, fully_accepted: bool, killed: bool) -> None:
        if self.edc is not None and batch.edc_index >= 0:
            self.edc.resolve(batch.edc_index, batch.edc_bucket, batch.edc_continue, fully_accepted, killed)

    def on_batches_changed(self) -> None:
        if self.edc is not None:   # decision 3: LLR = min(7, live unverified batches) on every event
            self.edc.set_live_batches(len(self.batches))

    def on_batch_drafted(self, batch: Batch, draft_time_s: float) -> None:
        if self.tvc is not None:
            self.tvc.pdct.push(draft_time_s * 1e9, batch.length)   # tvc.record_draft(...), inlined

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
            out["preverify"] = {"kv": self.kv_policy, "recomputed_tokens": self.pv_recomputed_tokens,
                                "pim_waiting_for_kv_s": self.pv_wait_s,
                                "kv_causality_violations": getattr(self, "kv_violations", None),
                                "kv_reads_checked": len(self.kv_ledger.reads)}
        out["edc_idle_waits"] = self.edc_idle_waits
        return out
