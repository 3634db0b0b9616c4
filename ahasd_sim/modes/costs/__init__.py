"""Task costs: which hardware unit runs which operator of a forward pass.

This is where execution modes meet the hardware models. Each method returns a
:class:`~ahasd_sim.modes.base.TaskCost` (duration, dynamic energy per device,
busy time per device) for one task, computed from the operator graph
(:mod:`ahasd_sim.workload.ops`) and the unit models (:mod:`ahasd_sim.hw`).
Results are cached per (task, tokens, KV length rounded up to
``run.kv_len_quantum_tokens``), so long runs do not recompute identical costs.

Mapping rules: drafting runs on the drafter's PIM ranks (GEMV),
nonlinear ops on the AAU when present, otherwise on the NPU vector unit with
their operands crossing the external bus; verification runs on the NPU,
streaming target weights and KV over the bus; pre-verification runs the target
on its own PIM ranks.

One module per device, and one per mode family that spans devices; :class:`StepCosts` is
their union (each part is a mixin without state of its own, so a call costs what it did as
one class):

* :mod:`.common`: the caches, the operator graphs, the KV rounding, a forward run op after op,
  one operator's cost on a named device (:mod:`.affine`: the graphs at many KV lengths);
* :mod:`.pim`: drafting, pre-verification, the target on every rank, the GTS switch,
  shared-rank contention;
* :mod:`.npu`: verification, layer splits, prefill on the host;
* :mod:`.gpu`: GPU forwards with H2D weight streaming;
* :mod:`.baseline`: the single-device autoregressive baselines (``baseline.device``);
* :mod:`.operator_sync`: operator_sync's per-operator host/PIM assignment and tiers;
* :mod:`.drafter`: the model-free (lookup) drafter on the CPU;
* :mod:`.tree`: draft trees (a level's drafter forward, one-pass tree verification).
"""
from __future__ import annotations

from .baseline import BaselineCosts
from .common import CommonCosts
from .drafter import DrafterCosts
from .gpu import GpuCosts
from .npu import NpuCosts
from .operator_sync import OperatorSyncCosts
from .pim import PimCosts
from .tree import TreeCosts

__all__ = ["StepCosts"]


class StepCosts(NpuCosts, PimCosts, GpuCosts, BaselineCosts, OperatorSyncCosts, DrafterCosts, TreeCosts,
                CommonCosts):
    """Costs of the tasks a mode schedules, for one (platform, drafter, target)."""
