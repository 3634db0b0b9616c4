"""Exact behaviour of the tree-selection policies (``ahasd_sim/policies/tree_base.py``,
``eagle_fixed``, ``eagle_dynamic``, ``specfit``, ``ecospec``, ``expert_budget``).

Small trees whose selections, ratios, costs and thresholds are derived by hand in each
docstring. Probabilities and costs are dyadic where a threshold is tested at its boundary, so
the boundary value is exact in binary floating point.
"""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from ahasd_sim.config.errors import InputError
from ahasd_sim.moe import closure
from ahasd_sim.moe.config import TreePolicyConfig
from ahasd_sim.moe.cost import LinearVerifyModel
from ahasd_sim.moe.tree import DraftTree, TreeView, expert_union
from ahasd_sim.policies import make_policy
from ahasd_sim.policies.tree_base import TreePolicy, item_matrix, top_by_confidence


def ex(x):
    return pytest.approx(x, rel=1e-12, abs=0)


def view_of(parent, q, pred, resident, costs, drafted_depth=None, draft_s=0.0, next_level_s=0.0,
            recorded_depth=None):
    parent = np.asarray(parent)
    pred = np.asarray(pred)
    tree = DraftTree(parent=parent, q_prob=np.asarray(q, dtype=float), correct=np.ones(len(parent), bool),
                     experts=pred)
    deep = tree.max_depth
    return TreeView(parent=parent, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                    drafted_depth=deep if drafted_depth is None else drafted_depth, predicted_experts=pred,
                    resident=np.asarray(resident, dtype=bool), costs=costs, draft_time_s=draft_s,
                    next_level_draft_s=next_level_s, recorded_depth=deep if recorded_depth is None else recorded_depth)


def policy(name, **params):
    pc = TreePolicyConfig()
    for k, v in params.items():
        setattr(getattr(pc, name), k, v)
    pol = make_policy(name, None, np.random.default_rng(0))
    pol.configure(pc)
    return pol


LM0 = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=1.0, n_layers=1)


# ------------------------------------------------------------------ the base class
def test_tree_policy_base_depth_drafting_and_round_statistics():
    """max_depth from the section (3); continue while drafted < 3; always drafts; decide is an
    error. Rounds (3 nodes, 2 accepted, 4 levels) and (1, 0, 2): nodes verified mean 2, levels
    mean 3, acceptance 2 / 4, accepted mean 1, committed (3 + 1) / 2 = 2."""
    pol = policy("eagle_dynamic", max_depth=3)
    assert TreePolicy.is_tree_policy is True and TreePolicy.drafts is True
    assert pol.max_depth() == 3 and type(pol.max_depth()) is int
    v = view_of([-1, 0], [1.0, 0.5], [[[0]], [[0]]], [[True]], LM0, drafted_depth=2)
    assert pol.continue_drafting(v) is True
    assert pol.continue_drafting(view_of([-1, 0], [1.0, 0.5], [[[0]], [[0]]], [[True]], LM0, drafted_depth=3)) is False
    assert pol.wants_draft(v) is True
    with pytest.raises(InputError) as e:
        pol.decide(None)
    assert str(e.value) == "policy 'eagle_dynamic' selects draft trees: use it with run.mode moe_offload"
    empty = pol.stats()
    assert empty["mean_levels_drafted"] == 0.0 and empty["mean_nodes_verified"] == 0.0
    pol.on_tree_verified(3, 2, 4)
    pol.on_tree_verified(1, 0, 2, 0.5)
    assert pol.round_lengths == [3, 1] and pol.accepted_lengths == [2, 0]
    assert pol.committed_lengths == [3, 1] and pol.levels_drafted == [4, 2]
    s = pol.stats()
    assert s["rounds"] == 2 and s["mean_nodes_verified"] == 2.0 and s["mean_levels_drafted"] == 3.0
    assert s["round_acceptance_rate"] == 0.5 and s["mean_accepted_length"] == 1.0
    assert s["mean_committed_per_round"] == 2.0
    assert "draft_length_histogram" not in s and "mean_draft_length" not in s


# ------------------------------------------------------------------ top_by_confidence
# node 1 (depth 1, P 0.5), node 2 (child of 1, depth 2, P 0.5 x 1), node 3 (depth 1, P 0.5),
# node 4 (child of 3, P 0.25)
TIE = dict(parent=[-1, 0, 1, 0, 3], q=[1.0, 0.5, 1.0, 0.5, 0.5], pred=[[[0]]] * 5, resident=[[True]], costs=LM0)


