"""Operator-level cost model of one forward pass.

:func:`forward_ops` lists the operators of one forward pass of ``n_tokens``
query tokens over ``kv_len`` already-cached tokens (causal among the new ones),
with FLOPs/MACs, bytes and element counts *per occurrence*; ``layer_repeat``
says how often the op occurs per forward.  Conventions:

* FLOPs = 2 x MACs, counted for matrix ops (weight GEMM/GEMV and attention)
  only.  Nonlinear and reduction ops carry their work in ``elements`` (their
  cost is modelled per element by the NPU vector unit / AAU); their flops are 0.
* Weight bytes of a weight op are read **once per forward regardless of
  n_tokens** (verification streams the target weights once for k tokens).
  Biases and norm weights (on the norm ops) are included.  The token/positional embedding tables are *not*
  streamed: only n rows are gathered, which is ignored (n x d bytes).  For
  tied models the LM head reads the embedding matrix.
* Attention: query token i (0-based) attends to ``kv_len + i + 1`` keys, so
  one forward attends ``n*kv_len + n*(n+1)/2`` (query, key) pairs per head.
  ``attn_score`` reads the K cache of ``kv_len`` tokens and writes the K of the
  n new tokens (``kv_write_bytes``); ``attn_context`` likewise for V.  Hence
  the KV bytes of one forward are ``kv_bytes_per_token * (kv_len + n)``.
  Attention ops aggregate all heads (MACs use query heads, bytes KV heads).
* RoPE, embedding gather, sampling/top-k bookkeeping are ignored (negligible).
* Tiers: ops with the same ``tier`` are mutually independent (q/k/v; gate/up);
  tiers run in increasing order.  Per-layer ops (``per_layer=True``,
  ``layer_repeat == n_layers``) use tiers 0..T-1 and run once per layer; the
  head ops (final_norm, lm_head, logits_softmax; ``layer_repeat == 1``) use
  tiers T.. and run once after the last layer.
* MoE: ``router`` (GEMV/GEMM d x E), ``router_softmax``, then
  ``expert_ffn_gate``/``expert_ffn_up`` (same tier), ``expert_ffn_act``,
  ``expert_ffn_down``, ``expert_combine`` (weighted sum of the top-k outputs).
  MACs use the n*k active (token, expert) pairs; weight bytes use the
  **expected union of experts touched** by the n tokens under uniform, independent
  routing: ``E * (1 - (1 - a/E)**n)`` (exact ``a`` for n = 1), plus shared
  experts.  Pass ``experts_touched=`` (e.g. from a routing trace) to override.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache

from .models import ModelSpec

__all__ = [
    "OpKind",
    "Operator",
    "OpTotals",
    "forward_ops",
    "forward_totals",
    "expected_experts_touched",
    "default_placement",
    "NONLINEAR_CLASSES",
]

NONLINEAR_CLASSES = ("gelu", "softmax", "layernorm", "reduction")


class OpKind(str, Enum):
    GEMM = "gemm"
    GEMV = "gemv"
    ATTENTION = "attention"
    NONLINEAR = "nonlinear"
    REDUCTION = "reduction"


@dataclass(frozen=True)
class Operator:
    name: str
    kind: OpKind
    layer_repeat: int
    n_tokens: int
    flops: float
    macs: float
    weight_bytes: float
    act_bytes_in: float
    act_bytes_out: float
    kv_bytes: float  # KV read + KV written (kv_write_bytes)
    elements: int
    nonlinear_class: str | None
    tier: int
    kv_write_bytes: float = 0.0  # part of kv_bytes that is written (new K or V)
    per_layer: bool = True  # False for final_norm / lm_head / logits_softmax
    k_dim: int = 0  # dense linear ops: weight rows (reduction dim K); 0 = not a single K x N GEMM
    n_dim: int = 0  # dense linear ops: weight columns (output dim N); used by the NPU fold arithmetic
    #: the GEMV a bank-level PIM driver issues for one occurrence: (rows, cols, input vectors,
    #: bytes per element) -- rows output elements, each a dot product of ``cols`` stored
    #: elements with an input vector (hw/pim_spec.py, the AiM layout); () = not a PIM GEMV
    pim_gemv: tuple = ()

    @property
    def kv_read_bytes(self) -> float:
        return self.kv_bytes - self.kv_write_bytes

    @property
    def is_weight_op(self) -> bool:
        return self.kind in (OpKind.GEMM, OpKind.GEMV)

    @property
    def bytes_moved(self) -> float:
        """Per occurrence: weights + KV + activations in and out."""
        return self.weight_bytes + self.kv_bytes + self.act_bytes_in + self.act_bytes_out

    @property
    def total_flops(self) -> float:
        return self.flops * self.layer_repeat

    @property
    def total_macs(self) -> float:
        return self.macs * self.layer_repeat

    @property
    def total_weight_bytes(self) -> float:
        return self.weight_bytes * self.layer_repeat

    @property
    def total_kv_bytes(self) -> float:
        return self.kv_bytes * self.layer_repeat

    @property
    def total_act_bytes(self) -> float:
        return (self.act_bytes_in + self.act_bytes_out) * self.layer_repeat

    @property
    def total_elements(self) -> int:
        return self.elements * self.layer_repeat

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (0 for ops without FLOPs)."""
        b = self.bytes_moved
        return self.flops / b if b > 0 else 0.0


