"""Tree-verification cost with expert offload, and the linear model SpecFit optimises.

A verification pass over a tree of n tokens (draft nodes + the root) on the GPU:

* per layer, the **dense part** (norms, attention over the context + tree, projections, router):
  the GPU roofline of the target's non-expert operators for n tokens (:mod:`ahasd_sim.workload.ops`)
  plus ``gpu.kernels_per_layer`` launches;
* per layer, the **experts**: the union U_l of the top-k experts of the n tokens. Experts not
  resident in the expert cache are copied over H2D, one copy per expert (``h2d.latency_us`` +
  bytes / ``h2d.effective_gb_s`` each, FIFO on one copy stream) -- the layer's expert compute
  starts only when every copy it needs has ended. Compute: the roofline of |U_l| experts' weights
  and n*k token-expert pairs, plus ``gpu.moe_fused_kernels`` launches (``fused``) or
  ``gpu.moe_loop_overhead_per_expert_us`` per expert hit (``per_expert_loop``);
* once, the head (final norm, LM head, softmax over n positions).

Energy: GPU (active - idle power) x busy time; H2D ``dma_pj_per_byte`` x bytes copied.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hw.cost import OpCost
from .cache import PassPins
from ..workload.ops import forward_ops


@dataclass(frozen=True)
class LinearVerifyModel:
    """SpecFit's cycle-time model (an offline profile of this cost model at one KV length):
    T(S) = T_draft + c0 + c1*(|S|+1) + sum_l [c2*|U_l| + |U_l not resident| * fetch
    + first_fetch_extra if layer l copies anything] -- the first copy of a layer finds the copy
    stream idle (isolated cost), the rest are pipelined (``fetch``)."""

    c0_s: float
    c1_s: float
    c2_s: float
    fetch_s: float
    n_layers: int
    first_fetch_extra_s: float = 0.0
    multi_token_s: float = 0.0    # fixed cost of a pass over > 1 token (c0 is the root-only pass's)

    def item_cost(self, resident: bool) -> float:
        return self.c2_s + (0.0 if resident else self.fetch_s)

    def cycle_time(self, n_selected: int, unions, resident_mask: np.ndarray, draft_s: float = 0.0) -> float:
        t = draft_s + self.c0_s + self.c1_s * (n_selected + 1) + (self.multi_token_s if n_selected else 0.0)
        for layer, u in enumerate(unions):
            u = np.asarray(u, dtype=int)
            miss = int((~resident_mask[layer, u]).sum()) if len(u) else 0
            t += self.c2_s * len(u) + miss * self.fetch_s + (self.first_fetch_extra_s if miss else 0.0)
        return t


class MoeCostModel:
    def __init__(self, platform, target, draft, moe_cfg, kv_quantum: int = 16, cpu=None):
        if platform.gpu is None or platform.h2d is None:
            raise ValueError("moe_offload needs a GPU and an h2d link")
        self.gpu, self.link, self.platform = platform.gpu, platform.h2d, platform
        self.target, self.draft, self.moe_cfg = target, draft, moe_cfg
        self.quantum = max(1, int(kv_quantum))
        self.expert_bytes = float(target.expert_params() * target.weight_bytes_per_param)
        self.copy_s = self.link.isolated_transfer_time_s(self.expert_bytes)          # stream idle
        self.copy_b2b_s = self.link.back_to_back_transfer_time_s(self.expert_bytes)  # queued behind a copy
        g = self.gpu.cfg
        self.launch_s = g.launch_overhead_us * 1e-6
        self.kernel = g.moe_kernel
        self._dense: dict[tuple[int, int], tuple[float, float]] = {}
        self.cpu = cpu                # host_cpu section (CPU experts), or None
        self._dyn_w = g.active_power_w - g.idle_power_w

    # ------------------------------------------------------------------ bytes
    def dense_weight_bytes(self) -> float:
        """Everything but the routed experts (attention, norms, router, embeddings, head)."""
        t = self.target
        experts = t.n_layers * t.n_experts * t.expert_params()
        return float((t.param_count() - experts) * t.weight_bytes_per_param)

    def all_expert_bytes(self) -> float:
        return self.expert_bytes * self.target.n_layers * self.target.n_experts

    # ------------------------------------------------------------------ times
    def _kv(self, kv: int) -> int:
        return -(-max(0, int(kv)) // self.quantum) * self.quantum

    def dense_times(self, n_tokens: int, kv: int) -> tuple[float, float]:
        """(one layer's dense part, the head) in seconds for ``n_tokens`` tokens at context ``kv``."""
        key = (int(n_tokens), self._kv(kv))
        hit = self._dense.get(key)
        if hit is None:
            layer = head = 0.0
            for op in forward_ops(self.target, key[0], key[1]):
                if op.name.startswith("expert_"):
                    continue
                t = self.gpu.op_cost(op).duration_s
                if op.per_layer:
                    layer += t
                else:
                    head += t * op.layer_repeat
            layer += self.gpu.cfg.kernels_per_layer * self.launch_s
            if key[0] > 1:   # the validated fixed cost of a multi-token step (gpu.multi_token_layer_overhead_us)
                layer += self.gpu.cfg.multi_token_layer_overhead_us * 1e-6
            hit = self._dense[key] = (layer, head)
        return hit

    def expert_body_s(self, n_tokens: int, n_distinct: int, pairs: int | None = None) -> float:
        """Roofline of one layer's expert FFN: max(FLOPs / ops, (hit experts' bytes + activations) / bw);
        ``pairs``: token-expert pairs (default every token's top-k)."""
        t = self.target
        pairs = n_tokens * t.n_active_experts if pairs is None else int(pairs)
        flops = 2.0 * pairs * t.expert_params()
        act = pairs * (2 * t.d_model + 3 * t.d_expert_ffn) * t.act_bytes_per_elem
        return max(flops / self.gpu.effective_ops_s,
                   (n_distinct * self.expert_bytes + act) / self.gpu.effective_bandwidth_bytes_s)

    def kernel_terms_s(self) -> tuple[float, float, float]:
        """(fixed per layer, per distinct expert, per token-expert pair) of the chosen MoE kernel, in s."""
        g = self.gpu.cfg
        if self.kernel == "fused":
            fixed = g.moe_fused_kernels * self.launch_s if g.moe_fused_fixed_us is None else g.moe_fused_fixed_us * 1e-6
            return fixed, g.moe_fused_per_expert_us * 1e-6, g.moe_fused_per_pair_us * 1e-6
        return g.moe_loop_fixed_us * 1e-6, g.moe_loop_overhead_per_expert_us * 1e-6, g.moe_loop_per_pair_us * 1e-6

    def expert_time_s(self, n_tokens: int, n_distinct: int, pairs: int | None = None) -> float:
        """One layer's expert FFN compute for ``n_tokens`` tokens hitting ``n_distinct`` experts:
        roofline + fixed + per-expert + per-pair terms of the kernel (fitted on the H200)."""
        if n_distinct <= 0:
            return 0.0
        fixed, per_e, per_p = self.kernel_terms_s()
        pairs = n_tokens * self.target.n_active_experts if pairs is None else int(pairs)
        return self.expert_body_s(n_tokens, n_distinct, pairs) + fixed + n_distinct * per_e + pairs * per_p

    # ------------------------------------------------------------------ CPU experts
    def cpu_bandwidth_bytes_s(self) -> float:
        return self.cpu.mem_bw_gb_s * 1e9 * self.cpu.bandwidth_efficiency

    def cpu_expert_time_s(self, n_tokens: int) -> float:
        """One expert FFN on the host CPU over ``n_tokens`` tokens routed to it: max(its weight
        bytes / effective DRAM bandwidth, its FLOPs / effective CPU throughput)."""
        flops = 2.0 * n_tokens * self.target.expert_params()
        return max(self.expert_bytes / self.cpu_bandwidth_bytes_s(), flops / (self.cpu.effective_gflops * 1e9))

    def cpu_handoff_s(self, n_tokens: int) -> float:
        """A layer with CPU experts: the hidden states of ``n_tokens`` to the host and the expert
        outputs back (two copies on the link) + the sync latency."""
        b = n_tokens * self.target.d_model * self.target.act_bytes_per_elem
        return 2.0 * self.link.isolated_transfer_time_s(b) + self.cpu.sync_latency_us * 1e-6

    def cpu_energy_j(self, busy_s: float) -> float:
        return self.cpu.active_power_w * busy_s

    def gpu_energy_j(self, busy_s: float) -> float:
        return self._dyn_w * busy_s

    def copy_energy_j(self, n_experts: int) -> float:
        return self.link.transfer_energy_j(n_experts * self.expert_bytes)

    def linear_model(self, kv: int) -> LinearVerifyModel:
        """Coefficients profiled from this model at context ``kv`` (finite differences)."""
        L = self.target.n_layers
        # slope from 2..34 tokens: the multi-token step overhead is a fixed cost of every tree pass (c0)
        d2, head2 = self.dense_times(2, kv)
        d34, head34 = self.dense_times(34, kv)
        c1 = (L * (d34 - d2) + (head34 - head2)) / 32.0
        d1, head1 = self.dense_times(1, kv)
        c0 = L * d1 + head1 - c1
        multi = L * d2 + head2 - 2 * c1 - c0
        k = self.target.n_active_experts
        c2 = self.expert_time_s(1, k + 1) - self.expert_time_s(1, k)
        c1_e = (self.expert_time_s(33, k) - self.expert_time_s(1, k)) / 32.0   # per token (pairs, activations)
        c1 += L * c1_e
        # the fixed per-layer part of expert compute (launches) goes to c0
        c0 += L * (self.expert_time_s(1, k) - k * c2 - c1_e)
        ex = getattr(self.moe_cfg, "expert_execution", "gpu")
        if ex != "gpu" and self.cpu is not None:
            # a non-resident expert runs on the CPU (its one-token time; the hand-off is the
            # layer's fixed extra); mixed takes the cheaper of that and a pipelined copy
            cpu1 = self.cpu_expert_time_s(1)
            fetch = cpu1 if ex == "cpu" else min(cpu1, self.copy_b2b_s)
            return LinearVerifyModel(c0, c1, c2, fetch, L, self.cpu_handoff_s(1), max(0.0, multi))
        # a pass's copies run back to back on the stream: the marginal copy is the pipelined one
        return LinearVerifyModel(c0, c1, c2, self.copy_b2b_s, L, max(0.0, self.copy_s - self.copy_b2b_s),
                                 max(0.0, multi))

    def copy_end_s(self, issue_s: float, stream_free_s: float) -> tuple[float, float]:
        """(start, end) of one expert copy issued at ``issue_s`` on a FIFO stream free from
        ``stream_free_s``: queued behind a copy (it starts as that one ends) it is pipelined
        (``copy_b2b_s``); on an idle stream it pays the isolated cost."""
        if stream_free_s >= issue_s:
            return stream_free_s, stream_free_s + self.copy_b2b_s
        return issue_s, issue_s + self.copy_s

    # ------------------------------------------------------------------ drafter
    def draft_level_cost(self, n_tokens: int, kv: int, costs) -> tuple[float, dict, dict]:
        """(duration, energy by device, busy by device) of one drafter forward over ``n_tokens``: on
        the GPU at ``moe.weight_bytes_per_param``; on the NPU or the PIM drafter ranks with the run's
        drafter spec (INT8, like the other modes). ``draft`` is the standalone model or the EAGLE
        head (:mod:`ahasd_sim.moe.drafter`), which runs on the GPU."""
        dev = self.moe_cfg.drafter_device
        ops = forward_ops(self.draft, int(n_tokens), self._kv(kv))
        if dev == "gpu":
            c: OpCost = self.gpu.forward_cost(ops)
            return c.duration_s, dict(c.energy_j_by_device), {"gpu": c.duration_s}
        if dev == "npu":  # mobile drafters run the run's (INT8) drafter spec, as everywhere else
            c = self.platform.forward_cost(costs.ops(costs.draft, int(n_tokens), self._kv(kv)), "npu")
            return c.duration_s, dict(c.energy_j_by_device), {"npu": c.duration_s}
        task = costs._pim_forward(costs.ops(costs.draft, int(n_tokens), self._kv(kv)),
                                  costs.partition.draft_ranks)
        return task.duration_s, dict(task.energy_j), dict(task.busy_s)


@dataclass
class LayerRecord:
    layer: int
    dense_start_s: float
    dense_end_s: float
    copies: int
    copy_start_s: float      # first copy of this layer (nan if none)
    copy_end_s: float        # last copy of this layer (nan if none)
    experts_ready_s: float   # every expert of the layer resident (copy ends, in-flight prefetches)
    expert_start_s: float
    expert_end_s: float
    distinct: int


@dataclass
class VerifyResult:
    end_s: float
    gpu_busy_s: float
    copied_experts: int
    hits: int
    misses: int
    distinct_total: int
    layers: list[LayerRecord]
    h2d_free_s: float
    copy_intervals: list[tuple[float, float]]
    wasted_prefetch: int = 0      # next_layer copies of experts the layer did not route to
    cpu_experts: int = 0          # expert runs on the host CPU (expert_execution cpu / mixed)
    cpu_intervals: list | None = None   # [(start, end)] of the CPU's expert work
    cpu_busy_s: float = 0.0


def schedule_verify(cost: MoeCostModel, cache, unions, n_tokens: int, kv: int, now_s: float,
                    h2d_free_s: float, overlap: str = "none", prefetch_guess=None, execution: str = "gpu",
                    token_counts=None) -> VerifyResult:
    """Analytic schedule of one verification pass starting at ``now_s``.

    ``unions[l]``: distinct experts layer l needs. Copies go FIFO on one stream that is free from
    ``h2d_free_s`` (earlier prefetches may still be in flight); a copy queued behind another is
    pipelined (:meth:`MoeCostModel.copy_end_s`). Causality: the expert compute of a layer starts
    at or after the end of every copy that brings one of its experts in (and after the ready time
    of cached experts whose prefetch is still in flight). No copy evicts an expert this pass still
    needs (:class:`~ahasd_sim.moe.cache.PassPins`).

    ``overlap="next_layer"``: when layer l starts, the experts ``prefetch_guess(l, unions)``
    predicts for layer l+1 are copied (a guess from layer l's routing, known once layer l's
    router ran -- never layer l+1's); wrong guesses cost copy time and cache slots, layer l+1's
    missed experts are copied on demand after its router. ``prefetch_guess=None`` is the oracle
    (the true layer l+1 union).

    ``execution`` ``cpu``: a layer's resident experts run on the GPU, the others on the host CPU
    (:meth:`MoeCostModel.cpu_expert_time_s`, one after another at the CPU's full bandwidth, after
    the hidden states' hand-off), in parallel with the GPU's part; nothing is copied. ``mixed``:
    a missing expert is copied when its copy is quicker than its CPU run (``token_counts[l][e]``
    tokens routed to it), else it runs on the CPU. The next layer starts when both parts end.
    """
    L = len(unions)
    dense_l, head = cost.dense_times(n_tokens, kv)
    copy_s = cost.copy_s
    ready = [0.0] * L
    ncopies = [0] * L
    cstart = [float("nan")] * L
    cend = [float("nan")] * L
    hits = misses = copied = 0
    intervals: list[tuple[float, float]] = []

    sets = [{int(e) for e in u} for u in unions]
    wasted = 0

    def copy(layer: int, e: int, issue_s: float, pins, keep_only: bool = False) -> float | None:
        """One copy on the stream; ``keep_only``: a guess, made only if the cache can keep it."""
        nonlocal copied, h2d_free_s
        start, end = cost.copy_end_s(issue_s, h2d_free_s)
        if not cache.insert(layer, e, end, pins) and keep_only:
            return None
        h2d_free_s = end
        copied += 1
        if ncopies[layer] == 0:
            cstart[layer] = start
        cend[layer] = end
        ncopies[layer] += 1
        if intervals and abs(intervals[-1][1] - start) <= 1e-15:
            intervals[-1] = (intervals[-1][0], end)
        else:
            intervals.append((start, end))
        return end

    def fetch(layer: int, issue_s: float) -> None:
        """Demand fetch of layer's experts once its routing is known at ``issue_s``."""
        nonlocal hits, misses
        r = issue_s
        pins = PassPins(sets, layer)
        for e in unions[layer]:
            e = int(e)
            if cache.access(layer, e):
                hits += 1
                rs = cache.ready_s((layer, e))
                if rs > issue_s:
                    cache.late_hits += 1
                r = max(r, rs)
            else:
                misses += 1
                r = max(r, copy(layer, e, issue_s, pins))
        ready[layer] = r

    def guess_fetch(layer: int, issue_s: float) -> None:
        """Speculative copies for ``layer`` (not accesses: the router has not run yet)."""
        nonlocal wasted
        guess = sets[layer] if prefetch_guess is None else prefetch_guess(layer, unions)
        pins = PassPins(sets, layer - 1)
        for e in sorted(int(x) for x in guess):
            if (layer, e) in cache:
                continue
            if copy(layer, e, issue_s, pins, keep_only=True) is not None and e not in sets[layer]:
                wasted += 1

    def count(layer: int, e: int) -> int:
        if token_counts is None:
            return max(1, -(-n_tokens * cost.target.n_active_experts // max(1, len(unions[layer]))))
        return int(token_counts[layer].get(e, 1))

    def split(layer: int, issue_s: float) -> tuple[list[int], list[int]]:
        """(GPU experts, CPU experts) of ``layer``; mixed: copies the misses a copy serves better."""
        nonlocal hits, misses
        r = issue_s
        pins = PassPins(sets, layer)
        on_gpu, on_cpu = [], []
        for e in unions[layer]:
            e = int(e)
            if cache.access(layer, e):
                hits += 1
                r = max(r, cache.ready_s((layer, e)))
                on_gpu.append(e)
                continue
            misses += 1
            if execution == "mixed" and cost.copy_s < cost.cpu_expert_time_s(count(layer, e)):
                r = max(r, copy(layer, e, issue_s, pins))
                on_gpu.append(e)
            else:
                on_cpu.append(e)
        ready[layer] = r
        return on_gpu, on_cpu

    t = now_s
    busy = cpu_busy = 0.0
    n_cpu = 0
    cpu_iv: list[tuple[float, float]] = []
    records = []
    cache.begin_pass()
    for layer in range(L):
        d0, d1 = t, t + dense_l
        if execution == "gpu":
            fetch(layer, d1)  # routing of this layer is known once its router ran
            if overlap == "next_layer" and layer + 1 < L:
                guess_fetch(layer + 1, d1)   # guessed from layer l's routing, issued behind its demand copies
            e0 = max(d1, ready[layer])
            e1 = e0 + cost.expert_time_s(n_tokens, len(unions[layer]))
            end_l = e1
        else:
            on_gpu, on_cpu = split(layer, d1)
            e0 = max(d1, ready[layer])
            e1 = e0 + (cost.expert_time_s(n_tokens, len(on_gpu), sum(count(layer, e) for e in on_gpu))
                       if on_gpu else 0.0)
            end_l = e1
            if on_cpu:
                c0 = d1 + cost.cpu_handoff_s(n_tokens)
                c1 = c0 + sum(cost.cpu_expert_time_s(count(layer, e)) for e in on_cpu)
                cpu_iv.append((c0, c1))
                cpu_busy += c1 - c0
                n_cpu += len(on_cpu)
                end_l = max(e1, c1)
        busy += (d1 - d0) + (e1 - e0)
        records.append(LayerRecord(layer, d0, d1, ncopies[layer], cstart[layer], cend[layer], ready[layer],
                                   e0, e1, len(unions[layer])))
        t = end_l
    end = t + head
    busy += head
    return VerifyResult(end, busy, copied, hits, misses, int(sum(len(u) for u in unions)), records,
                        h2d_free_s, intervals, wasted, n_cpu, cpu_iv, cpu_busy)
