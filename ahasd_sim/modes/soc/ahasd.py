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
from ..base import Batch, TaskCost, register_mode
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
    (its n + 1 input tokens); layer l is written when the pass has done ``(l + 1) * layer_s`` of
    its work, at the time that really happened: read off the pass's progress curve in the
    sharing model (``flow``, :meth:`~ahasd_sim.hw.sharing.Flow.time_at`) when contention is
    modelled, else ``t0 + (l + 1) * layer_s``. A pre-verification reads, at layer l and the time
    its layer l really started (``reads[l]``), the KV of every position before its first own input
    token (``need_hi``) except those it computes itself (from ``own_lo``)."""

    def __init__(self):
        self.writes: list[tuple] = []       # (lo, hi, t0, layer_s, layers, flow or None)
        self.reads: list[tuple[int, int, list[float]]] = []          # (need_hi, own_lo, per-layer read time)

    def write(self, lo: int, hi: int, t0: float, layer_s: float, layers: int, flow=None) -> None:
        self.writes.append((lo, hi, t0, layer_s, layers, flow))

    def read(self, need_hi: int, own_lo: int, layer_read_s: list[float]) -> None:
        self.reads.append((need_hi, own_lo, layer_read_s))

    @staticmethod
    def layer_written_s(write: tuple, layer: int) -> float:
        """When the pass ``write`` had written layer ``layer``'s KV (actual time)."""
        _lo, _hi, t0, layer_s, _layers, flow = write
        if flow is None:
            return t0 + (layer + 1) * layer_s
        return flow.time_at((layer + 1) * layer_s)

    @staticmethod
    def layers_written_s(write: tuple) -> list[float]:
        """:meth:`layer_written_s` of every layer of ``write``."""
        _lo, _hi, t0, layer_s, layers, flow = write
        if flow is None:
            return [t0 + (layer + 1) * layer_s for layer in range(layers)]
        return flow.times_at([(layer + 1) * layer_s for layer in range(layers)])

    def violations(self) -> int:
        """Pre-verification layer reads that happened before the NPU pass writing that KV had
        finished that layer (0 for a causal schedule)."""
        bad = 0
        written: dict[int, list[float]] = {}     # per write (index): each layer's write time
        last_written: dict[int, float] = {}      # per write (index): its last layer's write time
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
            for j in range(max(0, k - 2), k):
                w = self.writes[j]
                if w[0] >= hi:                          # not needed
                    continue
                # the last layer alone first (one lookup): most passes had written every layer
                # before the read began (reads never go back)
                last = last_written.get(j)
                if last is None:
                    last = last_written[j] = self.layer_written_s(w, w[4] - 1)
                if last <= first_limit:
                    continue
                at = written.get(j)
                if at is None:
                    at = written[j] = self.layers_written_s(w)
                if limits is None:    # each layer's read time plus the tolerance eps * max(1, t)
                    limits = [t + eps * (t if t > 1.0 else 1.0) for t in reads]
                for layer, limit in enumerate(limits[:w[4]]):
                    if at[layer] > limit:
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
        self.kv_ledger = KvLedger()
        # the KV ledger reads each NPU pass's layer times off its real progress curve
        self.record_verify_progress = self.tvc is not None
        self.pv_recomputed_tokens = 0   # in-flight tokens whose KV PIM rebuilt (recompute)
        self.pv_wait_s = 0.0            # PIM held in target mode waiting for the NPU's KV
        self.edc_idle_waits = 0

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
            # EDC alone follows the same stop semantics as with TVC (an ablation rung
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
        vflow = self.verify_flow    # the NPU pass in flight (None: contention not modelled)
        if self.kv_policy == "recompute":
            # rebuild the in-flight tokens' KV [v_start - 1, start - 1) too: n + 1 + L tokens
            own_lo = v_start - 1
            n_tok = length + (start - v_start)
            self.pv_recomputed_tokens += start - v_start
            cost = self.costs.preverify(n_tok, self.replay.kv_len_at(v_start))
            t0 = self.env.now
            cost = yield from self._pim_task(cost)     # shares the target's ranks with the NPU pass
            reads = self._layer_reads(t0, n_tok, self.replay.kv_len_at(v_start), cost.duration_s)
        elif self.kv_policy == "wait":
            t_hold = self.env.now
            if vflow is not None:
                if vflow.end_s is None:
                    yield vflow.event          # PIM gated to the target's ranks until the pass ends
            elif v_end > self.env.now:
                yield self.env.timeout(v_end - self.env.now)
            self.pv_wait_s += self.env.now - t_hold   # idle until the KV exists
            kv = self.replay.kv_len_at(start)
            t0 = self.env.now
            cost = yield from self._pim_task(self.costs.preverify(length, kv))
            reads = self._layer_reads(t0, length, kv, cost.duration_s)
        else:                               # layer_pipelined
            cost, reads, t0 = yield from self._layer_pipelined(start, length, v_start, v_n, v_t0, v_end, vflow)
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

    def _pim_task(self, cost: TaskCost):
        """Run a pre-verification pass on the target's ranks (a flow next to the NPU pass when
        contention is modelled); returns the cost as it ran."""
        if self.share is None:
            yield from self.run_task(cost, "preverify")
            return cost
        t0 = yield from self.run_shared(cost, "preverify")
        return self.as_run(cost, self.env._now - t0)

    def _layer_reads(self, t0: float, n_tokens: int, kv: int, took_s: float) -> list[float]:
        """Start time of each target layer of a pre-verification that ran from ``t0`` for
        ``took_s`` in one piece (recompute, wait): the layers take their share of that time."""
        n_l, layer_s, head_s = self.costs.layer_split("preverify", n_tokens, kv)
        total = n_l * layer_s + head_s
        layer_s *= took_s / total if total > 0 else 1.0
        return list(itertools.accumulate(itertools.repeat(layer_s, n_l - 1), initial=t0)) if n_l > 0 else [t0]

    def _layer_pipelined(self, start, length, v_start, v_n, v_t0, v_end, vflow):
        """layer_pipelined: PIM layer l starts once the NPU pass has really written layer l's KV
        (its flow's progress reached l + 1 layers: an event of the sharing model, so a pass
        slowed by contention delays the reads) and the previous PIM layer is done. Returns (the
        cost as it ran, each layer's start time, the start)."""
        env = self.env
        kv = self.replay.kv_len_at(start)
        n_l, npu_layer, npu_head = self.costs.layer_split("verify", v_n + 1, self.replay.kv_len_at(v_start))
        base = self.costs.preverify(length, kv)
        n_p, pv_layer, pv_head = self.costs.layer_split("preverify", length, kv)
        q = base.duration_s / (n_p * pv_layer + pv_head)
        t0 = env._now
        reads: list[float] = []
        layers: list[tuple[float, float]] = []
        share, spec = self.share, (self.flow_specs["preverify"] if self.share is not None else None)
        pairs = share._pairs if share is not None else None
        i = 0
        while i < n_p:
            if vflow is None or vflow.end_s is not None:
                # no contention, or the NPU pass has ended: the remaining layers' times are known
                # (without contention the pass runs as planned, layer i written at
                # v_t0 + (i + 1) * npu_layer), so they run as one timeout
                t = env._now
                for j in range(i, n_p):
                    if j < n_l and vflow is None:
                        done_s = v_t0 + (j + 1) * npu_layer
                        if done_s > t:           # t = max(t, done_s)
                            t = done_s
                    work = pv_layer * q if j < n_p - 1 else (pv_layer + pv_head) * q
                    reads.append(t)
                    layers.append((t, t + work))
                    t += work
                if t > env._now:
                    yield env.timeout(t - env._now)
                break
            # Between this process's own steps only the NPU pass (vflow) and this pass's layers
            # share the ranks: the drafter is running this, the verifier waits for it before its
            # next pass. So the times below, from the sharing model's current rates, are exact.
            j = self._layers_at_once(i, n_p, n_l, npu_layer, pv_layer, pv_head, q, vflow, spec, pairs, reads, layers)
            if j > i:
                i = j
                continue
            if i < n_l:
                need = (i + 1) * npu_layer - (vflow.done + vflow.rate * (env._now - vflow.t))   # done_of
                if need > 1e-12 * npu_layer:     # the NPU has not written layer i yet: wait
                    # for its real progress: the pass runs alone meanwhile, at its lone rate
                    # (nothing else starts), so it gets there in need / rate
                    t = env._now + need / vflow.rate
                    eq = env._queue
                    if eq and eq[0][0] <= t:
                        yield env.timeout(t - env._now)
                    else:
                        env._now = t
            work = pv_layer * q if i < n_p - 1 else (pv_layer + pv_head) * q
            a = env._now
            reads.append(a)
            b = None
            if vflow.end_s is None:
                # b = share.beside(spec, work), inlined for the cached pair (pass, layer)
                pair = pairs.get(spec)
                if pair is None or pair[0] is not vflow.spec or len(share.active) != 1:
                    b = share.beside(spec, work)
                else:
                    t = a + work / pair[2]
                    if vflow.done + vflow.rate * (a - vflow.t) + pair[1] * (t - a) < vflow.work:
                        b = (t, vflow, pair[1])
            eq = env._queue
            if b is not None and eq and eq[0][0] <= b[0] and share.drop_early_timer(b[1], b[0]):
                if eq and eq[0][0] <= b[0]:          # something else comes first
                    share.rearm(b[1])
            if b is not None and not (eq and eq[0][0] <= b[0]):
                # the layer ends before the pass and before anything else happens (the common
                # case): done at once, the clock advanced (fastq.advance's rule)
                env._now = b[0]
                share.commit_beside(b[1], b[2], a, b[0], spec, work)
            elif vflow.end_s is None:
                flow = share.start(spec, work, wait=False)   # shares the target's ranks with the pass
                t = share.projected_end(flow)
                v_t = share.projected_end(vflow)
                if v_t < t:     # the pass ends first; the layer then runs alone at full rate
                    t = v_t + (work - flow.rate * (v_t - a))
                if t > a:
                    yield env.timeout(t - a)
                share.finish_now(flow)
            elif work > 0:
                yield env.timeout(work)
            layers.append((a, env._now))
            i += 1
        busy = sum(b - a for a, b in layers)
        span = env._now - t0
        self.pv_wait_s += span - busy   # PIM in target mode, idle between layers
        r = busy / base.duration_s if base.duration_s > 0 else 1.0
        cost = TaskCost(span, base.energy_j, {d: b * r for d, b in base.busy_s.items()}, base.offchip_bytes)
        # PIM works only during its layers and idles between them, waiting for the NPU's next
        # layer; PIM is held in target mode for the whole span
        self.col.task_over(cost, "preverify", t0, layers)
        return cost, reads, t0

    def _layers_at_once(self, i, n_p, n_l, npu_layer, pv_layer, pv_head, q, vflow, spec, pairs, reads, layers) -> int:
        """Layers i, i + 1, ... of a layer-pipelined pre-verification done at once (the clock
        advanced, as fastq.advance does) while nothing but the NPU pass ``vflow`` and these
        layers happens: each waits for the pass to reach its layer (the pass alone, at its lone
        rate), then runs beside it at the pair's max-min rates, until the next other event or
        the pass's end would come first. Books exactly what FluidShare.beside + commit_beside
        would per layer (the pass's progress curve, PIM's lost time). Returns the next layer."""
        share = self.share
        pair = pairs.get(spec)
        if pair is None or pair[0] is not vflow.spec or len(share.active) != 1:
            return i
        env = self.env
        eq = env._queue
        dropped = False
        q0 = eq[0][0] if eq else float("inf")
        x_g, x = pair[1], pair[2]
        r1, w_v, hist = vflow.rate, vflow.work, vflow.history
        now = env._now
        dv = vflow.done + r1 * (now - vflow.t)
        tol = 1e-12 * npu_layer
        lost = 0.0
        slowed = 0
        j = i
        while j < n_p:
            t, d = now, dv
            if j < n_l:
                need = (j + 1) * npu_layer - d
                if need > tol:
                    t = now + need / r1
                    d += need
            work = pv_layer * q if j < n_p - 1 else (pv_layer + pv_head) * q
            b = t + work / x
            if d + x_g * (b - t) >= w_v:
                break
            if b >= q0:
                # the pass's own early wake-up would only re-arm: take it off (re-armed below)
                if dropped or not share.drop_early_timer(vflow, b):
                    break
                dropped = True
                q0 = eq[0][0] if eq else float("inf")
                if b >= q0:
                    break
            if hist is not None:
                if hist[-1][0] < t:
                    hist.append((t, d))
                hist.append((b, d + x_g * (b - t)))
            reads.append(t)
            layers.append((t, b))
            extra = (b - t) - work
            if extra > 1e-12 * (work if work > 1.0 else 1.0):
                lost += extra
                slowed += 1
            dv = d + x_g * (b - t)
            now = b
            j += 1
        if j > i:
            vflow.done, vflow.t = dv, now
            env._now = now
            if slowed:
                name = spec.name
                share.lost_s[name] = share.lost_s.get(name, 0.0) + lost
                share.contended[name] = share.contended.get(name, 0) + slowed
        if dropped:
            share.rearm(vflow)
        return j

    def on_verify_start(self, start: int, n: int, t0: float, cost, flow) -> None:
        n_l, layer_s, head_s = self.costs.layer_split("verify", n + 1, self.replay.kv_len_at(start))
        # layer l is written when the pass has done l + 1 layers of its work: with contention, at
        # the time its flow really got there (read off its progress curve by the ledger)
        if flow is None:
            layer_s *= cost.duration_s / (n_l * layer_s + head_s)
        self.kv_ledger.write(start - 1, start + n, t0, layer_s, n_l, flow)

    def finalize(self) -> None:
        super().finalize()
        if self.ctx.audit:      # else kv_causality_violations stays None (not checked)
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