def test_top_by_confidence_breaks_ties_by_depth_then_id_and_stays_ancestor_closed():
    """Order (-P, depth, id): 1 (0.5, d1), 3 (0.5, d1), 2 (0.5, d2), 4 (0.25). n = 2 -> {1, 3}
    (by id alone it would be {1, 2}); n = 3 -> {1, 2, 3}; n = 9 -> all. Candidates {2, 4} only:
    neither parent is taken -> nothing; {2, 3, 4}: 3, then 2 is skipped (parent 1 not taken)
    and 4 follows its parent 3."""
    v = view_of(**TIE)
    assert top_by_confidence(v, v.available(), 2) == [1, 3]
    assert top_by_confidence(v, v.available(), 3) == [1, 2, 3]
    assert top_by_confidence(v, v.available(), 9) == [1, 2, 3, 4]
    assert top_by_confidence(v, v.available(), 1) == [1]
    assert top_by_confidence(v, [2, 4], 2) == []
    assert top_by_confidence(v, [2, 3, 4], 3) == [3, 4]
    assert top_by_confidence(v, [2, 3, 4], 1) == [3]
    assert all(type(x) is int for x in top_by_confidence(v, np.array([1, 3]), 2))


def test_top_by_confidence_prefers_higher_confidence():
    """P: 1 -> 0.25, 2 -> 0.75, 3 (child of 2) -> 0.375. n = 1 -> {2}; n = 2 -> {2, 3}."""
    v = view_of([-1, 0, 0, 2], [1.0, 0.25, 0.75, 0.5], [[[0]]] * 4, [[True]], LM0)
    assert top_by_confidence(v, v.available(), 1) == [2]
    assert top_by_confidence(v, v.available(), 2) == [2, 3]


# ------------------------------------------------------------------ item_matrix
def test_item_matrix_items_layer_flags_and_times():
    """L 2, E 3, top-1; only (layer 0, expert 0) resident. Items: (l, e) -> 3 l + e, then the
    layer flags 6 (layer 0) and 7 (layer 1). Root routes (0,0), (1,1) -> items {0, 4}, and the
    flag of layer 1 (item 4 is not resident) -> root = {0, 4, 7}. Node 1 routes (0,1), (1,1): {1,
    4} + flags {6, 7}, minus the root's -> {1, 6}. Node 2 routes (0,0), (1,2): {0, 5} + flag 7
    (item 0 is resident: no flag 6) minus the root's -> {5}. Times (c2 1, fetch 10, first-fetch
    extra 100): [1, 11, 11, 11, 11, 11, 100, 100]."""
    m = LinearVerifyModel(c0_s=0.0, c1_s=0.0, c2_s=1.0, fetch_s=10.0, n_layers=2, first_fetch_extra_s=100.0)
    res = [[True, False, False], [False, False, False]]
    v = view_of([-1, 0, 0], [1.0, 0.5, 0.5], [[[0], [1]], [[1], [1]], [[0], [2]]], res, m)
    own, root, t = item_matrix(v, [1, 2])
    assert np.flatnonzero(root).tolist() == [0, 4, 7]
    assert [np.flatnonzero(r).tolist() for r in own] == [[1, 6], [5]]
    assert t.tolist() == [1.0, 11.0, 11.0, 11.0, 11.0, 11.0, 100.0, 100.0]
    own2, root2, _ = item_matrix(v, [2])                      # rows follow the nodes given
    assert [np.flatnonzero(r).tolist() for r in own2] == [[5]] and root2.tolist() == root.tolist()
    e_own, e_root, e_t = item_matrix(v, [])
    assert e_own.shape == (0, 8) and e_root.tolist() == root.tolist() and e_t.tolist() == t.tolist()
    # a cost model without first_fetch_extra_s: the flags cost nothing
    bare = SimpleNamespace(c2_s=1.0, fetch_s=10.0)
    v2 = view_of([-1, 0, 0], [1.0, 0.5, 0.5], [[[0], [1]], [[1], [1]], [[0], [2]]], res, bare)
    assert item_matrix(v2, [1])[2].tolist() == [1.0, 11.0, 11.0, 11.0, 11.0, 11.0, 0.0, 0.0]


def test_item_matrix_top2_rows():
    """L 1, E 4, top-2, nothing resident. Root {0, 1} + flag 4; node 1 {1, 2} -> {2}; node 2
    {2, 3} -> {2, 3} (the flag is the root's)."""
    m = LinearVerifyModel(c0_s=0.0, c1_s=0.0, c2_s=0.5, fetch_s=2.0, n_layers=1)
    v = view_of([-1, 0, 1], [1.0, 0.5, 0.5], [[[0, 1]], [[1, 2]], [[2, 3]]], [[False] * 4], m)
    own, root, t = item_matrix(v, [1, 2])
    assert np.flatnonzero(root).tolist() == [0, 1, 4]
    assert [np.flatnonzero(r).tolist() for r in own] == [[2], [2, 3]]
    assert t.tolist() == [2.5, 2.5, 2.5, 2.5, 0.0]


# ------------------------------------------------------------------ eagle_fixed / eagle_dynamic
# root children 1 (q 0.25), 2 (q 0.5), 3 (q 0.375): sibling ranks 2, 0, 1. Children of 1: 4 (q
# 0.75, rank 0), 5 (q 0.5, rank 1); of 2: 6 (q 0.875); of 3: 7 (q 0.5); 8 (depth 3) under 4.
# P: 1 .25, 2 .5, 3 .375, 4 .1875, 5 .125, 6 .4375, 7 .1875, 8 .1875.
FIX = dict(parent=[-1, 0, 0, 0, 1, 1, 2, 3, 4], q=[1.0, 0.25, 0.5, 0.375, 0.75, 0.5, 0.875, 0.5, 1.0],
           pred=[[[0]]] * 9, resident=[[True]], costs=LM0)


