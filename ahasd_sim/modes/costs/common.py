"""What every device's step costs share: the process-wide caches, the operator graphs, the
KV rounding, a forward run op after op, and one operator's cost on a named device."""
from __future__ import annotations

import math
from typing import Any

from ...hw.cost import OpCost
from ..base import TaskCost
from .affine import _affine_ops


# Process-wide cache of per-operator costs: (hardware fingerprint, unit, ranks, Operator) -> OpCost.
# Operators are frozen dataclasses, so a projection whose shape does not depend on the KV length
# is the same key at every KV length; sweeps and repeated runs reuse each other's work.
_OP_COST_CACHE: dict[tuple, OpCost] = {}
_OP_COST_CACHE_MAX = 500_000

# Process-wide task-cost tables, one per (config, drafter, target) and one per (NPU + LPDDR5,
# KV quantum, drafter, target) for the tasks that run on the NPU alone: every window of a run
# (and every repeat of a benchmark) builds a StepCosts from the same config, and a task's cost is
# a pure function of these, so windows share one table instead of recomputing each cost.
_TASK_COST_TABLES: dict[tuple, dict[tuple, TaskCost]] = {}
_TASK_COST_TABLES_MAX = 64

# Operator graphs per (model, tokens, KV length, KV quantum), shared by the tasks that cost them.
_OPS_CACHE: dict[tuple, tuple] = {}
_OPS_CACHE_MAX = 20_000

_MEMOS = ("memos by exact arguments",)   # a key no task uses, in a configuration's cost table


def _task_table(key: tuple) -> dict:
    """The process-wide task-cost table under ``key`` (made empty when new; the tables are all
    dropped when there are too many)."""
    table = _TASK_COST_TABLES.get(key)
    if table is None:
        if len(_TASK_COST_TABLES) >= _TASK_COST_TABLES_MAX:
            _TASK_COST_TABLES.clear()
        table = _TASK_COST_TABLES[key] = {}
    return table


class CommonCosts:
    """The part of :class:`~ahasd_sim.modes.costs.StepCosts` every device uses: the
    configuration, the placement, the cost tables and the per-operator cost cache."""

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
            from ..placement import place_untuned, resolve_placement
            # pinned, or the mode's best on the tuning data (a mode that tunes none: the first that fits)
            self.partition, self.placement = place_untuned(platform.pim, draft_spec, target_spec, cfg,
                                                           resolve_placement(cfg))
        self._cache: dict[tuple, TaskCost] = _task_table((cfg.fingerprint(), repr(draft_spec), repr(target_spec)))
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
        # a package power cap's split depends on the mode (host streams overlap PIM or not)
        cap = platform.pim.cap_key() if platform.pim is not None else ""
        # ... and the precision's widening work on the NPU (two precisions can share operator shapes)
        cap += f"|deq:{platform.npu.dequant_ops_per_weight!r}" if platform.npu is not None else ""
        self._hw_key += "|" + cap
        # An NPU (GPU) operator's cost depends on the NPU (GPU) and the LPDDR5 it streams from
        # alone (Npu(cfg.npu, memory), Gpu(cfg.gpu, memory), the bus bandwidth from cfg.memory):
        # keyed by those, the configurations of a sweep over PIM, drafting or placement (and a
        # point's placement-tuning runs) share the host's operator costs and its verification
        # and prefill tables instead of building them again.
        self._npu_key = "npu|" + repr(cfg.npu) + "|" + repr(cfg.memory) + "|" + cap
        self._gpu_key = "gpu|" + repr(cfg.gpu) + "|" + repr(cfg.memory)
        self._npu_cache: dict[tuple, Any] = _task_table((self._npu_key, self.quantum, repr(draft_spec),
                                                         repr(target_spec)))
        if getattr(draft_spec, "kind", "model") == "lookup":
            self._install_lookup()

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

    def _op_cost(self, unit: str, ranks: int, op, fn, hw_key: str | None = None) -> OpCost:
        key = (self._hw_key if hw_key is None else hw_key, unit, ranks, op)
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

    def _cached(self, key: tuple, fn, table: dict | None = None) -> TaskCost:
        """``fn()`` memoised under ``key`` in the configuration's table (``table``: another one,
        e.g. the NPU's own, for tasks that run on the NPU alone)."""
        if table is None:
            table = self._cache
        c = table.get(key)
        if c is None:
            c = table[key] = fn()
        return c

    @property
    def bus_bw(self) -> float:
        return self.p.memory.effective_bandwidth_bytes_s

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

    def _op_on(self, op, dev: str, role: str) -> OpCost:
        """One occurrence of ``op`` of ``role``'s model on ``dev``: the NPU, the GPU, else PIM
        (the role's ranks, :meth:`~ahasd_sim.modes.costs.pim.PimCosts._pim_side`)."""
        if dev == "npu":
            return self._op_cost("npu", 0, op, lambda o: self.p.npu.op_cost(o, self.bus_bw), self._npu_key)
        if dev == "gpu":
            # GPU-mapped operators read their weights from GPU memory (roofline, no launch overhead).
            return self._op_cost("gpu", 0, op, self.p.gpu.op_cost, self._gpu_key)
        ranks = self.partition.draft_ranks if role == "draft" else self.partition.target_ranks
        return self._pim_side(op, ranks)[0]
