"""Shipped real traces (traces/*.npz): fields for the chain policies, entropy vs acceptance,
and equality of the accept-flag replay with the generator's online cross-check runs."""

import glob
import json
import os

import numpy as np
import pytest

from ahasd_sim.traces.stats import compute_stats
from ahasd_sim.traces.format import load_trace, replay_fixed_k

TRACES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces")
FILES = sorted(f for f in glob.glob(os.path.join(TRACES, "*.npz")) if "tree" not in os.path.basename(f))  # tree traces: test_tree_traces.py
CROSS = sorted(glob.glob(os.path.join(TRACES, "*_crosscheck.json")))

# references.md (drafting algorithms): chain policies -> columns they read from a trace
POLICY_FIELDS = {
    "fixed_gamma/SpecPIM": ["accept"],
    "SpecDec++": ["accept", "drf_p_tok", "tgt_p_drf"],
    "SVIP": ["accept", "drf_H"],
    "AdaEDL": ["accept", "drf_H"],
    "BanditSpec": ["accept"],
    "AHASD_EDC": ["accept", "drf_H", "rollout_offset", "rollout_len", "rollout_H"],
    "HyCo": ["accept", "drf_p_tok", "drf_H"],
    "tree (EAGLE-2 fields)": ["topk_ids", "topk_p", "tgt_tok", "drf_p_top1"],
}


def largest(mode):
    cands = [f for f in FILES if load_trace(f).mode == mode]
    return max(cands, key=os.path.getsize) if cands else None


def test_shipped_traces_exist():
    assert FILES, "no traces shipped in traces/"
    assert any("greedy" in os.path.basename(f) for f in FILES)


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_policy_fields_present(path):
    tr = load_trace(path)  # full validation
    n = len(tr)
    assert n > 0
    for policy, fields in POLICY_FIELDS.items():
        for f in fields:
            assert f in tr.columns, f"{policy} needs column {f}"
    for f in ("drf_tok", "match", "alpha", "u", "tgt_p", "tgt_H", "drf_p_tgt", "prompt_id", "category",
              "pos_in_response", "prompt_len"):
        assert tr.columns[f].shape == (n,)
    assert tr.top_k >= 4
    h = tr.header
    for key in ("models", "tokenizer", "generator_version", "date", "L_max", "top_k", "prompt_sources",
                "temperature", "categories", "prompts"):
        assert key in h
    assert h["models"]["target"]["sha256"] == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    assert h["models"]["drafter"]["sha256"] == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    # a rollout at every rejected position (up to EOS), none at accepted ones
    rej = ~tr.accept
    assert np.all(tr.rollout_len[rej] >= 1) and np.all(tr.rollout_len[~rej] == 0)
    t = int(np.flatnonzero(rej)[0])
    tok, p, H = tr.offpath(t)
    assert 1 <= tok.size <= tr.L_max and np.all(H >= 0)
    if tr.mode == "greedy":
        assert np.all(np.isnan(tr.u))
    else:
        assert np.all((tr.u >= 0) & (tr.u < 1))
        # accept flag is the speculative-sampling test on the recorded draw
        ratio = np.minimum(1.0, tr.tgt_p_drf / np.maximum(tr.drf_p_tok, 1e-30))
        agree = (tr.u < ratio) == tr.accept
        assert agree.mean() > 0.999  # float32 storage of p, q
        # accepted proposals are the emitted tokens (coupled sampling)
        assert np.all(tr.drf_tok[tr.accept] == tr.tgt_tok[tr.accept])


@pytest.mark.parametrize("mode", ["greedy", "sample"])
def test_lower_entropy_higher_acceptance(mode):
    path = largest(mode)
    assert path is not None, f"no {mode} trace shipped in traces/ (both modes are: greedy and t1)"
    tr = load_trace(path)
    H, acc = tr.drf_H.astype(float), tr.accept.astype(float)
    lo = H <= np.median(H)
    assert acc[lo].mean() > acc[~lo].mean() + 0.1
    ev = compute_stats(tr)["entropy_vs_accept"]
    assert ev["accept_rate"].iloc[0] > ev["accept_rate"].iloc[-1] + 0.2
    # rank correlation between entropy and acceptance is clearly negative
    r = np.corrcoef(np.argsort(np.argsort(H)), acc)[0, 1]
    assert r < -0.2


@pytest.mark.parametrize("cc_path", CROSS, ids=os.path.basename)
def test_replay_equals_online_crosscheck(cc_path):
    trace_path = cc_path.replace("_crosscheck.json", ".npz")
    tr = load_trace(trace_path)
    with open(cc_path) as f:
        cc = json.load(f)
    by_id = {p["id"]: i for i, p in enumerate(tr.header["prompts"])}
    bounds = tr.prompt_bounds()
    n_seq = 0
    for run in cc["runs"]:
        i = by_id[run["id"]]
        s, e = bounds[i]
        e = s + run.get("n_requested", run["n_tokens"])  # a cross-check may cover only a prefix
        assert e <= bounds[i][1]
        replay = replay_fixed_k(tr.accept[s:e], run["k"]).tolist()
        if run["verify"] == "sequential":
            n_seq += 1
            assert run["tokens_equal_trace"], run["id"]
            assert run["accept_lengths"] == replay, (run["id"], run["k"])
            assert sum(run["accept_lengths"]) == e - s
        elif run["tokens_equal_trace"]:
            # batched verification: identical whenever no near-tie flipped the continuation
            assert run["accept_lengths"] == replay, (run["id"], run["k"])
    assert n_seq >= 3
    assert {4, 8} <= {r["k"] for r in cc["runs"]}