def test_eagle_fixed_keeps_the_top_ranked_children_of_kept_nodes():
    """branching [2, 1]: depth 1 keeps ranks < 2 -> {2, 3}; depth 2 keeps rank 0 children of
    kept nodes -> 6 (of 2), 7 (of 3); 4 is rank 0 but its parent 1 is not kept; depth 3 is beyond
    the shape. Drafts exactly 2 levels. With branching [3, 2]: {1, 2, 3} then 4, 5, 6, 7."""
    pol = policy("eagle_fixed", branching=[2, 1])
    assert pol.max_depth() == 2
    v = view_of(**FIX)
    assert v.sibling_rank().tolist() == [0, 2, 0, 1, 0, 1, 0, 0, 0]
    assert pol.select(v) == [2, 3, 6, 7]
    assert pol.select(view_of(**FIX, drafted_depth=1)) == [2, 3]
    assert policy("eagle_fixed", branching=[3, 2]).select(v) == [1, 2, 3, 4, 5, 6, 7]
    assert policy("eagle_fixed", branching=[1]).select(v) == [2]
    assert policy("eagle_fixed", branching=[3, 1, 1]).select(v) == [1, 2, 3, 4, 6, 7, 8]


def test_eagle_dynamic_takes_the_most_confident_nodes():
    """total_nodes 3: P order 2 (.5), 6 (.4375), 3 (.375) -> {2, 3, 6}; 4: + 1 (.25); only depth
    1 drafted: {1, 2, 3}."""
    assert policy("eagle_dynamic", total_nodes=3).select(view_of(**FIX)) == [2, 3, 6]
    assert policy("eagle_dynamic", total_nodes=4).select(view_of(**FIX)) == [1, 2, 3, 6]
    assert policy("eagle_dynamic", total_nodes=3).select(view_of(**FIX, drafted_depth=1)) == [1, 2, 3]


# ------------------------------------------------------------------ ecospec
# L 1, E 4, top-1; expert 0 resident, the root routes it. c0 1, c1 0.1, c2 0.2, fetch 1, first
# fetch extra 0.5 -> item times [0.2, 1.2, 1.2, 1.2, 0.5 (layer flag)], T_ref = 1 + 0.1 + 0.2 = 1.3.
# Node 1 (q .9, expert 1: items {1, flag}), 2 (q .8, expert 0: nothing new), 3 (child of 1, q .9,
# P .81, expert 1), 4 (child of 2, q .5, P .4, expert 2).
ECO_LM = LinearVerifyModel(c0_s=1.0, c1_s=0.1, c2_s=0.2, fetch_s=1.0, n_layers=1, first_fetch_extra_s=0.5)
ECO = dict(parent=[-1, 0, 0, 1, 2], q=[1.0, 0.9, 0.8, 0.9, 0.5], pred=[[[0]], [[1]], [[0]], [[1]], [[2]]],
           resident=[[True, False, False, False]], costs=ECO_LM)


def test_ecospec_greedy_growth_by_penalised_confidence():
    """mu 1: node 1 costs dT = 0.1 + 1.2 + 0.5 = 1.8 -> 0.9 - 1.8/1.3 < 0; node 2 dT 0.1 ->
    0.8 - 0.077 > 0: take 2; then 1 and 4 (dT 1.8, 0.4 - 1.38) are negative: {2}.
    mu 0.6: 2 (0.754) before 1 (0.9 - 0.6 x 1.385 = 0.069); then 1 (4 is 0.4 - 0.831 < 0); 1
    pays expert 1 and the flag, so 3 costs only c1: 0.81 - 0.6 x 0.1/1.3 > 0; 4 then costs 0.1 +
    1.2 (flag paid): 0.4 - 0.6 = -0.2: {1, 2, 3}. Without the coverage update 3 would score
    0.81 - 0.831 < 0. mu 0.25: every node positive -> all 4; max_nodes 3 -> the first three
    taken (2, 1, 3); max_nodes 1 -> {2}."""
    assert policy("ecospec", mu=1.0).select(view_of(**ECO)) == [2]
    assert policy("ecospec", mu=0.6).select(view_of(**ECO)) == [1, 2, 3]
    assert policy("ecospec", mu=0.25).select(view_of(**ECO)) == [1, 2, 3, 4]
    assert policy("ecospec", mu=0.25, max_nodes=3).select(view_of(**ECO)) == [1, 2, 3]
    assert policy("ecospec", mu=0.25, max_nodes=1).select(view_of(**ECO)) == [2]
    assert policy("ecospec", mu=0.6).select(view_of(**ECO, drafted_depth=1)) == [1, 2]


