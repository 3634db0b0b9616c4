"""MoE expert offload (issue 15): expert cache, tree-verification cost, SpecFit search, policies, mode."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.config.errors import ConfigError
from ahasd_sim.config.loader import load_config
from ahasd_sim.hw.platform import Platform
from ahasd_sim.moe import closure
from ahasd_sim.moe.cache import ExpertCache
from ahasd_sim.moe.cost import LinearVerifyModel, MoeCostModel, schedule_verify
from ahasd_sim.moe.predictor import RecallPredictor
from ahasd_sim.moe.stats import window_samples
from ahasd_sim.moe.tree import DraftTree, TreeView, accepted_length, expert_union, is_ancestor_closed
from ahasd_sim.policies import make_policy
from ahasd_sim.simulation import run_simulation
from ahasd_sim.workload.models import get_model, with_precision
from ahasd_sim.traces.tree import example_tree_trace, write_tree_trace

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml"
SMOKE = "traces/qwc-0.5b-1.5b_greedy_smoke.npz"
TREE_POLICIES = ("eagle_fixed", "eagle_dynamic", "specfit", "ecospec")


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory):
    """A constructed (random) tree trace with the MoEfied-1.5B layout (28 layers, 64 experts, top-8)."""
    h, c = example_tree_trace(n_prompts=2, n_rounds=14, depth=3, top_k=3, drf_top_k=4, n_layers=28,
                              moe_k=8, n_experts=64, seed=3)
    p = tmp_path_factory.mktemp("tree") / "tree_e64k8.npz"
    write_tree_trace(p, h, c)
    return p


def _cfg(trace_path, *sets):
    return load_config(PLATFORM, [f"run.trace={SMOKE}", "run.mode=moe_offload", "run.policy=specfit",
                                  "run.draft_model=qwen2.5-coder-0.5b",
                                  "run.target_model=qwen2.5-coder-1.5b-moefied-e64k8",
                                  f"moe.tree_trace={trace_path}", "run.generated_tokens=24",
                                  "moe.profile_rounds=4", "moe.ci_windows=4", "run.timeline=false", *sets])


# ------------------------------------------------------------------ tree helpers
def _tree(parents, correct, experts, q=None):
    n = len(parents)
    q = q or [1.0] + [0.5] * (n - 1)
    return DraftTree(parent=np.array(parents), q_prob=np.array(q, dtype=float),
                     correct=np.array(correct, dtype=bool), experts=np.array(experts))


def test_accepted_length_is_deepest_confirmed_path_inside_the_selection():
    #       0
    #     1   2        1 correct, 2 wrong; 3 (child of 1) correct, 4 (child of 3) wrong
    #     3
    #     4
    t = _tree([-1, 0, 0, 1, 3], [True, True, False, True, False], np.zeros((5, 1, 1), dtype=int))
    assert accepted_length(t, [1, 2, 3, 4]) == 2
    assert accepted_length(t, [1, 2]) == 1
    assert accepted_length(t, [2]) == 0
    assert accepted_length(t, []) == 0
    assert is_ancestor_closed(t.parent, [1, 3]) and not is_ancestor_closed(t.parent, [3])


def test_expert_union_cost_equals_hand_count():
    # 2 layers, top-2. root: L0 {0,1}, L1 {2,3}; node1: L0 {1,4}, L1 {3,5}; node2: L0 {4,6}, L1 {2,3}
    experts = [[[0, 1], [2, 3]], [[1, 4], [3, 5]], [[4, 6], [2, 3]]]
    t = _tree([-1, 0, 1], [True, True, True], experts)
    u = expert_union(t.experts, [1, 2])
    assert [list(x) for x in u] == [[0, 1, 4, 6], [2, 3, 5]]          # by hand: 4 + 3 distinct
    resident = np.zeros((2, 8), dtype=bool)
    resident[0, [0, 1]] = True                                         # only L0 experts 0, 1 cached
    m = LinearVerifyModel(c0_s=1.0, c1_s=0.1, c2_s=0.01, fetch_s=0.5, n_layers=2)
    # by hand: 1 + 0.1*3 + 0.01*7 + 5 missing (L0: 4, 6; L1: 2, 3, 5) * 0.5
    assert m.cycle_time(2, u, resident) == pytest.approx(1.0 + 0.3 + 0.07 + 2.5)
    # the simulated pass copies exactly the 5 missing experts
    cfg = load_config(PLATFORM, [])
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    cache = ExpertCache(2, 8, 16, "lru", popularity=resident.astype(float), fill=True)
    cache2 = ExpertCache(2, 8, 2, "lru", scope="global", popularity=resident.astype(float), fill=True)
    res = schedule_verify(cm, cache2, u, 3, 128, 0.0, 0.0)
    assert res.copied_experts == 5 and res.hits == 2 and res.distinct_total == 7
    assert cache.hits == 0  # untouched cache unaffected


# ------------------------------------------------------------------ cache
def test_lru_lfu_static_evict_as_defined():
    lru = ExpertCache(1, 8, 2, "lru", fill=False)
    for e in (0, 1):
        assert not lru.access(0, e) and lru.insert(0, e, 0.0)
    lru.access(0, 0)                       # 1 is now least recently used
    lru.insert(0, 2, 0.0)
    assert (0, 0) in lru and (0, 1) not in lru and (0, 2) in lru
    lfu = ExpertCache(1, 8, 2, "lfu", fill=False)
    for e in (0, 1):
        lfu.access(0, e); lfu.insert(0, e, 0.0)
    lfu.access(0, 1); lfu.access(0, 1); lfu.access(0, 0)  # freq 0:2, 1:3
    lfu.access(0, 2); lfu.insert(0, 2, 0.0)               # evicts 0 (less frequent, though more recent)
    assert (0, 0) not in lfu and (0, 1) in lfu
    pop = np.array([[5.0, 1.0, 9.0, 0.0, 0, 0, 0, 0]])
    st = ExpertCache(1, 8, 2, "static", popularity=pop, fill=False)
    assert (0, 2) in st and (0, 0) in st and not st.insert(0, 3, 0.0) and (0, 3) not in st
    # pinned experts are never evicted; with no evictable room the miss is streamed
    pin = ExpertCache(1, 8, 1, "lru", fill=False)
    pin.insert(0, 0, 0.0)
    assert not pin.insert(0, 1, 0.0, pinned={(0, 0)}) and (0, 0) in pin and pin.streamed == 1


def test_per_layer_scope_splits_capacity():
    c = ExpertCache(3, 8, 7, "lru", scope="per_layer", fill=True)
    assert c.layer_cap == [3, 2, 2] and c.resident_mask.sum(axis=1).tolist() == [3, 2, 2]


# ------------------------------------------------------------------ causality
def test_expert_compute_never_starts_before_its_copy_ends():
    cfg = load_config(PLATFORM, [])
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    L, E = target.n_layers, target.n_experts
    unions = [np.arange(l % 5, l % 5 + 12) for l in range(L)]
    for overlap in ("none", "next_layer"):
        cache = ExpertCache(L, E, 400, "lru", fill=False)
        for layer in range(3):                      # layers 0-2 fully cached: they finish early
            for e in unions[layer]:
                cache.insert(layer, int(e), 0.0)
        # an expert of layer 3 is still being prefetched: resident, but its copy ends at t = 0.05 s
        cache.insert(3, int(unions[3][0]), 0.05)
        res = schedule_verify(cm, cache, unions, 9, 256, 0.0, 0.05, overlap)
        assert res.layers[2].expert_end_s < 0.05
        assert res.copied_experts > 0
        for rec in res.layers:
            assert rec.expert_start_s >= rec.dense_end_s
            if rec.copies:
                assert rec.expert_start_s >= rec.copy_end_s
        assert res.layers[3].expert_start_s >= 0.05
        # next_layer: guessed copies still in flight when their layer's router runs are late hits too
        assert cache.late_hits == 1 if overlap == "none" else cache.late_hits >= 1
        # copies on one FIFO stream never overlap
        iv = res.copy_intervals
        assert all(b0 >= a1 - 1e-15 for (_, a1), (b0, _) in zip(iv, iv[1:]))


def test_overlap_hides_copies_behind_compute():
    cfg = load_config(PLATFORM, [])
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    unions = [np.arange(3) for _ in range(target.n_layers)]
    t = {o: schedule_verify(cm, ExpertCache(28, 64, 100, "lru", fill=False), unions, 4, 256, 0.0, 0.0, o).end_s
         for o in ("none", "next_layer")}
    assert t["next_layer"] < t["none"]


# ------------------------------------------------------------------ SpecFit search
def _brute_force_ratio(nodes, parent, pp, own, times, base_tok, base_t, c1):
    best = base_tok / base_t
    for r in range(1, len(nodes) + 1):
        for sub in itertools.combinations(range(len(nodes)), r):
            sel = [nodes[i] for i in sub]
            if not is_ancestor_closed(parent, sel):
                continue
            cov = own[list(sub)].any(axis=0)
            best = max(best, (base_tok + pp[list(sub)].sum()) / (base_t + c1 * r + times[cov].sum()))
    return best


@pytest.mark.parametrize("backend", ["python", "scipy"])
def test_specfit_dinkelbach_mincut_equals_brute_force(backend):
    if backend == "scipy" and closure.BACKEND != "scipy":
        pytest.skip("scipy not installed (pure-Python backend tested)")
    rng = np.random.default_rng(7)
    for trial in range(60):
        n = int(rng.integers(1, 10))
        parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n + 1)])
        nodes = list(range(1, n + 1))
        pp = np.ones(n + 1)
        for v in nodes:
            pp[v] = pp[parent[v]] * rng.uniform(0.2, 1.0)
        n_items = int(rng.integers(2, 12))
        own = rng.random((n, n_items)) < 0.35
        times = rng.uniform(0.0, 0.6, n_items)
        base_t, c1 = rng.uniform(0.5, 2.0), rng.uniform(0.0, 0.2)
        ratio, sel, _ = closure.dinkelbach(nodes, parent, pp[1:], own, times, 1.0, base_t, c1, backend=backend)
        bf = _brute_force_ratio(nodes, parent, pp[1:], own, times, 1.0, base_t, c1)
        assert ratio == pytest.approx(bf, rel=1e-7), trial
        assert is_ancestor_closed(parent, sel)
        rows = [v - 1 for v in sel]
        got = (1.0 + pp[sel].sum()) / (base_t + c1 * len(sel) + times[own[rows].any(axis=0)].sum()) if sel \
            else 1.0 / base_t
        assert got == pytest.approx(bf, rel=1e-7)


def test_backends_pick_the_same_subtree():
    if closure.BACKEND != "scipy":
        pytest.skip("scipy not installed")
    rng = np.random.default_rng(1)
    for _ in range(30):
        n = 12
        parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n + 1)])
        own = rng.random((n, 20)) < 0.3
        pp = rng.uniform(0.05, 0.9, n)
        t = rng.uniform(0, .3, 20)
        a = closure.dinkelbach(list(range(1, n + 1)), parent, pp, own, t, 1.0, 1.0, .01, backend="python")
        b = closure.dinkelbach(list(range(1, n + 1)), parent, pp, own, t, 1.0, 1.0, .01, backend="scipy")
        assert a[1] == b[1] and a[0] == b[0]


# ------------------------------------------------------------------ policies see no verdicts
def _view(tree, resident, lm, depth=None):
    return TreeView(parent=tree.parent, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                    drafted_depth=tree.max_depth if depth is None else depth, predicted_experts=tree.experts,
                    resident=resident, costs=lm, draft_time_s=0.0, next_level_draft_s=0.0,
                    recorded_depth=tree.max_depth)


def test_policies_select_ancestor_closed_sets_and_specfit_avoids_uncached_experts():
    cfg = load_config(PLATFORM, [])
    # root + two children: node 1 (p 0.6) needs uncached experts everywhere, node 2 (p 0.5) cached ones
    L, E = 2, 8
    experts = np.array([[[0, 1], [0, 1]], [[6, 7], [6, 7]], [[0, 1], [0, 1]]])
    tree = _tree([-1, 0, 0], [True, True, False], experts, q=[1.0, 0.6, 0.5])
    resident = np.zeros((L, E), dtype=bool)
    resident[:, :2] = True
    lm = LinearVerifyModel(c0_s=1e-3, c1_s=1e-6, c2_s=1e-6, fetch_s=1e-3, n_layers=L)
    out = {}
    for name in TREE_POLICIES:
        pol = make_policy(name, cfg.policy, np.random.default_rng(0))
        pol.configure(cfg.tree_policy)
        view = _view(tree, resident, lm)
        pol.continue_drafting(view)
        out[name] = pol.select(view)
        assert is_ancestor_closed(tree.parent, out[name])
    assert out["eagle_dynamic"] == [1, 2]                  # acceptance-maximising: takes both
    assert out["specfit"] == [2]                           # 4 copies (4 ms) for 0.6 tokens do not pay
    assert out["ecospec"] == [2]
    # with every expert resident, SpecFit takes both nodes
    pol = make_policy("specfit", cfg.policy, np.random.default_rng(0))
    pol.configure(cfg.tree_policy)
    v = _view(tree, np.ones((L, E), dtype=bool), lm)
    pol.continue_drafting(v)
    assert pol.select(v) == [1, 2]


def test_predictor_recall():
    rng = np.random.default_rng(0)
    true = np.stack([rng.permutation(64)[:8] for _ in range(28 * 50)]).reshape(50, 28, 8)
    assert np.array_equal(RecallPredictor(1.0, 64, rng).predict(true), true)
    p0 = RecallPredictor(0.0, 64, rng).predict(true)
    assert not any(np.isin(p0[i, l], true[i, l]).any() for i in range(50) for l in range(28))
    p = RecallPredictor(0.7, 64, rng).predict(true)
    hit = np.mean([np.isin(p[i, l], true[i, l]).mean() for i in range(50) for l in range(28)])
    assert hit == pytest.approx(0.7, abs=0.02)


def test_window_samples_pool_rounds_per_block():
    # 4 rounds in 2 blocks: (2 tok in 1 s, 4 tok in 1 s) and (6 tok in 2 s, 2 tok in 2 s)
    w = window_samples([2, 4, 6, 2], [1.0, 1.0, 2.0, 2.0], [1.0, 2.0, 3.0, 5.0], 2)
    assert w["throughput_tok_s"] == [6 / 2, 8 / 4]
    assert w["energy_per_token_j"] == [3 / 6, 8 / 8]


# ------------------------------------------------------------------ the mode
@pytest.mark.parametrize("policy", TREE_POLICIES)
def test_cache_holding_every_expert_copies_nothing(trace_path, policy):
    s = run_simulation(_cfg(trace_path, f"run.policy={policy}", "moe.cache_capacity=1.0")).summary
    assert s["expert_h2d_bytes"] == 0.0 and s["expert_cache_hit_rate"] == 1.0
    assert s["generated_tokens"] == 24


def test_smaller_cache_copies_more_and_is_slower(trace_path, monkeypatch):
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)   # few windows keep the test short
    big = run_simulation(_cfg(trace_path, "run.policy=eagle_dynamic", "moe.cache_capacity=0.9")).summary
    small = run_simulation(_cfg(trace_path, "run.policy=eagle_dynamic", "moe.cache_capacity=0.1")).summary
    assert small["expert_h2d_bytes"] > big["expert_h2d_bytes"] > 0
    assert small["throughput_tok_s"] < big["throughput_tok_s"]
    # same trees, same selection: accepted length is a property of the trace, not of the cache
    assert small["accepted_length_per_round"] == big["accepted_length_per_round"]
    lo, hi = small["throughput_tok_s_ci95_low"], small["throughput_tok_s_ci95_high"]
    assert lo < small["throughput_tok_s"] < hi and lo < hi
    # the mode's own windows (blocks of rounds, moe.ci_windows=4) feed the project-wide CI fields
    assert small["windows"] == 4 and small["throughput_tok_s_ci95"] == [lo, hi]
    # the bytes copied are the misses x the expert size
    eb = small["mode_stats"]["memory_split"]["expert_bytes"]
    assert small["expert_h2d_bytes"] == pytest.approx(small["mode_stats"]["cache"]["misses"] * eb)


def test_run_windows_do_not_replay_a_tree_trace_twice(trace_path):
    one = run_simulation(_cfg(trace_path, "run.policy=specfit", "run.windows=1")).summary
    many = run_simulation(_cfg(trace_path, "run.policy=specfit", "run.windows=5")).summary
    assert many["generated_tokens"] == one["generated_tokens"] == 24
    assert many["trace"].endswith(".npz") and "tree" in Path(many["trace"]).name


def test_prefetched_experts_are_used_only_after_their_copy(trace_path):
    from ahasd_sim.modes import RunContext  # noqa: F401
    from ahasd_sim import simulation
    cfg = _cfg(trace_path, "run.policy=eagle_dynamic", "moe.prefetch=true", "moe.cache_capacity=0.3")
    s = simulation.run_simulation(cfg).summary
    assert s["expert_h2d_bytes_prefetch"] > 0


def test_refuses_other_expert_count_or_topk(trace_path):
    with pytest.raises(ConfigError, match="refusing to invent routing"):
        run_simulation(_cfg(trace_path, "run.target_model=qwen2.5-coder-1.5b-moefied-e128k8"))
    with pytest.raises(ConfigError, match="moe_offload needs a MoE"):
        run_simulation(_cfg(trace_path, "run.target_model=qwen2.5-coder-1.5b"))
    with pytest.raises(ConfigError, match="needs a tree policy"):
        run_simulation(_cfg(trace_path, "run.policy=svip"))


def test_cache_that_does_not_fit_gpu_memory_is_a_config_error(trace_path):
    with pytest.raises(ConfigError, match="moe.cache_capacity"):
        run_simulation(_cfg(trace_path, "gpu.memory_gib=3.2"))


def test_per_expert_loop_kernel_is_slower_than_fused(trace_path):
    f = run_simulation(_cfg(trace_path, "run.policy=eagle_dynamic", "gpu.moe_kernel=fused")).summary
    p = run_simulation(_cfg(trace_path, "run.policy=eagle_dynamic", "gpu.moe_kernel=per_expert_loop")).summary
    assert p["makespan_s"] > f["makespan_s"]
    assert p["expert_h2d_bytes"] == f["expert_h2d_bytes"]


@pytest.mark.parametrize("dev", ["npu", "pim"])
def test_mobile_drafter_runs_on_its_device(trace_path, dev):
    s = run_simulation(_cfg(trace_path, "npu.enabled=true", "pim.enabled=true", f"moe.drafter_device={dev}")).summary
    assert s["device_busy_s"][dev] > 0 and s["dynamic_energy_by_task_j"]["draft"].get("gpu", 0.0) == 0.0
    with pytest.raises(ConfigError, match="moe.drafter_device"):
        run_simulation(_cfg(trace_path, f"moe.drafter_device={dev}"))


def test_compare_policies_reports_h2d_and_accepted_length(trace_path, tmp_path):
    from ahasd_sim.compare import run_compare_policies
    table, out = run_compare_policies(_cfg(trace_path), list(TREE_POLICIES), "eagle_dynamic", str(tmp_path / "c"))
    assert list(table["policy"]) == list(TREE_POLICIES)
    assert table.set_index("policy").loc["eagle_dynamic", "throughput_vs_eagle_dynamic"] == 1.0
    for _, r in table.iterrows():
        s = __import__("json").loads((out / r["policy"] / "summary.json").read_text())
        assert r["expert_h2d_bytes"] == s["expert_h2d_bytes"]
        assert r["accepted_length_per_round"] == pytest.approx(s["accepted_tokens"] / s["verifications"])


def test_specfit_stop_rule_is_a_valid_bound_and_stops_when_levels_are_costly():
    """When SpecFit stops after level d, no subtree using level d+1 (paying one more draft level)
    beats the incumbent -- checked by brute force on random trees."""
    cfg = load_config(PLATFORM, [])
    rng = np.random.default_rng(5)
    stops = 0
    for trial in range(40):
        n = 9
        parent = [-1, 0, 0, 1, 1, 2, 3, 3, 5, 6]
        depth = [0, 1, 1, 2, 2, 2, 3, 3, 3, 4]
        q = [1.0] + list(rng.uniform(0.05, 0.9, n))
        experts = rng.integers(0, 6, size=(n + 1, 2, 2))
        tree = _tree(parent, [True] * (n + 1), experts, q=q)
        resident = rng.random((2, 6)) < 0.5
        lm = LinearVerifyModel(c0_s=1e-3, c1_s=2e-5, c2_s=1e-5, fetch_s=float(rng.uniform(1e-4, 2e-3)), n_layers=2)
        t_level = float(rng.uniform(1e-5, 2e-3))
        pol = make_policy("specfit", cfg.policy, np.random.default_rng(0))
        pol.configure(cfg.tree_policy)
        d = 1
        while True:
            view = TreeView(parent=tree.parent, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                            drafted_depth=d, predicted_experts=tree.experts, resident=resident, costs=lm,
                            draft_time_s=t_level * d, next_level_draft_s=t_level, recorded_depth=4)
            if not pol.continue_drafting(view) or d == 4:
                break
            d += 1
        if d < 4:
            stops += 1
            best_now = _ratio_of(tree, pol.select(view), resident, lm, t_level * d)
            cand = [v for v in range(1, n + 1) if tree.depth[v] <= d + 1]
            for r in range(len(cand) + 1):
                for sub in itertools.combinations(cand, r):
                    if is_ancestor_closed(tree.parent, sub):
                        assert _ratio_of(tree, sub, resident, lm, t_level * (d + 1)) <= best_now * (1 + 1e-9)
    assert stops > 5     # the rule does fire on these trees


def _ratio_of(tree, sel, resident, lm, draft_s):
    e = 1.0 + sum(tree.path_prob[v] for v in sel)
    return e / lm.cycle_time(len(sel), expert_union(tree.experts, sel), resident, draft_s)


def test_same_seed_same_summary(trace_path):
    a = run_simulation(_cfg(trace_path, "moe.predictor=recall", "moe.predictor_recall=0.6", "run.policy=ecospec")).summary
    b = run_simulation(_cfg(trace_path, "moe.predictor=recall", "moe.predictor_recall=0.6", "run.policy=ecospec")).summary
    assert a == b


# ------------------------------------------------------------------ issue 27: caches, copies, cost fits
def _cm():
    cfg = load_config(PLATFORM, [])
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    return MoeCostModel(Platform.build(cfg), target, target, cfg.moe)


def test_no_copy_evicts_an_expert_the_same_pass_still_needs():
    """Global LRU, capacity 3, resident at the start (LRU order, oldest first): (0, 7), (1, 1),
    (1, 0). The pass routes layer 0 to {0, 1, 2} and layer 1 to {0, 1}. Layer 0 misses 3 experts:
    the first evicts (0, 7) (not needed again); (1, 0) and (1, 1) are needed by layer 1 of the same
    pass, so the other two misses are streamed (copied, not kept). Layer 1 then hits both:
    hits 2, copies 3, evictions 1, streamed 2. Evicting them (pinning only layer 0) would make
    layer 1 miss both (hits 0, copies 5)."""
    cm = _cm()
    pop = np.zeros((28, 64))
    pop[1, 0], pop[1, 1], pop[0, 7] = 3.0, 2.0, 1.0
    cache = ExpertCache(28, 64, 3, "lru", scope="global", popularity=pop, fill=True)
    unions = [np.array([0, 1, 2]), np.array([0, 1])] + [np.array([], dtype=int)] * 26
    res = schedule_verify(cm, cache, unions, 2, 128, 0.0, 0.0)
    assert (res.hits, res.copied_experts, cache.evictions, cache.streamed) == (2, 3, 1, 2)
    assert (1, 0) in cache and (1, 1) in cache and (0, 7) not in cache


def test_activation_policy_evicts_the_least_recently_activated_over_passes():
    """Half-life 1 pass: counts halve per pass. Expert 0 used in passes 1, 2, 3 (count at pass 4:
    0.5^3 + 0.5^2 + 0.5 = 0.875), expert 1 in pass 3 only (0.5), expert 2 in pass 1 only (0.125).
    In pass 4 (capacity 3) a miss evicts expert 2 (lowest count); the next miss, with the new
    expert 3 pinned, evicts 1 (0.5 < 0.875) -- LRU would evict 0, used before 1 in pass 3."""
    c = ExpertCache(1, 8, 3, "activation", fill=False, activation_half_life_passes=1.0)
    for p, used in enumerate(([0, 2], [0], [0, 1]), start=1):
        c.begin_pass()
        for e in used:
            if not c.access(0, e):
                c.insert(0, e, 0.0)
    c.begin_pass()
    assert c.activation((0, 0)) == pytest.approx(0.875) and c.activation((0, 2)) == pytest.approx(0.125)
    c.access(0, 3); c.insert(0, 3, 0.0)
    assert (0, 2) not in c
    c.access(0, 4); c.insert(0, 4, 0.0, pinned={(0, 3)})
    assert (0, 1) not in c and (0, 0) in c          # LRU would have evicted 0 (used before 1 in pass 3)


def test_back_to_back_copies_equal_the_analytic_burst():
    """One layer, n missing experts of b = 1,290,240 B, the stream idle: the copies end at
    dense_end + iso + (n - 1) * b2b with iso = max(12, 6.72 + b / 55.3 GB/s) = 30.05 us and
    b2b = max(12, 3.53 + 23.33) = 26.86 us (H200 config): n = 4 -> 30.05 + 3 x 26.86 = 110.6 us.
    The same holds for the link's burst form across sizes."""
    cm = _cm()
    link = cm.link
    b = cm.expert_bytes
    assert cm.copy_s * 1e6 == pytest.approx(6.72 + b / 55.3e3, rel=1e-9)
    assert cm.copy_b2b_s * 1e6 == pytest.approx(3.53 + b / 55.3e3, rel=1e-9)
    for n in (1, 4, 17):
        cache = ExpertCache(28, 64, 0, "lru", fill=False)
        unions = [np.arange(n)] + [np.array([], dtype=int)] * 27
        res = schedule_verify(cm, cache, unions, 1, 128, 0.0, 0.0)
        d_end = res.layers[0].dense_end_s
        assert res.layers[0].copy_end_s - d_end == pytest.approx(link.burst_transfer_time_s(b, n), rel=1e-12)
    assert link.burst_transfer_time_s(b, 4) * 1e6 == pytest.approx(30.05 + 3 * 26.86, abs=0.02)
    for nbytes in (1e3, 3.2e5, 9.44e6):     # tiny copies keep the per-copy latency floor
        assert link.back_to_back_transfer_time_s(nbytes) == pytest.approx(
            max(12e-6, 3.53e-6 + nbytes / 55.3e9), rel=1e-12)


