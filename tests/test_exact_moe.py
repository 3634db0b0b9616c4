"""Hand-derived exact values for the MoE-offload modules (``ahasd_sim/moe/``).

Each test builds a small case whose expected numbers are worked out in its docstring or
comments. The cost-model tests use stand-in platform/model objects with round numbers, so the
expected value is the formula of ``moe/cost.py`` and not another copy of the hardware models.
"""
from __future__ import annotations

import dataclasses
import re
from types import SimpleNamespace as NS

import numpy as np
import pandas as pd
import pytest

# Imported before any test patches ahasd_sim.simulation.run_simulation: these modules bind it
# at import, and a first import under the patch would keep the stand-in for later tests.
import ahasd_sim.compare  # noqa: F401
import ahasd_sim.modes.moe.offload  # noqa: F401
import ahasd_sim.outdir  # noqa: F401
import ahasd_sim.output  # noqa: F401
from ahasd_sim.config.errors import ConfigError
from ahasd_sim.moe import closure
from ahasd_sim import compare_moe as mc
from ahasd_sim.moe import cost as cost_mod
from ahasd_sim.moe.cache import ExpertCache, PassPins
from ahasd_sim.moe.config import EagleFixedParams, TreePolicyConfig
from ahasd_sim.moe.cost import LayerRecord, LinearVerifyModel, MoeCostModel, schedule_verify
from ahasd_sim.moe.predictor import LearnedPredictor, RecallPredictor
from ahasd_sim.moe.stats import window_samples
from ahasd_sim.moe.tree import DraftTree, TreeView, accepted_length, expert_union, is_ancestor_closed


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=0)


# ------------------------------------------------------------------ stats
def test_window_samples_totals_and_ratios_per_block():
    """5 rounds in 2 windows: np.array_split gives rounds [0, 1, 2] and [3, 4].
    tokens 1+2+3 = 6, 4+5 = 9; time 1+1+1 = 3, 1+2 = 3; energy 2*3 = 6, 2*2 = 4;
    throughput 6/3 = 2, 9/3 = 3 tok/s; energy per token 6/6 = 1, 4/9 J."""
    w = window_samples([1, 2, 3, 4, 5], [1, 1, 1, 1, 2], [2, 2, 2, 2, 2], 2)
    assert w == {"throughput_tok_s": [2.0, 3.0], "energy_per_token_j": [1.0, 4 / 9],
                 "generated_tokens": [6.0, 9.0], "decode_makespan_s": [3.0, 3.0],
                 "decode_energy_j": [6.0, 4.0]}


def test_window_samples_window_count_is_clamped_and_zero_denominators_give_nan():
    """n_windows 0 -> one window; 10 windows of 3 rounds -> 3 windows. A window of zero time has
    no throughput (nan, not inf), one of zero tokens no energy per token."""
    one = window_samples([1, 2, 3], [1, 1, 1], [1, 1, 1], 0)
    assert one["generated_tokens"] == [6.0] and one["throughput_tok_s"] == [2.0]
    three = window_samples([1, 2, 3], [1, 1, 1], [1, 1, 1], 10)
    assert three["generated_tokens"] == [1.0, 2.0, 3.0]
    z = window_samples([3, 0], [0, 1], [1, 1], 2)
    assert np.isnan(z["throughput_tok_s"][0]) and z["throughput_tok_s"][1] == 0.0
    assert z["energy_per_token_j"][0] == 1 / 3 and np.isnan(z["energy_per_token_j"][1])
    one_token = window_samples([1], [2], [5], 1)            # 1 token: 5 J per token, 0.5 tok/s
    assert (one_token["energy_per_token_j"], one_token["throughput_tok_s"]) == ([5.0], [0.5])


# ------------------------------------------------------------------ tree
def _tree(parents, q, experts=None, correct=None):
    n = len(parents)
    experts = np.zeros((n, 2, 3), dtype=int) if experts is None else np.asarray(experts)
    correct = [True] * n if correct is None else correct
    return DraftTree(parent=np.array(parents), q_prob=np.array(q, dtype=float),
                     correct=np.array(correct, dtype=bool), experts=experts)


def test_draft_tree_depth_path_probability_and_shape():
    """parents [-1, 0, 0, 1], q [0.9, 0.5, 0.25, 0.5]: depth [0, 1, 1, 2]; path probability
    [1 (the root's q is not used), 0.5, 0.25, 0.5 * 0.5 = 0.25]; 3 draft nodes, 2 layers, top-3."""
    t = _tree([-1, 0, 0, 1], [0.9, 0.5, 0.25, 0.5])
    assert t.depth.tolist() == [0, 1, 1, 2] and t.path_prob.tolist() == [1.0, 0.5, 0.25, 0.25]
    assert t.depth.dtype == np.int64          # depths index arrays (levels): integers, not floats
    assert (t.n_nodes, t.n_layers, t.top_k, t.max_depth) == (3, 2, 3, 2)
    root = _tree([-1], [1.0])                       # a root-only tree is valid
    assert (root.n_nodes, root.max_depth) == (0, 0)


@pytest.mark.parametrize("parents, experts, msg", [
    ([0, 0], None, "tree: node 0 must be the root (parent -1)"),
    ([-1, 1], None, "tree: every node's parent must be an earlier node"),
    ([-1, -1], None, "tree: every node's parent must be an earlier node"),
    ([-1, 0], np.zeros((2, 3), dtype=int), "tree: experts must be [n_nodes, layers, top_k], got (2, 3)"),
    ([-1, 0], np.zeros((3, 1, 1), dtype=int), "tree: experts must be [n_nodes, layers, top_k], got (3, 1, 1)"),
])
def test_draft_tree_rejects_malformed_trees(parents, experts, msg):
    with pytest.raises(ValueError, match="^" + re.escape(msg) + "$"):
        _tree(parents, [1.0] * len(parents), experts)


def test_ancestor_closed_and_accepted_length():
    """Tree 0 -> {1, 2}, 1 -> 3. {1, 3} closed; {3} not (parent 1 missing); {} closed; a set
    holding the root is not a draft selection. All correct: {1, 3} accepts 2, {2} accepts 1."""
    t = _tree([-1, 0, 0, 1], [1.0, 0.5, 0.5, 0.5], correct=[True, True, False, True])
    assert is_ancestor_closed(t.parent, [1, 3]) and is_ancestor_closed(t.parent, [])
    assert not is_ancestor_closed(t.parent, [3]) and not is_ancestor_closed(t.parent, [0, 1])
    assert accepted_length(t, [3, 1]) == 2 and accepted_length(t, [2]) == 0
    assert accepted_length(t, [1, 2]) == 1


def test_expert_union_includes_the_root():
    """Root routes L0 {5, 1}, L1 {0, 2}; node 1: L0 {1, 3}, L1 {2, 4}; node 2: L0 {7, 7}, L1 {6, 0}.
    Union over {root, 2}: L0 [1, 5, 7], L1 [0, 2, 6]."""
    ex = np.array([[[5, 1], [0, 2]], [[1, 3], [2, 4]], [[7, 7], [6, 0]]])
    u = expert_union(ex, [2])
    assert [x.tolist() for x in u] == [[1, 5, 7], [0, 2, 6]]
    assert [x.tolist() for x in expert_union(ex, [])] == [[1, 5], [0, 2]]


def test_tree_view_available_and_sibling_rank():
    """parents [-1, 0, 0, 0, 1], q [1, .2, .5, .2, .9], depths [0, 1, 1, 1, 2]. Drafted depth 1:
    nodes 1-3 available. Siblings of 0 by (-q, id): 2 (.5), 1 (.2), 3 (.2) -> ranks 1, 0, 2;
    node 4 is an only child (rank 0)."""
    parent = np.array([-1, 0, 0, 0, 1])
    v = TreeView(parent=parent, q_prob=np.array([1, .2, .5, .2, .9]), path_prob=np.ones(5),
                 depth=np.array([0, 1, 1, 1, 2]), drafted_depth=1, predicted_experts=np.zeros((5, 1, 1)),
                 resident=np.zeros((1, 1), bool), costs=None, draft_time_s=0.0, next_level_draft_s=0.0,
                 recorded_depth=2)
    assert v.available().tolist() == [1, 2, 3]
    assert v.sibling_rank().tolist() == [0, 1, 0, 2, 0]


# ------------------------------------------------------------------ predictors
class FakeRng:
    """Hands out fixed draws and records how it was asked."""

    def __init__(self, r, draws):
        self.r, self.draws, self.calls = np.array(r, dtype=float), np.array(draws), []

    def random(self, shape):
        self.calls.append(("random", tuple(shape)))
        return self.r

    def integers(self, lo, hi, size):
        self.calls.append(("integers", lo, hi, size))
        return self.draws[:size]


