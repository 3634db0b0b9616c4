"""LLM architecture specs: the draft (DLM) and target (TLM) models.

A model is data: a YAML file of :class:`ModelSpec` fields, or a Hugging Face ``config.json``
read directly (:func:`load_model_file`; dense and MoE decoders, GQA, tied embeddings, sliding
window). The zoo is the files in ``hw_configs/models/`` (the shipped ones, and a
``hw_configs/models/`` folder in the current directory, which wins); ``run.target_model`` may
also name a model file by path. docs/models.md describes the format.

Every model is a frozen, hashable :class:`ModelSpec` with its published
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

import collections.abc as _abc
import dataclasses
import difflib
import re
import types
from dataclasses import dataclass
from typing import Mapping

from ..errors import InputError, reported_in_one_line

__all__ = [
    "ModelSpec",
    "MODELS",
    "PAPER_PAIRS",
    "UnknownModelError",
    "get_model",
    "load_model_file",
    "ModelFileError",
    "spec_from_hf_config",
    "moefied",
    "eagle_head",
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
    sliding_window: int = 0  # attention reads at most this many cached tokens (0: all; Mistral-7B: 4096)
    #: EAGLE-style feature fusion: a linear layer (with bias) from [token embedding; the target's
    #: hidden state] (2 d) to d runs before the first layer (:func:`eagle_head`)
    feature_fusion: bool = False
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

    def fusion_params(self) -> int:
        """Parameters of the EAGLE feature-fusion layer (2 d x d weights + d bias; 0 without)."""
        return (2 * self.d_model * self.d_model + self.d_model) if self.feature_fusion else 0

    def param_count(self) -> int:
        return (
            self.fusion_params()
            + self.embedding_params()
            + self.n_layers * self.layer_params()
            + self.norm_params()  # final norm
            + self.lm_head_params()
        )

    def active_param_count(self) -> int:
        return (
            self.fusion_params()
            + self.embedding_params()
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
#: models defined in Python (the zoo itself is data: hw_configs/models/*.yaml, read by
#: :func:`load_model_file`); a model added here joins the zoo like a file would, and
#: ``spec_to_yaml(spec)`` writes its file for hw_configs/models/
_SPECS: tuple[ModelSpec, ...] = (
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



# ---------------------------------------------------------------------------
# Models as data: YAML model files and Hugging Face config.json
# ---------------------------------------------------------------------------
#: where the shipped model files live, relative to a data root (``ahasd_sim.paths``)
MODELS_DIR = "hw_configs/models"
MODEL_SUFFIXES = (".yaml", ".yml", ".json")

_INT_FIELDS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ffn", "vocab_size",
               "n_experts", "n_active_experts", "d_expert_ffn", "n_shared_experts", "n_pos_embeddings",
               "max_context", "sliding_window")
_BOOL_FIELDS = ("tied_embeddings", "linear_bias", "qkv_bias", "norm_bias", "qk_norm")
_FLOAT_FIELDS = ("published_params_b", "published_active_params_b", "weight_bytes_per_param",
                 "kv_bytes_per_elem", "act_bytes_per_elem")


@reported_in_one_line
class ModelFileError(UnknownModelError, InputError):
    """A model file that cannot be read or describes an impossible shape (one line: file, key, why)."""


def _bad(path, key: str | None, msg: str) -> ModelFileError:
    return ModelFileError(f"{path}: {key + ': ' if key else ''}{msg}")


def _typed(path, key: str, value):
    if key in _INT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _bad(path, key, f"expected a non-negative integer, got {value!r}")
    elif key in _BOOL_FIELDS:
        if not isinstance(value, bool):
            raise _bad(path, key, f"expected true or false, got {value!r}")
    elif key in _FLOAT_FIELDS:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _bad(path, key, f"expected a number, got {value!r}")
        value = float(value)
    elif not isinstance(value, str):
        raise _bad(path, key, f"expected a string, got {value!r}")
    return value


def spec_from_dict(data: Mapping, path: str = "<model>", default_name: str = "") -> ModelSpec:
    """A :class:`ModelSpec` from a model file's mapping: the spec's fields (``name`` defaults to the
    file's stem, ``display_name`` to the name, ``source`` to the file), or ``moefied: {model,
    n_experts, top_k}`` for a MoEfied copy of another model. Bad input raises
    :class:`ModelFileError` naming ``path`` and the key."""
    if not isinstance(data, Mapping):
        raise _bad(path, None, f"expected a mapping of model fields, got {type(data).__name__}")
    if "moefied" in data:
        m = data["moefied"]
        extra = sorted(set(data) - {"moefied", "name", "display_name"})
        if extra or not isinstance(m, Mapping) or set(m) != {"model", "n_experts", "top_k"}:
            raise _bad(path, "moefied", "expected exactly {model: NAME, n_experts: N, top_k: K}"
                       + (f" and no other keys (got {', '.join(extra)})" if extra else ""))
        try:
            spec = moefied(get_model(m["model"]), int(m["n_experts"]), int(m["top_k"]))
        except (ValueError, TypeError) as exc:
            raise _bad(path, "moefied", str(exc)) from None
        ren = {k: data[k] for k in ("name", "display_name") if k in data}
        return dataclasses.replace(spec, **ren) if ren else spec
    fields = {f.name: f for f in dataclasses.fields(ModelSpec)}
    kw = {}
    for key, value in data.items():
        if key not in fields:
            close = difflib.get_close_matches(str(key), list(fields), n=1, cutoff=0.6)
            raise _bad(path, str(key), "unknown model field" + (f" (did you mean '{close[0]}'?)" if close else "")
                       + "; a Hugging Face config.json is read as .json")
        kw[key] = _typed(path, key, value)
    kw.setdefault("name", default_name)
    kw.setdefault("display_name", kw["name"])
    kw.setdefault("source", str(path))
    kw.setdefault("published_params_b", 0.0)
    missing = [f.name for f in fields.values() if f.default is dataclasses.MISSING and f.name not in kw]
    if missing:
        raise _bad(path, None, f"missing field(s): {', '.join(missing)}")
    try:
        return ModelSpec(**kw)
    except ValueError as exc:
        raise _bad(path, None, str(exc).removeprefix(f"{kw['name']}: ")) from None


#: Hugging Face ``model_type`` -> what its config.json leaves implicit (the defaults of the
#: transformers config class, and the layer layout of the architecture)
HF_FAMILIES: Mapping[str, dict] = types.MappingProxyType({
    # LLaMA layout: RMSNorm, SwiGLU, no biases unless attention_bias / mlp_bias
    "llama": {"tie": False}, "mistral": {"tie": False}, "mixtral": {"tie": False, "moe": "mixtral"},
    "qwen2": {"tie": False, "qkv_bias": True}, "qwen3": {"tie": False, "qk_norm": True},
    "qwen3_moe": {"tie": False, "qk_norm": True, "moe": "qwen"},
    "qwen2_moe": {"tie": False, "qkv_bias": True, "moe": "qwen"},
    # OPT: LayerNorm with bias, 2-matrix ReLU FFN, biases everywhere, learned positions (+2 offset)
    "opt": {"tie": True, "opt": True},
})


def spec_from_hf_config(cfg: Mapping, path: str = "<config.json>", name: str = "") -> ModelSpec:
    """A :class:`ModelSpec` read from a Hugging Face ``config.json`` (decoder-only dense and MoE
    models of :data:`HF_FAMILIES`): GQA (``num_key_value_heads``), ``head_dim``, tied embeddings,
    biases, q/k norms, routed and shared experts, ``sliding_window`` where the model uses one.
    Precision stays the simulator's INT8 default (the config's ``torch_dtype`` is the checkpoint's
    storage, not the deployed precision). Anything the simulator cannot represent is refused."""
    mt = cfg.get("model_type")
    fam = HF_FAMILIES.get(mt)
    if fam is None:
        raise _bad(path, "model_type", f"{mt!r} is not a supported decoder family; supported: "
                   f"{', '.join(sorted(HF_FAMILIES))} (or write a model YAML file)")

    def need(key: str, *alts: str) -> int:
        for k in (key, *alts):
            v = cfg.get(k)
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                    raise _bad(path, k, f"expected a positive integer, got {v!r}")
                return v
        raise _bad(path, key, "missing")

    d = need("hidden_size")
    heads = need("num_attention_heads")
    kv = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or None
    if head_dim is None:
        if d % heads:
            raise _bad(path, "hidden_size", f"{d} is not a multiple of num_attention_heads {heads} "
                       "and no head_dim is given")
        head_dim = d // heads
    if not isinstance(kv, int) or heads % kv:
        raise _bad(path, "num_key_value_heads", f"num_attention_heads {heads} must be a multiple of it, got {kv!r}")
    tie = cfg.get("tie_word_embeddings", fam["tie"])
    kw = dict(name=name or str(cfg.get("_name_or_path") or mt).split("/")[-1].lower(),
              n_layers=need("num_hidden_layers"), d_model=d, n_heads=heads, n_kv_heads=kv,
              head_dim=head_dim, vocab_size=need("vocab_size"), tied_embeddings=bool(tie),
              max_context=int(cfg.get("max_position_embeddings") or 0), source=str(path),
              published_params_b=0.0)
    kw["display_name"] = kw["name"]
    if fam.get("opt"):
        if cfg.get("word_embed_proj_dim", d) != d:
            raise _bad(path, "word_embed_proj_dim", "OPT with an embedding projection is not modelled")
        if not cfg.get("do_layer_norm_before", True):
            raise _bad(path, "do_layer_norm_before", "post-norm OPT (350m) is not modelled")
        act = cfg.get("activation_function", "relu")
        kw.update(d_ffn=need("ffn_dim"), ffn_type="gelu", activation=act, norm_type="layernorm", norm_bias=True,
                  linear_bias=bool(cfg.get("enable_bias", True)),
                  n_pos_embeddings=kw["max_context"] + 2)   # OPTLearnedPositionalEmbedding's offset of 2
    else:
        act = cfg.get("hidden_act", "silu")
        if act not in ("silu", "swish"):
            raise _bad(path, "hidden_act", f"expected silu (a SwiGLU FFN), got {act!r}")
        if cfg.get("mlp_bias"):
            raise _bad(path, "mlp_bias", "FFN biases on a SwiGLU model are not modelled")
        kw.update(ffn_type="swiglu", activation="silu", norm_type="rmsnorm",
                  qkv_bias=bool(cfg.get("attention_bias", fam.get("qkv_bias", False))),
                  qk_norm=bool(fam.get("qk_norm")))
        if cfg.get("attention_bias") and mt not in ("qwen2", "qwen2_moe"):
            raise _bad(path, "attention_bias", "a bias on the output projection is not modelled")
        moe = fam.get("moe")
        if moe == "mixtral":
            kw.update(d_ffn=0, n_experts=need("num_local_experts"), n_active_experts=need("num_experts_per_tok"),
                      d_expert_ffn=need("intermediate_size"))
        elif moe == "qwen":
            if cfg.get("mlp_only_layers") or cfg.get("decoder_sparse_step", 1) != 1:
                raise _bad(path, "mlp_only_layers", "models with dense layers between MoE layers are not modelled")
            e = need("moe_intermediate_size")
            shared = cfg.get("shared_expert_intermediate_size") or 0
            if shared % e:
                raise _bad(path, "shared_expert_intermediate_size",
                           f"{shared} is not a whole number of experts of {e}")
            if shared:
                raise _bad(path, "shared_expert_intermediate_size", "a gated shared expert is not modelled")
            kw.update(d_ffn=0, n_experts=need("num_experts"), n_active_experts=need("num_experts_per_tok"),
                      d_expert_ffn=e)
        else:
            kw["d_ffn"] = need("intermediate_size")
        window = cfg.get("sliding_window")
        if mt in ("mistral", "mixtral"):
            if window:
                kw["sliding_window"] = int(window)
        elif window and cfg.get("use_sliding_window"):
            raise _bad(path, "use_sliding_window", "a sliding window on some layers only is not modelled")
    try:
        return ModelSpec(**kw)
    except ValueError as exc:
        raise _bad(path, None, str(exc).removeprefix(f"{kw['name']}: ")) from None


def spec_to_yaml(spec: ModelSpec) -> str:
    """The text of a YAML model file for ``spec`` (fields left at their defaults omitted), as the
    shipped files are written: ``load_model_file`` reads back an equal spec."""
    import yaml
    head = (f"# {spec.display_name}: model shape (a ModelSpec's fields; docs/models.md).\n"
            f"# Parameter count computed from this shape: {spec.param_count():,}"
            + (f" (active {spec.active_param_count():,})" if spec.is_moe else "") + "\n")
    body = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
            if f.default is dataclasses.MISSING or getattr(spec, f.name) != f.default}
    return head + yaml.safe_dump(body, sort_keys=False, width=110, allow_unicode=True)


def _looks_like_hf(data) -> bool:
    return isinstance(data, Mapping) and "model_type" in data and "hidden_size" in data


def load_model_file(path) -> ModelSpec:
    """Read a model file: a YAML model (the :class:`ModelSpec` fields, see ``hw_configs/models/``)
    or a Hugging Face ``config.json``. The name defaults to the file's stem (a ``config.json``: its
    folder's name)."""
    import json
    from pathlib import Path

    import yaml
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise _bad(p, None, f"cannot read: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise _bad(p, None, f"not valid {'JSON' if p.suffix == '.json' else 'YAML'}: "
                   f"{' '.join(str(exc).split())[:200]}") from None
    stem = p.parent.name if p.name == "config.json" else p.stem
    if _looks_like_hf(data):
        return spec_from_hf_config(data, str(p), name=stem.lower())
    return spec_from_dict(data, str(p), default_name=stem)