def test_specfit_cycle_model_matches_the_pass_it_predicts(trace_path):
    """Recall 1, no prefetch, overlap none: the policy's linear cycle time on the true routing
    and the residency it saw equals the simulated pass (within the dense roofline's nonlinearity),
    for a per-layer and a global cache -- the cache keeps what the pass needs."""
    for scope in ("per_layer", "global"):
        res = run_simulation(_cfg(trace_path, f"moe.cache_scope={scope}", "moe.cache_capacity=0.1"))
        err = res.summary["mode_stats"]["verify_time_model_error"]
        assert err["n"] > 0 and abs(err["worst"]) < 0.01, (scope, err)


def test_validate_moe_fits_reproduce_the_config_and_meet_the_targets():
    """The typed H200 values are what validate --moe fits (rounded), and the out-of-sample median
    errors meet the issue's goals: copies within 10%, MoE steps within 15% per kernel."""
    from ahasd_sim.validate_moe import validate_moe
    out, fitted = validate_moe()
    cfg = load_config(PLATFORM, [])
    assert fitted["h2d.back_to_back_setup_us"] == pytest.approx(cfg.h2d.back_to_back_setup_us, abs=0.01)
    f, e, p = fitted["fused (fixed, per expert, per pair) us"]
    assert (f, e, p) == pytest.approx((cfg.gpu.moe_fused_fixed_us, cfg.gpu.moe_fused_per_expert_us,
                                       cfg.gpu.moe_fused_per_pair_us), abs=0.01)
    f, e, p = fitted["per_expert_loop (fixed, per expert, per pair) us"]
    assert (f, e, p) == pytest.approx((cfg.gpu.moe_loop_fixed_us, cfg.gpu.moe_loop_overhead_per_expert_us,
                                       cfg.gpu.moe_loop_per_pair_us), abs=0.01)
    oos = out[out["sample"] == "out"]
    assert oos[oos.what == "expert copies"].rel_error.abs().median() < 0.10
    for kernel in ("fused", "per_expert_loop"):
        assert oos[oos.kernel == kernel].rel_error.abs().median() < 0.15


