"""Step costs of draft trees on the mobile SoC: a drafter forward over one level's nodes on its
PIM ranks, and the target's verification of an N-node tree in ONE pass with a tree attention
mask, on the NPU or on the target's PIM ranks.

Why these are the tree's costs: a pass over N tokens multiplies each weight matrix by N input
vectors. The NPU streams every weight once per pass whatever N is (a GEMM); a PIM unit that
holds k input vectors (``pim.vectors_per_weight_read``) re-reads each weight row for every k
vectors: ceil(N / k) weight passes, a step function of N (:meth:`~ahasd_sim.hw.pim.Pim.bytes_read`).
Attention is costed as causal over the pass's tokens: the tree mask lets a node attend to its
ancestors only, fewer pairs than causal, so the attention term is an upper bound (it is small
next to the weight stream at these sizes)."""
from __future__ import annotations

from ..base import TaskCost


class TreeCosts:
    """Tree step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

    def draft_level(self, n_nodes: int, kv_len: int) -> TaskCost:
        """One drafter forward over ``n_nodes`` tokens (a level's expanded nodes) on its PIM ranks."""
        kv = self._kv(kv_len)
        n = max(1, int(n_nodes))
        return self._cached(("draft_level", n, kv), lambda: self._pim_forward(
            self.ops(self.draft, n, kv), self.partition.draft_ranks))

    def tree_verify(self, n_tokens: int, kv_len: int, on: str = "npu") -> TaskCost:
        """The target over ``n_tokens`` tree tokens (root + selected nodes) in one pass: on the
        NPU (weights streamed once) or on the target's PIM ranks (ceil(n / k) weight passes)."""
        if on == "npu":
            return self.verify(n_tokens, kv_len)
        if on == "pim":
            return self.preverify(n_tokens, kv_len)
        raise ValueError(f"tree verification on '{on}': expected npu or pim")
