"""Tree-trace format (ahasd-tree-trace v1): loader, validator, tree cutting and replay."""

import json
import os

import numpy as np
import pytest

from ahasd_sim.traces.tree import (TreeTraceError, accepted_path, build_rounds, concat_rounds,
                                            example_tree_trace, is_tree_trace, load_tree_trace,
                                            write_tree_trace)

TRACES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces")
EXAMPLE = os.path.join(TRACES, "tiny_tree_example.npz")


@pytest.fixture
def example(tmp_path):
    h, c = example_tree_trace()
    p = tmp_path / "ex_tree.npz"
    write_tree_trace(p, h, c)
    return p, h, c


def _hand_tree():
    """root 10 -> children 11 (rank0), 12 (rank1); 11 -> 13 (rank0); 12 -> 14 (rank0).
    Target greedy: at root 12 (so 11 rejected, 12 accepted), at 12 -> 14 (accepted), at 14 -> 99."""
    return {"parent": [-1, 0, 0, 1, 2], "tok": [10, 11, 12, 13, 14], "tgt": [12, 13, 14, 5, 99],
            "rank": [-1, 0, 1, 0, 0], "q": [1.0, 0.6, 0.3, 0.9, 0.5],
            "topk_ids": [[11, 12, 1, 2], [13, 3, 4, 5], [14, 6, 7, 8], None, None],
            "topk_p": [[0.6, 0.3, 0.05, 0.01], [0.9, 0.05, 0.01, 0.01], [0.5, 0.2, 0.1, 0.1], None, None]}


def _hand_header(cols, depth=2, budget=4):
    return {"categories": ["code"], "prompts": [{"index": 0, "id": "hand"}], "drf_top_k": 4,
            "tree": {"depth": depth, "top_k": 2, "node_budget": budget},
            "moe": {"label": "test", "n_experts": 8, "k": 2, "n_layers": 3, "source": "moefied"},
            "n_rounds": 0, "n_nodes": 0, "n_commit": 0}


def test_hand_tree_verdicts_accepted_path_and_commits(tmp_path):
    cols = build_rounds([_hand_tree()], n_layers=3, k=2, n_experts=8, drf_top_k=4)
    assert cols["node_accept"].tolist() == [True, False, True, True, True]  # 13 is right, its parent not
    assert cols["round_accept_len"].tolist() == [2]
    assert cols["commit_tok"].tolist() == [12, 14, 99]      # path 12, 14 + correction 99
    assert cols["commit_node"].tolist() == [2, 4, -1]       # correction routed by the next root
    p = tmp_path / "hand_tree.npz"
    write_tree_trace(p, _hand_header(cols), cols)
    tr = load_tree_trace(p)
    # the top-1 chain (11, 13) is rejected at depth 1; the full tree accepts 2
    assert tr.accepted_length(0) == 2
    assert tr.accepted_length(0, tr.subtree(0, "chain", 2)) == 0
    assert tr.subtree(0, "chain", 2).tolist() == [0, 1, 3]
    # top-1 by cumulative drafter probability keeps node 1 (0.6) -> 0 accepted; top-2 adds 13 (0.54)
    assert tr.subtree(0, "top_n", 1).tolist() == [0, 1]
    assert tr.subtree(0, "top_n", 2).tolist() == [0, 1, 3]
    assert tr.subtree(0, "top_n", 3).tolist() == [0, 1, 2, 3]
    assert tr.accepted_lengths("top_n", 3).tolist() == [1]
    assert tr.accepted_lengths("top_n", 4).tolist() == [2]
    assert tr.subtree(0, "shape", depth=1, top_k=2).tolist() == [0, 1, 2]
    np.testing.assert_allclose(tr.cum_q, [1.0, 0.6, 0.3, 0.54, 0.15], rtol=1e-6)


def test_eos_truncates_commits_and_ends_prompt():
    t1 = _hand_tree()
    cols = build_rounds([t1, t1], n_layers=3, k=2, n_experts=8, drf_top_k=4, eos_ids=(14,))
    assert cols["commit_tok"].tolist() == [12, 14]
    assert cols["round_n_commit"].tolist() == [2]           # second round never happens