def model_dirs() -> list:
    """Folders searched for model files, first wins: ``./hw_configs/models`` (the user's), then the
    shipped ones (``ahasd_sim.paths``)."""
    from pathlib import Path

    from ..paths import data_roots
    dirs = [Path.cwd() / MODELS_DIR]
    dirs += [r / MODELS_DIR for r in data_roots()]
    out = []
    for d in dirs:
        if d.is_dir() and d.resolve() not in [o.resolve() for o in out]:
            out.append(d)
    return out


class _Zoo(_abc.Mapping):
    """The model registry: every model file of :func:`model_dirs` plus :data:`_SPECS`, read once
    on first use (a model file names its own key)."""

    def __init__(self):
        self._d: dict[str, ModelSpec] | None = None
        self._files: dict[str, str] = {}
        self._aliases: dict[str, str] | None = None

    def _load(self) -> dict[str, ModelSpec]:
        if self._d is None:
            d: dict[str, ModelSpec] = {s.name: s for s in _SPECS}
            files = []
            for folder in reversed(model_dirs()):       # shipped first, the user's folder overrides
                files += sorted(f for f in folder.iterdir() if f.suffix in MODEL_SUFFIXES)
            pending = list(files)
            self._d = d
            for _ in range(3):       # a moefied file names another model: read it after that one
                later = []
                for f in pending:
                    try:
                        spec = load_model_file(f)
                    except UnknownModelError:
                        later.append(f)
                        continue
                    d[spec.name] = spec
                    self._files[spec.name] = str(f)
                    self._aliases = None
                pending = later
            for f in pending:                           # report the first that still fails
                load_model_file(f)
        return self._d

    def file_of(self, name: str) -> str | None:
        self._load()
        return self._files.get(name)

    def __getitem__(self, key: str) -> ModelSpec:
        return self._load()[key]

    def __iter__(self):
        return iter(self._load())

    def __len__(self) -> int:
        return len(self._load())