def test_recall_predictor_replaces_misses_by_the_next_expert_outside_the_true_set():
    """True experts [4, 0, 1] of E = 5, recall 0.5; uniform draws [0.5, 0.2, 0.7]: a draw >= 0.5 is a
    miss, so slots 0 and 2 miss. Replacement draws 4 and 3: 4 is true -> 0 (wraps) true -> 1 true -> 2;
    3 is outside. Prediction [2, 0, 3]."""
    rng = FakeRng([[[0.5, 0.2, 0.7]]], [4, 3])
    p = RecallPredictor(0.5, 5, rng)
    out = p.predict(np.array([[[4, 0, 1]]]))
    assert out.tolist() == [[[2, 0, 3]]]
    assert rng.calls == [("random", (1, 1, 3)), ("integers", 0, 5, 2)]


def test_recall_predictor_oracle_and_no_miss_and_bounds():
    """recall 1 returns the truth itself (no draws); no miss: an equal copy, no replacement draws."""
    ex = np.array([[[1, 2]]])
    oracle = RecallPredictor(1.0, 4, None)
    assert oracle.predict(ex) is ex and (oracle.recall, oracle.n_experts) == (1.0, 4)
    rng = FakeRng([[[0.1, 0.2]]], [])
    out = RecallPredictor(0.3, 4, rng).predict(ex)
    assert out.tolist() == [[[1, 2]]] and out is not ex and rng.calls == [("random", (1, 1, 2))]
    RecallPredictor(0.0, 4, None)
    for bad in (-0.1, 1.1):
        with pytest.raises(ValueError, match=re.escape(f"predictor recall must be in [0, 1], got {bad}")):
            RecallPredictor(bad, 4, None)


def _learned():
    # m = 3 profile tokens, L = 2, k = 2, E = 4
    tokens = [5, 5, 9]
    routing = [[[0, 1], [2, 3]], [[0, 2], [2, 0]], [[3, 1], [1, 0]]]
    return LearnedPredictor(tokens, routing, 4)


def test_learned_predictor_profile_tables():
    """Popularity = counts / 3 tokens: L0 e0 2, e1 2, e2 1, e3 1; L1 e0 2, e1 1, e2 2, e3 1.
    Token 5 (2 rows): L0 e0 2, e1 1, e2 1 -> / 2; L1 e2 2, e3 1, e0 1 -> / 2. Token 9: one row.
    Transitions L0 -> L1 (every pair of a row's L0 and L1 experts): row 0 (0,2) (0,3) (1,2) (1,3),
    row 1 (0,2) (0,0) (2,2) (2,0), row 2 (3,1) (3,0) (1,1) (1,0)."""
    p = _learned()
    assert (p.L, p.E, p.k) == (2, 4, 2)
    assert p.pop.tolist() == [[2 / 3, 2 / 3, 1 / 3, 1 / 3], [2 / 3, 1 / 3, 2 / 3, 1 / 3]]
    assert p.by_token[5].tolist() == [[1.0, 0.5, 0.5, 0.0], [0.5, 0.0, 1.0, 0.5]]
    assert p.by_token[9].tolist() == [[0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]]
    assert p.trans.tolist() == [[[1, 0, 2, 1], [1, 1, 1, 1], [1, 0, 1, 0], [1, 1, 0, 0]]]
    assert p.recent.tolist() == [[0.0] * 4] * 2 and (p.w_recent, p.w_pop, p.decay) == (0.5, 0.05, 0.9)


def test_learned_predictor_predicts_top_k_of_token_counts_recent_and_popularity():
    """Token 5, L0: [1, .5, .5, 0] + 0.05 * pop0 = [1.033, .533, .517, .017] -> [0, 1];
    L1: [.5, 0, 1, .5] + 0.05 * pop1 = [.533, .017, 1.033, .517] -> [2, 0]. Unseen token 42: the
    popularity alone, ties by expert id: L0 [0, 1], L1 [0, 2].
    After observing [[L0 1, 3; L1 0, 1]] and then two rows ([0, 1; 2, 3], [0, 2; 2, 0]):
    recent L0 = 0.9 * [0, 1, 0, 1] + [2, 1, 1, 0] / 2 = [1, 1.4, .5, .9],
    recent L1 = 0.9 * [1, 1, 0, 0] + [1, 0, 2, 1] / 2 = [1.4, .9, 1, .5].
    Token 42 then: L0 0.5 * recent + 0.05 * pop = [.533, .733, .267, .467] -> [1, 0];
    L1 [.733, .467, .533, .267] -> [0, 2]."""
    p = _learned()
    assert p.predict_tokens([5, 42]).tolist() == [[[0, 1], [2, 0]], [[0, 1], [0, 2]]]
    p.observe_verified([[[1, 3], [0, 1]]])
    assert p.recent.tolist() == [[0, 1, 0, 1], [1, 1, 0, 0]]
    p.observe_verified([[[0, 1], [2, 3]], [[0, 2], [2, 0]]])
    assert p.recent == pytest.approx(np.array([[1, 1.4, .5, .9], [1.4, .9, 1, .5]]), rel=1e-12, abs=0)
    assert p.predict_tokens([42]).tolist() == [[[1, 0], [0, 2]]]
    assert p.predict_tokens([]).shape == (0, 2, 2)


def test_learned_predictor_scores_node_recall_and_union_precision():
    """pred v0 L0 [0,1] L1 [2,3], v1 L0 [0,2] L1 [1,3]; true v0 L0 [0,3] L1 [2,3], v1 L0 [2,1]
    L1 [0,1]. Per node and layer hits 1 + 2 + 1 + 1 = 5 of 2 * 2 * 2 = 8. Unions: L0 pred {0,1,2},
    true {0,1,2,3}: 3 common; L1 pred {1,2,3}, true {0,1,2,3}: 3 common -> union recall 6/8,
    precision 6/6."""
    p = _learned()
    assert p.stats() == {"kind": "learned", "node_recall": 0.0, "union_recall": 0.0, "union_precision": 0.0,
                         "train_tokens_seen": 2}
    pred = np.array([[[0, 1], [2, 3]], [[0, 2], [1, 3]]])
    true = np.array([[[0, 3], [2, 3]], [[2, 1], [0, 1]]])
    p.score(pred, true)
    assert (p.hits, p.total, p.union_hits, p.union_pred, p.union_true) == (5, 8, 6, 6, 8)
    assert p.stats() == {"kind": "learned", "node_recall": 5 / 8, "union_recall": 6 / 8, "union_precision": 1.0,
                         "train_tokens_seen": 2}


def test_learned_next_layer_guess_uses_transitions_then_the_next_layers_popularity():
    """Token routed to L0 expert 0 and 1: trans rows 0 + 1 = [2, 1, 3, 2], + 0.05 * pop1
    -> [2.033, 1.017, 3.033, 2.017]: top-2 {2, 0}. A token routed to expert 1 only: row [1, 1, 1, 1],
    ties broken by layer 1's popularity [2/3, 1/3, 2/3, 1/3]: {0, 2} (layer 0's would give {0, 1}).
    A token at [3, 3]: [2, 2, 0, 0] -> {0, 1}; union with the first: {0, 1, 2}."""
    p = _learned()
    assert p.next_layer_guess([[0, 1]], 0) == {0, 2}
    assert p.next_layer_guess([[1]], 0) == {0, 2}
    assert p.next_layer_guess([[0, 1], [3, 3]], 0) == {0, 1, 2}


# ------------------------------------------------------------------ cache
def test_cache_rejects_unknown_policy_and_scope_and_clamps_capacity():
    with pytest.raises(ValueError, match=re.escape("cache policy must be one of ('lru', 'lfu', 'activation', "
                                                   "'static'), got 'fifo'")):
        ExpertCache(1, 2, 1, "fifo")
    with pytest.raises(ValueError, match=re.escape("cache scope must be one of ('global', 'per_layer'), got 'x'")):
        ExpertCache(1, 2, 1, "lru", scope="x")
    assert ExpertCache(2, 3, 100, fill=False).capacity == 6       # at most L * E
    assert ExpertCache(2, 3, -4, fill=False).capacity == 0
    assert ExpertCache(3, 8, 7, scope="per_layer", fill=False).layer_cap == [3, 2, 2]
    assert ExpertCache(3, 8, 8, scope="per_layer", fill=False).layer_cap == [3, 3, 2]


def test_cache_fill_per_layer_orders_by_popularity_least_popular_is_first_victim():
    """L1 E4 capacity 2, popularity [1, 5, 5, 0]: by (-popularity, id) 1, 2, 0, 3 -> keep 1 and 2,
    added least popular first, so 2 is the LRU victim when 3 comes in. Filled entries are ready at 0."""
    c = ExpertCache(1, 4, 2, "lru", popularity=np.array([[1.0, 5, 5, 0]]))
    assert (0, 1) in c and (0, 2) in c and len(c) == 2 and c.ready_s((0, 1)) == 0.0
    assert c.resident_mask.tolist() == [[False, True, True, False]]
    assert c.insert(0, 3, 7.0) and (0, 2) not in c and (0, 1) in c and c.ready_s((0, 3)) == 7.0
    assert c.resident_mask.tolist() == [[False, True, False, True]]
    assert c.stats() == {"policy": "lru", "scope": "per_layer", "capacity_experts": 2, "hits": 0, "misses": 0,
                         "late_hits": 0, "hit_rate": 0.0, "evictions": 1, "streamed_misses": 0,
                         "resident_at_end": 2}


