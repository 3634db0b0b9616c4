"""Step costs on LPDDR5-PIM ranks: drafting on the drafter's ranks, pre-verification on the
target's, the target alone on every rank, the GTS switch, and the host's share of a rank the
PIM units also use (shared-rank contention)."""
from __future__ import annotations

from ...hw.cost import OpCost
from ...hw.sharing import FlowSpec, maxmin_rates
from ...workload.ops import OpKind
from ..base import TaskCost

_ELEMENTWISE = (OpKind.NONLINEAR, OpKind.REDUCTION)


def _task(cost: OpCost, busy: dict[str, float]) -> TaskCost:
    return TaskCost(cost.duration_s, dict(cost.energy_j_by_device), busy, cost.bus_bytes)


class PimCosts:
    """PIM step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

    def _pim_side(self, op, ranks: int) -> tuple[OpCost, str]:
        """Cost of one occurrence of ``op`` of a PIM-resident model; returns (cost, busy device).

        Nonlinear ops run on the AAUs of the model's ranks, or, without AAU, on the host
        (NPU vector unit) with operands crossing the external bus (Platform.offload_cost).
        """
        cost = self._op_cost("pim", ranks, op, lambda o: self.p.pim_op_cost(o, ranks))
        if op.kind in _ELEMENTWISE and not self.p.aau.enabled:
            return cost, "npu.vector"
        return cost, "pim"

    def _pim_forward(self, ops, ranks: int) -> TaskCost:
        # bus bytes: PIM protocol I/O (pim.protocol_io) and nonlinear ops offloaded without AAU
        return self._sequential(ops, lambda op: self._pim_side(op, ranks))

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

    def pim_target_forward(self, n_tokens: int, kv_len: int) -> TaskCost:
        """Target forward over ``n_tokens`` on every PIM rank (autoregressive on PIM: the target is
        the only model, striped over all ranks; nonlinear ops on the AAUs, or on the NPU without)."""
        kv = self._kv(kv_len)
        ranks = self.p.pim.cfg.ranks
        return self._cached(("pim_ar", n_tokens, kv), lambda: self._pim_forward(
            self.ops(self.target, n_tokens, kv), ranks))

    def gts_switch(self) -> TaskCost:
        def make():
            c = self.p.gts.switch_cost()
            return _task(c, {"pim": c.duration_s})
        return self._cached(("gts",), make)

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
            # a lookup drafter runs on the CPU: its "drafts" use no rank time
            d_both = 0.0 if getattr(self.draft, "kind", "model") == "lookup" else both
            c = self._memo[key] = {
                "verify": FlowSpec("verify", {"shared": f, "target_only": 1.0 - f}, share),
                "draft": FlowSpec("draft", {"shared": d_both}, 1.0 - share),
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
