"""The torch half of ``measure moe`` (:mod:`.moe_gpu` has the shapes, routings and counts).

Imports torch at module level: :func:`.moe_gpu.run_measure_moe` imports this module only after
:func:`.common.require_torch` found torch.
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from .common import MeasurementCsv, env_info, log, time_fn, time_wall
from .moe_gpu import (COPY_PRECISIONS, CSV_COLUMNS, PASS_SHAPE, SHAPES, SMOKE_LAYER, SMOKE_PASS_SHAPE, MoePlan,
                      distinct_expert_counts, expert_bytes, expert_copy_counts, layer_weight_bytes, padded_ffn,
                      pass_points, routing_expert_ids, token_counts)

CLOCK_WARMUP_S = 2.0   # GEMMs run before timing on CUDA, so the first rows do not see idle clocks


class Moe:
    """One MoE FFN layer: ``e`` SwiGLU experts of width ``f`` (padded, :func:`.moe_gpu.padded_ffn`)
    over ``d``, top-``k`` routing; random weights from a fixed seed."""

    def __init__(self, d, f, e, k, dev, dtype):
        g = torch.Generator(device="cpu").manual_seed(0)
        self.f_real = f
        f = padded_ffn(f)
        self.d, self.f, self.e, self.k = d, f, e, k
        self.w_gate = (torch.randn(e, f, d, generator=g) * 0.02).to(dev, dtype)
        self.w_up = (torch.randn(e, f, d, generator=g) * 0.02).to(dev, dtype)
        self.w_down = (torch.randn(e, d, f, generator=g) * 0.02).to(dev, dtype)
        if f != self.f_real:
            for w in (self.w_gate, self.w_up):
                w[:, self.f_real:, :] = 0
            self.w_down[:, :, self.f_real:] = 0
        self.dev, self.dtype = dev, dtype

    def routing(self, n_tokens, distinct):
        """top-k expert ids per token covering exactly ``distinct`` experts, and equal gates."""
        ids = torch.tensor(routing_expert_ids(n_tokens, self.k, distinct), dtype=torch.int64)
        return ids.to(self.dev), torch.full((n_tokens, self.k), 1.0 / self.k, device=self.dev, dtype=self.dtype)

    def loop(self, x, ids, gates):
        """transformers-style: per hit expert, select tokens (host sync), 3 linears, index_add."""
        out = torch.zeros_like(x)
        mask = F.one_hot(ids, self.e).permute(2, 1, 0)  # e, k, n
        hit = (mask.sum(dim=(1, 2)) > 0).nonzero().flatten().tolist()
        for e in hit:
            slot, tok = torch.where(mask[e])
            xe = x[tok]
            h = F.silu(F.linear(xe, self.w_gate[e])) * F.linear(xe, self.w_up[e])
            y = F.linear(h, self.w_down[e]) * gates[tok, slot, None]
            out.index_add_(0, tok, y.to(x.dtype))
        return out

    def fused(self, x, ids, gates):
        """sort tokens by expert, one grouped GEMM per matrix over the hit experts."""
        flat = ids.flatten()
        order = torch.argsort(flat, stable=True)
        tok = order // self.k
        hit, counts = torch.unique_consecutive(flat[order], return_counts=True)
        xs = x[tok]
        if hasattr(torch, "_grouped_mm") and x.is_cuda:
            offs = torch.cumsum(counts, 0).to(torch.int32)
            wg = self.w_gate[hit].transpose(1, 2)  # gather of hit experts' weights
            wu = self.w_up[hit].transpose(1, 2)
            wd = self.w_down[hit].transpose(1, 2)
            h = F.silu(torch._grouped_mm(xs, wg, offs=offs)) * torch._grouped_mm(xs, wu, offs=offs)
            y = torch._grouped_mm(h, wd, offs=offs)
        else:
            ys = []
            start = 0
            for e, c in zip(hit.tolist(), counts.tolist()):
                xe = xs[start:start + c]
                ys.append(F.linear(F.silu(F.linear(xe, self.w_gate[e])) * F.linear(xe, self.w_up[e]),
                                   self.w_down[e]))
                start += c
            y = torch.cat(ys)
        y = y * gates.flatten()[order, None]
        out = torch.zeros_like(x)
        out.index_add_(0, tok, y.to(x.dtype))
        return out


def _row(out: MeasurementCsv, ts, **cells) -> None:
    med = out.row(ts, **cells)
    log(f"{cells['kind']} {cells['model']} {cells.get('n_experts_copied')} {cells.get('n_tokens')} "
        f"{cells.get('distinct_experts')} {med * 1e6:.1f} us")


def measure_expert_copies(out: MeasurementCsv, dev, plan: MoePlan) -> None:
    """Groups of expert-sized copies, host (pinned on CUDA) to device, one stream."""
    for name, (d, f, _e, _k) in SHAPES.items():
        for bytes_per_param, precision in COPY_PRECISIONS:
            nbytes = expert_bytes(d, f, bytes_per_param)
            for n in expert_copy_counts(plan.smoke):
                host = [torch.empty(nbytes, dtype=torch.uint8).pin_memory() if dev.type == "cuda"
                        else torch.empty(nbytes, dtype=torch.uint8) for _ in range(n)]
                devb = [torch.empty(nbytes, dtype=torch.uint8, device=dev) for _ in range(n)]

                def copy_all():
                    for hb, db in zip(host, devb):
                        db.copy_(hb, non_blocking=True)
                _row(out, time_fn(copy_all, dev, 1, plan.reps), model=name, kind="h2d_experts",
                     n_experts_copied=n, bytes=n * nbytes,
                     notes=f"{precision}; one copy_ per expert, pinned, one stream, CUDA events")
                del host, devb


def measure_layer_steps(out: MeasurementCsv, dev, dtype, plan: MoePlan) -> None:
    """Per shape, tokens and distinct experts: the per-expert loop and the fused layer, each
    checked against the other (the max relative difference is in the loop row's notes)."""
    grouped = hasattr(torch, "_grouped_mm") and dev.type == "cuda"
    elem_bytes = 2 if dtype == torch.bfloat16 else 4
    for name, layer in SHAPES.items():
        moe = Moe(*(SMOKE_LAYER if plan.smoke else layer), dev, dtype)
        for n in token_counts(plan.smoke):
            x = torch.randn(n, moe.d, device=dev, dtype=dtype)
            for u in distinct_expert_counts(n, moe.k, moe.e):
                ids, gates = moe.routing(n, u)
                wbytes = layer_weight_bytes(u, moe.d, moe.f_real, elem_bytes)
                ref = moe.loop(x, ids, gates)
                got = moe.fused(x, ids, gates)
                err = float((ref - got).abs().max() / (ref.abs().max() + 1e-12))
                _row(out, time_wall(lambda: moe.loop(x, ids, gates), dev, 2, plan.reps), model=name,
                     kind="moe_step_loop", n_tokens=n, distinct_experts=u, bytes=wbytes,
                     notes=f"HF-style per-expert loop; host wall clock; max rel diff to fused {err:.2e}"
                     + (f"; FFN padded {moe.f_real}->{moe.f}" if moe.f != moe.f_real else ""))
                _row(out, time_wall(lambda: moe.fused(x, ids, gates), dev, 2, plan.reps), model=name,
                     kind="moe_step_fused", n_tokens=n, distinct_experts=u, bytes=wbytes,
                     notes=("torch._grouped_mm over hit experts (weights gathered by index)" if grouped
                            else "no _grouped_mm: per-expert GEMMs after one sort") + "; host wall clock")


class OffloadedPass:
    """A composed decode / verify pass with random weights (:data:`.moe_gpu.PASS_SHAPE`): per layer
    dense stand-in -> router -> copies of the missing experts (pinned host -> device slots, on a
    copy stream) -> fused MoE over the layer's experts; then the LM head. Every layer reuses one
    layer's weights (random, so the timing is the same) to keep memory small."""

    def __init__(self, shape: dict, dev, dtype):
        g = torch.Generator(device="cpu").manual_seed(1)
        d, hd = shape["d"], shape["head_dim"]
        self.s, self.dev, self.dtype = shape, dev, dtype
        q, kv = shape["heads"] * hd, shape["kv_heads"] * hd
        self.w_qkv = (torch.randn(q + 2 * kv, d, generator=g) * 0.02).to(dev, dtype)
        self.w_o = (torch.randn(d, q, generator=g) * 0.02).to(dev, dtype)
        self.w_router = (torch.randn(shape["e"], d, generator=g) * 0.02).to(dev, dtype)
        self.w_head = (torch.randn(shape["vocab"], d, generator=g) * 0.02).to(dev, dtype)
        self.k_cache = torch.randn(1, shape["kv_heads"], shape["kv_len"], hd, generator=g).to(dev, dtype)
        self.v_cache = torch.randn(1, shape["kv_heads"], shape["kv_len"], hd, generator=g).to(dev, dtype)
        self.moe = Moe(d, shape["f"], shape["e"], shape["k"], dev, dtype)
        pin = dev.type == "cuda"
        # host copies of expert weights (pinned) for the missing experts, one per slot
        self.host = [tuple((w[e].to("cpu").pin_memory() if pin else w[e].to("cpu").clone())
                           for w in (self.moe.w_gate, self.moe.w_up, self.moe.w_down)) for e in range(shape["e"])]
        self.copy_stream = torch.cuda.Stream(dev) if dev.type == "cuda" else None

    def _attention(self, x):
        s, hd = self.s, self.s["head_dim"]
        n = x.shape[0]
        qkv = F.linear(x, self.w_qkv)
        q = qkv[:, :s["heads"] * hd].view(1, n, s["heads"], hd).transpose(1, 2)
        k = torch.cat([self.k_cache, qkv[:, s["heads"] * hd:(s["heads"] + s["kv_heads"]) * hd]
                       .view(1, n, s["kv_heads"], hd).transpose(1, 2)], dim=2)
        v = torch.cat([self.v_cache, qkv[:, (s["heads"] + s["kv_heads"]) * hd:]
                       .view(1, n, s["kv_heads"], hd).transpose(1, 2)], dim=2)
        rep = s["heads"] // s["kv_heads"]
        o = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1))
        return x + F.linear(o.transpose(1, 2).reshape(n, -1), self.w_o)

    def run(self, x, ids, gates, missing: list[int]):
        for _ in range(self.s["layers"]):
            h = self._attention(x)
            F.linear(h, self.w_router).topk(self.s["k"], dim=-1)      # the router (routing is fixed)
            if missing:
                if self.copy_stream is not None:
                    self.copy_stream.wait_stream(torch.cuda.current_stream(self.dev))
                    with torch.cuda.stream(self.copy_stream):
                        for e in missing:
                            for w, hb in zip((self.moe.w_gate, self.moe.w_up, self.moe.w_down), self.host[e]):
                                w[e].copy_(hb, non_blocking=True)
                    torch.cuda.current_stream(self.dev).wait_stream(self.copy_stream)
                else:
                    for e in missing:
                        for w, hb in zip((self.moe.w_gate, self.moe.w_up, self.moe.w_down), self.host[e]):
                            w[e].copy_(hb)
            x = h + self.moe.fused(h, ids, gates)
        return F.linear(x[-1:], self.w_head)