def test_cache_fill_global_and_defaults():
    """Global, L2 E2, capacity 3, popularity [[1, 4], [4, 0]]: by (-pop, key) (0,1), (1,0), (0,0),
    (1,1) -> keep the first 3; (0,0) added first, the first victim. No popularity: experts by id.
    capacity 0: nothing is read (not even a wrong-shaped popularity). fill=False: empty, but the
    static policy always fills."""
    c = ExpertCache(2, 2, 3, "lru", scope="global", popularity=np.array([[1.0, 4], [4, 0]]))
    assert c.resident_mask.tolist() == [[True, True], [True, False]]
    assert c.insert(1, 1, 1.0) and (0, 0) not in c and len(c) == 3
    d = ExpertCache(1, 4, 2, "lru")
    assert d.resident_mask.tolist() == [[True, True, False, False]]
    ExpertCache(1, 2, 0, "lru", popularity=np.zeros((3, 3)))
    with pytest.raises(ValueError, match=re.escape("popularity must be [1, 2], got (3, 3)")):
        ExpertCache(1, 2, 1, "lru", popularity=np.zeros((3, 3)))
    assert len(ExpertCache(1, 4, 2, "lru", fill=False)) == 0
    assert len(ExpertCache(1, 4, 2, "static", fill=False)) == 2


def test_cache_hit_miss_accounting_and_ready_time_keeps_the_earliest_copy():
    """Accesses: 0 miss, 0 miss (not inserted yet), insert 0 at 5 s, 0 hit -> 1 hit, 2 misses
    (hit rate 1/3). Re-inserting 0 at 3 s keeps 3 s; at 4 s still 3 s; no eviction."""
    c = ExpertCache(1, 4, 2, "lru", fill=False)
    assert not c.access(0, 0) and not c.access(0, 0)
    assert c.insert(0, 0, 5.0) and c.access(0, 0)
    assert (c.hits, c.misses, c.hit_rate) == (1, 2, 1 / 3)
    assert c.insert(0, 0, 3.0) and c.ready_s((0, 0)) == 3.0
    assert c.insert(0, 0, 4.0) and c.ready_s((0, 0)) == 3.0 and c.evictions == 0 and len(c) == 1


def test_cache_lru_eviction_order_pins_and_streaming():
    """LRU capacity 2: 0, 1 in; a hit on 0 makes 1 the victim of 2; then 0 is the oldest, but
    pinned it is skipped and 2 goes. All pinned: streamed (not kept). Per layer with capacity 1 over
    2 layers, layer 1 has no slot: streamed. Static: every miss streamed."""
    c = ExpertCache(1, 8, 2, "lru", fill=False)
    c.insert(0, 0, 0.0); c.insert(0, 1, 0.0)
    c.access(0, 0)
    assert c.insert(0, 2, 0.0) and (0, 1) not in c
    assert c.insert(0, 3, 0.0, pinned={(0, 0)}) and (0, 2) not in c and (0, 0) in c
    assert not c.insert(0, 4, 0.0, pinned={(0, 0), (0, 3)}) and (0, 4) not in c
    assert (c.evictions, c.streamed) == (2, 1)
    pl = ExpertCache(2, 4, 1, "lru", fill=False)
    assert pl.layer_cap == [1, 0] and not pl.insert(1, 0, 0.0) and pl.streamed == 1
    st = ExpertCache(1, 4, 2, "static")
    assert not st.insert(0, 3, 0.0) and st.streamed == 1 and len(st) == 2


def test_cache_lfu_evicts_least_frequent_then_oldest_and_restores_pinned_entries():
    """LFU capacity 2. 0 and 1 accessed once and inserted (freq 1 each), then 0 hit (freq 2):
    inserting 2 evicts 1 (freq 1). 2 accessed once (freq 1) -- now 0 (freq 2), 2 (freq 1).
    Insert 3 with 2 pinned: 0 is evicted. Insert 4 unpinned: 2 and 3 both freq 1 -- 3 was never
    accessed (freq 0 at insert) so 3 goes. All pinned: streamed, the heap entries are kept."""
    c = ExpertCache(1, 8, 2, "lfu", fill=False)
    for e in (0, 1):
        c.access(0, e); c.insert(0, e, 0.0)
    c.access(0, 0)
    c.access(0, 2); assert c.insert(0, 2, 0.0) and (0, 1) not in c and (0, 0) in c
    assert c.insert(0, 3, 0.0, pinned={(0, 2)}) and (0, 0) not in c and (0, 2) in c
    assert not c.insert(0, 5, 0.0, pinned={(0, 2), (0, 3)}) and c.streamed == 1
    assert c.insert(0, 4, 0.0) and (0, 3) not in c and (0, 2) in c and c.evictions == 3


def test_cache_lfu_ties_go_to_the_oldest():
    c = ExpertCache(1, 8, 2, "lfu", fill=False)
    for e in (0, 1):
        c.access(0, e); c.insert(0, e, 0.0)
    assert c.insert(0, 2, 0.0) and (0, 0) not in c and (0, 1) in c


def test_cache_activation_counts_decay_with_the_half_life():
    """Half-life 2 passes: decay 0.5 ** 0.5 per pass. Pass 1: 0 and 1 used once. Two passes later
    (pass 3) 1 is used again: 1 * 0.5 + 1 = 1.5; 0 stays at 1 * 0.5 = 0.5. Inserting 2 evicts 0
    (lowest); an expert never used has 0."""
    c = ExpertCache(1, 8, 2, "activation", fill=False, activation_half_life_passes=2.0)
    c.begin_pass()
    for e in (0, 1):
        c.access(0, e); c.insert(0, e, 0.0)
    assert c.activation((0, 0)) == 1.0
    c.begin_pass()
    assert c.activation((0, 0)) == approx(0.5 ** 0.5)
    c.begin_pass(); c.access(0, 1)
    assert c._pass == 3
    assert c.activation((0, 0)) == approx(0.5) and c.activation((0, 1)) == approx(1.5)
    assert c.activation((0, 7)) == 0.0
    assert c.insert(0, 2, 0.0) and (0, 0) not in c and (0, 1) in c


def test_cache_activation_ties_go_to_the_oldest_and_pins_are_skipped():
    c = ExpertCache(1, 8, 2, "activation", fill=False)
    c.begin_pass()
    for e in (0, 1):
        c.access(0, e); c.insert(0, e, 0.0)
    assert c.insert(0, 2, 0.0, pinned={(0, 1)}) is True and (0, 0) not in c
    d = ExpertCache(1, 8, 2, "activation", fill=False)
    for e in (0, 1):
        d.access(0, e); d.insert(0, e, 0.0)
    assert d.insert(0, 2, 0.0) and (0, 0) not in d and (0, 1) in d
    assert not d.insert(0, 3, 0.0, pinned={(0, 1), (0, 2)}) and d.streamed == 1


def test_pass_pins_cover_this_and_later_layers_of_the_pass():
    pins = PassPins([{1}, {2}, {3}], 1)
    assert (1, 2) in pins and (2, 3) in pins
    assert (0, 1) not in pins and (1, 3) not in pins and (3, 3) not in pins
    assert (0, 1) in PassPins([{1}, {2}])


# ------------------------------------------------------------------ cost model
def _fake_platform(**gpu_over):
    cfg = dict(launch_overhead_us=2.0, moe_kernel="fused", active_power_w=30.0, idle_power_w=10.0,
               kernels_per_layer=4, moe_fused_kernels=3, moe_fused_fixed_us=None, moe_fused_per_expert_us=5.0,
               moe_fused_per_pair_us=7.0, moe_loop_fixed_us=11.0, moe_loop_overhead_per_expert_us=13.0,
               moe_loop_per_pair_us=17.0, multi_token_layer_overhead_us=0.0)
    cfg.update(gpu_over)
    gpu = NS(cfg=NS(**cfg), effective_ops_s=1200.0, effective_bandwidth_bytes_s=100.0,
             op_cost=lambda op: NS(duration_s=op.d))
    # copies: isolated 3 s + bytes / 100 B/s, back to back bytes / 100 B/s; 0.5 J per byte
    link = NS(isolated_transfer_time_s=lambda b: 3.0 + b / 100, back_to_back_transfer_time_s=lambda b: b / 100,
              transfer_energy_j=lambda b: 0.5 * b)
    return NS(gpu=gpu, h2d=link)