# Nothing resident; c0 0.5, c1 0.25, c2 0.25, fetch 0.5, first-fetch extra 0.5. The root routes
# expert 0: T_ref = 0.5 + 0.25 + (0.25 + 0.5) + 0.5 = 2. Node 1 routes expert 1 (dT = 0.25 + 0.75
# = 1, the layer's flag is the root's), node 2 expert 0 (dT = c1 = 0.25).
EDGE_LM = LinearVerifyModel(c0_s=0.5, c1_s=0.25, c2_s=0.25, fetch_s=0.5, n_layers=1, first_fetch_extra_s=0.5)


def _edge(q1, q2=0.0625):
    return view_of([-1, 0, 0], [1.0, q1, q2], [[[0]], [[1]], [[0]]], [[False, False]], EDGE_LM)


def test_ecospec_score_threshold_is_exact():
    """mu 1: node 1 scores P - 1/2, node 2 P - 1/8. P1 = 1/2 scores exactly 0: not taken (a
    positive score is needed); P1 = 1/2 + 2^-20: taken. P2 = 1/8 exactly: not taken; + 2^-20:
    taken. mu 2 doubles the penalty: P1 = 1/2 + 2^-20 < 1 is not taken."""
    assert policy("ecospec", mu=1.0).select(_edge(0.5)) == []
    assert policy("ecospec", mu=1.0).select(_edge(0.5 + 2**-20)) == [1]
    assert policy("ecospec", mu=1.0).select(_edge(0.25, 0.125)) == []
    assert policy("ecospec", mu=1.0).select(_edge(0.25, 0.125 + 2**-20)) == [2]
    assert policy("ecospec", mu=2.0).select(_edge(0.5 + 2**-20)) == []
    assert policy("ecospec", mu=0.0).select(_edge(2**-30, 2**-30)) == [1, 2]


def test_ecospec_equal_scores_take_the_lowest_id():
    """Two root children with the same P and nothing new to load (expert 0 is resident and the
    root's): equal scores; max_nodes 1 takes node 1."""
    v = view_of([-1, 0, 0], [1.0, 0.5, 0.5], [[[0]], [[0]], [[0]]], [[True, False]], ECO_LM)
    assert policy("ecospec", max_nodes=1).select(v) == [1]


# ------------------------------------------------------------------ expert_budget
# L 2, E 4, top-1; (layer 0, expert 3) resident; the root routes expert 0 in both layers (loaded:
# layer 0 {0}, layer 1 {0}). P: 1 .5, 2 .25 (d1), 3 (child of 1) .25 (d2), 4 (child of 2) .125 (d2),
# 5 .125 (d1). Copies each adds: 1 routes (1, 0) -> [1, 0]; 2 (3, 1) -> [0 (resident), 1]; 3 (2, 2)
# -> [1, 1]; 4 (1, 1) -> nothing once 1 and 2 are in; 5 (3, 0) -> nothing.
BUD = dict(parent=[-1, 0, 0, 1, 2, 0], q=[1.0, 0.5, 0.25, 0.5, 0.5, 0.125],
           pred=[[[0], [0]], [[1], [0]], [[3], [1]], [[2], [2]], [[1], [1]], [[3], [0]]],
           resident=[[False, False, False, True], [False] * 4], costs=LM0)


def test_expert_budget_counts_copies_beyond_the_root_and_the_cache():
    """Order (-P, depth, id): 1, 2, 3, 5, 4. Budget 1: 1 ([1, 0]), 2 ([1, 1]), 3 would make [2, 2]:
    skipped, 5 adds nothing, 4 nothing -> {1, 2, 4, 5}. Budget 2: 3 fits -> all. Budget 0: 1, 2
    skipped, 3 and 4 lose their parents, 5 adds nothing -> {5}. max_nodes 3 (budget 1): 1, 2, 5
    (5 before 4: same P, smaller depth)."""
    v = view_of(**BUD)
    assert policy("expert_budget", budget_experts_per_layer=1).select(v) == [1, 2, 4, 5]
    assert policy("expert_budget", budget_experts_per_layer=2).select(v) == [1, 2, 3, 4, 5]
    assert policy("expert_budget", budget_experts_per_layer=0).select(v) == [5]
    assert policy("expert_budget", budget_experts_per_layer=1, max_nodes=3).select(v) == [1, 2, 5]
    assert policy("expert_budget", budget_experts_per_layer=2, max_nodes=2).select(v) == [1, 2]
    assert policy("expert_budget", budget_experts_per_layer=1).select(view_of(**BUD, drafted_depth=1)) == [1, 2, 5]


