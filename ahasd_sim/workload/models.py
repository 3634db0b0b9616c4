"""LLM architecture specs: the draft (DLM) and target (TLM) models.

Every shipped model is a frozen, hashable :class:`ModelSpec` with its published
shape and a source URL.  Parameter counts are *computed* from the shape
(embeddings + every layer + untied LM head; all experts for MoE) and tested
against the published size (3% tolerance, tests/test_workload.py).

Computed vs published (INT8 = 1 byte/param, so ``weight_bytes()`` in bytes
equals the parameter count):

=====================  ==============  =========  ==========================
key                    computed        published  note
=====================  ==============  =========  ==========================
opt-1.3b               1,315,758,080   1.3 B      HF count is identical
opt-6.7b               6,658,473,984   6.7 B
llama2-7b              6,738,415,616   6.74 B     HF count is identical
llama2-13b             13,015,864,320  13.0 B     HF count is identical
palm-like-8b           8,028,164,096   8 B        shape assumed, see below
palm-like-30b          29,880,819,712  30 B       shape assumed, see below
qwen2.5-coder-0.5b     494,032,768     0.49 B     tied (official)
qwen2.5-coder-1.5b     1,543,714,304   1.54 B     tied (official)
qwen3-30b-a3b          30,532,122,624  30.5 B     active 3,353,032,704 (3.3 B)
llama3-8b, llama3.1-8b 8,030,261,248   8.03 B     same shape (mobile zoo)
llama3.2-1b            1,235,814,400   1.24 B     tied
llama3.2-3b            3,212,749,824   3.21 B     tied
qwen2.5-0.5b           494,032,768     0.49 B     tied (= Coder shape)
qwen2.5-1.5b           1,543,714,304   1.54 B     tied (= Coder shape)
qwen2.5-7b             7,615,616,512   7.61 B     untied
=====================  ==============  =========  ==========================

Modelling decisions (documented here, tested in tests/test_workload.py):

* **Precision.**  The AHASD paper runs everything in INT8, so the defaults are
  1 byte per weight, per KV element and per activation element.  Use
  :func:`with_precision` for BF16 (2.0) / INT4 (0.5) variants.
* **OPT activation.**  OPT uses ReLU, not GELU.  ``activation`` records
  "relu"; ``ffn_type`` is "gelu" (two matrices) and its activation op is put in
  the AAU's "gelu" nonlinear class, which covers every pointwise activation
  (the paper maps SiLU/SwiGLU there too).
* **OPT positional embeddings.**  Learned, ``max_position_embeddings + 2`` =
  2050 rows (HF's offset of 2); counted in the parameters/weight storage but
  only gathered (n rows), never streamed, in a forward pass.
* **Biases.**  OPT has biases on every linear layer and on LayerNorm; Qwen2.5
  has biases on q/k/v only; LLaMA2, PaLM-like and Qwen3 have none.  Qwen3 has
  per-head RMSNorm on q and k (``qk_norm``).  All are included for exact counts.
* **PaLM-like 8B / 30B** (the paper gives only hidden size / layers / heads /
  vocab): decoder-only, SwiGLU (3 matrices), LayerNorm without bias, no linear
  biases, tied 256,000-row embedding like PaLM, standard *multi-head* attention
  (``n_kv_heads == n_heads``; real PaLM uses multi-query attention, which would
  cut KV bytes 16x/64x; we assume the paper's simulator used plain MHA), sequential
  (not PaLM's parallel) attention/FFN blocks with two norms per layer.

  - 8B: d 4096, 32 L, 16 H (head_dim 256), FFN 12288 (= 3 d) -> 8.03 B.
    (Real PaLM-8B: MQA and FFN 4 d = 16384 -> 8.63 B.)
  - 30B: d 8192, 36 L, 64 H (head_dim 128), FFN 20480 (= 2.5 d) -> 29.9 B.
    36 layers follows the reference's "~36 gives ~29 B"; the FFN was chosen so
    the total lands on the nominal 30 B with the 2.1 B-parameter tied embedding.
* **Qwen2.5-Coder-0.5B head.**  The official checkpoint ties the LM head to
  the embedding (0.49 B).  The GGUF used to record traces has an *untied*
  output head (+136 M params); the default spec is the official tied one.  Use
  ``dataclasses.replace(get_model("qwen2.5-coder-0.5b"), tied_embeddings=False)``
  for the GGUF layout.
* **MoE** (Qwen3-30B-A3B): 128 experts, top-8, no shared experts, every layer
  sparse.  ``param_count`` counts all experts; ``active_param_count`` counts
  top-k (+ shared) experts plus everything dense, including the router.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
from dataclasses import dataclass
from typing import Mapping

from ..errors import reported_in_one_line

__all__ = [
    "ModelSpec",
    "MODELS",
    "PAPER_PAIRS",
    "UnknownModelError",
    "get_model",
    "moefied",
    "with_precision",
]

_FFN_TYPES = ("gelu", "swiglu")
_NORM_TYPES = ("layernorm", "rmsnorm")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """Shape of a decoder-only transformer LM.  Frozen and hashable (used as a
    cache key by :func:`ahasd_sim.workload.ops.forward_ops`).  Construct with
    keyword arguments."""

    name: str
    display_name: str
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ffn: int
    ffn_type: str
    norm_type: str
    vocab_size: int
    tied_embeddings: bool
    published_params_b: float
    source: str
    weight_bytes_per_param: float = 1.0
    kv_bytes_per_elem: float = 1.0
    act_bytes_per_elem: float = 1.0
    # MoE (n_experts == 0: dense FFN of size d_ffn)
    n_experts: int = 0
    n_active_experts: int = 0
    d_expert_ffn: int = 0
    n_shared_experts: int = 0  # always-active experts, each of size d_expert_ffn
    published_active_params_b: float = 0.0
    # details needed for exact counts
    activation: str = ""  # actual pointwise function: "relu", "silu", "gelu"...
    linear_bias: bool = False  # bias on every linear layer (OPT)
    qkv_bias: bool = False  # bias on q/k/v projections only (Qwen2.x)
    norm_bias: bool = False  # LayerNorm has a bias (OPT); RMSNorm never does
    qk_norm: bool = False  # per-head RMSNorm on q and k (Qwen3)
    n_pos_embeddings: int = 0  # learned absolute positional-embedding rows (OPT)
    max_context: int = 0  # max positions supported by the checkpoint (informational)
    notes: str = ""

    def __post_init__(self) -> None:
        if self.ffn_type not in _FFN_TYPES:
            raise ValueError(f"{self.name}: ffn_type must be one of {_FFN_TYPES}, got {self.ffn_type!r}")
        if self.norm_type not in _NORM_TYPES:
            raise ValueError(f"{self.name}: norm_type must be one of {_NORM_TYPES}, got {self.norm_type!r}")
        for f in ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "vocab_size"):
            if getattr(self, f) <= 0:
                raise ValueError(f"{self.name}: {f} must be positive")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"{self.name}: n_heads must be a multiple of n_kv_heads")
        if self.n_experts:
            if not (0 < self.n_active_experts <= self.n_experts) or self.d_expert_ffn <= 0:
                raise ValueError(f"{self.name}: MoE needs 0 < n_active_experts <= n_experts and d_expert_ffn > 0")
        elif self.d_ffn <= 0:
            raise ValueError(f"{self.name}: dense model needs d_ffn > 0")
        if min(self.weight_bytes_per_param, self.kv_bytes_per_elem, self.act_bytes_per_elem) <= 0:
            raise ValueError(f"{self.name}: byte widths must be positive")

    # ---- shape helpers ------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def q_dim(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def n_ffn_matrices(self) -> int:
        return 3 if self.ffn_type == "swiglu" else 2

    # ---- parameter counts ---------------------------------------------------
    def norm_params(self) -> int:
        """Parameters of one d_model-wide norm."""
        return self.d_model * (2 if (self.norm_type == "layernorm" and self.norm_bias) else 1)

    def attention_params_per_layer(self) -> int:
        d = self.d_model
        p = d * self.q_dim + 2 * d * self.kv_dim + self.q_dim * d
        if self.linear_bias:
            p += self.q_dim + 2 * self.kv_dim + d
        elif self.qkv_bias:
            p += self.q_dim + 2 * self.kv_dim
        if self.qk_norm:
            p += 2 * self.head_dim
        return p

    def _ffn_params(self, d_inner: int) -> int:
        p = self.n_ffn_matrices * self.d_model * d_inner
        if self.linear_bias:
            p += (self.n_ffn_matrices - 1) * d_inner + self.d_model
        return p

    def expert_params(self) -> int:
        """Parameters of one expert FFN (MoE only)."""
        return self._ffn_params(self.d_expert_ffn) if self.is_moe else 0

    def router_params_per_layer(self) -> int:
        return self.d_model * self.n_experts if self.is_moe else 0

    def ffn_params_per_layer(self, active_only: bool = False) -> int:
        if not self.is_moe:
            return self._ffn_params(self.d_ffn)
        n = (self.n_active_experts if active_only else self.n_experts) + self.n_shared_experts
        return n * self.expert_params() + self.router_params_per_layer()

    def layer_params(self, active_only: bool = False) -> int:
        return (
            self.attention_params_per_layer()
            + self.ffn_params_per_layer(active_only)
            + 2 * self.norm_params()
        )

    def embedding_params(self) -> int:
        """Token embedding table plus learned positional embeddings."""
        return (self.vocab_size + self.n_pos_embeddings) * self.d_model

    def lm_head_params(self) -> int:
        """Separately stored LM-head parameters (0 when tied)."""
        return 0 if self.tied_embeddings else self.vocab_size * self.d_model

    def param_count(self) -> int:
        return (
            self.embedding_params()
            + self.n_layers * self.layer_params()
            + self.norm_params()  # final norm
            + self.lm_head_params()
        )

    def active_param_count(self) -> int:
        return (
            self.embedding_params()
            + self.n_layers * self.layer_params(active_only=True)
            + self.norm_params()
            + self.lm_head_params()
        )

    def weight_bytes(self) -> int:
        """Bytes needed to store every weight (all experts) at this precision."""
        return int(round(self.param_count() * self.weight_bytes_per_param))

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes added per token: K and V, every layer, every KV head."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * self.kv_bytes_per_elem


def with_precision(
    spec: ModelSpec,
    weight_bytes_per_param: float | None = None,
    kv_bytes_per_elem: float | None = None,
    act_bytes_per_elem: float | None = None,
) -> ModelSpec:
    """Copy of ``spec`` with other byte widths (``None`` keeps the current one)."""
    changes = {}
    if weight_bytes_per_param is not None:
        changes["weight_bytes_per_param"] = float(weight_bytes_per_param)
    if kv_bytes_per_elem is not None:
        changes["kv_bytes_per_elem"] = float(kv_bytes_per_elem)
    if act_bytes_per_elem is not None:
        changes["act_bytes_per_elem"] = float(act_bytes_per_elem)
    return dataclasses.replace(spec, **changes)


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------
_SPECS = (
    ModelSpec(
        name="opt-1.3b",
        display_name="OPT-1.3B",
        n_layers=24, d_model=2048, n_heads=32, n_kv_heads=32, head_dim=64, d_ffn=8192,
        ffn_type="gelu", activation="relu", norm_type="layernorm", norm_bias=True,
        linear_bias=True, vocab_size=50272, n_pos_embeddings=2048 + 2, tied_embeddings=True,
        max_context=2048, published_params_b=1.3,
        source="https://huggingface.co/facebook/opt-1.3b/blob/main/config.json",
        notes="ReLU FFN, modelled in the AAU 'gelu' (pointwise activation) class.",
    ),
    ModelSpec(
        name="opt-6.7b",
        display_name="OPT-6.7B",
        n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, head_dim=128, d_ffn=16384,
        ffn_type="gelu", activation="relu", norm_type="layernorm", norm_bias=True,
        linear_bias=True, vocab_size=50272, n_pos_embeddings=2048 + 2, tied_embeddings=True,
        max_context=2048, published_params_b=6.7,
        source="https://huggingface.co/facebook/opt-6.7b/blob/main/config.json",
        notes="ReLU FFN, modelled in the AAU 'gelu' (pointwise activation) class.",
    ),
    ModelSpec(
        name="llama2-7b",
        display_name="LLaMA2-7B",
        n_layers=32, d_model=4096, n_heads=32, n_kv_heads=32, head_dim=128, d_ffn=11008,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=32000, tied_embeddings=False, max_context=4096, published_params_b=6.74,
        source="https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json",
    ),
    ModelSpec(
        name="llama2-13b",
        display_name="LLaMA2-13B",
        n_layers=40, d_model=5120, n_heads=40, n_kv_heads=40, head_dim=128, d_ffn=13824,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=32000, tied_embeddings=False, max_context=4096, published_params_b=13.0,
        source="https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json",
    ),
    ModelSpec(
        name="palm-like-8b",
        display_name="PaLM-Like-8B",
        n_layers=32, d_model=4096, n_heads=16, n_kv_heads=16, head_dim=256, d_ffn=12288,
        ffn_type="swiglu", activation="silu", norm_type="layernorm",
        vocab_size=256000, tied_embeddings=True, max_context=2048, published_params_b=8.0,
        source="https://arxiv.org/abs/2604.25326 (AHASD Sec. 5 shape); PaLM: https://arxiv.org/abs/2204.02311",
        notes="Assumed shape: MHA (real PaLM is MQA), FFN 12288 = 3d chosen for ~8B "
        "(real PaLM-8B: FFN 16384, 8.63B), tied 256k embedding, no biases.",
    ),
    ModelSpec(
        name="palm-like-30b",
        display_name="PaLM-Like-30B",
        n_layers=36, d_model=8192, n_heads=64, n_kv_heads=64, head_dim=128, d_ffn=20480,
        ffn_type="swiglu", activation="silu", norm_type="layernorm",
        vocab_size=256000, tied_embeddings=True, max_context=2048, published_params_b=30.0,
        source="https://arxiv.org/abs/2604.25326 (AHASD Sec. 5: d 8192 only); PaLM: https://arxiv.org/abs/2204.02311",
        notes="Assumed shape: 36 layers, 64 heads x 128, MHA, FFN 20480 = 2.5d chosen for ~30B, "
        "tied 256k embedding, no biases.",
    ),
    ModelSpec(
        name="qwen2.5-coder-0.5b",
        display_name="Qwen2.5-Coder-0.5B",
        n_layers=24, d_model=896, n_heads=14, n_kv_heads=2, head_dim=64, d_ffn=4864,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qkv_bias=True,
        vocab_size=151936, tied_embeddings=True, max_context=32768, published_params_b=0.49,
        source="https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B/blob/main/config.json",
        notes="Official checkpoint ties the LM head; the trace GGUF stores an untied output head.",
    ),
    ModelSpec(
        name="qwen2.5-coder-1.5b",
        display_name="Qwen2.5-Coder-1.5B",
        n_layers=28, d_model=1536, n_heads=12, n_kv_heads=2, head_dim=128, d_ffn=8960,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qkv_bias=True,
        vocab_size=151936, tied_embeddings=True, max_context=32768, published_params_b=1.54,
        source="https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B/blob/main/config.json",
    ),
    ModelSpec(
        name="qwen3-30b-a3b",
        display_name="Qwen3-30B-A3B",
        n_layers=48, d_model=2048, n_heads=32, n_kv_heads=4, head_dim=128, d_ffn=0,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qk_norm=True,
        n_experts=128, n_active_experts=8, d_expert_ffn=768, n_shared_experts=0,
        vocab_size=151936, tied_embeddings=False, max_context=40960,
        published_params_b=30.5, published_active_params_b=3.3,
        source="https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json",
        notes="Every layer is MoE (decoder_sparse_step 1, no mlp_only_layers); dense "
        "intermediate_size 6144 is unused.",
    ),
    # ---- mobile zoo: shapes of the published HF configs (the URLs; not fetched here).
    # Cross-checked where readable: NUM_LAYERS / HIDDEN_SIZE / NUM_ATTN_HEADS / NUM_KEY_VALUE_HEADS in
    # quic/ai-hub-models@52c080d2 qai_hub_models/models/<id>/model.py for Llama-3-8B, 3.1-8B, 3.2-1B,
    # 3.2-3B and Qwen2.5-1.5B (NUM_LAYERS only for Qwen2.5-7B); FFN width and vocabulary are checked
    # through the parameter count against the published size (tests/test_workload.py, 3%).
    ModelSpec(
        name="llama3-8b",
        display_name="Llama-3-8B",
        n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, d_ffn=14336,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=128256, tied_embeddings=False, max_context=8192, published_params_b=8.03,
        source="https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json",
    ),
    ModelSpec(
        name="llama3.1-8b",
        display_name="Llama-3.1-8B",
        n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, head_dim=128, d_ffn=14336,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=128256, tied_embeddings=False, max_context=131072, published_params_b=8.03,
        source="https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json",
        notes="Same shape as Llama-3-8B; RoPE scaling for 128k context (not modelled).",
    ),
    ModelSpec(
        name="llama3.2-1b",
        display_name="Llama-3.2-1B",
        n_layers=16, d_model=2048, n_heads=32, n_kv_heads=8, head_dim=64, d_ffn=8192,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=128256, tied_embeddings=True, max_context=131072, published_params_b=1.24,
        source="https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json",
    ),
    ModelSpec(
        name="llama3.2-3b",
        display_name="Llama-3.2-3B",
        n_layers=28, d_model=3072, n_heads=24, n_kv_heads=8, head_dim=128, d_ffn=8192,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
        vocab_size=128256, tied_embeddings=True, max_context=131072, published_params_b=3.21,
        source="https://huggingface.co/meta-llama/Llama-3.2-3B/blob/main/config.json",
    ),
    ModelSpec(
        name="qwen2.5-0.5b",
        display_name="Qwen2.5-0.5B",
        n_layers=24, d_model=896, n_heads=14, n_kv_heads=2, head_dim=64, d_ffn=4864,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qkv_bias=True,
        vocab_size=151936, tied_embeddings=True, max_context=32768, published_params_b=0.49,
        source="https://huggingface.co/Qwen/Qwen2.5-0.5B/blob/main/config.json",
    ),
    ModelSpec(
        name="qwen2.5-1.5b",
        display_name="Qwen2.5-1.5B",
        n_layers=28, d_model=1536, n_heads=12, n_kv_heads=2, head_dim=128, d_ffn=8960,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qkv_bias=True,
        vocab_size=151936, tied_embeddings=True, max_context=32768, published_params_b=1.54,
        source="https://huggingface.co/Qwen/Qwen2.5-1.5B/blob/main/config.json",
    ),
    ModelSpec(
        name="qwen2.5-7b",
        display_name="Qwen2.5-7B",
        n_layers=28, d_model=3584, n_heads=28, n_kv_heads=4, head_dim=128, d_ffn=18944,
        ffn_type="swiglu", activation="silu", norm_type="rmsnorm", qkv_bias=True,
        vocab_size=152064, tied_embeddings=False, max_context=131072, published_params_b=7.61,
        source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json",
    ),
)

def moefied(spec: ModelSpec, n_experts: int, top_k: int) -> ModelSpec:
    """A dense SwiGLU model's FFN split into ``n_experts`` equal neuron groups routed top-``top_k``
    (MoEfication, Zhang et al., Findings of ACL 2022, https://arxiv.org/abs/2110.01786).  Same
    weights (+ a d_model x n_experts router per layer); the partition is ours, so the name says
    "MoEfied".  The tree traces route through this layout."""
    if spec.is_moe or spec.d_ffn % n_experts:
        raise ValueError(f"{spec.name}: d_ffn {spec.d_ffn} must split into {n_experts} equal experts")
    active = (spec.param_count() - spec.n_layers * spec.n_ffn_matrices * spec.d_model * spec.d_ffn
              * (1 - top_k / n_experts) + spec.n_layers * spec.d_model * n_experts)
    return dataclasses.replace(
        spec, name=f"{spec.name}-moefied-e{n_experts}k{top_k}",
        display_name=f"MoEfied {spec.display_name} (E{n_experts} top-{top_k})", d_ffn=0,
        n_experts=n_experts, n_active_experts=top_k, d_expert_ffn=spec.d_ffn // n_experts,
        published_active_params_b=round(active / 1e9, 4),
        notes=f"MoEfication of {spec.display_name}: FFN neurons partitioned into {n_experts} experts of "
        f"{spec.d_ffn // n_experts}; active params derived (no published figure). Partition is ours.")


_SPECS = _SPECS + tuple(moefied(s, e, 8) for s in _SPECS if s.name == "qwen2.5-coder-1.5b" for e in (64, 128))

MODELS: Mapping[str, ModelSpec] = types.MappingProxyType({s.name: s for s in _SPECS})
"""Read-only registry, key -> spec."""

PAPER_PAIRS: Mapping[str, tuple[str, str]] = types.MappingProxyType(
    {
        "small": ("opt-1.3b", "opt-6.7b"),
        "medium": ("llama2-7b", "llama2-13b"),
        "large": ("palm-like-8b", "palm-like-30b"),
    }
)
"""AHASD paper's (draft, target) pairs by scale."""


@reported_in_one_line
class UnknownModelError(KeyError, ValueError):
    """Raised by :func:`get_model` for a name not in :data:`MODELS`."""

    def __str__(self) -> str:  # KeyError would repr()-quote the message
        return str(self.args[0]) if self.args else ""


def _normalize(name: str) -> str:
    s = re.sub(r"[\s_]+", "-", str(name).strip().lower())
    return s.replace("llama-2", "llama2").replace("qwen-2.5", "qwen2.5").replace("qwen-3", "qwen3")


_ALIASES: Mapping[str, str] = types.MappingProxyType(
    {_normalize(s.display_name): s.name for s in _SPECS} | {_normalize(s.name): s.name for s in _SPECS}
)


def get_model(name: str) -> ModelSpec:
    """Spec for ``name`` (case-, space- and underscore-insensitive; display
    names such as "LLaMA2-7B" work).  Unknown names raise
    :class:`UnknownModelError` listing the valid keys and the closest matches."""
    if isinstance(name, ModelSpec):
        return name
    key = _ALIASES.get(_normalize(name))
    if key is not None:
        return MODELS[key]
    close = difflib.get_close_matches(_normalize(name), list(MODELS), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownModelError(
        f"Unknown model {name!r}.{hint} Valid names: {', '.join(sorted(MODELS))}."
    )