TARGET = NS(expert_params=lambda: 100, weight_bytes_per_param=2.0, n_layers=2, n_experts=4,
            param_count=lambda: 1000, n_active_experts=2, d_model=3, d_expert_ffn=5, act_bytes_per_elem=1.0)


def _model(monkeypatch, ops=None, **gpu_over):
    calls = []

    def fake_ops(model, n, kv):
        calls.append((model, n, kv))
        if ops is not None:
            return ops(n)
        # per-layer dense op 1 + n s, an expert op (skipped), the head 2 n s
        return [NS(name="attn", per_layer=True, layer_repeat=2, d=1.0 + n),
                NS(name="expert_ffn_up", per_layer=True, layer_repeat=2, d=1000.0),
                NS(name="lm_head", per_layer=False, layer_repeat=1, d=2.0 * n)]

    monkeypatch.setattr(cost_mod, "forward_ops", fake_ops)
    cm = MoeCostModel(_fake_platform(**gpu_over), TARGET, "DRAFT", NS(drafter_device="gpu"))
    return cm, calls


def test_cost_model_bytes_copy_times_and_energy(monkeypatch):
    """Expert: 100 params x 2 B = 200 B; isolated copy 3 + 200/100 = 5 s, back to back 2 s.
    Dense bytes (1000 - 2 layers x 4 experts x 100) x 2 = 400 B; all experts 200 x 8 = 1600 B.
    Launch 2 us; GPU energy (30 - 10) W x 2 s = 40 J; 3 copies 0.5 J/B x 600 B = 300 J."""
    cm, _ = _model(monkeypatch)
    assert (cm.expert_bytes, cm.copy_s, cm.copy_b2b_s) == (200.0, 5.0, 2.0)
    assert (cm.dense_weight_bytes(), cm.all_expert_bytes()) == (400.0, 1600.0)
    assert cm.launch_s == approx(2e-6) and cm.kernel == "fused" and cm.quantum == 16
    assert cm.gpu_energy_j(2.0) == 40.0 and cm.copy_energy_j(3) == 300.0
    with pytest.raises(ValueError, match="^moe_offload needs a GPU and an h2d link$"):
        MoeCostModel(NS(gpu=None, h2d=1), TARGET, TARGET, None)
    with pytest.raises(ValueError, match="^moe_offload needs a GPU and an h2d link$"):
        MoeCostModel(NS(gpu=1, h2d=None), TARGET, TARGET, None)


def test_copy_end_pipelines_behind_a_busy_stream_and_pays_isolated_on_an_idle_one(monkeypatch):
    cm, _ = _model(monkeypatch)
    assert cm.copy_end_s(10.0, 10.0) == (10.0, 12.0)     # stream frees as it is issued: pipelined
    assert cm.copy_end_s(10.0, 12.0) == (12.0, 14.0)
    assert cm.copy_end_s(10.0, 3.0) == (10.0, 15.0)


def test_dense_times_skip_expert_ops_split_layer_and_head_and_quantise_kv(monkeypatch):
    """3 tokens, kv 17 -> quantum 16 rounds up to 32. Layer: attn 1 + 3 = 4 s plus 4 launches x 2 us
    (the expert op is skipped); head: lm_head 2 x 3 x repeat 1 = 6 s plus a repeated head op 0.5 x 3.
    kv 20 has the same key: no new forward_ops call."""
    def ops(n):
        return [NS(name="attn", per_layer=True, layer_repeat=2, d=1.0 + n),
                NS(name="expert_ffn_up", per_layer=True, layer_repeat=2, d=1000.0),
                NS(name="lm_head", per_layer=False, layer_repeat=1, d=2.0 * n),
                NS(name="mtp_expert_", per_layer=False, layer_repeat=3, d=0.5)]
    cm, calls = _model(monkeypatch, ops)
    assert cm.dense_times(3, 17) == (approx(4 + 8e-6), 7.5)
    assert cm.dense_times(3.0, 20) == (approx(4 + 8e-6), 7.5)
    assert calls == [(TARGET, 3, 32)]
    assert [cm._kv(k) for k in (-5, 0, 1, 16, 17)] == [0, 0, 16, 16, 32]


def test_kv_quantum_at_least_one(monkeypatch):
    monkeypatch.setattr(cost_mod, "forward_ops", lambda *a: [])
    cm = MoeCostModel(_fake_platform(), TARGET, TARGET, None, kv_quantum=0)
    assert cm.quantum == 1 and cm._kv(5) == 5


def test_expert_body_is_the_roofline_of_flops_and_bytes(monkeypatch):
    """3 tokens x top-2 = 6 pairs: 2 x 6 x 100 = 1200 FLOPs / 1200 = 1 s; activations
    6 x (2 x 3 + 3 x 5) x 1 B = 126 B. 2 distinct experts: (400 + 126) B / 100 B/s = 5.26 s (binds);
    at 1052 B/s 0.5 s, the FLOPs bind (1 s)."""
    cm, _ = _model(monkeypatch)
    assert cm.expert_body_s(3, 2) == approx(5.26)
    cm.gpu.effective_bandwidth_bytes_s = 1052.0
    assert cm.expert_body_s(3, 2) == 1.0


@pytest.mark.parametrize("over, terms", [
    ({}, (6e-6, 5e-6, 7e-6)),                                   # fixed = 3 fused launches x 2 us
    ({"moe_fused_fixed_us": 9.0}, (9e-6, 5e-6, 7e-6)),
    ({"moe_kernel": "per_expert_loop"}, (11e-6, 13e-6, 17e-6)),
])
def test_kernel_terms(monkeypatch, over, terms):
    cm, _ = _model(monkeypatch, **over)
    assert cm.kernel_terms_s() == tuple(approx(x) for x in terms)


def test_expert_time_adds_fixed_per_expert_and_per_pair_terms(monkeypatch):
    """3 tokens, 2 experts, fused: body 5.26 + 6 us + 2 x 5 us + 6 pairs x 7 us = 5.26 + 58 us;
    no expert: 0."""
    cm, _ = _model(monkeypatch)
    assert cm.expert_time_s(3, 2) == approx(5.26 + 58e-6)
    assert cm.expert_time_s(3, 0) == 0.0 and cm.expert_time_s(3, -1) == 0.0


def test_linear_model_coefficients_by_finite_differences(monkeypatch):
    """Dense layer(n) = 1 + n + 8 us, head(n) = 2 n; L = 2. c1 = (2 x 32 + 64) / 32 = 4;
    c0 = 2 x (2 + 8 us) + 2 - 4 = 2 + 16 us. Expert time (bandwidth binds at 100 B/s):
    t(1, d) = (200 d + 42) / 100 + 6 us + 5 d us + 14 us: t(1,2) = 4.42 + 30 us, t(1,3) = 6.42 + 35 us
    -> c2 = 2 + 5 us; t(33, 2) = (400 + 1386) / 100 + 16 us + 462 us = 17.86 + 478 us
    -> c1_e = (13.44 + 448 us) / 32 = 0.42 + 14 us; c1 = 4 + 2 c1_e = 4.84 + 28 us;
    c0 += 2 x (t(1,2) - 2 c2 - c1_e) = 2 x 6 us -> c0 = 2 + 28 us. fetch: back to back 2 s;
    first-copy extra 5 - 2 = 3 s."""
    cm, _ = _model(monkeypatch)
    m = cm.linear_model(0)
    assert m == LinearVerifyModel(approx(2 + 28e-6), approx(4.84 + 28e-6), approx(2 + 5e-6), 2.0, 2, 3.0)
    cm.copy_s = 1.0                            # isolated faster than pipelined: no extra
    assert cm.linear_model(0).first_fetch_extra_s == 0.0


def test_linear_verify_model_cycle_time_with_first_fetch_extra():
    """c0 1, c1 0.1, c2 0.01, fetch 0.5, first-copy extra 2; 2 selected nodes, draft 3 s. Unions:
    L0 {0, 1} both resident, L1 {2} missing, L2 empty.
    T = 3 + 1 + 0.1 x 3 + (2 x 0.01) + (0.01 + 0.5 + 2) + 0 = 6.83."""
    m = LinearVerifyModel(1.0, 0.1, 0.01, 0.5, 3, first_fetch_extra_s=2.0)
    res = np.zeros((3, 4), dtype=bool)
    res[0, [0, 1]] = True
    assert m.cycle_time(2, [[0, 1], [2], []], res, draft_s=3.0) == approx(3 + 1 + 0.3 + 0.02 + 2.51)
    assert m.cycle_time(0, [[], [], []], res) == approx(1.1)
    assert m.item_cost(True) == 0.01 and m.item_cost(False) == 0.51
    assert LinearVerifyModel(1, 1, 1, 1, 1).first_fetch_extra_s == 0.0