def test_expert_budget_counts_a_layer_against_its_own_budget():
    """L 2, nothing resident, the root routes expert 0 in both layers. Node 1 routes expert 1 in
    layer 0 and 0 in layer 1 (adds [1, 0]); node 2 (child of 1) expert 2 in layer 0, 0 in layer 1
    (adds [1, 0]): layer 0 would need 2 copies. Budget 1 -> {1}. Node 2 routes (0, 1) instead:
    [1, 1], fits -> {1, 2}."""
    base = dict(parent=[-1, 0, 1], q=[1.0, 0.5, 0.5], resident=[[False] * 3] * 2, costs=LM0)
    v = view_of(pred=[[[0], [0]], [[1], [0]], [[2], [0]]], **base)
    assert policy("expert_budget", budget_experts_per_layer=1).select(v) == [1]
    v2 = view_of(pred=[[[0], [0]], [[1], [0]], [[0], [1]]], **base)
    assert policy("expert_budget", budget_experts_per_layer=1).select(v2) == [1, 2]


# ------------------------------------------------------------------ specfit
# L 1, E 4, top-1, expert 0 resident and the root's. c0 1, c1 0.125, c2 0.125, fetch 1, first-fetch
# extra 0.5; drafting so far 0.5 s. Base time T0 = 0.5 + c0 + c1 (the root) + 0.125 (root's expert)
# = 1.75. Node 1 (q .5, expert 0: free), node 2 (q .25, expert 1: 0.125 + 1 + 0.5 = 1.625), node 3
# (child of 1, q .5 -> P .25, expert 0). E(S) = 1 + sum P, T(S) = T0 + 0.125 |S| + items:
# {} 1/1.75; {1} 1.5/1.875 = 0.8; {1, 3} 1.75/2 = 0.875; {1, 2} 1.75/3.625; {2} 1.25/3.5;
# {1, 2, 3} 2/3.75 -> best {1, 3}, 0.875.
SF_LM = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=1.0, n_layers=1, first_fetch_extra_s=0.5)
SF = dict(parent=[-1, 0, 0, 1], q=[1.0, 0.5, 0.25, 0.5], pred=[[[0]], [[0]], [[1]], [[0]]],
          resident=[[True, False, False, False]], costs=SF_LM, draft_s=0.5)


def _brute(v, costs):
    """max over ancestor-closed S of E(S) / T(S) by enumeration, with the cost model's own T."""
    best = (0.0, None)
    nodes = [int(x) for x in v.available()]
    for r in range(len(nodes) + 1):
        for s in itertools.combinations(nodes, r):
            if any(int(v.parent[x]) != 0 and int(v.parent[x]) not in s for x in s):
                continue
            e = 1 + sum(v.path_prob[x] for x in s)
            t = costs.cycle_time(len(s), expert_union(v.predicted_experts, s), v.resident, v.draft_time_s)
            if best[1] is None or e / t > best[0]:
                best = (e / t, sorted(s))
    return best


@pytest.mark.parametrize("backend", ["python", "scipy"])
def test_specfit_picks_the_throughput_optimal_subtree(backend, monkeypatch):
    """Both min-cut backends: {1, 3} at 0.875 (docstring above; the brute force agrees). With
    node 2 at q 0.75 and fetch 0.25, no extra (node 2's items 0.375): {1, 2, 3} gives 2.5 / 2.5 = 1
    > {1, 2} 2.25 / 2.375 > {1, 3} 1.75 / 2: all three. max_nodes 1 (candidates: node 1 only):
    {1} at 0.8."""
    monkeypatch.setattr(closure, "BACKEND", backend)
    v = view_of(**SF)
    pol = policy("specfit")
    ratio, sel = pol._solve(v)
    assert sel == [1, 3] and ratio == 0.875
    assert _brute(v, SF_LM) == (0.875, [1, 3])
    assert pol.select(v) == [1, 3]
    lm2 = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=0.25, n_layers=1)
    v2 = view_of(**dict(SF, q=[1.0, 0.5, 0.75, 0.5], costs=lm2))
    ratio2, sel2 = policy("specfit")._solve(v2)
    assert sel2 == [1, 2, 3] and ratio2 == 1.0
    assert _brute(v2, lm2) == (1.0, [1, 2, 3])
    assert policy("specfit", max_nodes=1)._solve(v) == (0.8, [1])


def test_specfit_solve_with_extra_tokens_and_time():
    """The stop rule's bound: E + 0.75 and T + 0.5 -> {1}: 2.25 / 2.375; {1, 3}: 2.5 / 2.5 = 1;
    {}: 1.75 / 2.25; {1, 2, 3}: 2.75 / 4.25 -> {1, 3} at 1."""
    ratio, sel = policy("specfit")._solve(view_of(**SF), 0.75, 0.5)
    assert sel == [1, 3] and ratio == 1.0


