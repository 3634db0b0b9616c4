"""``python -m ahasd_sim measure moe``: MoE expert offload primitives on a CUDA GPU (
written to ``validation/h200_moe_measured.csv``, read by ``python -m ahasd_sim validate --moe``
and ``scripts/validate_moe_gpu.py``).

Two families of rows, one tidy CSV (one row per measurement, flushed as it goes):

* ``h2d_experts`` -- ``n`` expert-sized host->device copies (pinned host memory, one
  ``copy_(non_blocking=True)`` per expert on one stream, as an expert cache fills its slots);
  timed with CUDA events over the whole group.
* ``moe_step_fused`` / ``moe_step_loop`` -- one MoE FFN layer (SwiGLU experts, top-k routing)
  for ``n_tokens`` tokens that hit ``distinct_experts`` experts: ``fused``: a grouped GEMM over
  the hit experts (``torch._grouped_mm`` when the build has it, else per-expert GEMMs after one
  sort, noted per row); ``loop``: the Hugging Face transformers style loop, per hit expert a
  ``torch.where`` (host sync), gather, three linears, activation, scale and ``index_add_``.
  Timed end to end with host wall clock after ``torch.cuda.synchronize`` (the loop is
  launch/sync bound, which is the point), median of repetitions.

* ``moe_pass_offloaded`` (``--passes``) -- a composed offloaded decode / tree-verify pass of
  Qwen3-30B-A3B shapes with random weights: per layer the dense stand-in (QKV and O projections,
  attention over ``kv_len`` cached tokens, the router), then the layer's missing experts copied
  from pinned host memory on a copy stream (the expert compute waits for them on an event), then
  the fused MoE layer over the layer's distinct experts; 48 layers, then the LM head. One row per
  (tokens, distinct experts per layer, missing experts per layer); ``n_experts_copied`` is per
  pass. Compared with the simulator (``schedule_verify`` on the platform that ran it) by
  :func:`ahasd_sim.validate_moe.model_pass_s`.

Shapes: Qwen3-30B-A3B (d 2048, expert FFN 768, 128 experts, top-8) and the MoEfied
Qwen2.5-Coder-1.5B (d 1536, 8960 / E neurons per expert, top-8), bf16. ``--smoke`` runs on the
CPU in fp32 with a tiny layer, in seconds.

This module is the part without torch (shapes, routings, byte counts, the plan); the layer
and the timed runs are in :mod:`.moe_torch`.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

COMMAND = "measure moe"

SHAPES = {  # name -> (d_model, expert_ffn, n_experts, top_k)
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "moefied-qwen2.5-coder-1.5b-e64": (1536, 140, 64, 8),
}
SMOKE_LAYER = (64, 16, 16, 4)   # (d_model, expert_ffn, n_experts, top_k) of every shape with --smoke
SMOKE_REPS = 3
#: the composed pass: Qwen3-30B-A3B's attention shape (q heads, kv heads, head dim), layers, vocab
PASS_SHAPE = {"d": 2048, "f": 768, "e": 128, "k": 8, "heads": 32, "kv_heads": 4, "head_dim": 128, "layers": 48,
              "vocab": 151936, "kv_len": 1024}
SMOKE_PASS_SHAPE = {"d": 64, "f": 16, "e": 16, "k": 4, "heads": 4, "kv_heads": 2, "head_dim": 16, "layers": 3,
                    "vocab": 256, "kv_len": 32}
CSV_COLUMNS = ["gpu_name", "driver", "torch_version", "cuda_version", "date_utc", "model", "dtype", "kind",
               "n_experts_copied", "n_tokens", "distinct_experts", "bytes", "latency_s_median", "latency_s_p10",
               "latency_s_p90", "n_reps", "notes"]
#: (bytes per parameter, the dtype named in the notes) of the expert copies
COPY_PRECISIONS = ((2.0, "bf16"), (0.5, "int4-bytes"))
GROUPED_GEMM_ALIGN = 8   # torch._grouped_mm needs 16-byte strides: FFN widths padded to 8 bf16


def expert_copy_counts(smoke: bool) -> tuple[int, ...]:
    """How many experts one timed group of copies moves."""
    return (1, 2) if smoke else (1, 8, 32, 64)


def token_counts(smoke: bool) -> tuple[int, ...]:
    """Tokens of one timed MoE layer step."""
    return (1, 4) if smoke else (1, 4, 16, 32, 64)


def pass_points(smoke: bool, k: int, e: int) -> list[tuple[int, int, int]]:
    """(tokens, distinct experts per layer, missing experts per layer) of the composed passes:
    a decode step (1 token) and tree verifications (8, 32 tokens), each all-resident, a quarter
    missing and all missing."""
    out = []
    for n in ((1, 4) if smoke else (1, 8, 32)):
        u = min(e, n * k if n == 1 else max(k, (n * k) // 3))
        for miss in sorted({0, u // 4, u}):
            out.append((n, u, miss))
    return out


def expert_bytes(d_model: int, expert_ffn: int, bytes_per_param: float) -> int:
    """Bytes of one SwiGLU expert (gate, up and down matrices)."""
    return int(3 * d_model * expert_ffn * bytes_per_param)


def padded_ffn(expert_ffn: int) -> int:
    """The FFN width rounded up to :data:`GROUPED_GEMM_ALIGN` (the padding neurons are zero, so
    the result is exact)."""
    return -(-expert_ffn // GROUPED_GEMM_ALIGN) * GROUPED_GEMM_ALIGN


def distinct_expert_counts(n_tokens: int, top_k: int, n_experts: int) -> list[int]:
    """The distinct-expert counts a step of ``n_tokens`` is timed at: top_k (every token picks the
    same experts), every pick distinct (capped at n_experts), and a half and a quarter of that."""
    picks = n_tokens * top_k
    return sorted({top_k, min(n_experts, picks), min(n_experts, max(top_k, picks // 2)),
                   min(n_experts, max(top_k, picks // 4))})


def routing_expert_ids(n_tokens: int, top_k: int, distinct: int) -> list[list[int]]:
    """Top-k expert ids per token that cover exactly ``distinct`` experts (round robin over the
    first ``distinct`` ids; needs n_tokens * top_k >= distinct >= top_k)."""
    if not top_k <= distinct <= n_tokens * top_k:
        raise ValueError(f"{distinct} distinct experts cannot be hit by {n_tokens} tokens x top-{top_k}")
    return [[(t * top_k + j) % distinct for j in range(top_k)] for t in range(n_tokens)]


def layer_weight_bytes(distinct: int, d_model: int, expert_ffn: int, elem_bytes: int) -> int:
    """Weight bytes a layer step reads: every hit expert's three matrices (unpadded)."""
    return distinct * 3 * d_model * expert_ffn * elem_bytes


@dataclass(frozen=True)
class MoePlan:
    """A checked ``measure moe`` command line."""

    out: str
    smoke: bool
    reps: int
    passes: bool = False


def plan_moe(args) -> MoePlan:
    if not args.reps >= 1:
        raise InputError(f"{COMMAND}: --reps: expected an integer >= 1, got {args.reps!r}")
    return MoePlan(out=args.out, smoke=args.smoke, reps=SMOKE_REPS if args.smoke else args.reps,
                   passes=bool(getattr(args, "passes", False)))


def run_measure_moe(args) -> int:
    """Body of ``measure moe``: check the options, then measure (needs torch)."""
    plan = plan_moe(args)
    from .common import refuse_shipped_out, require_torch
    refuse_shipped_out(COMMAND, plan.out, getattr(args, "force", False))
    require_torch(COMMAND)
    from .moe_torch import measure
    return measure(plan)