def test_draft_level_cost_on_each_device(monkeypatch):
    """GPU: the drafter's ops for int(3.0) tokens at kv 17 -> 32 through gpu.forward_cost; NPU: the
    run's (INT8) drafter spec through platform.forward_cost on 'npu'; PIM: the drafter ranks."""
    cm, calls = _model(monkeypatch)
    seen = []
    cm.gpu.forward_cost = lambda ops: (seen.append(ops), NS(duration_s=4.0, energy_j_by_device={"gpu": 1.5}))[1]
    assert cm.draft_level_cost(3.0, 17, None) == (4.0, {"gpu": 1.5}, {"gpu": 4.0})
    assert calls[-1] == ("DRAFT", 3, 32)
    costs = NS(ops=lambda m, n, kv: ("ops", m, n, kv), draft="D", partition=NS(draft_ranks=(4, 5)),
               _pim_forward=lambda ops, ranks: (seen.append((ops, ranks)),
                                                NS(duration_s=1.0, energy_j={"pim": .2}, busy_s={"pim": 1.0}))[1])
    cm.platform.forward_cost = lambda ops, dev: (seen.append((ops, dev)),
                                                 NS(duration_s=2.0, energy_j_by_device={"npu": .5}))[1]
    cm.moe_cfg = NS(drafter_device="npu")
    assert cm.draft_level_cost(3.0, 17, costs) == (2.0, {"npu": .5}, {"npu": 2.0})
    assert seen[-1] == (("ops", "D", 3, 32), "npu")
    cm.moe_cfg = NS(drafter_device="pim")
    assert cm.draft_level_cost(3.0, 17, costs) == (1.0, {"pim": .2}, {"pim": 1.0})
    assert seen[-1] == (("ops", "D", 3, 32), (4, 5))


def _sched_model(monkeypatch):
    """Copies 5 s isolated, 2 s back to back; dense 1 s per layer, head 0.5 s; experts 0.25 s each."""
    cm, _ = _model(monkeypatch)
    cm.dense_times = lambda n, kv: (1.0, 0.5)
    cm.expert_time_s = lambda n, d: 0.25 * d
    return cm


def test_schedule_verify_demand_copies_with_pinned_full_cache(monkeypatch):
    """Per layer 1 slot: L0 holds 0, L1 holds 3 (pinned: this pass uses them). Unions L0 {0, 1}, L1 {2, 3},
    start 10 s, stream idle. L0: dense 10-11; 0 hits; 1 misses, copy 11-16 (idle: 5 s), not kept
    (the only slot is pinned) -> experts 16-16.5. L1: dense 16.5-17.5; 2 copied 17.5-22.5 (idle again),
    3 hits -> experts 22.5-23. Head: end 23.5. Busy 1 + 0.5 + 1 + 0.5 + 0.5 = 3.5."""
    cm = _sched_model(monkeypatch)
    cache = ExpertCache(2, 4, 2, "lru", popularity=np.array([[1.0, 0, 0, 0], [0, 0, 0, 1]]))
    r = schedule_verify(cm, cache, [np.array([0, 1]), np.array([2, 3])], 3, 0, 10.0, 0.0)
    assert (r.end_s, r.gpu_busy_s, r.copied_experts, r.hits, r.misses, r.distinct_total) == (23.5, 3.5, 2, 2, 2, 4)
    assert r.layers == [LayerRecord(0, 10.0, 11.0, 1, 11.0, 16.0, 16.0, 16.0, 16.5, 2),
                        LayerRecord(1, 16.5, 17.5, 1, 17.5, 22.5, 22.5, 22.5, 23.0, 2)]
    assert r.h2d_free_s == 22.5 and r.copy_intervals == [(11.0, 16.0), (17.5, 22.5)] and r.wasted_prefetch == 0
    assert (cache.streamed, cache.late_hits, cache._pass, cache.hits, cache.misses) == (2, 0, 1, 2, 2)


def test_schedule_verify_pipelined_copies_merge_and_late_hits_wait(monkeypatch):
    """One layer; 3 in flight until 20 s (a prefetch); stream busy until 12 s. Start 10 s: dense
    10-11. 1 misses: queued behind the stream, 12-14 (pipelined 2 s); 2: 14-16 (one busy interval
    12-16); 3 hits but waits for its copy (late hit) -> experts 20-20.75, head -> 21.25.
    Busy 1 + 0.75 + 0.5 = 2.25. A layer without copies records nan copy times."""
    cm = _sched_model(monkeypatch)
    cache = ExpertCache(1, 4, 4, "lru", fill=False)
    cache.insert(0, 3, 20.0)
    r = schedule_verify(cm, cache, [[1, 2, 3]], 3, 0, 10.0, 12.0)
    assert (r.end_s, r.gpu_busy_s, r.copied_experts, r.hits, r.misses) == (21.25, 2.25, 2, 1, 2)
    assert r.layers == [LayerRecord(0, 10.0, 11.0, 2, 12.0, 16.0, 20.0, 20.0, 20.75, 3)]
    assert r.copy_intervals == [(12.0, 16.0)] and r.h2d_free_s == 16.0 and cache.late_hits == 1
    assert cache.ready_s((0, 1)) == 14.0 and cache.ready_s((0, 2)) == 16.0
    r2 = schedule_verify(cm, cache, [[1]], 3, 0, 30.0, 0.0)
    lr = r2.layers[0]
    assert np.isnan(lr.copy_start_s) and np.isnan(lr.copy_end_s) and lr.copies == 0 and lr.experts_ready_s == 31.0
    assert cache.late_hits == 1 and r2.copy_intervals == []


def test_schedule_verify_next_layer_guess_copies_and_counts_wrong_guesses(monkeypatch):
    """2 layers, 2 slots each, empty. Unions L0 {0}, L1 {1, 2}; guess for L1 {1, 3} (3 wrong).
    L0: dense 0-1; 0 copied 1-6 (idle); guesses behind it: 1 6-8, 3 8-10 (one interval 1-10,
    wasted 1); experts 6-6.25. L1: dense 6.25-7.25; 1 hits, copy still in flight until 8 (late);
    2 misses: 10-12, evicting 3 (not in this pass); experts 12-12.5; end 13. Busy 1.25 + 1.5 + 0.5."""
    cm = _sched_model(monkeypatch)
    cache = ExpertCache(2, 4, 4, "lru", fill=False)
    asked = []
    r = schedule_verify(cm, cache, [[0], [1, 2]], 2, 0, 0.0, 0.0, overlap="next_layer",
                        prefetch_guess=lambda layer, u: (asked.append(layer), {3, 1})[1])
    assert asked == [1]
    assert (r.end_s, r.gpu_busy_s, r.copied_experts, r.hits, r.misses, r.wasted_prefetch) == (13.0, 3.25, 4, 1, 2, 1)
    assert r.layers == [LayerRecord(0, 0.0, 1.0, 1, 1.0, 6.0, 6.0, 6.0, 6.25, 1),
                        LayerRecord(1, 6.25, 7.25, 3, 6.0, 12.0, 12.0, 12.0, 12.5, 2)]
    assert r.copy_intervals == [(1.0, 12.0)] and r.h2d_free_s == 12.0
    assert (cache.late_hits, cache.evictions) == (1, 1) and (1, 3) not in cache and (1, 1) in cache


def test_schedule_verify_oracle_guess_not_kept_is_not_copied(monkeypatch):
    """Static cache (L0 and L1 hold expert 0). Unions L0 {0}, L1 {0, 1}, oracle guess for L1 = {0, 1}:
    0 is resident (skipped), 1 cannot be kept -> no guessed copy. L0: dense 0-1, hit, experts 1-1.25;
    L1: dense 1.25-2.25, 1 copied on demand 2.25-7.25 (streamed), experts 7.25-7.75; end 8.25."""
    cm = _sched_model(monkeypatch)
    cache = ExpertCache(2, 4, 2, "static")
    r = schedule_verify(cm, cache, [[0], [0, 1]], 2, 0, 0.0, 0.0, overlap="next_layer")
    assert (r.end_s, r.copied_experts, r.hits, r.misses, r.wasted_prefetch) == (8.25, 1, 2, 1, 0)
    assert r.copy_intervals == [(2.25, 7.25)] and cache.streamed == 2
    assert r.layers[1] == LayerRecord(1, 1.25, 2.25, 1, 2.25, 7.25, 7.25, 7.25, 7.75, 2)


def test_cost_model_on_the_shipped_h200_platform():
    """Expert of the MoEfied 1.5B at BF16: 645,120 params x 2 B = 1,290,240 B; its copies are the
    link's isolated / back-to-back times of that many bytes."""
    from pathlib import Path
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.hw.platform import Platform
    from ahasd_sim.workload.models import get_model, with_precision
    cfg = load_config(Path(__file__).resolve().parents[1] / "hw_configs" / "platform_server_h200_pcie5.yaml", [])
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    assert cm.expert_bytes == 1290240.0 and target.expert_params() == 645120
    assert cm.copy_s == cm.link.isolated_transfer_time_s(1290240.0)
    assert cm.copy_b2b_s == cm.link.back_to_back_transfer_time_s(1290240.0)
    assert cm.all_expert_bytes() == 1290240.0 * 28 * 64