def test_specfit_stop_rule_bound_against_the_incumbent():
    """Depth 1 drafted of 2: candidates 1, 2; incumbent {1} at 1.5 / 1.875 = 0.8. The last level
    holds P 0.5 + 0.25 = 0.75; bound with one more level of x s: {1}: 2.25 / (1.875 + x) (the
    best; {} 1.75 / (1.75 + x), {1, 2} 2.5 / (3.625 + x)). x = 0.5: 0.947 > 0.8, continue;
    x = 1: 0.78 <= 0.8, stop; x = 0.9375: 2.25 / 2.8125 = 0.8 exactly (the same double as 1.5 /
    1.875): no gain, stop. One iteration count kept per level (the bound's is dropped)."""
    pol = policy("specfit")
    assert pol.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=0.5)) is True
    assert pol._best == [1] and pol.stops_by_rule == 0 and len(pol.dinkelbach_iterations) == 1
    v = view_of(**SF, drafted_depth=1, next_level_s=1.0)
    assert pol.continue_drafting(v) is False and pol.stops_by_rule == 1
    assert len(pol.dinkelbach_iterations) == 2 and pol._solved is v
    n = len(pol.dinkelbach_iterations)
    assert pol.select(v) == [1] and len(pol.dinkelbach_iterations) == n     # no second solve
    assert pol.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=0.9375)) is False
    assert pol.stops_by_rule == 2
    assert pol.stats()["stops_by_rule"] == 2
    # without the stop rule: continue whatever the bound
    off = policy("specfit", stop_rule=False)
    assert off.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=1.0)) is True
    assert off.stops_by_rule == 0 and len(off.dinkelbach_iterations) == 1


def test_specfit_stops_at_its_depth_limits():
    """max_depth 1 at drafted depth 1, or the drafter's recorded depth reached: stop without a
    bound (it would continue otherwise: x = 0.5 above); the incumbent is still solved."""
    pol = policy("specfit", max_depth=1)
    assert pol.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=0.5)) is False
    assert pol._best == [1] and pol.stops_by_rule == 0
    pol2 = policy("specfit")
    assert pol2.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=0.5, recorded_depth=1)) is False
    assert pol2.stops_by_rule == 0 and pol2.max_depth() == 6
    assert policy("specfit", max_depth=3).continue_drafting(view_of(**SF, drafted_depth=2, next_level_s=0.0,
                                                                    recorded_depth=3)) is True


def test_specfit_select_resolves_a_new_view_and_records_its_draft_time():
    pol = policy("specfit")
    v1 = view_of(**SF, drafted_depth=1)
    pol.continue_drafting(v1)
    v2 = view_of(**SF)
    assert pol.select(v2) == [1, 3] and pol._solved is v2 and pol._round_draft_s == 0.5


def test_specfit_blind_costs_profile_and_least_squares():
    """Profile (fewer than 2 distinct sizes): L 2, top-3, 2 of 8 experts resident -> miss 0.75;
    per layer c2 + 0.75 fetch = 0.125 + 0.75 = 0.875; a = c0 + L k 0.875 = 1 + 6 x 0.875 = 6.25,
    b = c1 + L 0.875 = 1.875. Observations (1, 2 s), (3, 3 s): slope 0.5, intercept 1.5. A
    negative slope falls back to the profile."""
    lm = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=1.0, n_layers=2)
    res = [[True, False, False, False], [True, False, False, False]]
    v = view_of([-1, 0], [1.0, 0.5], [[[0, 1, 2], [0, 1, 2]]] * 2, res, lm)
    pol = policy("specfit", expert_term=False)
    assert pol._blind_costs(v) == (6.25, 1.875)
    pol._obs = [(2, 1.0), (2, 3.0)]
    assert pol._blind_costs(v) == (6.25, 1.875)
    pol._obs = [(1, 2.0), (3, 3.0)]
    a, b = pol._blind_costs(v)
    assert (a, b) == (ex(1.5), ex(0.5)) and type(a) is float and type(b) is float
    pol._obs = [(1, 3.0), (2, 1.0)]
    assert pol._blind_costs(v) == (6.25, 1.875)


def test_specfit_expert_blind_objective():
    """expert_term false on the SpecFit tree: profile a = 1 + 0.875 = 1.875 (miss 0.75, L = k =
    1), b = 0.125 + 0.875 = 1; T(S) = 0.5 + a + b (|S| + 1): {} 1/3.375, {1} 1.5/4.375 = 0.343,
    {1, 3} 1.75/5.375 = 0.326, {1, 2, 3} 2/6.375 -> {1}. With a least-squares fit instead (sizes
    1 and 3 at 1.0625 and 1.1875 s: b = 0.0625, a = 1), T(S) = 0.5 + 1 + 0.0625 (|S| + 1): {1}
    1.5/1.625 = 0.92, {1, 3} 1.75/1.6875 = 1.04, {1, 2, 3} 2/1.75 = 1.14 -> {1, 2, 3}."""
    pol = policy("specfit", expert_term=False)
    v = view_of(**SF)
    ratio, sel = pol._solve(v)
    assert sel == [1] and ratio == 1.5 / 4.375
    pol._obs = [(1, 1.0625), (3, 1.1875)]
    ratio, sel = pol._solve(v)
    assert sel == [1, 2, 3] and ratio == ex(2 / 1.75)
    assert len(pol.dinkelbach_iterations) == 2


