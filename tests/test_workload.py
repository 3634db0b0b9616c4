"""Tests for the LLM workload model (issue 4): ahasd_sim.workload.models / ops."""

import dataclasses
import math

import pytest

from ahasd_sim.workload.models import (
    MODELS,
    PAPER_PAIRS,
    ModelSpec,
    UnknownModelError,
    get_model,
    with_precision,
)
from ahasd_sim.workload.ops import (
    OpKind,
    Operator,
    expected_experts_touched,
    default_placement,
    forward_ops,
    forward_totals,
)

DENSE = [k for k, m in MODELS.items() if not m.is_moe]


def _streamed_weight_params(m: ModelSpec) -> int:
    """Weights a forward streams: everything except the embedding tables, which
    are only gathered; a tied LM head re-reads the token embedding."""
    p = m.param_count() - m.embedding_params()
    if m.tied_embeddings:
        p += m.vocab_size * m.d_model
    return p


# ---------------------------------------------------------------- parameters
@pytest.mark.parametrize("name", sorted(MODELS))
def test_param_count_matches_published(name):
    m = get_model(name)
    assert m.param_count() / 1e9 == pytest.approx(m.published_params_b, rel=0.03)
    assert m.source.startswith("https://")


@pytest.mark.parametrize("name", [k for k, m in MODELS.items() if m.is_moe])
def test_moe_active_params_match_published(name):
    m = get_model(name)
    assert m.published_active_params_b > 0
    assert m.active_param_count() / 1e9 == pytest.approx(m.published_active_params_b, rel=0.03)
    assert m.active_param_count() < m.param_count()


@pytest.mark.parametrize("name,exact", [
    ("opt-1.3b", 1_315_758_080),          # HF num_parameters()
    ("llama2-7b", 6_738_415_616),
    ("llama2-13b", 13_015_864_320),
    ("qwen2.5-coder-0.5b", 494_032_768),
    ("qwen2.5-coder-1.5b", 1_543_714_304),
    ("qwen3-30b-a3b", 30_532_122_624),
])
def test_exact_counts_of_released_checkpoints(name, exact):
    assert get_model(name).param_count() == exact


def test_dense_active_equals_total_and_int8_bytes():
    for k in DENSE:
        m = MODELS[k]
        assert m.active_param_count() == m.param_count()
        assert m.weight_bytes() == m.param_count()  # INT8 default


def test_qwen3_expert_size_matches_hardware_reference():
    m = get_model("qwen3-30b-a3b")
    assert m.expert_params() == 3 * 2048 * 768 == 4_718_592
    bf16 = with_precision(m, 2.0, 2.0)
    assert bf16.weight_bytes() == 2 * m.param_count()


def test_paper_pairs_and_shapes():
    for draft, target in PAPER_PAIRS.values():
        assert MODELS[draft].param_count() < MODELS[target].param_count()
    assert get_model("opt-1.3b").n_pos_embeddings == 2050
    assert get_model("palm-like-8b").vocab_size == 256000
    assert get_model("palm-like-30b").d_model == 8192


def test_qwen_gguf_untied_variant():
    m = get_model("qwen2.5-coder-0.5b")
    untied = dataclasses.replace(m, tied_embeddings=False)
    assert untied.param_count() - m.param_count() == 151936 * 896


# ---------------------------------------------------------------- registry
def test_get_model_normalizes_names():
    assert get_model("LLaMA2-7B") is MODELS["llama2-7b"]
    assert get_model("llama_2_7b") is MODELS["llama2-7b"]
    assert get_model("PaLM-Like-30B") is MODELS["palm-like-30b"]
    assert get_model(MODELS["opt-6.7b"]) is MODELS["opt-6.7b"]


def test_unknown_model_error_is_helpful():
    with pytest.raises(UnknownModelError) as ei:
        get_model("llama2-8b")
    err = ei.value
    assert isinstance(err, KeyError) and isinstance(err, ValueError)
    msg = str(err)
    assert "Did you mean" in msg and "'llama2-7b'" in msg
    for k in MODELS:
        assert k in msg
    with pytest.raises(KeyError):
        get_model("gpt-4")