# ------------------------------------------------------------------ issue 27: prediction, baselines
def test_learned_predictor_never_reads_the_routing_of_unverified_nodes(trace_path, monkeypatch):
    """The routing the policy sees for a round is the same whether or not that round's recorded
    routing of its draft nodes is scrambled: the learned predictor reads draft tokens and the
    routing of tokens already verified, never the target's routing of an unverified node."""
    import ahasd_sim.modes.moe.offload as mo
    seen: dict[tuple[bool, int], np.ndarray] = {}
    real_tree_of_round, real_predict = mo.tree_of_round, mo.MoeOffloadMode.predict
    state = {"scramble": False}

    def tree_of_round(tt, r):
        t = real_tree_of_round(tt, r)
        if state["scramble"] and r == 3:
            ex = np.random.default_rng(0).integers(0, 64, size=t.experts.shape)
            t = DraftTree(parent=t.parent, q_prob=t.q_prob, correct=t.correct, experts=ex, kv_len=t.kv_len,
                          index=t.index, extras=t.extras, recorded_accepted=t.recorded_accepted)
        return t

    def predict(self, tree):
        out = real_predict(self, tree)
        # the first pass of a round (later passes of the round follow its verified routing)
        seen.setdefault((state["scramble"], tree.index), out.copy())
        return out

    monkeypatch.setattr(mo, "tree_of_round", tree_of_round)
    monkeypatch.setattr(mo.MoeOffloadMode, "predict", predict)
    for scramble in (False, True):
        state["scramble"] = scramble
        run_simulation(_cfg(trace_path, "run.policy=specfit", "moe.predictor=learned"))
    assert np.array_equal(seen[(False, 3)], seen[(True, 3)])
    assert np.array_equal(seen[(False, 2)], seen[(True, 2)])
    # a later round may differ: round 3's verified routing (scrambled) feeds the recent term
    # the recall model, by contrast, is built from the truth (an oracle at recall 1)
    state["scramble"] = False


