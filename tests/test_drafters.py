"""Drafter kinds (``run.drafter``): the EAGLE head's shape, the lookup drafter's exact
acceptance and its CPU cost, and what summary.json says about where acceptance came from."""
from __future__ import annotations

import numpy as np
import pytest

from conftest import ROOT, SMOKE_TRACE

from ahasd_sim.config import load_config
from ahasd_sim.config.errors import InputError
from ahasd_sim.modes.replay import TraceReplay
from ahasd_sim.traces.format import load_trace
from ahasd_sim.traces.lookup import NO_PROPOSAL, lookup_proposals, lookup_trace
from ahasd_sim.workload.models import eagle_head, get_model
from ahasd_sim.workload.ops import forward_ops

PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
GREEDY = ROOT / "traces" / "qwc-0.5b-1.5b_greedy.npz"


def _small_case():
    """300 positions of the shipped greedy trace from prompt 2 (3 responses; the smoke trace's
    few positions hold no repeated n-gram the lookup would get right)."""
    return load_trace(GREEDY).take(300, 2)


# ------------------------------------------------------------------ EAGLE head
def test_eagle_head_of_llama2_13b_matches_a_hand_count():
    """LLaMA2-13B: d 5120, FFN 13824 (SwiGLU), 40 heads of 128, vocab 32000, untied, RMSNorm, INT8.
    Head = fusion FC 2d->d with bias (2*5120^2 + 5120 = 52,433,920) + one layer (q,k,v,o 4*5120^2 =
    104,857,600; FFN 3*5120*13824 = 212,336,640; 2 norms 10,240) + final norm 5,120 + embedding and
    LM head 2*32000*5120 = 327,680,000: 697,323,520 parameters = bytes at INT8 (5.4% of the target).
    One forward streams all but the embedding (gathered): 533,483,520 bytes. FLOPs at 1 token, KV
    100: 2 x (52,428,800 + 104,857,600 + 212,336,640 + 163,840,000) matmul MACs = 1,066,926,080,
    plus attention 2 ops x 2 x 40*128*101 = 2,068,480: 1,068,994,560."""
    t = get_model("llama2-13b")
    h = eagle_head(t)
    assert h.param_count() == 697_323_520 == h.weight_bytes()
    assert h.n_layers == 1 and h.d_model == t.d_model and h.vocab_size == t.vocab_size
    ops = forward_ops(h, 1, 100)
    assert sum(o.weight_bytes * o.layer_repeat for o in ops) == 533_483_520
    assert sum(o.flops * o.layer_repeat for o in ops) == 1_068_994_560
    assert h.kv_bytes_per_token() == t.kv_bytes_per_token() / t.n_layers
    assert [o.name for o in ops][0] == "feature_fc"
    # without the fusion layer the graph is the plain one-layer model's
    plain = forward_ops(t.__class__(**{**t.__dict__, "n_layers": 1}), 1, 100)
    assert len(ops) == len(plain) + 1


# ------------------------------------------------------------------ lookup: exact acceptance
def _brute_proposal(ctx: list[int], max_n: int, min_n: int):
    """The token after the latest earlier occurrence of the longest suffix of ``ctx`` (sizes
    max_n..min_n) whose next token is in ``ctx``; None without a match. Written independently:
    a plain backward scan over the context."""
    for k in range(max_n, min_n - 1, -1):
        if len(ctx) < k:
            continue
        suffix = ctx[len(ctx) - k:]
        for e in range(len(ctx) - 2, k - 2, -1):      # occurrence ends at e, its next token e+1 < len
            if ctx[e - k + 1:e + 1] == suffix:
                return ctx[e + 1]
    return None


def test_lookup_proposals_equal_a_brute_force_scan():
    tr = _small_case()
    tok, pir = tr.tgt_tok.tolist(), tr.pos_in_response.tolist()
    got = lookup_proposals(tok, pir, 3, 1)
    start = 0
    for p in range(len(tok)):
        if pir[p] == 0:
            start = p
        want = _brute_proposal(tok[start:p], 3, 1)
        assert got[p] == (NO_PROPOSAL if want is None else want), p
    assert (got != NO_PROPOSAL).any() and (got == np.asarray(tok)).any()