# ------------------------------------------------------------------ closure
def test_dinic_max_flow_and_minimal_source_side():
    """0 -> 2 (5), 2 -> 1 (2), 0 -> 3 (1), 3 -> 1 (4): max flow 2 + 1 = 3; in the residual graph
    only 2 stays reachable from 0 (3 of its 5 left)."""
    d = closure._Dinic(4)
    for a, b, c in ((0, 2, 5.0), (2, 1, 2.0), (0, 3, 1.0), (3, 1, 4.0)):
        d.add(a, b, c)
    assert d.maxflow(0, 1) == 3.0
    assert d.source_side(0) == [True, False, True, False]
    e = closure._Dinic(3)                       # a chain 0 -> 2 -> 1 of capacities 4, 3 and a back edge
    e.add(0, 2, 4.0); e.add(2, 1, 3.0); e.add(1, 2, 9.0)
    assert e.maxflow(0, 1) == 3.0 and e.source_side(0) == [True, False, True]


def _instance():
    """Nodes 1, 2, 3; 2 is a child of 1, 1 and 3 of the root. Items (time): 0 (1), 1 (2), 2 (4), 3 (8),
    4 (16), 5 (0). Node 1 needs 0, 1, 4; node 2 needs 0, 2, 3; node 3 needs 1, 3, 4, 5.
    Node 2 inherits 0 from 1 (no edge), item 5 costs nothing (dropped). Users: 0 {1}, 2 {2}
    (folded: 1 into node 1, 4 into node 2); 1 and 4 {1, 3} (one group, 18); 3 {2, 3} (8)."""
    own = np.zeros((3, 6), dtype=bool)
    for r, items in enumerate(([0, 1, 4], [0, 2, 3], [1, 3, 4, 5])):
        own[r, items] = True
    return closure.ClosureInstance([1, 2, 3], np.array([-1, 0, 1, 0]), own,
                                   np.array([1.0, 2, 4, 8, 16, 0]))


def test_closure_instance_reductions():
    """Group order follows np.unique of the packed user bits: {2, 3} (0b011 -> 96) before {1, 3}
    (0b101 -> 160). Infinite edges: node 2 -> node 1 (vertices 3 -> 2), then node -> group:
    node 1 -> group 1, node 2 -> group 0, node 3 -> groups 0, 1 (vertices 5, 6). 3 + 2 + 2 vertices."""
    inst = _instance()
    assert inst.par.tolist() == [-1, 0, -1]
    assert inst.folded_time.tolist() == [1.0, 4.0, 0.0]
    assert inst.group_time.tolist() == [8.0, 18.0] and inst.n_groups == 2
    assert inst.inf_src.tolist() == [3, 2, 3, 4, 4] and inst.inf_dst.tolist() == [2, 6, 5, 5, 6]
    assert inst.n_vert == 7


@pytest.mark.parametrize("backend", ["python", "scipy"])
def test_closure_solve_exact_value(backend):
    """Gains [10, 3, 28], price 1: weights after folding [9, -1, 28], groups 8 and 18 (|w| + groups
    = 64, so the 2^30 integer scale is exact). {1}: 9 - 18 = -9; {3}: 28 - 26 = 2; {1, 3}: 37 - 26 = 11;
    {1, 2, 3}: 36 - 34 = 2 -> {1, 3}, 11. Price 2: [8, -5, 28] and 16, 36: the empty set (0) wins."""
    inst = _instance()
    assert inst.solve(np.array([10.0, 3, 28]), 1.0, backend) == (11.0, [1, 3])
    assert inst.solve(np.array([10.0, 3, 28]), 2.0, backend) == (0.0, [])
    empty = closure.ClosureInstance([], np.array([-1]), np.zeros((0, 0), bool), np.zeros(0))
    assert empty.solve(np.zeros(0), 1.0, backend) == (0.0, [])


def test_matrix_and_max_closure():
    """Items sorted by key: a, b. Node 1 (weight 8) needs a (3); node 2 (weight 1, child of 1) needs
    a, b (4). {1}: 5; {1, 2}: 9 - 7 = 2 -> {1}, 5 (|w| = 5 + 3 = 8: exact scale)."""
    own, t = closure._matrix([1, 2], {1: ["b"], 2: ["a", "b"]}, {"a": 1.0, "b": 2.0})
    assert own.tolist() == [[False, True], [True, True]] and t.tolist() == [1.0, 2.0]
    own, t = closure._matrix([1, 3], {1: ["b"]}, {"b": 2.0})   # node 3 requires nothing
    assert own.tolist() == [[True], [False]] and t.tolist() == [2.0]
    args = ([2, 1], np.array([-1, 0, 1]), {1: 8.0, 2: 1.0}, {1: ["a"], 2: ["b", "a"]}, {"a": 3.0, "b": 4.0})
    assert closure.max_closure(*args, backend="python") == (5.0, [1])
    assert closure.max_closure(*args, backend="scipy") == (5.0, [1])
    assert closure.max_closure(*args) == (5.0, [1])
    assert closure.BACKEND == "scipy"


def test_dinkelbach_exact_ratio_and_iterations():
    """Chain 1 -> 2, P = 0.9, 0.8; each node one item of 0.5 s; base 1 token / 2 s, 0.25 s per node.
    {}: 0.5; {1}: 1.9 / 2.75 = 0.691; {1, 2}: 2.7 / 3.5 = 0.771 (the optimum). Iteration 1 at
    lambda 0.5 selects {1, 2}; iteration 2 confirms it (F = 0). With max_iter 1 the first step's
    set is returned. An item that is too expensive keeps node 2 out: {1} at 0.691."""
    own = np.array([[True, False], [False, True]])
    args = ([1, 2], np.array([-1, 0, 1]), np.array([0.9, 0.8]), own)
    lam, sel, it = closure.dinkelbach(*args, np.array([0.5, 0.5]), 1.0, 2.0, 0.25)
    assert (lam, sel, it) == (approx((1 + (0.9 + 0.8)) / (2 + 0.5 + 1.0)), [1, 2], 2)
    assert closure.dinkelbach(*args, np.array([0.5, 0.5]), 1.0, 2.0, 0.25, max_iter=1)[1:] == ([1, 2], 1)
    lam, sel, it = closure.dinkelbach(*args, np.array([0.5, 50.0]), 1.0, 2.0, 0.25)
    assert (lam, sel) == (approx(1.9 / 2.75), [1])
    lam, sel, it = closure.dinkelbach(*args, np.array([50.0, 50.0]), 1.0, 2.0, 0.25)
    assert (lam, sel, it) == (0.5, [], 1)


# ------------------------------------------------------------------ config
def test_tree_policy_sections_metadata_and_defaults():
    f = {x.name: x for x in dataclasses.fields(TreePolicyConfig)}
    assert dict(f["eagle_fixed"].metadata) == {"doc": "EAGLE static tree shape", "unit": None, "source": None,
                                               "ge": None, "gt": None, "le": None, "lt": None, "choices": None}
    assert dict(f["ecospec"].metadata)["doc"] == "EcoSpec expert-cost-aware greedy"
    assert TreePolicyConfig().eagle_fixed == EagleFixedParams() and EagleFixedParams().branching == [3, 2, 1, 1, 1]


# ------------------------------------------------------------------ compare
def test_compare_candidates_grid():
    """Autoregressive 1; EAGLE: 5 node counts at depth 6 + 2 fixed shapes = 7; budgets 4; SpecFit
    max_nodes 4; EcoSpec mu 4; expert-blind SpecFit 4; CPU experts 2 policies x 2 executions."""
    c = mc.candidates()
    assert list(c) == ["autoregressive", "eagle_tuned", "expert_budget_tuned", "specfit_tuned", "ecospec_tuned",
                       "specfit_blind_tuned", "cpu_experts_tuned"]
    assert [len(v) for v in c.values()] == [1, 7, 4, 4, 4, 4, 4]
    assert c["eagle_tuned"][0] == ("eagle_dynamic N=4 depth=6", ["run.policy=eagle_dynamic",
                                   "tree_policy.eagle_dynamic.total_nodes=4", "tree_policy.eagle_dynamic.max_depth=6"])
    assert c["eagle_tuned"][4][0] == "eagle_dynamic N=64 depth=6"
    assert c["eagle_tuned"][5] == ("eagle_fixed [1, 1, 1, 1]", ["run.policy=eagle_fixed",
                                    "tree_policy.eagle_fixed.branching=[1,1,1,1]"])
    assert c["expert_budget_tuned"][0] == ("expert_budget B=4", ["run.policy=expert_budget",
                                           "tree_policy.expert_budget.budget_experts_per_layer=4"])
    assert c["autoregressive"] == [("no_draft", ["run.policy=no_draft"])]
    assert c["specfit_blind_tuned"][1] == ("specfit expert-blind max_nodes=16", [
        "run.policy=specfit", "tree_policy.specfit.expert_term=false", "tree_policy.specfit.max_nodes=16"])
    assert c["ecospec_tuned"][0] == ("ecospec mu=0.25", ["run.policy=ecospec", "tree_policy.ecospec.mu=0.25"])
    assert c["cpu_experts_tuned"][3] == ("specfit experts=mixed", ["run.policy=specfit", "moe.expert_execution=mixed",
                                                                   "tree_policy.specfit.max_nodes=16"])