@dataclass(frozen=True)
class OpTotals:
    """Whole-forward totals (layer_repeat applied)."""

    flops: float
    macs: float
    weight_bytes: float
    kv_bytes: float
    kv_write_bytes: float
    act_bytes: float
    nonlinear_elements: tuple[tuple[str, int], ...] = field(default=())  # (class, elements), sorted

    def elements(self, nonlinear_class: str) -> int:
        return dict(self.nonlinear_elements).get(nonlinear_class, 0)

    @property
    def kv_read_bytes(self) -> float:
        return self.kv_bytes - self.kv_write_bytes

    @property
    def bytes_moved(self) -> float:
        return self.weight_bytes + self.kv_bytes + self.act_bytes


def expected_experts_touched(n_experts: int, n_active: int, n_tokens: int) -> float:
    """Expected number of distinct experts selected by ``n_tokens`` tokens, each
    picking ``n_active`` of ``n_experts`` uniformly at random (independent tokens):
    ``E * (1 - (1 - a/E)**n)``.  Equals ``a`` for one token, tends to ``E``."""
    if n_experts <= 0:
        return 0.0
    if n_tokens <= 1:
        return float(n_active) if n_tokens == 1 else 0.0
    return n_experts * (1.0 - (1.0 - n_active / n_experts) ** n_tokens)


# ---------------------------------------------------------------------------
# op builders
# ---------------------------------------------------------------------------
def _weight_op(m: ModelSpec, name: str, n: int, d_in: int, d_out: int, tier: int, *,
               bias: bool, repeat: int, per_layer: bool = True,
               weight_matrices: float = 1.0, macs: float | None = None,
               act_in_elems: float | None = None,
               act_out_elems: float | None = None) -> Operator:
    """Linear layer y = x W (+b); ``weight_matrices`` scales the weight read
    (e.g. number of experts touched), ``macs`` overrides n*d_in*d_out."""
    ab, wb = m.act_bytes_per_elem, m.weight_bytes_per_param
    n_params = d_in * d_out + (d_out if bias else 0)
    mac = float(n * d_in * d_out) if macs is None else float(macs)
    return Operator(
        name=name,
        kind=OpKind.GEMM if n > 1 else OpKind.GEMV,
        layer_repeat=repeat,
        n_tokens=n,
        flops=2.0 * mac,
        macs=mac,
        weight_bytes=n_params * wb * weight_matrices,
        act_bytes_in=(n * d_in if act_in_elems is None else act_in_elems) * ab,
        act_bytes_out=(n * d_out if act_out_elems is None else act_out_elems) * ab,
        kv_bytes=0.0,
        elements=0,
        nonlinear_class=None,
        tier=tier,
        per_layer=per_layer,
        k_dim=d_in if macs is None else 0,
        n_dim=d_out if macs is None else 0,
        # every distinct weight matrix is read once per input vector it multiplies: an MoE op
        # reads ``weight_matrices`` experts' rows, each with its share of the (token, expert) pairs
        pim_gemv=(math.ceil(d_out * weight_matrices), d_in,
                  max(1, math.ceil(mac / (d_in * d_out * weight_matrices))) if weight_matrices > 0 else n, wb),
    )