def measure_passes(out: MeasurementCsv, dev, dtype, plan: MoePlan) -> None:
    """Composed offloaded passes (decode and tree verification) of Qwen3-30B-A3B shapes."""
    shape = SMOKE_PASS_SHAPE if plan.smoke else PASS_SHAPE
    model = OffloadedPass(shape, dev, dtype)
    nbytes = expert_bytes(shape["d"], shape["f"], 2 if dtype == torch.bfloat16 else 4)
    for n, u, miss in pass_points(plan.smoke, shape["k"], shape["e"]):
        x = torch.randn(n, shape["d"], device=dev, dtype=dtype)
        ids, gates = model.moe.routing(n, u)
        missing = list(range(u - miss, u))
        _row(out, time_wall(lambda: model.run(x, ids, gates, missing), dev, 2, plan.reps),
             model="qwen3-30b-a3b" if not plan.smoke else "smoke", kind="moe_pass_offloaded", n_tokens=n,
             distinct_experts=u, n_experts_copied=miss * shape["layers"], bytes=miss * shape["layers"] * nbytes,
             notes=f"{shape['layers']} layers, kv {shape['kv_len']}, {miss} of {u} experts per layer copied from "
                   f"{'pinned ' if dev.type == 'cuda' else ''}host memory on a copy stream; random weights; host wall clock")


def measure(plan: MoePlan) -> int:
    """Run a checked plan: on CUDA in bf16 (unless --smoke), else on the CPU in fp32."""
    t_start = time.perf_counter()
    dev = torch.device("cuda" if torch.cuda.is_available() and not plan.smoke else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    env = env_info(dev)
    log(f"env: {env}")
    if dev.type == "cuda":
        m = torch.randn(8192, 8192, device=dev, dtype=dtype)
        t = time.perf_counter()
        while time.perf_counter() - t < CLOCK_WARMUP_S:
            m @ m
        torch.cuda.synchronize()
        del m
    with MeasurementCsv(plan.out, CSV_COLUMNS, {**env, "dtype": "bf16" if dtype == torch.bfloat16 else "fp32"}) as out:
        if plan.passes:
            measure_passes(out, dev, dtype, plan)
        else:
            measure_expert_copies(out, dev, plan)
            measure_layer_steps(out, dev, dtype, plan)
    log(f"wrote {out.n_rows} rows to {plan.out} in {time.perf_counter() - t_start:.1f}s")
    return 0
