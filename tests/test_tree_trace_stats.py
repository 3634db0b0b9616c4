"""`traces stats` on tree traces: acceptance by cut size, routing statistics (hand-computed cases)."""

import numpy as np
import pytest

from ahasd_sim.__main__ import main
from ahasd_sim.metrics.stats import t_quantile
from ahasd_sim.traces.tree_stats import acceptance_table, load_balance_table, routing_table
from ahasd_sim.traces.tree import TreeTrace, build_rounds, example_tree_trace, write_tree_trace

E, L, K = 4, 1, 2


def _trace(routes):
    """Rounds of a 1-node chain tree (root + 1 child, always accepted); node routing given."""
    trees, root = [], 5
    it = iter(routes)
    for _ in range(len(routes) // 2):
        child = root + 1
        trees.append({"parent": [-1, 0], "tok": [root, child], "tgt": [child, child + 1], "rank": [-1, 0],
                      "q": [1.0, 0.9], "topk_ids": [[child, 90, 91, 92], None], "topk_p": [[0.9, 0.05, 0.03, 0.02], None],
                      "moe_ids": [[next(it)], [next(it)]], "moe_w": [[[0.5, 0.5]], [[0.5, 0.5]]]})
        root = child + 1
    cols = build_rounds(trees, n_layers=L, k=K, n_experts=E, drf_top_k=4)
    header = {"format": "ahasd-tree-trace", "format_version": 1, "kind": "tree", "categories": ["c"],
              "prompts": [{"id": "p"}], "drf_top_k": 4, "tree": {"depth": 1, "top_k": 1, "node_budget": 1},
              "moe": {"label": "t", "n_experts": E, "k": K, "n_layers": L, "source": "moefied"},
              "n_rounds": len(cols["round_pos"]), "n_nodes": cols["node_tok"].size, "n_commit": cols["commit_tok"].size}
    return TreeTrace(cols, header)


def test_routing_union_and_reuse_by_hand():
    # round 0: root {0,1}, child {1,2}; round 1: root {2,3}, child {2,3}
    tt = _trace([[0, 1], [1, 2], [2, 3], [3, 2]])
    rt = routing_table(tt, steps=(1, 2))
    tree1 = rt.loc[("tree (root + top-(T-1) nodes)", 1)]
    tree2 = rt.loc[("tree (root + top-(T-1) nodes)", 2)]
    assert tree1["experts_per_layer"] == 2.0
    assert tree2["experts_per_layer"] == (3 + 2) / 2          # {0,1,2} and {2,3}
    assert tree2["reuse_next_step"] == 1 / 2                   # {2} of {2,3} was in the previous step
    assert tree1["reuse_next_step"] == 0.0                     # {0,1} -> {2,3}
    # committed tokens: child(r0) {1,2}, correction(r0) = root(r1) {2,3}, child(r1) {3,2}; last unrouted
    com2 = rt.loc[("committed tokens (window of T)", 2)]
    assert com2["experts_per_layer"] == 3.0                    # first window {1,2} u {2,3}
    np.testing.assert_allclose(tree1["uniform_random_expect"], 2.0)
    np.testing.assert_allclose(tree2["uniform_random_expect"], 4 * (1 - 0.5 ** 2))


def test_load_balance_perfect_and_skewed():
    bal = load_balance_table(_trace([[0, 1], [2, 3], [0, 1], [2, 3]]))  # commits: {2,3},{0,1},{2,3}
    # committed tokens route to 2,3 / 0,1 / 2,3 -> loads [1,1,2,2]
    row = bal.loc[0]
    np.testing.assert_allclose(row["max_over_mean"], 2 / 1.5)
    assert row["experts_unused"] == 0
    skew = load_balance_table(_trace([[0, 1], [0, 1], [0, 1], [0, 1]])).loc[0]
    assert skew["experts_unused"] == 2 and skew["max_over_mean"] == 2.0
    np.testing.assert_allclose(skew["norm_entropy"], np.log(2) / np.log(4))


def test_acceptance_table_monotone_and_ci(tmp_path):
    h, c = example_tree_trace(n_prompts=3, n_rounds=6, seed=4)
    p = tmp_path / "ex_tree.npz"
    write_tree_trace(p, h, c)
    from ahasd_sim.traces.tree import load_tree_trace
    tt = load_tree_trace(p)
    acc = acceptance_table(tt)
    tree = acc.loc["tree top-N"]["mean_accepted"].to_numpy()
    assert (np.diff(tree) >= 0).all()
    full = acc.loc["tree top-N"].iloc[-1]
    assert full["mean_accepted"] == tt.round_accept_len.mean()
    # one sample per prompt (its rounds' mean), never the rounds pooled: the t interval's width
    per_prompt = [tt.round_accept_len[a:b].mean() for _, a, b in tt.prompt_rounds() if b > a]
    n = len(per_prompt)
    assert n >= 3
    half = t_quantile(0.975, n - 1) * np.std(per_prompt, ddof=1) / np.sqrt(n)
    m = full["mean_accepted"]
    assert full["ci95_high"] == pytest.approx(m + half, rel=1e-12)
    assert full["ci95_low"] == pytest.approx(max(0.0, m - half), rel=1e-12)


def test_cli_stats_on_tree_example(capsys):
    assert main(["traces", "stats", "traces/tiny_tree_example.npz"]) == 0
    out = capsys.readouterr().out
    assert "constructed example" in out and "== routing ==" in out and "== acceptance ==" in out


def test_cli_record_needs_a_kind(capsys):
    assert main(["traces", "record"]) == 2
    assert "--kind chain or --kind tree" in capsys.readouterr().err