def _elementwise_op(m: ModelSpec, name: str, n: int, elements: int, cls: str, tier: int, *,
                    repeat: int, per_layer: bool = True, in_elems: int | None = None,
                    weight_params: int = 0) -> Operator:
    ab = m.act_bytes_per_elem
    return Operator(
        name=name,
        kind=OpKind.REDUCTION if cls == "reduction" else OpKind.NONLINEAR,
        layer_repeat=repeat,
        n_tokens=n,
        flops=0.0,
        macs=0.0,
        weight_bytes=weight_params * m.weight_bytes_per_param,
        act_bytes_in=(elements if in_elems is None else in_elems) * ab,
        act_bytes_out=elements * ab,
        kv_bytes=0.0,
        elements=int(elements),
        nonlinear_class=cls,
        tier=tier,
        per_layer=per_layer,
    )


def _build_ops(m: ModelSpec, n: int, kv_len: int, experts_touched: float) -> tuple[Operator, ...]:
    L = m.n_layers
    d = m.d_model
    ab, kvb = m.act_bytes_per_elem, m.kv_bytes_per_elem
    norm_cls = "layernorm"  # LayerNorm and RMSNorm
    act_cls = "gelu"  # GELU, ReLU, SiLU/SwiGLU
    ops: list[Operator] = []
    t = 0
    if m.feature_fusion:
        # EAGLE head: FC([token embedding; target hidden state]) before its one decoder layer
        ops.append(_weight_op(m, "feature_fc", n, 2 * d, d, t, bias=True, repeat=1, per_layer=False))
        t += 1

    # --- attention block ---------------------------------------------------
    ops.append(_elementwise_op(m, "norm_attn", n, n * d, norm_cls, t, repeat=L,
                               weight_params=m.norm_params()))
    t += 1
    qkv_bias = m.linear_bias or m.qkv_bias
    ops.append(_weight_op(m, "q_proj", n, d, m.q_dim, t, bias=qkv_bias, repeat=L))
    ops.append(_weight_op(m, "k_proj", n, d, m.kv_dim, t, bias=qkv_bias, repeat=L))
    ops.append(_weight_op(m, "v_proj", n, d, m.kv_dim, t, bias=qkv_bias, repeat=L))
    t += 1
    if m.qk_norm:
        # per-head RMSNorm on q and k (one head_dim-sized weight each)
        ops.append(_elementwise_op(m, "qk_norm", n, n * (m.q_dim + m.kv_dim), norm_cls, t, repeat=L,
                                   weight_params=2 * m.head_dim))
        t += 1

    pairs = n * kv_len + n * (n + 1) // 2  # causal (query, key) pairs per head
    if m.sliding_window and kv_len + n > m.sliding_window:
        # sliding-window attention: query i sees its last W positions only, and the cache keeps W
        w = m.sliding_window
        pairs = sum(min(kv_len + i + 1, w) for i in range(n))
        kv_len = min(kv_len, w)
    attn_macs = float(m.n_heads * m.head_dim * pairs)
    kv_one = m.kv_dim * kvb  # bytes of K (or V) of one token in one layer
    score_elems = m.n_heads * pairs
    # on PIM (AiM layout): K is stored one key per row chunk, V transposed (one head dimension
    # per row); the n_heads / n_kv_heads query heads of a KV head are separate input vectors
    q_per_kv = m.n_heads // m.n_kv_heads
    ops.append(Operator(
        name="attn_score", kind=OpKind.ATTENTION, layer_repeat=L, n_tokens=n,
        flops=2.0 * attn_macs, macs=attn_macs, weight_bytes=0.0,
        act_bytes_in=n * m.q_dim * ab, act_bytes_out=score_elems * ab,
        kv_bytes=kv_one * (kv_len + n), kv_write_bytes=kv_one * n,
        elements=0, nonlinear_class=None, tier=t,
        pim_gemv=((kv_len + n) * m.n_kv_heads, m.head_dim, n * q_per_kv, kvb),
    ))
    t += 1
    ops.append(_elementwise_op(m, "attn_softmax", n, score_elems, "softmax", t, repeat=L))
    t += 1
    ops.append(Operator(
        name="attn_context", kind=OpKind.ATTENTION, layer_repeat=L, n_tokens=n,
        flops=2.0 * attn_macs, macs=attn_macs, weight_bytes=0.0,
        act_bytes_in=score_elems * ab, act_bytes_out=n * m.q_dim * ab,
        kv_bytes=kv_one * (kv_len + n), kv_write_bytes=kv_one * n,
        elements=0, nonlinear_class=None, tier=t,
        pim_gemv=(m.kv_dim, kv_len + n, n * q_per_kv, kvb),
    ))
    t += 1
    ops.append(_weight_op(m, "o_proj", n, m.q_dim, d, t, bias=m.linear_bias, repeat=L))
    t += 1
    ops.append(_elementwise_op(m, "residual_attn", n, n * d, "reduction", t, repeat=L, in_elems=2 * n * d))
    t += 1

    # --- FFN block ---------------------------------------------------------
    ops.append(_elementwise_op(m, "norm_ffn", n, n * d, norm_cls, t, repeat=L,
                               weight_params=m.norm_params()))
    t += 1
    swiglu = m.ffn_type == "swiglu"
    if not m.is_moe:
        f = m.d_ffn
        if swiglu:
            ops.append(_weight_op(m, "ffn_gate", n, d, f, t, bias=m.linear_bias, repeat=L))
        ops.append(_weight_op(m, "ffn_up", n, d, f, t, bias=m.linear_bias, repeat=L))
        t += 1
        ops.append(_elementwise_op(m, "ffn_act", n, n * f, act_cls, t, repeat=L,
                                   in_elems=(2 if swiglu else 1) * n * f))
        t += 1
        ops.append(_weight_op(m, "ffn_down", n, f, d, t, bias=m.linear_bias, repeat=L))
        t += 1
    else:
        E, f = m.n_experts, m.d_expert_ffn
        a = m.n_active_experts + m.n_shared_experts  # experts applied per token
        touched = experts_touched + m.n_shared_experts  # distinct expert weights read
        ops.append(_weight_op(m, "router", n, d, E, t, bias=False, repeat=L))
        t += 1
        ops.append(_elementwise_op(m, "router_softmax", n, n * E, "softmax", t, repeat=L))
        t += 1
        pairs_e = n * a  # (token, expert) pairs
        for nm in (("expert_ffn_gate", "expert_ffn_up") if swiglu else ("expert_ffn_up",)):
            ops.append(_weight_op(m, nm, n, d, f, t, bias=m.linear_bias, repeat=L,
                                  weight_matrices=touched, macs=pairs_e * d * f,
                                  act_out_elems=pairs_e * f))
        t += 1
        ops.append(_elementwise_op(m, "expert_ffn_act", n, pairs_e * f, act_cls, t, repeat=L,
                                   in_elems=(2 if swiglu else 1) * pairs_e * f))
        t += 1
        ops.append(_weight_op(m, "expert_ffn_down", n, f, d, t, bias=m.linear_bias, repeat=L,
                              weight_matrices=touched, macs=pairs_e * d * f,
                              act_in_elems=pairs_e * f, act_out_elems=pairs_e * d))
        t += 1
        ops.append(_elementwise_op(m, "expert_combine", n, pairs_e * d, "reduction", t, repeat=L))
        t += 1
    ops.append(_elementwise_op(m, "residual_ffn", n, n * d, "reduction", t, repeat=L, in_elems=2 * n * d))
    t += 1

    # --- head (once per forward) ------------------------------------------
    ops.append(_elementwise_op(m, "final_norm", n, n * d, norm_cls, t, repeat=1, per_layer=False,
                               weight_params=m.norm_params()))
    t += 1
    ops.append(_weight_op(m, "lm_head", n, d, m.vocab_size, t, bias=False, repeat=1, per_layer=False))
    t += 1
    # probabilities over the vocabulary for every position (speculative sampling / entropy)
    ops.append(_elementwise_op(m, "logits_softmax", n, n * m.vocab_size, "softmax", t,
                               repeat=1, per_layer=False))
    return tuple(ops)


