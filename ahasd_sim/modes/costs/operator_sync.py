"""Step costs of operator-level synchronous execution (``operator_sync``): every operator on
the host (NPU, else GPU) or on PIM, tier by tier with a barrier, the assignment found offline."""
from __future__ import annotations

import itertools

from ...config.errors import ConfigError
from ...hw.sharing import two_flow_span
from ..base import TaskCost


class OperatorSyncCosts:
    """operator_sync step costs of :class:`~ahasd_sim.modes.costs.StepCosts`."""

    @property
    def host(self) -> str:
        """Device that runs host-side operators in operator_sync: the NPU, else the GPU."""
        return "npu" if self.p.npu is not None else "gpu"

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
            if getattr(model, "kind", "model") == "lookup":    # no operators: it runs on the CPU
                out[role] = mapping
                continue
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
            if getattr(model, "kind", "model") == "lookup":
                gpu_bytes[role] = 0.0
                continue
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