def test_learned_predictor_scores_recall_and_precision_and_learns_token_routing():
    """Two tokens seen in held-out data: token 5 always routes layer 0 to {1, 2}, token 9 to {3, 4}
    (top-2 of 8 experts, 1 layer). Predicting [5, 9] returns exactly those; scoring against a truth
    of {1, 2} and {3, 6} gives node recall 3/4 and union recall 3/4, precision 3/4."""
    from ahasd_sim.moe.predictor import LearnedPredictor
    routing = np.array([[[1, 2]], [[1, 2]], [[3, 4]]])
    lp = LearnedPredictor(np.array([5, 5, 9]), routing, n_experts=8, w_recent=0.0)
    pred = lp.predict_tokens([5, 9])
    assert [sorted(p[0]) for p in pred] == [[1, 2], [3, 4]]
    lp.score(pred, np.array([[[1, 2]], [[3, 6]]]))
    st = lp.stats()
    assert st["node_recall"] == pytest.approx(0.75) and st["union_recall"] == pytest.approx(0.75)
    assert st["union_precision"] == pytest.approx(0.75)


def test_next_layer_guess_pays_for_wrong_copies():
    """overlap next_layer, an empty per-layer cache of 7 experts per layer, 4 experts per layer
    needed. A guess that is always wrong (expert 63, never routed): every layer still copies its
    4 true experts on demand (112) plus one wasted copy per guessed layer (27): 139 copies, and
    the pass ends later than with the oracle guess (112 copies, 0 wasted). A guess the cache
    cannot keep is not made (capacity 0: no guessed copies at all)."""
    cm = _cm()
    unions = [np.arange(4) for _ in range(28)]
    ora = schedule_verify(cm, ExpertCache(28, 64, 196, "lru", fill=False), unions, 4, 256, 0.0, 0.0, "next_layer")
    bad = schedule_verify(cm, ExpertCache(28, 64, 196, "lru", fill=False), unions, 4, 256, 0.0, 0.0, "next_layer",
                          prefetch_guess=lambda layer, u: {63})
    assert (bad.wasted_prefetch, bad.copied_experts) == (27, 139)
    assert (ora.wasted_prefetch, ora.copied_experts) == (0, 112)
    assert bad.end_s > ora.end_s
    none = schedule_verify(cm, ExpertCache(28, 64, 0, "lru", fill=False), unions, 4, 256, 0.0, 0.0, "next_layer")
    assert none.copied_experts == 112