def test_registry_is_read_only():
    with pytest.raises(TypeError):
        MODELS["x"] = MODELS["opt-1.3b"]  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        MODELS["opt-1.3b"].n_layers = 1  # type: ignore[misc]


def test_spec_validation():
    base = MODELS["llama2-7b"]
    with pytest.raises(ValueError):
        dataclasses.replace(base, ffn_type="relu")
    with pytest.raises(ValueError):
        dataclasses.replace(base, n_kv_heads=3)


# ---------------------------------------------------------------- KV
def test_kv_bytes_per_token_llama2_7b_by_hand():
    m = get_model("llama2-7b")
    assert m.kv_bytes_per_token() == 2 * 32 * 4096 == 262144
    assert with_precision(m, kv_bytes_per_elem=2.0).kv_bytes_per_token() == 524288
    # GQA: Qwen2.5-Coder-0.5B has 2 KV heads of 64
    assert get_model("qwen2.5-coder-0.5b").kv_bytes_per_token() == 2 * 24 * 2 * 64


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_kv_bytes(name):
    m = get_model(name)
    for n, L in [(1, 0), (1, 300), (8, 300)]:
        t = forward_totals(m, n, L)
        assert t.kv_bytes == pytest.approx(m.kv_bytes_per_token() * (L + n))
        assert t.kv_write_bytes == pytest.approx(m.kv_bytes_per_token() * n)


# ---------------------------------------------------------------- scaling
@pytest.mark.parametrize("name", DENSE)
def test_verification_reads_weights_once(name):
    m = get_model(name)
    w1 = forward_totals(m, 1, 128).weight_bytes
    assert w1 == pytest.approx(_streamed_weight_params(m) * m.weight_bytes_per_param)
    for k in (2, 4, 8, 16, 32):
        assert forward_totals(m, k, 128).weight_bytes == w1


@pytest.mark.parametrize("name", sorted(MODELS))
def test_flops_linear_in_k_up_to_causal_term(name):
    m = get_model(name)
    L = 200
    f1 = forward_totals(m, 1, L).flops
    for k in (2, 5, 16):
        fk = forward_totals(m, k, L).flops
        causal = 2 * 2 * m.n_heads * m.head_dim * m.n_layers * k * (k - 1) / 2
        assert fk - k * f1 == pytest.approx(causal, rel=1e-12)
        assert fk == pytest.approx(k * f1, rel=0.01)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_attention_grows_with_kv_len_rest_does_not(name):
    m = get_model(name)
    prev = None
    for L in (0, 64, 512, 2048):
        ops = {o.name: o for o in forward_ops(m, 4, L)}
        att = ops["attn_score"]
        if prev is not None:
            assert att.flops > prev["attn_score"].flops
            assert att.kv_bytes > prev["attn_score"].kv_bytes
            assert ops["attn_softmax"].elements > prev["attn_softmax"].elements
            for nm in ("q_proj", "o_proj", "lm_head"):
                assert ops[nm] == prev[nm]
        prev = ops


def test_llama2_7b_decode_flops_by_hand():
    m = get_model("llama2-7b")
    for L in (0, 128, 1024, 4095):
        # 2 FLOPs per weight except the (gathered, not multiplied) embedding table,
        # plus QK^T and PV: 2 * 2 * layers * d_model * attended keys.
        hand = 2 * (6_738_415_616 - 32000 * 4096) + 4 * 32 * 4096 * (L + 1)
        assert forward_totals(m, 1, L).flops == pytest.approx(hand, rel=0.01)


