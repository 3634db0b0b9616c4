"""Step costs on the NPU: verification (target weights and KV streamed over the external
bus), its layer split (and that of a pre-verification on PIM, which AHASD interleaves with it),
and prefill on the host."""
from __future__ import annotations

from ..base import TaskCost


class NpuCosts:
    """NPU step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

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
        c = self._memo[memo_key] = self._cached(("verify", n_tokens, kv), make, self._npu_cache)
        return c

    def npu_draft_token(self, kv_len: int) -> TaskCost:
        """One drafter forward (one token) on the NPU, its weights streamed over the bus."""
        kv = self._kv(kv_len)
        return self._cached(("npu_draft", kv), lambda: self._sequential(
            self.ops(self.draft, 1, kv), lambda op: (self._op_on(op, "npu", "draft"), "npu")), self._npu_cache)

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
        return self._cached(("layers", task, n_tokens, kv), make, self._npu_cache if task == "verify" else None)

    def prefill(self, role: str, n_tokens: int) -> TaskCost:
        """Prefill of ``role``'s model over ``n_tokens`` prompt tokens on the host (the NPU, else
        the GPU): one forward with an empty KV cache."""
        model = self.draft if role == "draft" else self.target
        n = max(1, int(n_tokens))
        if self.p.npu is None:
            return self._gpu_forward(model, n, 0, resident_other=0 if role == "draft" else self.draft.weight_bytes())
        kv = self._kv(0)
        return self._cached(("prefill", role, n, kv), lambda: self._sequential(
            self.ops(model, n, kv), lambda op: (self._op_on(op, "npu", role), "npu")), self._npu_cache)
