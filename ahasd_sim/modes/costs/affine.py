"""Operator graphs at many KV lengths without rebuilding them: for a fixed token count every
operator field is affine in the KV length (:class:`_AffineOps`)."""
from __future__ import annotations

import dataclasses
from functools import lru_cache

from ...workload.ops import forward_ops

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