def test_expert_budget_caps_the_copies_each_layer_adds():
    """1 layer, 8 experts, top-2, nothing resident. Root routes {0, 1}; node 1 (P 0.9) {2, 3},
    node 2 (P 0.8) {4, 5}, node 3 (child of 1, P 0.5) {2, 6}. Budget 3 copies beyond the root's:
    node 1 adds 2 (total 2), node 2 would make 4 (skipped), node 3 adds 1 (total 3): {1, 3}."""
    parents = np.array([-1, 0, 0, 1])
    q = np.array([1.0, 0.9, 0.8, 0.5 / 0.9])
    pred = np.array([[[0, 1]], [[2, 3]], [[4, 5]], [[2, 6]]])
    lm = LinearVerifyModel(c0_s=1e-3, c1_s=1e-6, c2_s=1e-6, fetch_s=1e-3, n_layers=1)
    tree = DraftTree(parent=parents, q_prob=q, correct=np.ones(4, bool), experts=pred)
    view = TreeView(parent=parents, q_prob=q, path_prob=tree.path_prob, depth=tree.depth, drafted_depth=2,
                    predicted_experts=pred, resident=np.zeros((1, 8), bool), costs=lm, draft_time_s=0.0,
                    next_level_draft_s=0.0, recorded_depth=2)
    from ahasd_sim.moe.config import TreePolicyConfig
    pc = TreePolicyConfig()
    pc.expert_budget.budget_experts_per_layer = 3
    pol = make_policy("expert_budget", None, np.random.default_rng(0))
    pol.configure(pc)
    assert pol.select(view) == [1, 3]