def test_specfit_rates_and_observations_after_each_round():
    """gate_ema 0.25. Speculative rounds: drafting 0.5 s, verify 0.5 s, 1 accepted -> 2 tokens / 1 s
    = 2 (first: taken as is); drafting 0.5, verify 0.5, 3 accepted -> 4 / 1 = 4 -> 0.75 x 2 +
    0.25 x 4 = 2.5. Root-only rounds (drafting 0): 1 / 0.25 = 4; 1 / 0.5 = 2 -> 0.75 x 4 + 0.25 x 2
    = 3.5. A round with no verify time records nothing. Observations (nodes + 1, verify s)."""
    pol = policy("specfit", gate_ema=0.25)
    pol.select(view_of(**SF))
    pol.on_tree_verified(2, 1, 1, 0.5)
    assert pol._spec_rate == 2.0 and pol._ar_rate is None
    pol.on_tree_verified(2, 3, 2, 0.5)
    assert pol._spec_rate == 2.5
    pol.select(view_of(**dict(SF, draft_s=0.0)))
    pol.on_tree_verified(0, 0, 0, 0.25)
    assert pol._ar_rate == 4.0
    pol.on_tree_verified(0, 0, 0, 0.5)
    assert pol._ar_rate == 3.5 and pol._spec_rate == 2.5
    pol.on_tree_verified(1, 1, 1, 0.0)
    pol.on_tree_verified(1, 1, 1)                           # verify time left out: 0
    assert pol._obs == [(3, 0.5), (3, 0.5), (1, 0.25), (1, 0.5)]
    assert pol.round_lengths == [2, 2, 0, 0, 1, 1] and pol.levels_drafted == [1, 2, 0, 0, 1, 1]
    assert pol._spec_rate == 2.5 and pol._ar_rate == 3.5


def test_specfit_speculation_gate():
    """Root-only time of the cost model: c0 + c1 + the root's expert 0.125 = 1.25 s -> 0.8 tok/s.
    No speculative estimate yet: draft. Speculative rate exactly 0.8: draft (not below); one ulp
    below: gated, and the gated round selects nothing. probe 2: gated, gated, probe, gated...
    With an observed root-only rate 3.5 it replaces the model: 1.75 is gated. Gate off: always."""
    pol = policy("specfit", speculation_gate=True, gate_probe_rounds=2)
    v = view_of(**SF, drafted_depth=0)
    assert pol.wants_draft(v) is True
    pol._spec_rate = 1 / 1.25
    assert pol.wants_draft(v) is True and pol.gated == 0
    pol._spec_rate = np.nextafter(1 / 1.25, 0)
    assert [pol.wants_draft(v) for _ in range(5)] == [False, False, True, False, False]
    assert pol.gated == 4 and pol.stats()["gated_rounds"] == 4
    assert pol.select(v) == [] and pol._solved is v
    pol2 = policy("specfit", speculation_gate=True, gate_probe_rounds=1)
    pol2._ar_rate, pol2._spec_rate = 3.5, 1.75
    assert [pol2.wants_draft(v) for _ in range(4)] == [False, True, False, True]
    pol2._spec_rate = 3.5
    assert pol2.wants_draft(v) is True
    off = policy("specfit")
    off._spec_rate, off._ar_rate = 0.0, 1.0
    assert off.wants_draft(v) is True and off.gated == 0


def test_specfit_statistics():
    pol = policy("specfit")
    s = pol.stats()
    assert s["stops_by_rule"] == 0 and s["gated_rounds"] == 0 and s["mean_dinkelbach_iterations"] == 0.0
    pol.dinkelbach_iterations = [1, 2]
    pol.stops_by_rule, pol.gated = 3, 4
    s = pol.stats()
    assert s["mean_dinkelbach_iterations"] == 1.5 and s["stops_by_rule"] == 3 and s["gated_rounds"] == 4
    assert "mean_nodes_verified" in s


def test_tree_policies_keep_config_and_rng_and_read_params_only_from_tree_policy():
    """The run's generator and policy section are kept as given (DraftPolicy contract); a tree
    policy's parameters come only from configure(tree_policy), none before it. Keywords work."""
    from ahasd_sim.policies.specfit import SpecFit
    rng = np.random.default_rng(7)
    cfg = SimpleNamespace(min_tokens=2, max_tokens=5, specfit="not this")
    pol = SpecFit(config=cfg, rng=rng, fit_data=None)
    assert pol.config is cfg and pol.rng is rng and pol.params is None
    for name in ("eagle_fixed", "eagle_dynamic", "ecospec", "expert_budget"):
        p = make_policy(name, cfg, rng)
        assert p.config is cfg and p.rng is rng and p.params is None


def test_every_tree_policy_selects_nothing_before_the_first_level():
    """Drafted depth 0: no node available -> an empty selection."""
    v = view_of(**ECO, drafted_depth=0)
    for name in ("eagle_fixed", "eagle_dynamic", "ecospec", "expert_budget", "specfit"):
        assert policy(name).select(v) == []