def test_opkinds_tiers_and_gqa_shapes():
    m = get_model("qwen2.5-coder-0.5b")
    ops1 = {o.name: o for o in forward_ops(m, 1, 10)}
    ops4 = {o.name: o for o in forward_ops(m, 4, 10)}
    assert ops1["q_proj"].kind is OpKind.GEMV and ops4["q_proj"].kind is OpKind.GEMM
    assert ops4["attn_score"].kind is OpKind.ATTENTION
    assert ops4["attn_softmax"].nonlinear_class == "softmax"
    assert ops4["ffn_act"].nonlinear_class == "gelu"
    assert ops4["norm_attn"].nonlinear_class == "layernorm"
    assert ops4["residual_attn"].kind is OpKind.REDUCTION
    assert ops4["q_proj"].tier == ops4["k_proj"].tier == ops4["v_proj"].tier
    assert ops4["ffn_gate"].tier == ops4["ffn_up"].tier < ops4["ffn_act"].tier < ops4["ffn_down"].tier
    # GQA visible: k_proj is d x (2 * 64) (+bias), q_proj d x (14 * 64) (+bias)
    assert ops4["k_proj"].weight_bytes == 896 * 128 + 128
    assert ops4["q_proj"].weight_bytes == 896 * 896 + 896
    assert ops4["lm_head"].layer_repeat == 1 and not ops4["lm_head"].per_layer
    assert ops4["q_proj"].layer_repeat == 24
    # per-layer tiers come before the head tiers
    max_layer_tier = max(o.tier for o in ops4.values() if o.per_layer)
    assert min(o.tier for o in ops4.values() if not o.per_layer) > max_layer_tier
    # names unique within a forward; non-matrix ops carry elements, not flops
    assert len(ops4) == len(forward_ops(m, 4, 10))
    for o in ops4.values():
        if o.kind in (OpKind.NONLINEAR, OpKind.REDUCTION):
            assert o.flops == 0 and o.elements > 0 and o.nonlinear_class
        else:
            assert o.flops == 2 * o.macs > 0 and o.elements == 0 and o.nonlinear_class is None


def test_opt_gelu_ffn_has_two_matrices():
    names = [o.name for o in forward_ops(get_model("opt-1.3b"), 1, 0)]
    assert "ffn_gate" not in names and "ffn_up" in names and "ffn_down" in names


def test_operator_properties():
    m = get_model("llama2-7b")
    o = {x.name: x for x in forward_ops(m, 8, 100)}["ffn_up"]
    assert o.total_flops == o.flops * 32
    assert o.total_weight_bytes == 4096 * 11008 * 32
    assert o.arithmetic_intensity == pytest.approx(o.flops / o.bytes_moved)
    att = {x.name: x for x in forward_ops(m, 8, 100)}["attn_score"]
    assert att.kv_read_bytes == 100 * 4096 and att.kv_write_bytes == 8 * 4096


def test_totals_equal_sum_of_ops():
    m = get_model("qwen3-30b-a3b")
    ops = forward_ops(m, 6, 77)
    t = forward_totals(m, 6, 77)
    assert t.flops == pytest.approx(sum(o.total_flops for o in ops))
    assert t.weight_bytes == pytest.approx(sum(o.total_weight_bytes for o in ops))
    assert t.act_bytes == pytest.approx(sum(o.total_act_bytes for o in ops))
    assert t.elements("softmax") == sum(o.total_elements for o in ops if o.nonlinear_class == "softmax")
    assert t.elements("nope") == 0


# ---------------------------------------------------------------- MoE
def test_moe_expert_union():
    m = get_model("qwen3-30b-a3b")
    assert expected_experts_touched(128, 8, 1) == 8
    assert expected_experts_touched(128, 8, 4) == pytest.approx(128 * (1 - (120 / 128) ** 4))
    assert expected_experts_touched(128, 8, 10_000) == pytest.approx(128)
    one_expert = m.expert_params()
    # one token reads exactly the active parameters (minus the gathered embedding)
    assert forward_totals(m, 1, 0).weight_bytes == pytest.approx(
        m.active_param_count() - m.embedding_params())
    prev = 0.0
    for k in (1, 2, 4, 8, 16, 64):
        ops = {o.name: o for o in forward_ops(m, k, 50)}
        exp_w = sum(o.weight_bytes for n, o in ops.items() if n.startswith("expert_ffn"))
        assert exp_w == pytest.approx(expected_experts_touched(128, 8, k) * one_expert)
        assert prev < exp_w <= 128 * one_expert
        prev = exp_w
        assert ops["expert_ffn_up"].macs == k * 8 * 2048 * 768
    # routing-trace hook
    ops = {o.name: o for o in forward_ops(m, 4, 50, experts_touched=20)}
    assert ops["expert_ffn_down"].weight_bytes == 20 * 768 * 2048
    with pytest.raises(ValueError):
        forward_ops(m, 4, 50, experts_touched=40)  # > 4 tokens x 8 experts


