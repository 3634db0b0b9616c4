"""The torch half of ``measure gpu`` (:mod:`.gpu` has the shapes, the plan and the counts).

Imports torch at module level: :func:`.gpu.run_measure_gpu` imports this module only after
:func:`.common.require_torch` found torch.
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F

from ..errors import InputError
from .common import Budget, MeasurementCsv, env_info, log, time_fn, time_wall
from .gpu import (COMMAND, CSV_COLUMNS, GpuPlan, Shape, graph_modes, kv_cache_bytes, step_flops,
                  step_points, weight_bytes)


class Linear(torch.nn.Module):
    """y = x W^T (+ b); bf16 weight, or int8 weight-only with per-row scales."""

    def __init__(self, n_in, n_out, bias, dtype, device, quant: str, std: float):
        super().__init__()
        self.quant = quant
        if quant == "int8":
            # Random int8 values and per-output-channel scales: same bytes and
            # kernel as a weight-only quantized layer.
            self.weight = torch.randint(-127, 128, (n_out, n_in), dtype=torch.int8, device=device)
            self.scales = torch.full((n_out,), std / 73.0, dtype=dtype, device=device)
        else:
            w = torch.empty(n_out, n_in, dtype=dtype, device=device)
            w.normal_(0.0, std)
            self.weight = w
            self.scales = None
        self.bias = (torch.randn(n_out, dtype=dtype, device=device) * 0.02) if bias else None

    def weight_bytes(self) -> int:
        b = self.weight.numel() * self.weight.element_size()
        if self.scales is not None:
            b += self.scales.numel() * self.scales.element_size()
        if self.bias is not None:
            b += self.bias.numel() * self.bias.element_size()
        return b

    def forward(self, x):
        if self.quant == "int8":
            y = torch._weight_int8pack_mm(x, self.weight, self.scales)
            return y + self.bias if self.bias is not None else y
        return F.linear(x, self.weight, self.bias)


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention:
    """Attention over a KV cache.  ``mode`` picks how the causal mask among
    the k new tokens is expressed:

    * "lower_right": torch.nn.attention.bias.causal_lower_right (lets SDPA use
      the flash / memory-efficient kernels with bottom-right causal alignment);
    * "bool_mask":   an explicit boolean [k, kv+k] mask;
    * "reference":   explicit fp32 math (used only by the self-test).
    For k = 1 no mask is needed (the one query sees every key).
    """

    def __init__(self, mode: str):
        self.mode = mode

    def __call__(self, q, k, v, kv_len, n_new, gqa):
        # q: [1, H, n_new, hd]; k, v: [1, Hkv, kv_len + n_new, hd]
        if self.mode == "reference":
            return _reference_attention(q, k, v, kv_len, n_new)
        if n_new == 1:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        if self.mode == "lower_right":
            from torch.nn.attention.bias import causal_lower_right
            bias = causal_lower_right(n_new, kv_len + n_new)
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, enable_gqa=gqa)
        mask = _bool_mask(kv_len, n_new, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


def _bool_mask(kv_len, n_new, device):
    i = torch.arange(n_new, device=device)[:, None]
    j = torch.arange(kv_len + n_new, device=device)[None, :]
    return j <= kv_len + i


def _reference_attention(q, k, v, kv_len, n_new):
    qf, kf, vf = q.float(), k.float(), v.float()
    rep = qf.shape[1] // kf.shape[1]
    if rep > 1:
        kf = kf.repeat_interleave(rep, dim=1)
        vf = vf.repeat_interleave(rep, dim=1)
    s = (qf @ kf.transpose(-1, -2)) / math.sqrt(qf.shape[-1])
    s = s.masked_fill(~_bool_mask(kv_len, n_new, q.device), float("-inf"))
    return (s.softmax(-1) @ vf).to(q.dtype)


class DecoderModel(torch.nn.Module):
    """A full decoder stack (all layers) with a preallocated KV cache."""

    def __init__(self, shape: Shape, dtype, device, quant: str, max_len: int):
        super().__init__()
        s = shape
        self.shape, self.dtype, self.device, self.quant = s, dtype, device, quant
        self.max_len = max_len
        d, hd, H, Hkv = s.d_model, s.head_dim, s.n_heads, s.n_kv_heads
        std_in = 1.0 / math.sqrt(d)
        std_out = 1.0 / math.sqrt(d) / math.sqrt(2 * s.n_layers)

        def lin(n_in, n_out, bias, std):
            return Linear(n_in, n_out, bias, dtype, device, quant, std)

        self.embed = torch.randn(s.vocab, d, dtype=dtype, device=device)
        if s.arch == "opt":
            # learned positions; allocated to max_len even past OPT's trained 2048
            self.pos_embed = torch.randn(max_len + 2, d, dtype=dtype, device=device) * 0.1
        else:
            inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
            t = torch.arange(max_len, device=device, dtype=torch.float32)
            fr = torch.outer(t, inv)
            emb = torch.cat((fr, fr), dim=-1)
            self.cos = emb.cos().to(dtype)
            self.sin = emb.sin().to(dtype)
        self.layers = []
        for _ in range(s.n_layers):
            L = {}
            L["qkv"] = lin(d, (H + 2 * Hkv) * hd, s.qkv_bias, std_in)
            L["o"] = lin(H * hd, d, s.arch == "opt", std_out)
            if s.arch == "opt":
                L["fc1"] = lin(d, s.d_ffn, True, std_in)
                L["fc2"] = lin(s.d_ffn, d, True, std_out / math.sqrt(s.d_ffn / d))
                L["ln1_w"] = torch.ones(d, dtype=dtype, device=device)
                L["ln1_b"] = torch.zeros(d, dtype=dtype, device=device)
                L["ln2_w"] = torch.ones(d, dtype=dtype, device=device)
                L["ln2_b"] = torch.zeros(d, dtype=dtype, device=device)
            else:
                L["gate_up"] = lin(d, 2 * s.d_ffn, False, std_in)
                L["down"] = lin(s.d_ffn, d, False, std_out / math.sqrt(s.d_ffn / d))
                L["ln1_w"] = torch.ones(d, dtype=dtype, device=device)
                L["ln2_w"] = torch.ones(d, dtype=dtype, device=device)
            L["k_cache"] = torch.zeros(1, Hkv, max_len, hd, dtype=dtype, device=device)
            L["v_cache"] = torch.zeros(1, Hkv, max_len, hd, dtype=dtype, device=device)
            self.layers.append(L)
        self.lnf_w = torch.ones(d, dtype=dtype, device=device)
        self.lnf_b = torch.zeros(d, dtype=dtype, device=device) if s.arch == "opt" else None
        if s.tied_embeddings and quant != "int8":
            self.lm_head_w = self.embed  # tied: the LM head GEMM streams the embedding matrix
            self.lm_head = None
        else:
            self.lm_head = lin(d, s.vocab, False, std_in)
            self.lm_head_w = None

    # -- accounting (the formulas are in .gpu, where tests check them without torch) --------
    @property
    def elem_bytes(self) -> int:
        return torch.finfo(self.dtype).bits // 8

    def weight_bytes(self) -> int:
        """Bytes of weights one step must stream (:func:`.gpu.weight_bytes`)."""
        return weight_bytes(self.shape, self.quant, self.elem_bytes)

    def kv_bytes(self, kv_len: int, n_new: int) -> int:
        """KV-cache bytes one step reads (kv_len + n_new positions, K and V)."""
        return kv_cache_bytes(self.shape, kv_len, n_new, self.elem_bytes)

    def param_count(self) -> int:
        n = 0
        for L in self.layers:
            for v in L.values():
                if isinstance(v, Linear):
                    n += v.weight.numel() + (v.bias.numel() if v.bias is not None else 0)
        n += self.embed.numel()
        if self.lm_head is not None:
            n += self.lm_head.weight.numel()
        return n

    def flops(self, kv_len: int, n_new: int) -> int:
        """Approximate FLOPs of one step (:func:`.gpu.step_flops`)."""
        return step_flops(self.shape, kv_len, n_new)

    # -- forward ----------------------------------------------------------
    def _norm(self, x, w, b):
        if self.shape.arch == "opt":
            return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        return F.rms_norm(x, (x.shape[-1],), w, 1e-6)

    def step(self, ids, kv_len: int, attn: Attention):
        """One decode/verify step: ids [n_new] -> logits [n_new, vocab]."""
        s = self.shape
        n = ids.shape[0]
        H, Hkv, hd = s.n_heads, s.n_kv_heads, s.head_dim
        gqa = Hkv != H
        x = F.embedding(ids, self.embed)
        if s.arch == "opt":
            x = x + self.pos_embed[kv_len + 2: kv_len + 2 + n]
        else:
            cos = self.cos[kv_len: kv_len + n][:, None, :]
            sin = self.sin[kv_len: kv_len + n][:, None, :]
        for L in self.layers:
            h = self._norm(x, L["ln1_w"], L.get("ln1_b"))
            qkv = L["qkv"](h)
            q, k, v = qkv.split([H * hd, Hkv * hd, Hkv * hd], dim=-1)
            q = q.view(n, H, hd)
            k = k.view(n, Hkv, hd)
            v = v.view(n, Hkv, hd)
            if s.arch != "opt":
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
            L["k_cache"][0, :, kv_len: kv_len + n].copy_(k.transpose(0, 1))
            L["v_cache"][0, :, kv_len: kv_len + n].copy_(v.transpose(0, 1))
            kc = L["k_cache"][:, :, : kv_len + n]
            vc = L["v_cache"][:, :, : kv_len + n]
            a = attn(q.transpose(0, 1).unsqueeze(0), kc, vc, kv_len, n, gqa)
            a = a.squeeze(0).transpose(0, 1).reshape(n, H * hd)
            x = x + L["o"](a)
            h = self._norm(x, L["ln2_w"], L.get("ln2_b"))
            if s.arch == "opt":
                x = x + L["fc2"](F.relu(L["fc1"](h)))
            else:
                g, u = L["gate_up"](h).chunk(2, dim=-1)
                x = x + L["down"](F.silu(g) * u)
        x = self._norm(x, self.lnf_w, self.lnf_b)
        if self.lm_head is not None:
            return self.lm_head(x)
        return F.linear(x, self.lm_head_w)


class Graphed:
    """Capture ``fn`` once into a CUDA graph; calling replays it."""

    def __init__(self, fn):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(s)
        self.g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.g):
            self.out = fn()

    def __call__(self):
        self.g.replay()
        return self.out


def measure_ceilings(out: MeasurementCsv, device, plan: GpuPlan):
    """The measured ceilings (CUDA only): a large device-to-device copy and a large bf16 GEMM."""
    if device.type != "cuda":
        return
    # Device-to-device copy: bytes read + bytes written.
    n = plan.membw_bytes
    src = torch.empty(n, dtype=torch.uint8, device=device)
    src.view(torch.int32).random_()
    dst = torch.empty_like(src)
    ts = time_fn(lambda: dst.copy_(src), device, 3, plan.reps)
    med = out.row(ts, model="-", dtype="uint8", kind="ceiling_membw", cuda_graph=False,
                  bytes=2 * n, notes=f"D2D copy of {n} B; bytes = read + written")
    log(f"ceiling_membw: {2 * n / med / 1e12:.3f} TB/s (copy {n / 2**30:.2f} GiB, {med * 1e3:.3f} ms)")
    del src, dst
    # bf16 GEMM on random data, rotating over 3 input sets.
    m = plan.gemm_n
    As = [torch.randn(m, m, dtype=torch.bfloat16, device=device) for _ in range(3)]
    Bs = [torch.randn(m, m, dtype=torch.bfloat16, device=device) for _ in range(3)]
    C = torch.empty(m, m, dtype=torch.bfloat16, device=device)
    it = [0]

    def gemm():
        i = it[0] % 3
        it[0] += 1
        torch.mm(As[i], Bs[i], out=C)

    ts = time_fn(gemm, device, 5, plan.reps)
    fl = 2 * m ** 3
    med = out.row(ts, model="-", dtype="bf16", kind="ceiling_gemm", cuda_graph=False, flops=fl,
                  bytes=3 * m * m * 2, notes=f"torch.mm {m}x{m}x{m} bf16 random inputs (3 sets rotated)")
    log(f"ceiling_gemm: {fl / med / 1e12:.1f} TFLOP/s ({m}^3 bf16, {med * 1e3:.3f} ms)")
    del As, Bs, C
    torch.cuda.empty_cache()


def measure_h2d(out: MeasurementCsv, device, plan: GpuPlan):
    """Host-to-device copies of 4 KiB .. 1 GiB from pinned memory (CUDA events) and of
    4 KiB .. 256 MiB from pageable memory (host wall clock); CUDA only."""
    if device.type != "cuda":
        return
    sizes = [4 ** i for i in range(6, 16)]  # 4 KiB .. 1 GiB
    big = max(sizes)
    host = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    host.view(torch.int64).random_()
    dev = torch.empty(big, dtype=torch.uint8, device=device)
    for sz in sizes:
        h, d = host[:sz], dev[:sz]
        reps = plan.reps if sz <= 64 * 2**20 else max(10, plan.reps // 3)
        ts = time_fn(lambda: d.copy_(h, non_blocking=True), device, 3, reps)
        med = out.row(ts, model="-", dtype="uint8", kind="h2d_pinned", cuda_graph=False, bytes=sz,
                      notes="pinned host -> device, copy_(non_blocking=True), CUDA events")
        log(f"h2d_pinned {sz:>11d} B: {med * 1e6:10.1f} us  {sz / med / 1e9:7.2f} GB/s")
    del host
    pageable_sizes = [4 ** 6, 4 ** 8, 4 ** 10, 4 ** 12, 4 ** 14]  # 4 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB
    ph = torch.empty(max(pageable_sizes), dtype=torch.uint8)
    ph.view(torch.int64).random_()
    for sz in pageable_sizes:
        h, d = ph[:sz], dev[:sz]
        reps = plan.reps if sz <= 16 * 2**20 else 10
        ts = time_wall(lambda: d.copy_(h), device, 2, reps)
        med = out.row(ts, model="-", dtype="uint8", kind="h2d_pageable", cuda_graph=False, bytes=sz,
                      notes="pageable host -> device, copy_(), host wall clock incl. synchronize")
        log(f"h2d_pageable {sz:>11d} B: {med * 1e6:10.1f} us  {sz / med / 1e9:7.2f} GB/s")
    del ph, dev
    torch.cuda.empty_cache()


def measure_linear_micro(out: MeasurementCsv, device, plan: GpuPlan, int8_ok: bool):
    """One linear (LLaMA2-7B gate_up shape 4096 -> 22016) at M = 1 and 16,
    bf16 F.linear vs torch._weight_int8pack_mm: shows the int8 kernel's
    achieved weight bandwidth."""
    if device.type != "cuda":
        return
    K, N = 4096, 22016
    w = torch.randn(N, K, dtype=torch.bfloat16, device=device) * 0.02
    wq = torch.randint(-127, 128, (N, K), dtype=torch.int8, device=device)
    sc = torch.full((N,), 1e-3, dtype=torch.bfloat16, device=device)
    for m in (1, 16):
        x = torch.randn(m, K, dtype=torch.bfloat16, device=device)
        ts = time_fn(lambda: F.linear(x, w), device, 5, plan.reps)
        med = out.row(ts, model=f"linear_{K}x{N}", dtype="bf16", kind="linear_micro", cuda_graph=False,
                      k_tokens=m, bytes=N * K * 2, weight_bytes=N * K * 2, flops=2 * m * N * K,
                      notes="F.linear")
        log(f"linear_micro bf16 M={m}: {med * 1e6:.1f} us  {N * K * 2 / med / 1e12:.2f} TB/s weight")
        if int8_ok:
            ts = time_fn(lambda: torch._weight_int8pack_mm(x, wq, sc), device, 3, plan.reps, max_total_s=5)
            med = out.row(ts, model=f"linear_{K}x{N}", dtype="int8wo", kind="linear_micro", cuda_graph=False,
                          k_tokens=m, bytes=N * K, weight_bytes=N * K, flops=2 * m * N * K,
                          notes="torch._weight_int8pack_mm")
            log(f"linear_micro int8 M={m}: {med * 1e6:.1f} us  {N * K / med / 1e12:.2f} TB/s weight")
    del w, wq
    torch.cuda.empty_cache()


def count_kernels(fn):
    """Run fn once under torch.profiler; return (number of GPU kernels,
    summed kernel time in s).  None if the profiler cannot see the GPU."""
    try:
        from torch.profiler import ProfilerActivity, profile
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
        return len(evs), sum(e.device_time_total for e in evs) / 1e6
    except Exception as e:  # noqa: BLE001
        log(f"  kernel count failed: {type(e).__name__}: {e}")
        return None


def probe_int8(device):
    """Is torch._weight_int8pack_mm usable here with bf16 activations, and right?"""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return False, "torch._weight_int8pack_mm not present"
    try:
        x = torch.randn(4, 256, dtype=torch.bfloat16, device=device)
        w = torch.randint(-127, 128, (128, 256), dtype=torch.int8, device=device)
        s = torch.rand(128, dtype=torch.bfloat16, device=device) + 0.5
        y = torch._weight_int8pack_mm(x, w, s)
        ref = (x.double() @ w.double().t()) * s.double()
        err = ((y.double() - ref).norm() / ref.norm()).item()
        if not err < 2e-2:
            return False, f"torch._weight_int8pack_mm wrong (rel err {err:.3g})"
        return True, f"torch._weight_int8pack_mm ok (rel err {err:.2g})"
    except Exception as e:  # noqa: BLE001
        return False, f"torch._weight_int8pack_mm failed: {type(e).__name__}: {e}"[:300]


def self_test(model: DecoderModel, attn: Attention, device):
    """Cache/mask/RoPE check: a full causal pass over T tokens with the
    explicit fp32-math reference attention, vs (a) the fast attention over a
    cache filled by a (T-4)-token pass then a 4-token verify step, and (b) a
    1-token decode step.  Returns the worst relative error on the logits."""
    T = 64
    ids = torch.randint(0, model.shape.vocab, (T,), device=device)
    with torch.no_grad():
        ref = model.step(ids, 0, Attention("reference")).float()
        model.step(ids[: T - 4], 0, attn)
        out_v = model.step(ids[T - 4:], T - 4, attn).float()
        out_d = model.step(ids[T - 1:], T - 1, attn).float()
    e1 = ((out_v - ref[T - 4:]).norm() / ref[T - 4:].norm()).item()
    e2 = ((out_d - ref[T - 1:]).norm() / ref[T - 1:].norm()).item()
    if not (math.isfinite(e1) and math.isfinite(e2)):
        return float("inf")
    return max(e1, e2)


def pick_attention(model, device, dtype):
    """Use the first attention mode whose self-test passes; if none passes,
    the one with the smallest error, flagged SELFTEST_FAIL in the notes."""
    tol = 1e-3 if dtype == torch.float32 else 5e-2
    notes, tried = [], []
    for mode in ("lower_right", "bool_mask"):
        try:
            err = self_test(model, Attention(mode), device)
        except Exception as e:  # noqa: BLE001
            notes.append(f"{mode} failed: {type(e).__name__}: {e}"[:200])
            continue
        if err < tol:
            return Attention(mode), err, notes
        notes.append(f"{mode} rel err {err:.3g}")
        tried.append((err, mode))
    if not tried:
        raise RuntimeError("no attention mode ran: " + "; ".join(notes))
    err, mode = min(tried)
    notes.append("SELFTEST_FAIL")
    return Attention(mode), err, notes


def measure_model(out: MeasurementCsv, device, shape: Shape, quant: str, plan: GpuPlan, modes, budget: Budget):
    """Build ``shape`` in bf16 (fp32 with --smoke-fp32 on CPU) or int8 weight-only and time every
    step point (:func:`.gpu.step_points`), one row each, until the time budget is spent."""
    dtype = torch.float32 if (plan.smoke and device.type == "cpu" and plan.smoke_fp32) else torch.bfloat16
    dname = ("fp32" if dtype == torch.float32 else "bf16") if quant == "none" else "int8wo"
    t0 = time.perf_counter()
    torch.manual_seed(0)
    with torch.no_grad():
        model = DecoderModel(shape, dtype, device, quant, plan.max_len)
    if device.type == "cuda":
        torch.cuda.synchronize()
    wb = model.weight_bytes()
    attn, err, anotes = pick_attention(model, device, dtype)
    log(f"[{shape.name} {dname}] built {model.param_count() / 1e9:.3f} B params, {wb / 1e9:.3f} GB weights "
        f"in {time.perf_counter() - t0:.1f}s; attention={attn.mode}; self-test rel err {err:.2e} "
        + ("; ".join(anotes)))
    base_note = f"attn={attn.mode}; selftest_rel_err={err:.2e}; weights=random; batch=1"
    if "SELFTEST_FAIL" in anotes:
        base_note += "; SELFTEST_FAIL"
    if shape.arch == "opt" or shape.name.startswith("llama2"):
        base_note += "; kv+k may exceed the model's trained context (timing only)"
    ids_all = torch.randint(0, shape.vocab, (max(plan.ks),), device=device)
    attn_ref = [attn]
    for kind, k, kv, graphed in step_points(plan.kv_lens, plan.ks, modes):
        if budget.expired():
            log(f"  time budget reached: skipping rest of {shape.name} {dname}")
            return
        ids = ids_all[:k].clone()

        def fn(ids=ids, kv=kv):
            return model.step(ids, kv, attn_ref[0])

        row_note = base_note
        if plan.kernel_count and device.type == "cuda" and kv == plan.kernel_count_kv:
            with torch.no_grad():
                kc = count_kernels(fn)
            if kc is not None:
                row_note += f"; kernels_per_step={kc[0]}; kernel_time_sum_s={kc[1]:.6g}"
        with torch.no_grad():
            g = None
            if graphed:
                try:
                    g = Graphed(fn)
                except Exception as e:  # noqa: BLE001
                    log(f"  graph capture failed ({type(e).__name__}: {e}); "
                        f"attention {attn.mode} -> bool_mask, retrying")
                    torch.cuda.synchronize()
                    attn = Attention("bool_mask")
                    attn_ref[0] = attn
                    base_note = base_note.replace("attn=lower_right", "attn=bool_mask(capture fallback)")
                    row_note = row_note.replace("attn=lower_right", "attn=bool_mask(capture fallback)")
                    try:
                        g = Graphed(fn)
                    except Exception as e2:  # noqa: BLE001
                        log(f"  graph capture failed again ({type(e2).__name__}); measuring eager")
                        row_note += "; graph capture failed"
            if g is not None:
                ts = time_fn(g, device, plan.warmup, plan.reps, max_total_s=plan.max_config_s)
                del g
            else:
                ts = time_fn(fn, device, plan.warmup, plan.reps, max_total_s=plan.max_config_s)
        used_graph = graphed and "graph capture failed" not in row_note
        kvb = model.kv_bytes(kv, k)
        med = out.row(ts, model=shape.name, dtype=dname, kind=kind, cuda_graph=used_graph,
                      k_tokens=k, kv_len=kv, bytes=wb + kvb, weight_bytes=wb, kv_bytes=kvb,
                      flops=model.flops(kv, k), notes=row_note)
        log(f"  {kind:6s} k={k:2d} kv={kv:5d} graph={int(graphed)}: {med * 1e3:8.3f} ms "
            f"({(wb + kvb) / med / 1e12:.2f} TB/s eff)")
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()




def pick_device(requested: str | None):
    """``--device`` as a torch.device (default: cuda if available, else cpu); a CUDA device
    that is not there is an :class:`InputError`."""
    device = torch.device(requested or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"{COMMAND}: --device {requested}: no CUDA device is available "
                             f"(torch {torch.__version__}); use --device cpu")
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise InputError(f"{COMMAND}: --device {requested}: only {torch.cuda.device_count()} CUDA "
                             f"device(s) here")
    return device


def measure(plan: GpuPlan) -> int:
    """Run a checked plan: ceilings, H2D copies and linear microbenchmarks (CUDA only), then every
    model in bf16 and in int8 weight-only, one CSV row per measurement. A model that fails (out
    of memory, ...) is logged and skipped; the exit code is 0 as long as the CSV was written."""
    t_start = time.perf_counter()
    budget = Budget(plan.budget_s)
    device = pick_device(plan.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
    env = env_info(device)
    log(f"env: {env}")
    if device.type == "cuda":
        p = torch.cuda.get_device_properties(device)
        log(f"device: {p.name}, {p.multi_processor_count} SMs, {p.total_memory / 2**30:.1f} GiB")
    failures = []
    with MeasurementCsv(plan.out, CSV_COLUMNS, env) as out:
        int8_ok, int8_note = probe_int8(device) if plan.int8 else (False, "disabled by --no-int8")
        log(f"int8 weight-only: {int8_note}")
        if plan.ceilings:
            measure_ceilings(out, device, plan)
        if plan.h2d:
            measure_h2d(out, device, plan)
        measure_linear_micro(out, device, plan, int8_ok)

        use_graph = device.type == "cuda" and plan.graph
        free = torch.cuda.mem_get_info(device)[0] if device.type == "cuda" else None
        for n in plan.models:
            try:
                measure_model(out, device, plan.catalog[n], "none", plan,
                              graph_modes(n, use_graph, plan.eager_models), budget)
            except torch.cuda.OutOfMemoryError as e:
                failures.append(f"{n} bf16: OOM ({e})"[:200])
                log(f"SKIP {n} bf16: does not fit ({free} B free at start)")
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001 - one model failing must not lose the others' rows
                failures.append(f"{n} bf16: {type(e).__name__}: {e}"[:300])
                log(f"FAIL {n} bf16: {type(e).__name__}: {e}")
        for n in plan.int8_models if int8_ok else []:
            try:
                measure_model(out, device, plan.catalog[n], "int8", plan, [use_graph], budget)
            except Exception as e:  # noqa: BLE001
                failures.append(f"{n} int8wo: {type(e).__name__}: {e}"[:300])
                log(f"FAIL {n} int8wo: {type(e).__name__}: {e}")
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    log(f"wrote {out.n_rows} rows to {plan.out} in {time.perf_counter() - t_start:.1f}s")
    for f in failures:
        log(f"failure: {f}")
    return 0