def test_ecospec_remembers_every_chosen_node_s_experts():
    """Expert 0 resident and the root's; c0 1, c1 0.125, c2 0.125, fetch 1 -> T_ref 1.25, a new
    expert 1.125. Chain 1 (P .75, expert 1) -> 2 (P .75, expert 2) -> 3 (P .1875, expert 1).
    mu 0.5: 1 scores .75 - 0.5 x 1.25/1.25 = .25, 2 likewise; 3 needs expert 1, already paid by
    1: .1875 - 0.5 x 0.125/1.25 = .1375 > 0 -> {1, 2, 3} (forgetting 1's experts once 2 is taken
    would charge 3 the copy: .1875 - 0.5 < 0)."""
    lm = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=1.0, n_layers=1)
    v = view_of([-1, 0, 1, 2], [1.0, 0.75, 1.0, 0.25], [[[0]], [[1]], [[2]], [[1]]],
                [[True, False, False, False]], lm)
    assert policy("ecospec", mu=0.5).select(v) == [1, 2, 3]


def test_expert_budget_accumulates_copies_over_chosen_nodes():
    """L 2, nothing resident, the root routes expert 0 in both layers; budget 1. Chain 1 (layer 0
    expert 1: [1, 0]) -> 2 (layer 1 expert 1: [0, 1]; total [1, 1]) -> 3 (layer 0 expert 2:
    would make [2, 1]) -> {1, 2}."""
    v = view_of([-1, 0, 1, 2], [1.0, 0.5, 0.5, 0.5], [[[0], [0]], [[1], [0]], [[0], [1]], [[2], [0]]],
                [[False] * 3] * 2, LM0)
    assert policy("expert_budget", budget_experts_per_layer=1).select(v) == [1, 2]


def test_specfit_tolerance_is_the_configured_one():
    """A Dinkelbach tolerance of 10 accepts the root-only ratio at once: nothing selected (at the
    default 1e-9: {1, 3}, or {1} expert-blind)."""
    v = view_of(**SF)
    assert policy("specfit", tolerance=10.0)._solve(v) == (1 / 1.75, [])
    assert policy("specfit", tolerance=10.0, expert_term=False)._solve(v) == (1 / 3.375, [])


def test_specfit_expert_blind_stop_rule_bound():
    """expert_term false, depth 1 of 2 drafted (nodes 1, 2): T(S) = 0.5 + 1.875 + 1 (|S| + 1)
    (profile above) -> incumbent {1} at 1.5 / 4.375 = 0.343. Bound: E + 0.75, T + x. x = 0.5:
    {1} 2.25 / 4.875 = 0.46 > 0.343, continue. x = 3: {1} 2.25 / 7.375 = 0.305, {1, 2} 2.5 / 8.375,
    {} 1.75 / 6.375: all below, stop. Iterations are counted as integers."""
    pol = policy("specfit", expert_term=False)
    assert pol.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=0.5)) is True
    assert pol._best == [1]
    assert pol.continue_drafting(view_of(**SF, drafted_depth=1, next_level_s=3.0)) is False
    assert pol.stops_by_rule == 1 and len(pol.dinkelbach_iterations) == 2
    assert all(type(i) is int and i >= 1 for i in pol.dinkelbach_iterations)
    assert pol.stats()["mean_dinkelbach_iterations"] >= 1.0


def test_specfit_blind_costs_fetch_scaling_and_a_flat_fit():
    """fetch 2: per layer 0.125 + 0.75 x 2 = 1.625; L 1, k 1: a = 1 + 1.625, b = 0.125 + 1.625.
    Observations with equal times (slope exactly 0) fall back to the profile: a zero per-node
    cost would make every node free."""
    lm = LinearVerifyModel(c0_s=1.0, c1_s=0.125, c2_s=0.125, fetch_s=2.0, n_layers=1)
    v = view_of([-1, 0], [1.0, 0.5], [[[0]], [[1]]], [[True, False, False, False]], lm)
    pol = policy("specfit", expert_term=False)
    assert pol._blind_costs(v) == (2.625, 1.75)
    pol._obs = [(1, 0.0), (2, 0.0)]
    assert pol._blind_costs(v) == (2.625, 1.75)


def test_specfit_rate_of_a_round_verified_without_a_select():
    """No select this round: drafting time 0 -> 2 tokens / (0 + 1 s) = 2 tok/s."""
    pol = policy("specfit")
    pol.on_tree_verified(1, 1, 1, 1.0)
    assert pol._spec_rate == 2.0


def test_accepted_length_follows_the_confirmed_path_of_the_selection():
    """Root children 1 (rejected) and 2 (confirmed); 3 under 1, 4 under 2 (both confirmed).
    Selecting {1, 2, 3, 4}: 2 then 4 -> 2 tokens; {1, 3}: 1 is rejected -> 0; {2}: 1; {1, 2, 3}: 1."""
    from ahasd_sim.moe.tree import accepted_length
    t = DraftTree(parent=np.array([-1, 0, 0, 1, 2]), q_prob=np.full(5, 0.5),
                  correct=np.array([True, False, True, True, True]), experts=np.zeros((5, 1, 1), int))
    assert [accepted_length(t, s) for s in ([1, 2, 3, 4], [1, 3], [2], [1, 2, 3], [])] == [2, 0, 1, 1, 0]