@lru_cache(maxsize=16384)
def _forward_ops_cached(model: ModelSpec, n_tokens: int, kv_len: int,
                        experts_touched: float) -> tuple[Operator, ...]:
    return _build_ops(model, n_tokens, kv_len, experts_touched)


def _normalize_args(model: ModelSpec, n_tokens, kv_len, experts_touched) -> tuple:
    if not isinstance(model, ModelSpec):
        raise TypeError(f"model must be a ModelSpec (use get_model(name)), got {type(model).__name__}")
    if int(n_tokens) != n_tokens or n_tokens < 1:
        raise ValueError(f"n_tokens must be a positive integer, got {n_tokens!r}")
    if int(kv_len) != kv_len or kv_len < 0:
        raise ValueError(f"kv_len must be a non-negative integer, got {kv_len!r}")
    n_tokens, kv_len = int(n_tokens), int(kv_len)
    if not model.is_moe:
        et = 0.0
    elif experts_touched is None:
        et = expected_experts_touched(model.n_experts, model.n_active_experts, n_tokens)
    else:
        et = float(experts_touched)
        lo, hi = float(model.n_active_experts), float(min(model.n_experts, n_tokens * model.n_active_experts))
        if not lo <= et <= hi:
            raise ValueError(f"experts_touched must lie in [{lo}, {hi}], got {experts_touched!r}")
    return model, n_tokens, kv_len, et


