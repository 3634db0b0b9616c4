"""``python -m ahasd_sim measure gpu``: real GPU latencies of LLM decode / verification steps
(written to ``validation/h200_measured.csv``, read by ``python -m ahasd_sim validate``).

Builds plain-PyTorch decoder stacks with the *real* shapes of the models the simulator uses
(random weights, all layers, real weight bytes), then times with CUDA events:

* ``decode``  -- one step with k = 1 new token over a KV cache of ``kv_len``;
* ``verify``  -- one step that scores k = 1, 2, 4, 8, 16 drafted tokens at once (causal among
  themselves, attending to ``kv_len`` cached tokens), with the LM head applied to all k positions;
* ``h2d_pinned`` / ``h2d_pageable`` -- host-to-device copy time vs size;
* ``ceiling_membw`` / ``ceiling_gemm`` -- a large device-to-device copy and a large bf16 GEMM,
  the measured ceilings;
* ``linear_micro`` -- single-linear microbenchmarks (bf16 vs int8 weight-only) that explain the
  int8 rows.

Everything is written to one tidy CSV, one row per measurement, flushed as it goes so a run cut
short still leaves usable rows. ``--smoke`` measures tiny shapes (on a CPU in seconds).

This module is the part without torch: the shapes, what a run measures (:func:`plan_gpu`), and
the byte and FLOP counts of the CSV's ``weight_bytes``, ``kv_bytes`` and ``flops`` columns. The
tensors and the timed steps are in :mod:`.gpu_torch`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import InputError, did_you_mean

COMMAND = "measure gpu"
DEFAULT_OUT = "validation/h200_measured.csv"


@dataclass(frozen=True)
class Shape:
    name: str
    arch: str  # "opt" (LayerNorm, ReLU MLP, learned positions) | "llama" (RMSNorm, SwiGLU, RoPE)
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_ffn: int
    vocab: int
    qkv_bias: bool = False
    tied_embeddings: bool = False

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads


# Real shapes (from the models' published configs; the names are the simulator's model names,
# which `validate` looks up). OPT's config uses ReLU (activation_function="relu"); the op mix is
# the same as a GELU MLP.
MODELS: dict[str, Shape] = {
    s.name: s
    for s in [
        Shape("opt-1.3b", "opt", 2048, 24, 32, 32, 8192, 50272, qkv_bias=True, tied_embeddings=True),
        Shape("opt-6.7b", "opt", 4096, 32, 32, 32, 16384, 50272, qkv_bias=True, tied_embeddings=True),
        Shape("llama2-7b", "llama", 4096, 32, 32, 32, 11008, 32000),
        Shape("llama2-13b", "llama", 5120, 40, 40, 40, 13824, 32000),
        Shape("qwen2.5-coder-1.5b", "llama", 1536, 28, 12, 2, 8960, 151936, qkv_bias=True, tied_embeddings=True),
        Shape("qwen2.5-coder-0.5b", "llama", 896, 24, 14, 2, 4864, 151936, qkv_bias=True, tied_embeddings=True),
    ]
}

SMOKE_MODELS: dict[str, Shape] = {
    s.name: s
    for s in [
        Shape("tiny-opt", "opt", 64, 2, 4, 4, 256, 1000, qkv_bias=True, tied_embeddings=True),
        Shape("tiny-llama", "llama", 64, 2, 4, 4, 176, 1000),
        Shape("tiny-qwen", "llama", 64, 2, 4, 2, 160, 1000, qkv_bias=True, tied_embeddings=True),
    ]
}

CSV_COLUMNS = [
    "gpu_name", "driver", "torch_version", "cuda_version", "date_utc",
    "model", "dtype", "kind", "k_tokens", "kv_len", "bytes",
    "latency_s_median", "latency_s_p10", "latency_s_p90", "n_reps", "cuda_graph",
    # extra columns (documented in validation/README.md)
    "weight_bytes", "kv_bytes", "flops", "notes",
]

DEFAULT_KV_LENS = [128, 512, 1024, 2048, 4096]
DEFAULT_KS = [1, 2, 4, 8, 16]
DEFAULT_EAGER_MODELS = ["llama2-7b", "qwen2.5-coder-0.5b"]
SMOKE_MAX_KV, SMOKE_MAX_REPS, SMOKE_MAX_WARMUP = 512, 5, 2
CACHE_SLACK_TOKENS = 8   # KV cache positions allocated past the longest kv_len + k


# ---------------------------------------------------------------- byte and FLOP counts
def linears(shape: Shape) -> list[tuple[int, int, bool]]:
    """(n_in, n_out, bias) of one layer's linears, as the measured model builds them (fused QKV
    and, for LLaMA-style models, fused gate/up)."""
    s = shape
    d, hd, H, Hkv = s.d_model, s.head_dim, s.n_heads, s.n_kv_heads
    out = [(d, (H + 2 * Hkv) * hd, s.qkv_bias), (H * hd, d, s.arch == "opt")]
    if s.arch == "opt":
        out += [(d, s.d_ffn, True), (s.d_ffn, d, True)]
    else:
        out += [(d, 2 * s.d_ffn, False), (s.d_ffn, d, False)]
    return out


def linear_bytes(n_in: int, n_out: int, bias: bool, quant: str, elem_bytes: int) -> int:
    """Bytes of one linear: weight (int8 weight-only: 1 byte each plus one scale per output
    row, in the activation dtype) and bias."""
    b = n_in * n_out * (1 if quant == "int8" else elem_bytes)
    if quant == "int8":
        b += n_out * elem_bytes
    if bias:
        b += n_out * elem_bytes
    return b


def lm_head_is_tied(shape: Shape, quant: str) -> bool:
    """Tied embeddings stream the embedding matrix as the LM head; int8 has its own LM head."""
    return shape.tied_embeddings and quant != "int8"


def weight_bytes(shape: Shape, quant: str, elem_bytes: int) -> int:
    """Bytes of weights one step streams (the CSV's ``weight_bytes``): every linear with its bias
    and scales, the norm weights (and LayerNorm biases) of each layer, the final norm's weight,
    and the LM head (tied: the embedding matrix once). The embedding gather of k rows is not
    counted."""
    s = shape
    per_layer = sum(linear_bytes(i, o, b, quant, elem_bytes) for i, o, b in linears(s))
    per_layer += (4 if s.arch == "opt" else 2) * s.d_model * elem_bytes   # ln1/ln2 weights (+ biases)
    total = s.n_layers * per_layer + s.d_model * elem_bytes                 # + final norm weight
    if lm_head_is_tied(s, quant):
        return total + s.vocab * s.d_model * elem_bytes
    return total + linear_bytes(s.d_model, s.vocab, False, quant, elem_bytes)


def kv_cache_bytes(shape: Shape, kv_len: int, n_new: int, elem_bytes: int) -> int:
    """KV-cache bytes one step reads (kv_len + n_new positions, K and V; the CSV's ``kv_bytes``)."""
    s = shape
    return s.n_layers * 2 * s.n_kv_heads * s.head_dim * (kv_len + n_new) * elem_bytes


def step_flops(shape: Shape, kv_len: int, n_new: int) -> int:
    """Approximate FLOPs of one step (the CSV's ``flops``): 2 x linear weights (LM head
    included) x n_new, plus attention (QK^T and PV)."""
    s = shape
    lin_params = s.n_layers * sum(i * o for i, o, _b in linears(s)) + s.vocab * s.d_model
    attn = s.n_layers * 2 * 2 * s.n_heads * s.head_dim * n_new * (kv_len + n_new)
    return 2 * lin_params * n_new + attn


# ---------------------------------------------------------------- what a run measures
@dataclass(frozen=True)
class GpuPlan:
    """A checked ``measure gpu`` command line, with ``--smoke`` applied."""

    out: str
    device: str | None          # None: cuda if available, else cpu
    smoke: bool
    smoke_fp32: bool
    catalog: dict
    models: list[str]           # measured in bf16 (empty with --no-bf16)
    int8: bool                  # int8 weight-only runs wanted (not --no-int8; the kernel may still be missing)
    int8_models: list[str]      # measured in int8 weight-only, if int8 works here
    eager_models: list[str]     # bf16 models also measured without CUDA graphs
    kv_lens: list[int]
    ks: list[int]
    reps: int
    warmup: int
    graph: bool                 # CUDA graphs allowed (they are used on CUDA only)
    h2d: bool
    ceilings: bool
    kernel_count: bool
    kernel_count_kv: int
    membw_bytes: int
    gemm_n: int
    max_config_s: float
    budget_s: float

    @property
    def max_len(self) -> int:
        """KV cache positions a model allocates."""
        return max(self.kv_lens) + max(self.ks) + CACHE_SLACK_TOKENS


def _at_least(option: str, values, low, what: str) -> None:
    for v in values:
        if not v >= low:   # also refuses NaN
            raise InputError(f"{COMMAND}: {option}: expected {what}, got {v!r}")


def _known(option: str, names, catalog) -> list[str]:
    for n in names:
        if n not in catalog:
            raise InputError(f"{COMMAND}: {option}: unknown model '{n}'{did_you_mean(n, catalog)}; "
                             f"choose from {', '.join(catalog)}")
    return list(names)


def parse_device(text: str | None) -> str | None:
    """``--device``: cpu, cuda or cuda:N (None: chosen at run time)."""
    if text is None or re.fullmatch(r"cpu|cuda(:\d+)?", text):
        return text
    raise InputError(f"{COMMAND}: --device: expected cpu, cuda or cuda:N, got '{text}'")


def plan_gpu(args) -> GpuPlan:
    """Check the options and apply ``--smoke`` (tiny shapes, KV lengths up to 512, at most 5
    repetitions and 2 warm-ups). Raises :class:`InputError` (one line) on bad input."""
    if not args.kv:
        raise InputError(f"{COMMAND}: --kv: expected at least one KV length")
    if not args.k:
        raise InputError(f"{COMMAND}: --k: expected at least one verify width")
    _at_least("--kv", args.kv, 0, "KV lengths >= 0")
    _at_least("--k", args.k, 1, "verify widths >= 1")
    _at_least("--reps", [args.reps], 1, "an integer >= 1")
    _at_least("--warmup", [args.warmup], 0, "an integer >= 0")
    _at_least("--kernel-count-kv", [args.kernel_count_kv], 0, "a KV length >= 0")
    _at_least("--membw-bytes", [args.membw_bytes], 1, "a size in bytes >= 1")
    _at_least("--gemm-n", [args.gemm_n], 1, "a matrix size >= 1")
    for option, v in (("--max-config-s", args.max_config_s), ("--budget-s", args.budget_s)):
        if not v > 0 or v == float("inf"):
            raise InputError(f"{COMMAND}: {option}: expected a finite number of seconds > 0, got {v!r}")
    if args.smoke_fp32 and not args.smoke:
        raise InputError(f"{COMMAND}: --smoke-fp32 needs --smoke")
    catalog = SMOKE_MODELS if args.smoke else MODELS
    kv_lens, reps, warmup = list(args.kv), args.reps, args.warmup
    eager = args.eager_models
    if args.smoke:
        kv_lens = [k for k in kv_lens if k <= SMOKE_MAX_KV] or [128]
        reps, warmup = min(reps, SMOKE_MAX_REPS), min(warmup, SMOKE_MAX_WARMUP)
        if eager is None:
            eager = list(SMOKE_MODELS)[:1]
    elif eager is None:
        eager = list(DEFAULT_EAGER_MODELS)
    models = _known("--models", args.models, catalog) if args.models else list(catalog)
    int8 = _known("--int8-models", args.int8_models, catalog) if args.int8_models is not None else models
    return GpuPlan(
        out=args.out, device=parse_device(args.device), smoke=args.smoke, smoke_fp32=args.smoke_fp32,
        catalog=catalog, models=[] if args.no_bf16 else models, int8=not args.no_int8, int8_models=int8,
        eager_models=_known("--eager-models", eager, catalog), kv_lens=kv_lens, ks=list(args.k),
        reps=reps, warmup=warmup, graph=not args.no_graph, h2d=not args.skip_h2d,
        ceilings=not args.skip_ceilings, kernel_count=args.kernel_count, kernel_count_kv=args.kernel_count_kv,
        membw_bytes=args.membw_bytes, gemm_n=args.gemm_n, max_config_s=args.max_config_s,
        budget_s=args.budget_s)


def graph_modes(model: str, use_graph: bool, eager_models) -> list[bool]:
    """CUDA-graph settings a bf16 model is measured with: graphed (eager too for the models of
    ``--eager-models``, to show launch overhead), or eager only where graphs are off."""
    if not use_graph:
        return [False]
    return [False, True] if model in eager_models else [True]


def step_points(kv_lens, ks, modes) -> list[tuple[str, int, int, bool]]:
    """(kind, k, kv_len, graphed) of every timed step of one model, in the order measured:
    per KV length one decode (k = 1) and a verify per width, each in every graph mode."""
    steps = [("decode", 1)] + [("verify", k) for k in ks]
    return [(kind, k, kv, graphed) for kv in kv_lens for kind, k in steps for graphed in modes]


def run_measure_gpu(args) -> int:
    """Body of ``measure gpu``: check the options, then measure (needs torch)."""
    plan = plan_gpu(args)
    from .common import refuse_shipped_out, require_torch
    refuse_shipped_out(COMMAND, plan.out, getattr(args, "force", False))
    require_torch(COMMAND)
    from .gpu_torch import measure
    return measure(plan)