def _split_cfg(profile, windows):
    return NS(moe=NS(profile_rounds=profile, ci_windows=windows), source_file="x.yaml")


def test_compare_split_rounds():
    """100 rounds, 10 profile: 90 left, a third (30) tune -> reported 0-60, tuning 60-90, profile
    90-100. 30 rounds, 10 profile, half: 10 tune, 10 reported = 2 x 5 windows (allowed); 6 windows
    need 12: refused. 20 rounds: 0.2 -> 4 tuning rounds (allowed), 0.15 -> 3 (refused)."""
    assert mc.split_rounds(_split_cfg(10, 4), [0] * 100, 1 / 3) == {"reported": (0, 60), "tuning": (60, 90),
                                                                     "profile": (90, 100)}
    assert mc.split_rounds(_split_cfg(10, 5), [0] * 30, 0.5)["reported"] == (0, 10)
    assert mc.split_rounds(_split_cfg(0, 5), [0] * 20, 0.2)["tuning"] == (16, 20)
    # max_rounds 60: only the first 60 are split (20 tune), the profile stays the trace's last 10
    assert mc.split_rounds(_split_cfg(10, 4), [0] * 100, 1 / 3, 60) == {"reported": (0, 40), "tuning": (40, 60),
                                                                         "profile": (90, 100)}
    with pytest.raises(ConfigError) as e:
        mc.split_rounds(_split_cfg(10, 6), [0] * 30, 0.5)
    assert (e.value.source, e.value.key_path, e.value.message) == (
        "x.yaml", "moe.profile_rounds",
        "the tree trace's 30 rounds leave too few for tuning (10) and reporting (10) after 10 profile rounds")
    with pytest.raises(ConfigError):
        mc.split_rounds(_split_cfg(0, 5), [0] * 20, 0.15)


def test_compare_slice_overrides():
    """Rounds 1-3 commit 2 + 3 = 5 tokens: the token budget is 6 (never reached)."""
    tt = NS(round_n_commit=np.array([1, 2, 3, 4, 5]))
    assert mc._slice_overrides(tt, 1, 3, (7, 9)) == ["moe.trace_start_round=1", "moe.trace_end_round=3",
                                                      "moe.profile_start_round=7", "moe.profile_rounds=2",
                                                      "run.generated_tokens=6"]


def test_format_compare_moe():
    from ahasd_sim.compare import text_table
    t = pd.DataFrame([{"row": "specfit", "config": "run.policy=specfit", "throughput_tok_s": 12.345,
                       "ci95": [11.0, 13.96], "vs_best_baseline": 1.23456, "vs_best_baseline_ci95": [1.1, 1.3],
                       "nodes_verified": 7.25, "accepted_per_round": 2.345, "expert_h2d_gb": 0.5,
                       "hit_rate": 0.12345, "windows": 8, "best_baseline": "eagle_tuned (x)",
                       "vs_expert_blind": 0.5, "vs_expert_blind_ci95": [0.25, 0.75],
                       "reported_rounds": "0-60", "tuning_rounds": "60-90", "profile_rounds": "90-100",
                       "routing": "recorded"}])
    head = ["row", "config", "tok/s [95% CI]", "vs best baseline [95% CI]", "vs expert-blind [95% CI]", "nodes",
            "acc/round", "H2D GB", "hit"]
    body = ["specfit", "run.policy=specfit", "12.3 [11.0, 14.0]", "1.235 [1.100, 1.300]", "0.500 [0.250, 0.750]",
            "7.2", "2.35", "0.50", "0.123"]
    tail = ("best baseline: eagle_tuned (x), chosen on tuning rounds 60-90; reported rounds 0-60 (8 windows: ratio "
            "estimators, 95% intervals by resampling whole windows, paired for ratios); profile rounds 90-100")
    assert mc.format_compare_moe(t) == "\n".join(text_table([head, body]) + [tail])
    synth = mc.format_compare_moe(t.assign(routing="synthetic")).splitlines()[-1]
    assert synth.startswith("ROUTING IS SYNTHETIC")


class _Windows:
    def __init__(self, tokens, times, first=(0, 8, 12)):
        self.generated_tokens, self.makespan_s, self.first_round = list(tokens), list(times), list(first)

    def __len__(self):
        return len(self.generated_tokens)