def forward_ops(model: ModelSpec, n_tokens: int, kv_len: int, *,
                experts_touched: float | None = None) -> tuple[Operator, ...]:
    """Operators of one forward pass of ``n_tokens`` query tokens over
    ``kv_len`` cached tokens.  Cached: identical arguments return the identical
    tuple.  ``experts_touched`` (MoE only) overrides the expected distinct
    (routed) experts per layer, e.g. from a routing trace."""
    return _forward_ops_cached(*_normalize_args(model, n_tokens, kv_len, experts_touched))


@lru_cache(maxsize=131072)
def _forward_totals_cached(model: ModelSpec, n_tokens: int, kv_len: int,
                           experts_touched: float) -> OpTotals:
    ops = _build_ops(model, n_tokens, kv_len, experts_touched)
    elems: dict[str, int] = {}
    for o in ops:
        if o.nonlinear_class is not None:
            elems[o.nonlinear_class] = elems.get(o.nonlinear_class, 0) + o.total_elements
    return OpTotals(
        flops=math.fsum(o.total_flops for o in ops),
        macs=math.fsum(o.total_macs for o in ops),
        weight_bytes=math.fsum(o.total_weight_bytes for o in ops),
        kv_bytes=math.fsum(o.total_kv_bytes for o in ops),
        kv_write_bytes=math.fsum(o.kv_write_bytes * o.layer_repeat for o in ops),
        act_bytes=math.fsum(o.total_act_bytes for o in ops),
        nonlinear_elements=tuple(sorted(elems.items())),
    )


def forward_totals(model: ModelSpec, n_tokens: int, kv_len: int, *,
                   experts_touched: float | None = None) -> OpTotals:
    """Totals of :func:`forward_ops` (cached separately; does not fill the op cache)."""
    return _forward_totals_cached(*_normalize_args(model, n_tokens, kv_len, experts_touched))


forward_ops.cache_info = _forward_ops_cached.cache_info  # type: ignore[attr-defined]
forward_ops.cache_clear = _forward_ops_cached.cache_clear  # type: ignore[attr-defined]
forward_totals.cache_info = _forward_totals_cached.cache_info  # type: ignore[attr-defined]
forward_totals.cache_clear = _forward_totals_cached.cache_clear  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# default mapping
# ---------------------------------------------------------------------------
_ROLES = ("draft", "verify", "preverify")


def default_placement(op: Operator, role: str, aau_enabled: bool) -> str:
    """Unit that runs ``op`` by default: "pim", "npu" or "aau".

    * ``verify`` (TLM on the NPU): everything on the NPU.
    * ``draft`` (DLM on PIM) and ``preverify`` (TLM on PIM, in the TLM ranks --
      rank choice is the caller's): weight ops and attention on PIM;
      nonlinear/reduction ops on the AAU when enabled, else shipped to the NPU.
    """
    if role not in _ROLES:
        raise ValueError(f"role must be one of {_ROLES}, got {role!r}")
    if role == "verify":
        return "npu"
    if op.kind in (OpKind.NONLINEAR, OpKind.REDUCTION):
        return "aau" if aau_enabled else "npu"
    return "pim"