@pytest.mark.parametrize("k", [2, 5])
def test_lookup_acceptance_equals_a_brute_force_replay(k):
    """Greedy speculative decoding with a lookup drafter, replayed literally on the trace's
    target tokens (each round drafts k tokens from the committed context PLUS its own drafts,
    the target accepts the longest right prefix and adds its own token) commits exactly where
    the simulator's replay of the lookup trace does, round after round."""
    tr = _small_case()
    lt = lookup_trace(tr, 3, 1)
    rp = TraceReplay(lt, len(tr))
    tok, pir = tr.tgt_tok.tolist(), tr.pos_in_response.tolist()
    n = len(tok)
    start, rounds, accepted = 0, 0, 0
    while start < n:
        rstart = max(i for i in range(start + 1) if pir[i] == 0)
        end = rp.prompt_end(start)
        ctx = tok[rstart:start]
        drafts = []
        for _ in range(min(k, end - start)):
            d = _brute_proposal(ctx + drafts, 3, 1)
            drafts.append(-1 if d is None else d)       # no match: a guess that is never right
        acc = 0
        while acc < len(drafts) and drafts[acc] == tok[start + acc]:
            acc += 1
        commit = min(start + acc + 1, end)
        assert rp.accepted_run(start, len(drafts)) == acc
        assert rp.commit_point(start, len(drafts)) == commit
        accepted += acc
        rounds += 1
        start = commit
    assert rounds > 0 and accepted > 20


def test_lookup_run_counts_the_brute_force_acceptance_and_costs_cpu_time(tmp_path):
    """A task_sync run with the lookup drafter and a fixed k = 4 accepts what the literal replay
    accepts over the window; drafting takes CPU time only (probes x probe time per drafted token,
    3 probes of 100 ns by default), never PIM time."""
    from ahasd_sim.simulation import run_simulation
    n, k = 200, 4
    cfg = load_config(PLATFORM, ["run.mode=task_sync", "run.drafter=lookup", f"run.trace={GREEDY}",
                                 "run.trace_start_prompt=2",
                                 f"run.generated_tokens={n}", "run.windows=1", "run.policy=fixed",
                                 f"policy.fixed.k={k}", "pim.partition_policy=striped", "run.prefill=false"])
    res = run_simulation(cfg)
    s = res.summary
    rp = TraceReplay(lookup_trace(_small_case(), 3, 1), n)
    start, want = 0, 0
    while start < n:
        drafted = min(k, rp.prompt_end(start) - start)
        acc = rp.accepted_run(start, drafted)
        want += min(acc, n - start)
        start = min(rp.commit_point(start, drafted), n)
    assert s["accepted_tokens"] == want > 10
    assert s["drafter"] == "lookup" and s["acceptance_source"].startswith("exact")
    assert s["device_busy_s"].get("pim", 0.0) == 0.0
    assert s["device_busy_s"]["cpu"] == pytest.approx(s["drafted_tokens"] * 3 * 100e-9, rel=1e-6)   # busy: sums of (end - start) at ~100 s


def test_head_run_is_a_what_if_and_says_so(tmp_path, capsys):
    from ahasd_sim.simulation import run_simulation
    base = [f"run.trace={SMOKE_TRACE}", "run.generated_tokens=48", "run.windows=1", "run.mode=task_sync",
            "pim.partition_policy=striped"]
    head = run_simulation(load_config(PLATFORM, [*base, "run.drafter=head"])).summary
    model = run_simulation(load_config(PLATFORM, [*base, "run.drafter=model"])).summary
    auto = run_simulation(load_config(PLATFORM, base)).summary
    assert head["drafter"] == "head" and head["acceptance_source"].startswith("what-if")
    assert head["draft_model"] == "eagle-head:llama2-13b"
    assert model["drafter"] == auto["drafter"] == "model"
    # same verdicts (the trace's), a drafter of 5% of the 7B's bytes: the same tokens, sooner
    assert head["accepted_tokens"] == model["accepted_tokens"]
    assert head["device_busy_s"]["pim"] < 0.2 * model["device_busy_s"]["pim"]
    from ahasd_sim.checks import summary_trace_line
    assert "what-if" in summary_trace_line(head) and "drafter" not in summary_trace_line(model)


def test_lookup_ngram_bounds_are_checked():
    from ahasd_sim.simulation import mode_and_models
    cfg = load_config(PLATFORM, ["run.drafter=lookup", "lookup.min_ngram=4", "lookup.max_ngram=2"])
    with pytest.raises(InputError, match="lookup.min_ngram"):
        mode_and_models(cfg)
    with pytest.raises(InputError, match="run.drafter"):
        load_config(PLATFORM, ["run.drafter=medusa"])


def test_dry_run_names_the_drafter_and_a_non_soc_mode_warns():
    from ahasd_sim.checks import config_warnings, dry_run
    lines = dry_run(load_config(PLATFORM, ["run.drafter=lookup", f"run.trace={SMOKE_TRACE}",
                                           "run.generated_tokens=48", "pim.partition_policy=striped"]))
    assert any("draft lookup(n=1..3)" in x and "run.drafter lookup" in x for x in lines)
    moe = load_config(ROOT / "hw_configs" / "moe_offload.yaml", ["run.drafter=lookup"])
    assert any("modelled on the mobile SoC modes" in w for w in config_warnings(moe))
    assert not any("mobile SoC" in w for w in config_warnings(load_config(PLATFORM, ["run.drafter=head"])))
