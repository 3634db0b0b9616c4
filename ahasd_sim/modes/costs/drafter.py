"""Step costs of the model-free drafter (``run.drafter: lookup``): each drafted token is a
suffix match on the application CPU, ``probes_per_token`` hash probes of ``lookup.probe_ns``
each, at ``lookup.cpu_power_w``; no PIM, no NPU, no weights. The drafter's "prefill" is free
(its index grows with the generated tokens, one insert per token, inside the probe time).
Installed over the model drafter's methods only for a lookup run, so a model run pays nothing."""
from __future__ import annotations

from ..base import TaskCost

_FREE = TaskCost(0.0, {}, {})


class DrafterCosts:
    """Lookup-drafter step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

    @property
    def drafter_kind(self) -> str:
        return getattr(self.draft, "kind", "model")

    def lookup_token(self) -> TaskCost:
        """One drafted token of the lookup drafter on the CPU."""
        c = self._memo.get(("lookup",))
        if c is None:
            lc = self.cfg.lookup
            dur = self.draft.probes_per_token() * lc.probe_ns * 1e-9
            c = self._memo[("lookup",)] = TaskCost(dur, {"cpu": dur * lc.cpu_power_w}, {"cpu": dur})
        return c

    def _install_lookup(self) -> None:
        """Route every drafter task of this cost model to the lookup's (instance attributes
        shadow the model drafter's methods)."""
        tok = self.lookup_token()
        self.draft_token = lambda kv_len: tok
        self.gpu_draft_token = lambda kv_len: tok
        self.npu_draft_token = lambda kv_len: tok
        model_opsync, model_prefill, model_gpu_prefill = self.opsync_forward, self.prefill, self.gpu_prefill
        self.opsync_forward = lambda role, n, kv, mapping: tok if role == "draft" else model_opsync(role, n, kv, mapping)
        self.prefill = lambda role, n: _FREE if role == "draft" else model_prefill(role, n)
        self.gpu_prefill = lambda role, n: _FREE if role == "draft" else model_gpu_prefill(role, n)
