"""Task costs: which hardware unit runs which operator of a forward pass.

This is where execution modes meet the hardware models. Each method returns a
:class:`~ahasd_sim.modes.base.TaskCost` (duration, dynamic energy per device,
busy time per device) for one task, computed from the operator graph
(:mod:`ahasd_sim.workload.ops`) and the unit models (:mod:`ahasd_sim.hw`).
Results are cached per (task, tokens, KV length rounded up to
``run.kv_len_quantum_tokens``), so long runs do not recompute identical costs.

Mapping rules (issue 4): drafting runs on the drafter's PIM ranks (GEMV),
nonlinear ops on the AAU when present, otherwise on the NPU vector unit with
their operands crossing the external bus; verification runs on the NPU,
streaming target weights and KV over the bus; pre-verification runs the target
on its own PIM ranks.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from functools import lru_cache
from typing import Any

from ..config.errors import ConfigError
from ..hw.cost import OpCost
from ..hw.gpu import double_buffered_time_s
from ..hw.sharing import FlowSpec, maxmin_rates, two_flow_span
from ..workload.ops import OpKind, forward_ops
from .base import TaskCost

_ELEMENTWISE = (OpKind.NONLINEAR, OpKind.REDUCTION)


def _task(cost: OpCost, busy: dict[str, float]) -> TaskCost:
    return TaskCost(cost.duration_s, dict(cost.energy_j_by_device), busy, cost.bus_bytes)


# Process-wide cache of per-operator costs: (hardware fingerprint, unit, ranks, Operator) -> OpCost.
# Operators are frozen dataclasses, so a projection whose shape does not depend on the KV length
# is the same key at every KV length; sweeps and repeated runs reuse each other's work.
_OP_COST_CACHE: dict[tuple, OpCost] = {}
_OP_COST_CACHE_MAX = 500_000

# Process-wide task-cost tables, one per (config, drafter, target): every window of a run (and
# every repeat of a benchmark) builds a StepCosts from the same config, and a task's cost is a
# pure function of these, so windows share one table instead of recomputing each cost.
_TASK_COST_TABLES: dict[tuple, dict[tuple, TaskCost]] = {}
_TASK_COST_TABLES_MAX = 32

# Operator graphs per (model, tokens, KV length, KV quantum), shared by the tasks that cost them.
_OPS_CACHE: dict[tuple, tuple] = {}
_OPS_CACHE_MAX = 20_000

_NUMERIC = ("flops", "macs", "weight_bytes", "act_bytes_in", "act_bytes_out", "kv_bytes", "elements")


class _AffineOps:
    """forward_ops(model, n, kv) for many kv without rebuilding the graph each time.

    For a fixed token count every operator field is affine in the KV length (attention reads
    and computes over kv + causal tokens); the coefficients are taken from two KV lengths and
    checked exactly against a third, otherwise the graph builder is called directly.
    """

    def __init__(self, model, n_tokens: int, kv_probe: int):
        self.model, self.n = model, n_tokens
        k0, k1, k2 = kv_probe, 2 * kv_probe, 3 * kv_probe + 7
        a, b, c = (forward_ops(model, n_tokens, k) for k in (k0, k1, k2))
        self.base = a
        self.varying: list[tuple[int, dict[str, tuple[float, float, type]]]] = []
        self.exact = len(a) == len(b) == len(c)
        if self.exact:
            for i, (x, y, z) in enumerate(zip(a, b, c)):
                if x == y == z:
                    continue
                coeffs = {}
                for f in _NUMERIC:
                    vx, vy, vz = getattr(x, f), getattr(y, f), getattr(z, f)
                    slope = (vy - vx) / (k1 - k0)
                    icpt = vx - slope * k0
                    if abs(icpt + slope * k2 - vz) > 1e-9 * max(1.0, abs(vz)):
                        self.exact = False
                    coeffs[f] = (icpt, slope, type(vx))
                # the PIM layout (rows, cols, vectors, element bytes) is affine in kv element-wise
                gx, gy, gz = x.pim_gemv, y.pim_gemv, z.pim_gemv
                if not len(gx) == len(gy) == len(gz):
                    self.exact = False
                layout = []
                for vx, vy, vz in zip(gx, gy, gz):
                    slope = (vy - vx) / (k1 - k0)
                    icpt = vx - slope * k0
                    if abs(icpt + slope * k2 - vz) > 1e-9 * max(1.0, abs(vz)):
                        self.exact = False
                    layout.append((icpt, slope, type(vx)))
                coeffs["pim_gemv"] = tuple(layout)
                self.varying.append((i, coeffs))

    def at(self, kv: int):
        if not self.exact:
            return forward_ops(self.model, self.n, kv)
        ops = list(self.base)
        def value(a, b, t):
            return t(round(a + b * kv)) if t is int else t(a + b * kv)
        for i, coeffs in self.varying:
            fields = {f: value(*c) for f, c in coeffs.items() if f != "pim_gemv"}
            fields["pim_gemv"] = tuple(value(*c) for c in coeffs["pim_gemv"])
            ops[i] = dataclasses.replace(ops[i], **fields)
        return tuple(ops)


@lru_cache(maxsize=4096)
def _affine_ops(model, n_tokens: int, kv_probe: int) -> _AffineOps:
    return _AffineOps(model, n_tokens, kv_probe)


_MEMOS = ("memos by exact arguments",)   # a key no task uses, in a configuration's cost table


class StepCosts:
    """Costs of the tasks a mode schedules, for one (platform, drafter, target)."""

    def __init__(self, platform, draft_spec, target_spec, cfg):
        self.p = platform
        self.draft = draft_spec
        self.target = target_spec
        self.cfg = cfg
        self.quantum = cfg.run.kv_len_quantum_tokens
        self.partition = None
        self.placement = None
        self._auto_device: str | None = None     # baseline.device auto, once chosen
        if platform.pim is not None:
            from .placement import place_models, resolve_placement
            self.placement = resolve_placement(cfg)      # pinned, or the mode's best on the tuning data
            self.partition = place_models(platform.pim, draft_spec, target_spec, cfg, self.placement.policy)
        table_key = (cfg.fingerprint(), repr(draft_spec), repr(target_spec))
        self._cache: dict[tuple, TaskCost] = _TASK_COST_TABLES.get(table_key)
        if self._cache is None:
            if len(_TASK_COST_TABLES) >= _TASK_COST_TABLES_MAX:
                _TASK_COST_TABLES.clear()
            self._cache = _TASK_COST_TABLES[table_key] = {}
        # Memos by exact arguments (a task asked again skips the KV rounding and the key), kept in
        # the configuration's table like the costs themselves, so later windows start warm:
        # exact KV length -> draft_token cost (the drafter loop reads it directly), and
        # (task, arguments) -> verify / preverify cost or layer split.
        memos = self._cache.get(_MEMOS)
        if memos is None:
            memos = self._cache[_MEMOS] = ({}, {})
        self.draft_costs_by_kv: dict[int, TaskCost] = memos[0]
        self._memo: dict[tuple, Any] = memos[1]
        # Fingerprint of everything a unit cost depends on (the hardware sections; dataclass
        # reprs are complete and deterministic).
        self._hw_key = "|".join(repr(getattr(cfg, k)) for k in ("npu", "memory", "pim", "gpu", "h2d"))

    def ops(self, model, n_tokens: int, kv: int):
        # a pass's cost, its layer split and the pre-verification over the same tokens all ask
        # for the same operator graph: build it once (a pure function of these arguments)
        key = (model, n_tokens, kv, self.quantum)
        g = _OPS_CACHE.get(key)
        if g is None:
            if len(_OPS_CACHE) >= _OPS_CACHE_MAX:
                _OPS_CACHE.clear()
            g = _OPS_CACHE[key] = _affine_ops(model, n_tokens, self.quantum).at(kv)
        return g

    def _op_cost(self, unit: str, ranks: int, op, fn) -> OpCost:
        key = (self._hw_key, unit, ranks, op)
        c = _OP_COST_CACHE.get(key)
        if c is None:
            if len(_OP_COST_CACHE) > _OP_COST_CACHE_MAX:
                _OP_COST_CACHE.clear()
            c = _OP_COST_CACHE[key] = fn(op)
        return c

    # ------------------------------------------------------------ helpers
    def _kv(self, kv_len: int) -> int:
        q = self.quantum
        return max(q, int(math.ceil(kv_len / q)) * q)

    def _cached(self, key: tuple, fn) -> TaskCost:
        c = self._cache.get(key)
        if c is None:
            c = self._cache[key] = fn()
        return c

    @property
    def bus_bw(self) -> float:
        return self.p.memory.effective_bandwidth_bytes_s

    def _pim_side(self, op, ranks: int) -> tuple[OpCost, str]:
        """Cost of one occurrence of ``op`` of a PIM-resident model; returns (cost, busy device).

        Nonlinear ops run on the AAUs of the model's ranks, or, without AAU, on the host
        (NPU vector unit) with operands crossing the external bus (Platform.offload_cost).
        """
        cost = self._op_cost("pim", ranks, op, lambda o: self.p.pim_op_cost(o, ranks))
        if op.kind in _ELEMENTWISE and not self.p.aau.enabled:
            return cost, "npu.vector"
        return cost, "pim"

    @staticmethod
    def _sequential(ops, unit_cost) -> TaskCost:
        """One forward pass run op after op: ``unit_cost(op) -> (OpCost, busy device)`` per
        occurrence, times ``layer_repeat``; durations, energies, busy time and bus bytes add."""
        dur = 0.0
        energy: dict[str, float] = {}
        busy: dict[str, float] = {}
        nbytes = 0.0
        for op in ops:
            cost, dev = unit_cost(op)
            r = op.layer_repeat
            dur += cost.duration_s * r
            nbytes += cost.bus_bytes * r
            busy[dev] = busy.get(dev, 0.0) + cost.duration_s * r
            for d, e in cost.energy_j_by_device.items():
                energy[d] = energy.get(d, 0.0) + e * r
        return TaskCost(dur, energy, busy, nbytes)

    def _pim_forward(self, ops, ranks: int) -> TaskCost:
        # bus bytes are non-zero only for nonlinear ops offloaded without AAU
        return self._sequential(ops, lambda op: self._pim_side(op, ranks))

    # ------------------------------------------------------------ NPU + PIM tasks
    def draft_token(self, kv_len: int) -> TaskCost:
        """One drafter forward (one token) on the drafter's PIM ranks."""
        c = self.draft_costs_by_kv.get(kv_len)   # asked once per drafted token: skip the rounding + key
        if c is None:
            kv = self._kv(kv_len)
            c = self.draft_costs_by_kv[kv_len] = self._cached(("draft", kv), lambda: self._pim_forward(
                self.ops(self.draft, 1, kv), self.partition.draft_ranks))
        return c

    def preverify(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Target forward over ``n_tokens`` on the target's PIM ranks (TVC pre-verification)."""
        memo_key = ("preverify", n_tokens, kv_len)      # exact arguments: skips the rounding
        c = self._memo.get(memo_key)
        if c is None:
            kv = self._kv(kv_len)
            c = self._memo[memo_key] = self._cached(("preverify", n_tokens, kv), lambda: self._pim_forward(
                self.ops(self.target, n_tokens, kv), self.partition.target_ranks))
        return c

    def verify(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Target forward over ``n_tokens`` on the NPU (weights and KV streamed over the bus)."""
        memo_key = ("verify", n_tokens, kv_len)
        c = self._memo.get(memo_key)
        if c is not None:
            return c
        kv = self._kv(kv_len)

        def make():
            return self._sequential(self.ops(self.target, n_tokens, kv),
                                    lambda op: (self._op_on(op, "npu", "target"), "npu"))
        c = self._memo[memo_key] = self._cached(("verify", n_tokens, kv), make)
        return c

    def layer_split(self, task: str, n_tokens: int, kv_len: int) -> tuple[int, float, float]:
        """(layers, time of one layer, time of the head ops after the last layer) of a target pass
        on the NPU (``task="verify"``) or on the target's PIM ranks (``"preverify"``)."""
        memo_key = ("layers", task, n_tokens, kv_len)
        c = self._memo.get(memo_key)
        if c is None:
            c = self._memo[memo_key] = self._layer_split(task, n_tokens, kv_len)
        return c

    def _layer_split(self, task: str, n_tokens: int, kv_len: int) -> tuple[int, float, float]:
        kv = self._kv(kv_len)

        def make():
            ops = self.ops(self.target, n_tokens, kv)
            per_layer = [op for op in ops if op.per_layer]
            head = [op for op in ops if not op.per_layer]
            if task == "verify":
                one = lambda op: (self._op_on(op, "npu", "target"), "npu")  # noqa: E731
            else:
                one = lambda op: self._pim_side(op, self.partition.target_ranks)  # noqa: E731
            layer_s = sum(one(op)[0].duration_s for op in per_layer)
            head_s = sum(one(op)[0].duration_s * op.layer_repeat for op in head)
            n_layers = per_layer[0].layer_repeat if per_layer else 1
            return n_layers, layer_s, head_s
        return self._cached(("layers", task, n_tokens, kv), make)

    # ------------------------------------------------------------ shared-rank contention
    @property
    def host_share(self) -> float:
        """Host's share of a PIM-active rank's time; 1.0 when contention is not modelled."""
        if self.p.pim is None or not self.cfg.pim.shared_rank_contention:
            return 1.0
        return self.cfg.pim.host_share_of_active_rank

    def sharing_specs(self) -> dict[str, FlowSpec] | None:
        """Flow kinds of the tasks that share the PIM ranks (:mod:`ahasd_sim.hw.sharing`), or
        None when contention is not modelled.

        Resources: the bank time of the ranks holding both models (``shared``, striped
        allocation) and of the ranks holding only the target (``target_only``). An NPU pass
        streams the target's bytes, the fraction ``target_shared_fraction`` of them (and of its
        time at full speed) from the shared ranks; a drafter forward is a GEMV striped over the
        drafter's ranks, every part as long as the others, so its parts on the shared ranks keep
        those ranks busy for its whole length and set its pace (the parts on drafter-only ranks,
        which nothing else uses, finish no later); a pre-verification computes on every target
        rank. Weights: the host's command stream ``host_share``, PIM's ``1 - host_share``."""
        share = self.host_share
        if share >= 1.0 or self.partition is None:
            return None
        key = ("sharing specs", share)
        c = self._memo.get(key)
        if c is None:
            f = self.partition.target_shared_fraction
            both = 1.0 if self.partition.shared_ranks else 0.0
            c = self._memo[key] = {
                "verify": FlowSpec("verify", {"shared": f, "target_only": 1.0 - f}, share),
                "draft": FlowSpec("draft", {"shared": both}, 1.0 - share),
                "preverify": FlowSpec("preverify", {"shared": both, "target_only": 1.0}, 1.0 - share)}
        return c

    def _tier_args(self, share: float) -> tuple[FlowSpec, FlowSpec, tuple[float, float]]:
        """operator_sync's two flows of a tier: the host's operators stream the very ranks the
        PIM operators compute on (both use all of their bank time at full speed), weighted like
        :meth:`sharing_specs`; with their max-min rates."""
        key = ("tier specs", share)
        c = self._memo.get(key)
        if c is None:
            h = FlowSpec("host", {"ranks": 1.0}, share)
            p = FlowSpec("pim", {"ranks": 1.0}, 1.0 - share)
            c = self._memo[key] = (h, p, tuple(maxmin_rates((h, p))))
        return c

    def gts_switch(self) -> TaskCost:
        def make():
            c = self.p.gts.switch_cost()
            return _task(c, {"pim": c.duration_s})
        return self._cached(("gts",), make)

    # ------------------------------------------------------------ single-device baselines
    def baseline_devices(self) -> tuple[str, ...]:
        """Devices of this platform that can run the target autoregressively."""
        return tuple(d for d in ("gpu", "npu", "pim") if getattr(self.p, d, None) is not None)

    def _baseline_device(self) -> str:
        dev = self.cfg.baseline.device
        if dev == "auto":
            c = self._auto_device
            if c is None:
                devs = self.baseline_devices()
                if not devs:
                    raise ConfigError("", "baseline.device", "autoregressive decoding needs a GPU, an NPU or PIM")
                kv = self.cfg.baseline.auto_reference_kv_tokens
                # the fastest one-token forward; ties keep the order gpu, npu, pim
                c = self._auto_device = min(devs, key=lambda d: self._target_forward_on(d, 1, kv).duration_s)
            return c
        if getattr(self.p, dev, None) is None:
            raise ConfigError("", "baseline.device", f"is {dev}, but this platform has no {dev.upper()} "
                              f"({dev}.enabled is false); use auto or a device the platform has")
        return dev

    def target_forward(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Autoregressive decoding step of the target on the baseline device."""
        return self._target_forward_on(self._baseline_device(), n_tokens, kv_len)

    def _target_forward_on(self, dev: str, n_tokens: int, kv_len: int) -> TaskCost:
        if dev == "gpu":
            return self._gpu_forward(self.target, n_tokens, kv_len, resident_other=0)
        if dev == "pim":
            return self.pim_target_forward(n_tokens, kv_len)
        if self.p.npu is None:
            raise ConfigError("", "baseline.device", "autoregressive decoding needs a GPU or an NPU")
        return self.verify(n_tokens, kv_len)

    def pim_target_forward(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Target forward over ``n_tokens`` on every PIM rank (autoregressive on PIM: the target is
        the only model, striped over all ranks; nonlinear ops on the AAUs, or on the NPU without)."""
        kv = self._kv(kv_len)
        ranks = self.p.pim.cfg.ranks
        return self._cached(("pim_ar", n_tokens, kv), lambda: self._pim_forward(
            self.ops(self.target, n_tokens, kv), ranks))

    def _gpu_forward(self, model, n_tokens: int, kv_len: int, resident_other: float) -> TaskCost:
        kv = self._kv(kv_len)

        def make():
            gpu = self.p.gpu
            cost = gpu.forward_cost(self.ops(model, n_tokens, kv))
            # Weights that do not fit in GPU memory are streamed over H2D every forward.
            overflow = gpu.overflow_bytes(model.weight_bytes() + resident_other)
            share = min(overflow, model.weight_bytes())
            energy = dict(cost.energy_j_by_device)
            dur = cost.duration_s
            busy = {"gpu": cost.duration_s}
            if share > 0:
                if self.p.h2d is None:
                    raise ConfigError("", "gpu.memory_gib",
                                      f"{model.name} needs {share / 1e9:.1f} GB more than the GPU holds "
                                      f"and no h2d link is enabled to stream it")
                link = self.p.h2d.isolated_transfer_cost(share)   # the bytes' energy, whatever the overlap
                if gpu.cfg.weight_streaming == "serial":
                    dur += link.duration_s
                    busy["h2d"] = link.duration_s
                else:
                    dur, busy["h2d"] = self._overlapped_stream(self.ops(model, n_tokens, kv), cost.duration_s, share)
                for d, e in link.energy_j_by_device.items():
                    energy[d] = energy.get(d, 0.0) + e
            return TaskCost(dur, energy, busy, cost.bus_bytes)
        return self._cached(("gpu", model.name, n_tokens, kv, resident_other), make)

    def _overlapped_stream(self, ops, compute_s: float, stream_bytes: float) -> tuple[float, float]:
        """(forward span, h2d busy time) of a GPU forward that streams ``stream_bytes`` of its
        weights double-buffered, layer by layer (``gpu.weight_streaming: overlapped``).

        Units of the pipeline: the model's layers, then the head ops. The streamed bytes are spread
        over the units in proportion to their weight bytes (the runtime offloads the same share of
        every layer); each unit's transfer pays the link's per-transfer latency. A layer's compute
        is the forward's compute (with launch overheads) less the head, over the layers."""
        gpu, link = self.p.gpu, self.p.h2d
        per_layer = [op for op in ops if op.per_layer]
        head = [op for op in ops if not op.per_layer]
        n_layers = per_layer[0].layer_repeat if per_layer else 0
        head_s = sum(gpu.op_cost(op).duration_s * op.layer_repeat for op in head)
        layer_s = (compute_s - head_s) / n_layers if n_layers else 0.0
        w_layer = sum(op.weight_bytes for op in per_layer)
        w_head = sum(op.weight_bytes * op.layer_repeat for op in head)
        w_total = w_layer * n_layers + w_head
        if w_total <= 0:
            t = link.isolated_transfer_time_s(stream_bytes)
            return compute_s + t, t
        s_layer = link.isolated_transfer_time_s(stream_bytes * w_layer / w_total) if w_layer > 0 else 0.0
        s_head = link.isolated_transfer_time_s(stream_bytes * w_head / w_total) if w_head > 0 else 0.0
        compute = [layer_s] * n_layers + [head_s]
        stream = [s_layer] * n_layers + [s_head]
        return double_buffered_time_s(compute, stream), s_layer * n_layers + s_head

    def baseline_prefill(self, n_tokens: int) -> TaskCost:
        """Prefill of the target alone on the autoregressive baseline device."""
        dev = self._baseline_device()
        if dev == "gpu":
            return self._gpu_forward(self.target, max(1, n_tokens), 0, resident_other=0)
        if dev == "pim" and self.p.npu is None:
            return self.pim_target_forward(max(1, n_tokens), 0)
        # PIM decoding prefills on the NPU (a compute-bound GEMM over the prompt, as every mode does)
        return self.prefill("target", n_tokens)

    def gpu_prefill(self, role: str, n_tokens: int) -> TaskCost:
        """Prefill of ``role``'s model over ``n_tokens`` prompt tokens on the GPU."""
        if role == "draft":
            return self._gpu_forward(self.draft, max(1, n_tokens), 0, resident_other=0)
        return self._gpu_forward(self.target, max(1, n_tokens), 0, resident_other=self.draft.weight_bytes())

    def prefill(self, role: str, n_tokens: int) -> TaskCost:
        """Prefill of ``role``'s model over ``n_tokens`` prompt tokens on the host (the NPU, else
        the GPU): one forward with an empty KV cache."""
        model = self.draft if role == "draft" else self.target
        n = max(1, int(n_tokens))
        if self.p.npu is None:
            return self._gpu_forward(model, n, 0, resident_other=0 if role == "draft" else self.draft.weight_bytes())
        kv = self._kv(0)
        return self._cached(("prefill", role, n, kv), lambda: self._sequential(
            self.ops(model, n, kv), lambda op: (self._op_on(op, "npu", role), "npu")))

    def gpu_draft_token(self, kv_len: int) -> TaskCost:
        # The drafter is loaded first and stays resident; the target takes what is left.
        return self._gpu_forward(self.draft, 1, kv_len, resident_other=0)

    def gpu_verify(self, n_tokens: int, kv_len: int) -> TaskCost:
        return self._gpu_forward(self.target, n_tokens, kv_len, resident_other=self.draft.weight_bytes())

    # ------------------------------------------------------------ operator-level synchronous
    @property
    def host(self) -> str:
        """Device that runs host-side operators in operator_sync: the NPU, else the GPU."""
        return "npu" if self.p.npu is not None else "gpu"

    def _op_on(self, op, dev: str, role: str) -> OpCost:
        if dev == "npu":
            return self._op_cost("npu", 0, op, lambda o: self.p.npu.op_cost(o, self.bus_bw))
        if dev == "gpu":
            # GPU-mapped operators read their weights from GPU memory (roofline, no launch overhead).
            return self._op_cost("gpu", 0, op, self.p.gpu.op_cost)
        ranks = self.partition.draft_ranks if role == "draft" else self.partition.target_ranks
        return self._pim_side(op, ranks)[0]

    def _tiers(self, model, n_tokens: int, kv: int):
        """Per-layer and head ops grouped by dependency tier: {(per_layer, tier): [ops]}."""
        groups: dict[tuple[int, int], list] = {}
        for op in self.ops(model, n_tokens, kv):
            groups.setdefault((op.layer_repeat, op.tier), []).append(op)
        return groups

    def _opsync_eval(self, model, role: str, n_tokens: int, kv: int, mapping: dict[str, str]):
        barrier = self.cfg.operator_sync.barrier_ns * 1e-9
        host = self.host
        dur = 0.0
        busy = {host: 0.0, "pim": 0.0}
        energy: dict[str, float] = {}
        nbytes = 0.0
        # The host's operators stream this model's weights from the very ranks whose PIM units run
        # the PIM-mapped operators of the same tier: they share those ranks' time (contention).
        share = self.host_share if host == "npu" else 1.0
        for (rep, _tier), ops in sorted(self._tiers(model, n_tokens, kv).items(), key=lambda kv_: kv_[0][1]):
            t = {host: 0.0, "pim": 0.0}
            for op in ops:
                dev = mapping.get(op.name, host)
                c = self._op_on(op, dev, role)
                t[dev] += c.duration_s
                nbytes += c.bus_bytes * rep
                for k, v in c.energy_j_by_device.items():
                    energy[k] = energy.get(k, 0.0) + v * rep
            if share < 1.0:    # the tier's host and PIM flows share the ranks (processor sharing)
                span, t_host, t_pim = two_flow_span(t[host], t["pim"], *self._tier_args(share))
            else:
                span, t_host, t_pim = max(t.values()), t[host], t["pim"]
            dur += (span + barrier) * rep
            busy[host] += t_host * rep
            busy["pim"] += t_pim * rep
        return dur, busy, energy, nbytes

    def opsync_mapping(self, draft_len: int) -> dict[str, dict[str, str]]:
        """Offline search of the host (NPU or GPU) / PIM assignment of every operator for draft length ``draft_len``.

        A round is ``draft_len`` drafter forwards plus one verification of ``draft_len + 1``
        tokens; its time is a sum over dependency tiers of max(NPU ops, PIM ops), so the
        exhaustive search decomposes exactly into one small search per tier and model.
        """
        kv = self._kv(self.cfg.ahasd.tvc_config.preload_kv_len)
        share = self.host_share if self.host == "npu" else 1.0
        specs = self._tier_args(share) if share < 1.0 else None
        out = {}
        for role, model, n in (("draft", self.draft, 1), ("target", self.target, draft_len + 1)):
            mapping: dict[str, str] = {}
            for _key, ops in sorted(self._tiers(model, n, kv).items(), key=lambda kv_: kv_[0][1]):
                best = None
                for combo in itertools.product((self.host, "pim"), repeat=len(ops)):
                    t = {self.host: 0.0, "pim": 0.0}
                    for op, dev in zip(ops, combo):
                        t[dev] += self._op_on(op, dev, role).duration_s
                    span = (two_flow_span(t["npu"], t["pim"], *specs)[0] if share < 1.0
                            else max(t.values()))
                    if best is None or span < best[0]:
                        best = (span, combo)
                mapping.update((op.name, dev) for op, dev in zip(ops, best[1]))
            out[role] = mapping
        return out

    def _opsync_overflow_bytes(self, mapping) -> dict[str, float]:
        """Per model, weight bytes of GPU-mapped operators that do not fit GPU memory.

        With a GPU host, operators mapped to the GPU read their weights from GPU memory; what
        exceeds it (both models' GPU-mapped weights together) is streamed over H2D in every
        forward, split between the models in proportion to their GPU-mapped bytes."""
        if self.host != "gpu":
            return {"draft": 0.0, "target": 0.0}
        kv = self._kv(self.quantum)
        gpu_bytes = {}
        for role, model in (("draft", self.draft), ("target", self.target)):
            gpu_bytes[role] = sum(op.weight_bytes * op.layer_repeat for op in self.ops(model, 1, kv)
                                  if mapping[role].get(op.name, self.host) == "gpu")
        total = sum(gpu_bytes.values())
        over = self.p.gpu.overflow_bytes(total)
        if over > 0 and self.p.h2d is None:
            raise ConfigError("", "h2d.enabled", f"operator_sync maps {total / 1e9:.1f} GB of weights to the GPU, "
                              f"{over / 1e9:.1f} GB more than it holds, and no h2d link is enabled to stream them")
        return {r: (over * b / total if total else 0.0) for r, b in gpu_bytes.items()}

    def opsync_forward(self, role: str, n_tokens: int, kv_len: int, mapping) -> TaskCost:
        kv = self._kv(kv_len)
        model = self.draft if role == "draft" else self.target

        def make():
            dur, busy, energy, nbytes = self._opsync_eval(model, role, n_tokens, kv, mapping[role])
            stream = self._opsync_overflow_bytes(mapping)[role]
            if stream > 0:
                link = self.p.h2d.isolated_transfer_cost(stream)
                dur += link.duration_s
                busy["h2d"] = link.duration_s
                for d, e in link.energy_j_by_device.items():
                    energy[d] = energy.get(d, 0.0) + e
            return TaskCost(dur, energy, busy, nbytes)
        return self._cached(("opsync", role, n_tokens, kv), make)