# ---------------------------------------------------------------- caching & args
def test_forward_ops_cached_identical_object():
    m = get_model("llama2-13b")
    a = forward_ops(m, 8, 333)
    assert forward_ops(m, 8, 333) is a
    assert forward_ops(m, n_tokens=8, kv_len=333) is a
    assert forward_ops(get_model("LLaMA2-13B"), 8, 333) is a
    assert forward_totals(m, 8, 333) is forward_totals(m, 8, 333)
    assert isinstance(a, tuple) and all(isinstance(o, Operator) for o in a)
    # different precision -> different spec -> different entry
    int4 = with_precision(m, 0.5, 1.0)
    assert forward_totals(int4, 8, 333).weight_bytes == pytest.approx(
        forward_totals(m, 8, 333).weight_bytes / 2)


def test_bad_arguments():
    m = get_model("opt-1.3b")
    with pytest.raises(ValueError):
        forward_ops(m, 0, 10)
    with pytest.raises(ValueError):
        forward_ops(m, 1, -1)
    with pytest.raises(TypeError):
        forward_ops("opt-1.3b", 1, 0)  # type: ignore[arg-type]


# ---------------------------------------------------------------- placement
def test_default_placement():
    m = get_model("opt-1.3b")
    ops = {o.name: o for o in forward_ops(m, 1, 16)}
    for nm in ("q_proj", "attn_score", "attn_context", "ffn_down", "lm_head"):
        for role in ("draft", "preverify"):
            assert default_placement(ops[nm], role, True) == "pim"
            assert default_placement(ops[nm], role, False) == "pim"
    for nm in ("attn_softmax", "ffn_act", "norm_attn", "residual_ffn", "final_norm"):
        for role in ("draft", "preverify"):
            assert default_placement(ops[nm], role, True) == "aau"
            assert default_placement(ops[nm], role, False) == "npu"
    for o in forward_ops(m, 8, 16):
        assert default_placement(o, "verify", True) == "npu"
    with pytest.raises(ValueError):
        default_placement(ops["q_proj"], "prefill", True)


def test_forward_is_fast():
    import time

    m = get_model("llama2-7b")
    t0 = time.perf_counter()
    for L in range(1024):
        forward_totals(m, 1, 5000 + L)
    assert time.perf_counter() - t0 < 5.0
    assert math.isfinite(forward_totals(m, 1, 6023).flops)


def test_extra_context_tokens_lengthen_every_kv_read_and_prefill_by_exactly_that():
    """run.extra_context_tokens = E: every replayed position's KV length is prompt_len + position in
    the response + E (E more than without), the trace's other columns are the same arrays, and
    plain decoding on PIM, whose attention reads the whole KV, gets slower."""
    from pathlib import Path
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.modes.replay import TraceReplay
    from ahasd_sim.simulation import run_simulation
    from ahasd_sim.traces.format import load_trace, with_extra_context
    root = Path(__file__).resolve().parent.parent
    tr = load_trace(root / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz")
    longer = with_extra_context(tr, 1000)
    assert longer is with_extra_context(tr, 1000)            # one copy per amount
    a, b = TraceReplay(tr, 64), TraceReplay(longer, 64)
    assert all(b.kv_len_at(p) == a.kv_len_at(p) + 1000 for p in range(a.n_positions))
    assert longer.tgt_tok is tr.tgt_tok and longer.accept is tr.accept
    short = ["run.mode=autoregressive", "baseline.device=pim", "run.generated_tokens=32", "run.windows=1",
             "run.timeline=false", f"run.trace={root / 'traces' / 'qwc-0.5b-1.5b_greedy_smoke.npz'}"]
    cfg = load_config(root / "hw_configs" / "ahasd_mobile.yaml", short)
    t0 = run_simulation(cfg).summary["throughput_tok_s"]
    t1 = run_simulation(cfg.replace(["run.extra_context_tokens=8192"])).summary["throughput_tok_s"]
    assert t1 < t0
