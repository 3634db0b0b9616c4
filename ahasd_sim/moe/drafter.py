"""The drafter kinds of mode ``moe_offload`` (``run.drafter``) and the EAGLE draft head's shape.

An EAGLE-style draft head (EAGLE-1/2/3, https://arxiv.org/abs/2406.16858) is one decoder layer
on the target's hidden size plus the target's LM head, run over the nodes of one draft level.
For a MoE target the head's FFN is dense (EAGLE heads are dense decoder layers), of width
``moe.head_ffn_width``; 0 takes the routed width a token sees, top-k x expert FFN width -- for
Qwen3-30B-A3B 8 x 768 = 6144, equal to its config's (unused) dense ``intermediate_size``
(https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json). EAGLE-3's fusion layer
(3 x hidden -> hidden) is left out: 12.6 M parameters against the 311 M of Qwen3-30B-A3B's LM
head (< 4% of the head's bytes). The head's embedding is the target's (shared, not counted in
GPU memory).
"""
from __future__ import annotations

import dataclasses

from ..workload.models import ModelSpec

KINDS = ("auto", "model", "head", "lookup")


def eagle_head_spec(target: ModelSpec, ffn_width: int = 0) -> ModelSpec:
    """One dense decoder layer of the target's hidden size + the target's LM head."""
    width = int(ffn_width) or (target.n_active_experts * target.d_expert_ffn if target.is_moe else target.d_ffn)
    return dataclasses.replace(
        target, name=f"{target.name}-eagle-head", display_name=f"EAGLE head of {target.display_name}",
        n_layers=1, d_ffn=width, n_experts=0, n_active_experts=0, d_expert_ffn=0, n_shared_experts=0,
        published_params_b=0.0, published_active_params_b=0.0,
        notes="EAGLE-style draft head: one dense decoder layer + the target's LM head (derived)")


def head_weight_bytes(head: ModelSpec) -> float:
    """GPU bytes of the head beyond the target's: its layer and LM head (the embedding is shared)."""
    return float((head.param_count() - head.vocab_size * head.d_model) * head.weight_bytes_per_param)


def resolve_kind(kind: str, policy_drafts: bool, drafter_device: str = "gpu") -> str:
    """``auto``: the EAGLE head for the drafting tree policies on the GPU (EAGLE, SpecFit, EcoSpec
    and the expert budget are EAGLE-3-based methods); the standalone model on a mobile drafter
    device (a head needs the target's features) and for autoregressive decoding (no drafter)."""
    if kind != "auto":
        return kind
    return "head" if policy_drafts and drafter_device == "gpu" else "model"