def test_moe_compare_tunes_baselines_on_rounds_it_does_not_report(tmp_path):
    """The shipped tree trace: tuning, reported and profile rounds are disjoint; every row replays
    the same reported rounds (paired windows); the tuned EAGLE and budget are the tuning-slice
    maxima of their grids; the best baseline ratio is 1 for itself."""
    from ahasd_sim import compare_moe as mc
    cfg = load_config(ROOT / "hw_configs" / "moe_offload.yaml", ["run.timeline=false"])
    grid = {"eagle_tuned": mc.candidates()["eagle_tuned"][:4:3], "expert_budget_tuned":
            mc.candidates()["expert_budget_tuned"][:2], "autoregressive": mc.candidates()["autoregressive"],
            "specfit_blind_tuned": mc.candidates()["specfit_blind_tuned"][:1]}
    table, tune, out = mc.run_compare_moe(cfg, tmp_path / "cmp", n_boot=200, grid=grid, references=False)
    t = table.iloc[0]
    lo, hi = (int(x) for x in t.reported_rounds.split("-"))
    tlo, thi = (int(x) for x in t.tuning_rounds.split("-"))
    plo, phi = (int(x) for x in t.profile_rounds.split("-"))
    assert lo == 0 and hi == tlo and thi == plo and phi == 199
    for fam in ("eagle_tuned", "expert_budget_tuned"):
        g = tune[tune.family == fam]
        assert table.set_index("row").loc[fam, "config"] == g.loc[g.tuning_throughput_tok_s.idxmax(), "config"]
    best = t.best_baseline.split(" ")[0]
    assert table.set_index("row").loc[best, "vs_best_baseline"] == pytest.approx(1.0)
    # single-candidate families are not tuned but still measured on the tuning rounds for the choice
    g = tune.set_index("family")
    assert g.loc[best, "tuning_throughput_tok_s"] == tune.tuning_throughput_tok_s.max()
    assert table.set_index("row").loc["specfit_blind_tuned", "vs_expert_blind"] == pytest.approx(1.0)
    for r in table.itertuples():
        assert r.ci95[0] <= r.throughput_tok_s <= r.ci95[1]
    assert (tmp_path / "cmp" / "compare.csv").is_file() and (tmp_path / "cmp" / "tuning.csv").is_file()