def test_shipped_example_loads_and_replays_consistently():
    tr = load_tree_trace(EXAMPLE)
    assert tr.header.get("constructed_example") is True
    full = tr.accepted_lengths("top_n", 10 ** 6)
    assert np.array_equal(full, tr.round_accept_len)
    # a cut tree never accepts more than the full tree, and the chain never more than its depth
    for n in (1, 2, 4, 8):
        cut = tr.accepted_lengths("top_n", n)
        assert (cut <= full).all()
    for d in (1, 2, 3):
        ch = tr.accepted_lengths("chain", d)
        assert (ch <= d).all() and (ch <= full).all()
    # acceptance is monotone in the cut size (nested trees)
    prev = np.zeros(len(tr), dtype=int)
    for n in (1, 2, 4, 8, 14):
        cur = tr.accepted_lengths("top_n", n)
        assert (cur >= prev).all()
        prev = cur
    idx, ids, w = tr.commit_routing()
    assert ids.shape == (idx.size, tr.n_layers, tr.moe_k)
    assert is_tree_trace(EXAMPLE) and not is_tree_trace(os.path.join(TRACES, "qwc-0.5b-1.5b_greedy_smoke.npz"))


def test_concat_rebases_offsets(example):
    _, h, c = example
    tr = load_tree_trace(example[0])
    # the second prompt's first committed token is routed by a node of the second prompt
    (p0, a0, b0), (p1, a1, b1) = tr.prompt_rounds()
    first_commit = int(tr.round_commit_offset[a1])
    node = int(tr.commit_node[first_commit])
    assert tr.nodes(a1).start <= node < tr.nodes(b1 - 1).stop


def _corrupt(example, tmp_path, mutate):
    _, h, c = example
    h, c = json.loads(json.dumps(h)), {k: v.copy() for k, v in c.items()}
    mutate(h, c)
    p = tmp_path / "bad_tree.npz"
    np.savez_compressed(p, header_json=np.array(json.dumps(h)), **c)
    with pytest.raises(TreeTraceError) as ei:
        load_tree_trace(p)
    msg = str(ei.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def _flip_accept(h, c):
    c["node_accept"][1] = ~c["node_accept"][1]


def _bad_commit(h, c):
    c["commit_tok"][0] += 1


def _bad_parent(h, c):
    c["node_parent"][2] = 5


def _bad_version(h, c):
    h["format_version"] = 99


def _bad_expert(h, c):
    c["node_moe_ids"][0, 0, 0] = 200


def _dup_expert(h, c):
    c["node_moe_ids"][0, 0, 1] = c["node_moe_ids"][0, 0, 0]


def _bad_pos(h, c):
    c["round_pos"][1] += 1


def _bad_len(h, c):
    c["node_q"] = c["node_q"][:-1]


def _bad_accept_len(h, c):
    c["round_accept_len"][0] += 1


def _missing_moe_key(h, c):
    del h["moe"]["k"]


@pytest.mark.parametrize("mutate,needle", [
    (_flip_accept, "node_accept"), (_bad_commit, "committed tokens"), (_bad_parent, "parents"),
    (_bad_version, "format_version"), (_bad_expert, "expert ids"), (_dup_expert, "repeats an expert"),
    (_bad_pos, "round_pos"), (_bad_len, "node_q"), (_bad_accept_len, "round_accept_len"),
    (_missing_moe_key, "moe.k"),
])
def test_validator_rejects(example, tmp_path, mutate, needle):
    assert needle in _corrupt(example, tmp_path, mutate)


def test_missing_and_chain_files_are_one_line_errors(tmp_path):
    with pytest.raises(TreeTraceError, match="file not found"):
        load_tree_trace(tmp_path / "nope.npz")
    with pytest.raises(TreeTraceError, match="ahasd-tree-trace"):
        load_tree_trace(os.path.join(TRACES, "qwc-0.5b-1.5b_greedy_smoke.npz"))


def test_accepted_path_prefers_deepest():
    parent = np.array([-1, 0, 0, 2, 3])
    acc = np.array([True, True, True, True, False])
    dep = np.array([0, 1, 1, 2, 3])
    assert accepted_path(parent, acc, dep) == [2, 3]


def test_quantized_gate_weights_sum_to_one_and_stay_close():
    from ahasd_sim.traces.tree import quantize_gate_weights
    rng = np.random.default_rng(1)
    w = -np.sort(-rng.dirichlet(np.ones(8), size=(200, 5)), axis=2)
    q = quantize_gate_weights(w, 256)
    assert q.dtype == np.float16
    assert np.array_equal(q.astype(np.float64).sum(axis=2), np.ones((200, 5)))   # exact in float16
    assert np.abs(q.astype(np.float64) - w).max() < 1 / 256
    assert np.array_equal(np.mod(q.astype(np.float64) * 256, 1), np.zeros_like(w))


def test_chain_loader_names_a_tree_trace():
    from ahasd_sim.traces.format import TraceError, load_trace
    with pytest.raises(TraceError, match="draft-tree trace"):
        load_trace(EXAMPLE)