MODELS: Mapping[str, ModelSpec] = _Zoo()
"""Read-only registry, key -> spec: the model files of :func:`model_dirs` and :data:`_SPECS` (read on
first use)."""


def _aliases() -> dict[str, str]:
    if MODELS._aliases is None:
        specs = list(MODELS.values())
        MODELS._aliases = ({_normalize(s.display_name): s.name for s in specs}
                           | {_normalize(s.name): s.name for s in specs})
    return MODELS._aliases


def _is_path(name: str) -> bool:
    return str(name).endswith(MODEL_SUFFIXES) or "/" in str(name) or "\\" in str(name)


_FILE_SPECS: dict[tuple, ModelSpec] = {}


def get_model(name: str, relative_to: str | None = None) -> ModelSpec:
    """Spec for ``name``: a zoo key (case-, space- and underscore-insensitive; display names such as
    "LLaMA2-7B" work), or the path of a model file (``my/model.yaml``, a Hugging Face
    ``config.json``, or a folder holding one). Unknown names raise :class:`UnknownModelError`
    listing the valid keys and the closest matches. ``relative_to``: a config file, next to which
    a relative model path is also looked for."""
    if isinstance(name, ModelSpec):
        return name
    key = _aliases().get(_normalize(name))
    if key is not None:
        return MODELS[key]
    if _is_path(name):
        from pathlib import Path

        from ..paths import resolve_data_path
        p = Path(name)
        if p.is_dir():
            p = p / "config.json"
        p = resolve_data_path(p, relative_to)
        if not p.is_file():
            raise UnknownModelError(f"model file {name!r} not found (a path, or a name of: {', '.join(sorted(MODELS))})")
        st = p.stat()
        k = (str(p.resolve()), st.st_mtime_ns, st.st_size)
        if k not in _FILE_SPECS:
            _FILE_SPECS[k] = load_model_file(p)
        return _FILE_SPECS[k]
    close = difflib.get_close_matches(_normalize(name), list(MODELS), n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownModelError(
        f"Unknown model {name!r}.{hint} Valid names: {', '.join(sorted(MODELS))}. "
        f"Or add a model file to {MODELS_DIR}/ or give its path."
    )


#: ModelSpec fields that describe a model but do not change a simulation
_DESCRIPTIVE = ("name", "display_name", "source", "notes", "published_params_b", "published_active_params_b")


def _shape_text(spec: ModelSpec) -> str:
    return repr([(f.name, getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.name not in _DESCRIPTIVE])


def models_identity(cfg) -> str:
    """The shapes of the models a config names (``run.draft_model``, ``run.target_model``), as text:
    part of a run's identity, since a model file can change while its name stays."""
    out = []
    for key in ("draft_model", "target_model"):
        name = getattr(cfg.run, key, None)
        try:
            out.append(_shape_text(get_model(name, cfg.source_file)) if name else "")
        except (UnknownModelError, ValueError, TypeError):
            out.append(f"unknown:{name}")
    return "\n".join(out)


#: EAGLE draft head (Li et al., "EAGLE: Speculative Sampling Requires Rethinking Feature
#: Uncertainty", ICML 2024, https://arxiv.org/abs/2401.15077, section 3: an embedding layer, a
#: fusion layer FC(2d -> d), one decoder layer, and the target's LM head)
EAGLE_SOURCE = "https://arxiv.org/abs/2401.15077 (EAGLE, section 3 and its reference code)"


def eagle_head(target: ModelSpec) -> ModelSpec:
    """An EAGLE-style draft head for ``target``, its shape derived from the target's: the fusion
    layer FC([token embedding; target hidden state]) of 2 d -> d (with bias), ONE decoder layer of
    the target's shape, a final norm, and the target's embedding and LM head (a copy held where
    the head runs: the token embedding is gathered, the LM head streamed in every forward). Same
    precision as the target. Its KV cache is that of one target layer."""
    spec = dataclasses.replace(
        target, name=f"eagle-head:{target.name}", display_name=f"EAGLE head of {target.display_name}",
        n_layers=1, feature_fusion=True, published_params_b=0.0, source=EAGLE_SOURCE,
        notes=f"derived from {target.name}: fusion FC + 1 decoder layer + the target's embedding/LM head")
    return dataclasses.replace(spec, published_params_b=spec.param_count() / 1e9)