def test_speculation_gate_goes_autoregressive_while_speculation_loses_and_probes():
    """Gate on, probe every 2 gated rounds. Round 1 (no estimate): drafts; its rate 2 tokens /
    (1 + 1) s = 1 tok/s. A root-only round of the cost model takes c0 + c1 + 8 root items x
    (c2 + fetch) = 0.1 + 0.1 + 8 x 0.05 = 0.6 s -> 1.67 tok/s > 1: the next 2 rounds are gated
    (select = [], no drafting), the third probes; a root-only round observed at 0.5 s (2 tok/s)
    replaces the model estimate."""
    from ahasd_sim.moe.config import TreePolicyConfig
    pc = TreePolicyConfig()
    pc.specfit.speculation_gate, pc.specfit.gate_probe_rounds, pc.specfit.gate_ema = True, 2, 1.0
    pol = make_policy("specfit", None, np.random.default_rng(0))
    pol.configure(pc)
    lm = LinearVerifyModel(c0_s=0.1, c1_s=0.1, c2_s=0.05, fetch_s=0.0, n_layers=1)
    parents = np.array([-1, 0])
    pred = np.array([[[0, 1, 2, 3, 4, 5, 6, 7]], [[0, 1, 2, 3, 4, 5, 6, 7]]])
    tree = DraftTree(parent=parents, q_prob=np.array([1.0, 0.9]), correct=np.ones(2, bool), experts=pred)

    def view(depth, draft_s):
        return TreeView(parent=parents, q_prob=tree.q_prob, path_prob=tree.path_prob, depth=tree.depth,
                        drafted_depth=depth, predicted_experts=pred, resident=np.zeros((1, 8), bool), costs=lm,
                        draft_time_s=draft_s, next_level_draft_s=0.0, recorded_depth=1)
    assert pol.wants_draft(view(0, 0.0))
    pol.select(view(1, 1.0))
    pol.on_tree_verified(1, 1, 1, 1.0)                       # 2 tokens in 2 s
    v0 = view(0, 0.0)
    assert not pol.wants_draft(v0) and pol.select(v0) == []
    pol.on_tree_verified(0, 0, 0, 0.5)                       # root-only: 2 tok/s
    assert pol._ar_rate == pytest.approx(2.0)
    assert not pol.wants_draft(view(0, 0.0))
    assert pol.wants_draft(view(0, 0.0))                     # the probe after 2 gated rounds
    assert pol.stats()["gated_rounds"] == 2
