#!/usr/bin/env python3
"""Measure MoE expert offload primitives on a CUDA GPU (issue 15).

Two families of rows, one tidy CSV (one row per measurement, flushed as it goes):

* ``h2d_experts`` -- ``n`` expert-sized host->device copies (pinned host memory, one
  ``copy_(non_blocking=True)`` per expert on one stream, as an expert cache fills its
  slots); timed with CUDA events over the whole group.
* ``moe_step_fused`` / ``moe_step_loop`` -- one MoE FFN layer (SwiGLU experts, top-k
  routing) for ``n_tokens`` tokens that hit ``distinct_experts`` experts:
  ``fused``: a grouped GEMM over the hit experts (``torch._grouped_mm`` when the build
  has it, else one batched GEMM over the gathered hit experts, noted per row);
  ``loop``: the Hugging Face transformers style loop, per hit expert a ``torch.where``
  (host sync), gather, three linears, activation, scale and ``index_add_``.
  Timed end to end with host wall clock after ``torch.cuda.synchronize`` (the loop
  is launch/sync bound, which is the point), median of repetitions.

Shapes: Qwen3-30B-A3B (d 2048, expert FFN 768, 128 experts, top-8) and the MoEfied
Qwen2.5-Coder-1.5B (d 1536, 8960 / E neurons per expert, top-8), bf16.

    python3 scripts/measure_moe_gpu.py --out validation/h200_moe_measured.csv
    python3 scripts/measure_moe_gpu.py --smoke --out /tmp/moe_smoke.csv   # CPU, seconds
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import statistics
import subprocess
import time

import torch
import torch.nn.functional as F

SHAPES = {  # name -> (d_model, expert_ffn, n_experts, top_k)
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "moefied-qwen2.5-coder-1.5b-e64": (1536, 140, 64, 8),
}
FIELDS = ["gpu_name", "driver", "torch_version", "cuda_version", "date_utc", "model", "dtype", "kind",
          "n_experts_copied", "n_tokens", "distinct_experts", "bytes", "latency_s_median", "latency_s_p10",
          "latency_s_p90", "n_reps", "notes"]


def _driver() -> str:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


def _q(xs):
    xs = sorted(xs)
    return statistics.median(xs), xs[int(0.1 * (len(xs) - 1))], xs[int(0.9 * (len(xs) - 1))]


def time_events(fn, reps, dev):
    if dev.type != "cuda":
        out = []
        for _ in range(reps):
            t = time.perf_counter(); fn(); out.append(time.perf_counter() - t)
        return out
    fn(); torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        out.append(a.elapsed_time(b) * 1e-3)
    return out


def time_wall(fn, reps, dev):
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    fn(); fn(); sync()
    out = []
    for _ in range(reps):
        sync(); t = time.perf_counter(); fn(); sync(); out.append(time.perf_counter() - t)
    return out


class Moe:
    def __init__(self, d, f, e, k, dev, dtype):
        g = torch.Generator(device="cpu").manual_seed(0)
        self.f_real = f
        f = -(-f // 8) * 8  # grouped GEMM needs 16-byte strides: pad with zero neurons (exact)
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
        """top-k expert ids per token covering exactly ``distinct`` experts (needs n*k >= distinct >= k)."""
        ids = torch.arange(n_tokens * self.k) % distinct
        ids = ids.view(n_tokens, self.k)
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--smoke", action="store_true", help="tiny CPU run")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() and not a.smoke else "cpu")
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    meta = dict(gpu_name=torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
                driver=_driver() if dev.type == "cuda" else "-", torch_version=torch.__version__,
                cuda_version=torch.version.cuda or "-",
                date_utc=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                dtype="bf16" if dtype == torch.bfloat16 else "fp32")
    reps = 3 if a.smoke else a.reps
    grouped = hasattr(torch, "_grouped_mm") and dev.type == "cuda"
    if dev.type == "cuda":  # warm the clocks before timing
        m = torch.randn(8192, 8192, device=dev, dtype=dtype)
        t = time.perf_counter()
        while time.perf_counter() - t < 2.0:
            m @ m
        torch.cuda.synchronize()
    with open(a.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()

        def row(**kw):
            lat = kw.pop("lat")
            m, p10, p90 = _q(lat)
            w.writerow({**meta, **kw, "latency_s_median": f"{m:.9g}", "latency_s_p10": f"{p10:.9g}",
                        "latency_s_p90": f"{p90:.9g}", "n_reps": len(lat)})
            fh.flush()
            print(kw.get("kind"), kw.get("model"), kw.get("n_experts_copied"), kw.get("n_tokens"),
                  kw.get("distinct_experts"), f"{m * 1e6:.1f} us", flush=True)

        # ---- expert-sized H2D copies
        for name, (d, f, e, k) in SHAPES.items():
            for bpp, dt in ((2.0, "bf16"), (0.5, "int4-bytes")):
                nbytes = int(3 * d * f * bpp)
                for n in ((1, 2) if a.smoke else (1, 8, 32, 64)):
                    host = [torch.empty(nbytes, dtype=torch.uint8).pin_memory() if dev.type == "cuda"
                            else torch.empty(nbytes, dtype=torch.uint8) for _ in range(n)]
                    devb = [torch.empty(nbytes, dtype=torch.uint8, device=dev) for _ in range(n)]

                    def copy_all():
                        for hb, db in zip(host, devb):
                            db.copy_(hb, non_blocking=True)
                    row(model=name, kind="h2d_experts", n_experts_copied=n, bytes=n * nbytes,
                        lat=time_events(copy_all, reps, dev),
                        notes=f"{dt}; one copy_ per expert, pinned, one stream, CUDA events")
                    del host, devb
        # ---- MoE layer steps
        for name, (d, f, e, k) in SHAPES.items():
            moe = Moe(d, f, e, k, dev, dtype) if not a.smoke else Moe(64, 16, 16, 4, dev, dtype)
            token_list = (1, 4) if a.smoke else (1, 4, 16, 32, 64)
            for n in token_list:
                x = torch.randn(n, moe.d, device=dev, dtype=dtype)
                for u in sorted({moe.k, min(moe.e, n * moe.k), min(moe.e, max(moe.k, n * moe.k // 2)),
                                 min(moe.e, max(moe.k, n * moe.k // 4))}):
                    ids, gates = moe.routing(n, u)
                    wbytes = u * 3 * moe.d * moe.f_real * (2 if dtype == torch.bfloat16 else 4)
                    ref = moe.loop(x, ids, gates)
                    got = moe.fused(x, ids, gates)
                    err = float((ref - got).abs().max() / (ref.abs().max() + 1e-12))
                    row(model=name, kind="moe_step_loop", n_tokens=n, distinct_experts=u, bytes=wbytes,
                        lat=time_wall(lambda: moe.loop(x, ids, gates), reps, dev),
                        notes=f"HF-style per-expert loop; host wall clock; max rel diff to fused {err:.2e}"
                        + (f"; FFN padded {moe.f_real}->{moe.f}" if moe.f != moe.f_real else ""))
                    row(model=name, kind="moe_step_fused", n_tokens=n, distinct_experts=u, bytes=wbytes,
                        lat=time_wall(lambda: moe.fused(x, ids, gates), reps, dev),
                        notes=("torch._grouped_mm over hit experts (weights gathered by index)" if grouped
                               else "no _grouped_mm: per-expert GEMMs after one sort") + "; host wall clock")


if __name__ == "__main__":
    main()
