"""Step costs on a GPU: a forward from GPU memory, with the weights that do not fit streamed
over H2D (serially or double-buffered layer by layer)."""
from __future__ import annotations

from ...config.errors import ConfigError
from ...hw.gpu import double_buffered_time_s
from ..base import TaskCost


class GpuCosts:
    """GPU step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

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

    def gpu_prefill(self, role: str, n_tokens: int) -> TaskCost:
        """Prefill of ``role``'s model over ``n_tokens`` prompt tokens on the GPU."""
        if role == "draft":
            return self._gpu_forward(self.draft, max(1, n_tokens), 0, resident_other=0)
        return self._gpu_forward(self.target, max(1, n_tokens), 0, resident_other=self.draft.weight_bytes())

    def gpu_draft_token(self, kv_len: int) -> TaskCost:
        # The drafter is loaded first and stays resident; the target takes what is left.
        return self._gpu_forward(self.draft, 1, kv_len, resident_other=0)

    def gpu_verify(self, n_tokens: int, kv_len: int) -> TaskCost:
        return self._gpu_forward(self.target, n_tokens, kv_len, resident_other=self.draft.weight_bytes())