def test_run_compare_moe_plumbing_with_stand_in_runs(monkeypatch, tmp_path):
    """The compare driver with stand-in simulations (the real ones are covered by
    test_moe_offload's compare test) and a small grid: autoregressive (one candidate), EAGLE
    (N=8 depth=6, N=16 depth=6), expert budget (B=16, B=4), SpecFit (max_nodes 8, one candidate,
    expert-aware) and expert-blind SpecFit (max_nodes 16, one candidate). 30 rounds, 6 profile,
    a third of the other 24 tune: reported 0-16, tuning 16-24, profile 24-30; every round commits
    1 token, so the budgets are 8 + 1 = 9 (tuning) and 16 + 1 = 17 (reported). Tuning
    throughput: eagle N=8 depth=6 30 tok/s, B=16 20, no_draft 5, every other run 10; one-candidate
    families are not tuned, but the expert-blind ones run once on the tuning rounds for the choice
    of the best baseline -> eagle_tuned (SpecFit, expert-aware, is not a baseline). Reported
    windows (3, 1 s each): the tuned EAGLE 30 tokens each; SpecFit rows with the expert term 45
    each; SpecFit uncalibrated 10, 50, 30; every other row 15 each (the expert-blind SpecFit too: SpecFit is
    3 x it)."""
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # few windows keep the test short
    import ahasd_sim.modes.moe.offload as mo
    import ahasd_sim.output as out_mod
    import ahasd_sim.simulation as sim
    from ahasd_sim.metrics.stats import paired_ratio_ci, ratio_ci

    tt = type("TT", (), {"round_n_commit": np.ones(30, dtype=int), "__len__": lambda self: 30})()
    slice_keys = ("moe.trace_start_round", "moe.trace_end_round", "moe.profile_start_round", "moe.profile_rounds",
                  "run.generated_tokens")

    class Cfg:
        def __init__(self, o=()):
            self.o = list(o)
            self.moe = NS(tree_trace="t.npz", profile_rounds=6, ci_windows=2, routing="trace")
            self.source_file = "c.yaml"

        def replace(self, o):
            return Cfg(self.o + list(o))

    runs, written = [], []

    def fake_run(cfg):
        own = [x for x in cfg.o if not x.startswith(slice_keys)]
        sl = [x for x in cfg.o if x.startswith(slice_keys)]
        runs.append((own, sl))
        if "moe.trace_start_round=16" in sl:          # tuning
            tput = {("tree_policy.eagle_dynamic.total_nodes=8", "tree_policy.eagle_dynamic.max_depth=6"): 30.0,
                    ("tree_policy.expert_budget.budget_experts_per_layer=16",): 20.0}.get(tuple(own[1:]), 10.0)
            if own == ["run.policy=no_draft"]:
                tput = 5.0
            return NS(summary={"generated_tokens": 2 * tput, "decode_makespan_s": 2.0, "mode_windows": {}})
        if own == ["run.policy=eagle_dynamic", "tree_policy.eagle_dynamic.total_nodes=8",
                   "tree_policy.eagle_dynamic.max_depth=6"]:
            w = _Windows([30, 30, 30], [1, 1, 1])
        elif own[0] == "run.policy=specfit" and "tree_policy.specfit.expert_term=false" not in own \
                and "moe.cost_calibration=none" not in own:
            w = _Windows([45, 45, 45], [1, 1, 1])
        elif own == ["run.policy=specfit", "moe.cost_calibration=none"]:
            w = _Windows([10, 50, 30], [1, 1, 1])
        else:
            w = _Windows([15, 15, 15], [1, 1, 1])
        return NS(windows=w, summary={"policy_stats": {"mean_nodes_verified": 7.0}, "accepted_length_per_round": 2.5,
                                      "expert_h2d_bytes": 3e9, "expert_cache_hit_rate": 0.25})

    monkeypatch.setattr(mo, "load_tree_trace_cached", lambda p: (written.append(("trace", p)), tt)[1])
    monkeypatch.setattr(sim, "resolve_data_path", lambda p, src: ("resolved", p, src))
    monkeypatch.setattr(sim, "run_simulation", fake_run)
    monkeypatch.setattr(out_mod, "write_run", lambda res, cfg, d, s: written.append(
        ("run", d.name, isinstance(res.windows, _Windows), cfg.o[-1], s >= 0)))
    c = mc.candidates()
    grid = {"autoregressive": c["autoregressive"],
            "eagle_tuned": [x for x in c["eagle_tuned"] if x[0] in ("eagle_dynamic N=8 depth=6",
                                                                  "eagle_dynamic N=16 depth=6")],
            "expert_budget_tuned": [x for x in c["expert_budget_tuned"] if x[0] in ("expert_budget B=16",
                                                                                  "expert_budget B=4")],
            "specfit_tuned": c["specfit_tuned"][:1], "specfit_blind_tuned": c["specfit_blind_tuned"][1:2]}
    progress = []
    table, tune, out = mc.run_compare_moe(Cfg(), tmp_path / "cmp", n_boot=300, grid=grid,
                                          progress=lambda d, t, label: progress.append((d, t, label)))

    assert out == tmp_path / "cmp" and written[0] == ("trace", ("resolved", "t.npz", "c.yaml"))
    # 4 tuning runs + 7 reported rows + 2 one-candidate baselines measured on the tuning rounds
    assert [p[:2] for p in progress] == [(i, 13) for i in range(13)]
    assert len(tune) == 7 and list(tune.columns) == ["family", "config", "tuning_throughput_tok_s", "overrides"]
    assert tune.set_index("config").tuning_throughput_tok_s.to_dict(into=dict) == pytest.approx({
        "no_draft": 5.0, "eagle_dynamic N=8 depth=6": 30.0, "eagle_dynamic N=16 depth=6": 10.0,
        "expert_budget B=16": 20.0, "expert_budget B=4": 10.0, "specfit max_nodes=8": float("nan"),
        "specfit expert-blind max_nodes=16": 10.0}, nan_ok=True)
    assert runs[0][1] == ["moe.trace_start_round=16", "moe.trace_end_round=24", "moe.profile_start_round=24",
                          "moe.profile_rounds=6", "run.generated_tokens=9"]
    assert runs[4][1] == ["moe.trace_start_round=0", "moe.trace_end_round=16", "moe.profile_start_round=24",
                          "moe.profile_rounds=6", "run.generated_tokens=17"]
    rows = ["autoregressive", "eagle_tuned", "expert_budget_tuned", "specfit_tuned", "specfit_blind_tuned",
            "specfit_uncalibrated", "eagle_dynamic_default"]
    assert table.row.tolist() == rows and [x[1] for x in written[1:]] == rows
    assert all(x[2:] == (True, "run.generated_tokens=17", True) for x in written[1:])   # each row's result and config
    assert table.config.tolist()[:3] == ["no_draft", "eagle_dynamic N=8 depth=6", "expert_budget B=16"]
    assert table.config[5] == "run.policy=specfit moe.cost_calibration=none"
    assert table.throughput_tok_s.tolist() == [15.0, 30.0, 15.0, 45.0, 15.0, 30.0, 15.0]
    assert table.vs_best_baseline.tolist() == [0.5, 1.0, 0.5, 1.5, 0.5, 1.0, 0.5]
    assert table.vs_expert_blind.tolist() == [1.0, 2.0, 1.0, 3.0, 1.0, 2.0, 1.0]
    assert table.ci95[3] == [45.0, 45.0] and table.vs_best_baseline_ci95[3] == [1.5, 1.5]
    assert table.ci95[5] == ratio_ci([10, 50, 30], [1, 1, 1], n_resamples=300)[1]
    assert table.vs_best_baseline_ci95[5] == paired_ratio_ci([10, 50, 30], [1, 1, 1], [30, 30, 30], [1, 1, 1],
                                                             n_resamples=300)[1]
    r0 = table.iloc[0]
    assert (r0.nodes_verified, r0.accepted_per_round, r0.expert_h2d_gb, r0.hit_rate, r0.windows) == (
        7.0, 2.5, 3.0, 0.25, 3)
    assert (r0.best_baseline, r0.reported_rounds, r0.tuning_rounds, r0.profile_rounds, r0.routing) == (
        "eagle_tuned (eagle_dynamic N=8 depth=6)", "0-16", "16-24", "24-30", "recorded")
    csv = pd.read_csv(tmp_path / "cmp" / "compare.csv")
    assert csv.row.tolist() == rows and csv.ci95_low[3] == 45.0 and csv.vs_best_baseline_ci95_high[3] == 1.5
    assert csv.ci95_high[5] == table.ci95[5][1]
    assert csv.vs_best_baseline_ci95_low[5] == table.vs_best_baseline_ci95[5][0]
    assert list(csv.columns) == ["row", "config", "throughput_tok_s", "nodes_verified", "accepted_per_round",
                                 "expert_h2d_gb", "hit_rate", "windows", "vs_best_baseline", "vs_expert_blind",
                                 "best_baseline", "reported_rounds", "tuning_rounds", "profile_rounds", "routing",
                                 "ci95_low", "ci95_high", "vs_best_baseline_ci95_low", "vs_best_baseline_ci95_high",
                                 "vs_expert_blind_ci95_low", "vs_expert_blind_ci95_high"]
    tcsv = pd.read_csv(tmp_path / "cmp" / "tuning.csv")
    assert list(tcsv.columns) == ["family", "config", "tuning_throughput_tok_s", "overrides"] and len(tcsv) == 7


def test_run_compare_moe_refuses_rows_on_different_rounds(monkeypatch, tmp_path):
    import ahasd_sim.modes.moe.offload as mo
    import ahasd_sim.output as out_mod
    import ahasd_sim.simulation as sim
    tt = type("TT", (), {"round_n_commit": np.ones(30, dtype=int), "__len__": lambda self: 30})()
    cfg = NS(moe=NS(tree_trace="t", profile_rounds=6, ci_windows=2, routing="trace"), source_file="c",
             replace=lambda o: o)

    def fake_run(o):
        if "moe.trace_start_round=16" in o:
            return NS(summary={"generated_tokens": 1.0, "decode_makespan_s": 1.0})
        first = (0, 9) if o[0] == "run.policy=ecospec" else (0, 8)
        return NS(windows=_Windows([1, 1], [1, 1], first), summary={"policy_stats": {}})
    monkeypatch.setattr(mo, "load_tree_trace_cached", lambda p: tt)
    monkeypatch.setattr(sim, "resolve_data_path", lambda p, src: p)
    monkeypatch.setattr(sim, "run_simulation", fake_run)
    monkeypatch.setattr(out_mod, "write_run", lambda *a: None)
    with pytest.raises(RuntimeError, match="^moe compare: rows replayed different rounds; ratios would not be paired$"):
        mc.run_compare_moe(cfg, tmp_path / "c2", n_boot=10)


def test_run_compare_moe_one_window_rows_have_no_interval_and_missing_stats_read_zero(monkeypatch, tmp_path):
    """One reported window per row: no bootstrap interval ([nan, nan]); a summary without the
    policy / acceptance / H2D / hit-rate entries reads 0 for each."""
    import ahasd_sim.modes.moe.offload as mo
    import ahasd_sim.output as out_mod
    import ahasd_sim.simulation as sim
    tt = type("TT", (), {"round_n_commit": np.ones(30, dtype=int), "__len__": lambda self: 30})()
    cfg = NS(moe=NS(tree_trace="t", profile_rounds=6, ci_windows=2, routing="trace"), source_file="c",
             replace=lambda o: o)

    def fake_run(o):
        if "moe.trace_start_round=16" in o:
            return NS(summary={"generated_tokens": 1.0, "decode_makespan_s": 1.0})
        return NS(windows=_Windows([4], [2], (0,)), summary={"policy_stats": {}})
    monkeypatch.setattr(mo, "load_tree_trace_cached", lambda p: tt)
    monkeypatch.setattr(sim, "resolve_data_path", lambda p, src: p)
    monkeypatch.setattr(sim, "run_simulation", fake_run)
    monkeypatch.setattr(out_mod, "write_run", lambda *a: None)
    table, _, _ = mc.run_compare_moe(cfg, tmp_path / "c3", n_boot=10)
    r = table.iloc[0]
    assert r.throughput_tok_s == 2.0 and r.vs_best_baseline == 1.0 and r.windows == 1
    assert len(r.ci95) == 2 and np.isnan(r.ci95).all() and len(r.vs_best_baseline_ci95) == 2
    assert np.isnan(r.vs_best_baseline_ci95).all()
    assert (r.nodes_verified, r.accepted_per_round, r.expert_h2d_gb, r.hit_rate) == (0.0, 0.0, 0.0, 0.0)
