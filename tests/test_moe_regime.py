"""MoE offload in SpecFit's regime: every committed token replayed (autoregressive and every
policy), EAGLE-head draft cost, the calibrated expert-cost estimate, memory-forced offload with
synthetic routing, CPU experts."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ahasd_sim.config.loader import load_config
from ahasd_sim.hw.platform import Platform
from ahasd_sim.moe.cost import MoeCostModel
from ahasd_sim.moe.tree import DraftTree, accepted_path, reroot
from ahasd_sim.simulation import run_simulation
from ahasd_sim.traces.tree import example_tree_trace, write_tree_trace
from ahasd_sim.workload.models import get_model, with_precision
from test_moe_offload import _cfg, trace_path  # noqa: F401  (the MoEfied-1.5B tree trace fixture and its config)

ROOT = Path(__file__).resolve().parents[1]
PLATFORM = ROOT / "hw_configs" / "platform_server_h200_pcie5.yaml"
L, E, K = 28, 64, 8


def _experts(groups):
    """[n, L, K]: node i routes every layer to experts 8*g .. 8*g+7 (g = groups[i])."""
    return np.array([[list(range(8 * g, 8 * g + 8))] * L for g in groups], dtype=np.int64)


def _hand_trees():
    """Round 0: root (group 0), node 1 (correct, group 1) -> node 2 (correct, group 0); node 3
    (wrong, child of the root, group 2); commits 3 (2 accepted + bonus). Round 1: root (group 1),
    node 1 wrong; commits 1."""
    t0 = DraftTree(parent=np.array([-1, 0, 1, 0]), q_prob=np.array([1.0, 0.9, 0.8, 0.1]),
                   correct=np.array([True, True, True, False]), experts=_experts([0, 1, 0, 2]), kv_len=100,
                   index=0, extras={"expanded": np.array([True, True, False, False]),
                                    "tok": np.array([5, 6, 7, 8]), "n_commit_recorded": 3}, recorded_accepted=2)
    t1 = DraftTree(parent=np.array([-1, 0]), q_prob=np.array([1.0, 0.5]), correct=np.array([True, False]),
                   experts=_experts([1, 3]), kv_len=103, index=1,
                   extras={"expanded": np.array([True, False]), "tok": np.array([9, 10]), "n_commit_recorded": 1},
                   recorded_accepted=0)
    return [t0, t1]


def test_accepted_path_and_reroot():
    t0 = _hand_trees()[0]
    assert accepted_path(t0) == [1, 2]
    sub = reroot(t0, 1, 1)
    assert list(sub.parent) == [-1, 0] and sub.kv_len == 101 and sub.extras["n_commit_recorded"] == 2
    assert list(sub.q_prob) == [1.0, 0.8] and list(sub.extras["tok"]) == [6, 7]
    assert np.array_equal(sub.experts, t0.experts[[1, 2]])


def test_autoregressive_replay_decodes_every_committed_token(trace_path, monkeypatch):
    """Autoregressive decoding of the two hand rounds forwards every committed token's input:
    round 0 the root (experts A = 0..7 in every layer), node 1 (B = 8..15), node 2 (A); round 1
    its root (B) -- 4 single-token steps at KV 100, 101, 102, 103 committing 4 tokens (the
    recorded-roots replay took 2 steps). Per-layer LRU of 16 experts (448 of 1792), empty at the
    start: steps 1 and 2 copy 8 experts per layer, steps 3 and 4 hit all 8: 448 copies, 448 hits.
    Time of a step, per layer: dense + [copies: one isolated copy + 7 pipelined] + expert compute
    (8 experts, 1 token); + the head once."""
    import ahasd_sim.modes.moe.offload as mo
    trees = _hand_trees()
    monkeypatch.setattr(mo, "tree_of_round", lambda tt, r: trees[r])
    cfg = _cfg(trace_path, "run.policy=no_draft", "moe.cache_initial=empty", "moe.cache_capacity=448",
               "moe.cache_capacity_unit=experts", "moe.trace_end_round=2", "run.generated_tokens=60",
               "moe.predictor=recall")
    res = run_simulation(cfg)
    s = res.summary
    target = with_precision(get_model("qwen2.5-coder-1.5b-moefied-e64k8"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    expert = cm.expert_time_s(1, 8)
    copies = cm.copy_s + 7 * cm.copy_b2b_s
    want = 0.0
    for kv, miss in ((100, True), (101, True), (102, False), (103, False)):
        dense, head = cm.dense_times(1, kv)
        want += L * (dense + expert + (copies if miss else 0.0)) + head
    assert s["generated_tokens"] == 4 and s["mode_stats"]["cache"]["misses"] == 448
    assert s["mode_stats"]["cache"]["hits"] == 448 and s["verify_passes"] == 4
    assert s["decode_makespan_s"] == pytest.approx(want, rel=1e-12)


def test_every_policy_commits_every_recorded_token(trace_path):
    """Every policy generates the same tokens on the same rounds: a pass that commits fewer
    tokens than recorded continues from its last committed node, so the windows pair exactly."""
    toks = {}
    for pol in ("no_draft", "eagle_dynamic", "specfit", "ecospec"):
        res = run_simulation(_cfg(trace_path, f"run.policy={pol}", "moe.trace_end_round=10",
                                  "run.generated_tokens=70"))
        toks[pol] = list(res.windows.generated_tokens)
    assert len({tuple(v) for v in toks.values()}) == 1


# ------------------------------------------------------------------ calibrated expert-cost estimate
def _top_n(tree, n):
    order = sorted(range(1, len(tree.parent)), key=lambda v: (-tree.path_prob[v], tree.depth[v], v))
    chosen: set[int] = set()
    for v in order:
        if len(chosen) >= n:
            break
        if tree.parent[v] == 0 or tree.parent[v] in chosen:
            chosen.add(v)
    return [0, *sorted(chosen)]


def test_calibrated_union_size_matches_the_truth_on_held_out_rounds():
    """The shipped tree trace (real MoEfied routing), the learned predictor trained on the last 32
    rounds. The calibrator learns on rounds 0-79 (the verified tokens of top-N subtrees, N cycling
    4, 8, 16, 32), then is frozen; on held-out rounds 80-159 its expected union size (sum over
    layers and rounds) is within 15% of the true one at every N, where the predictor's raw union
    is off by more than 40% (it under-sizes unions: union recall ~0.3)."""
    from ahasd_sim.modes.moe.offload import tree_of_round
    from ahasd_sim.moe.calibration import UnionCalibrator
    from ahasd_sim.moe.predictor import LearnedPredictor
    from ahasd_sim.traces.tree import load_tree_trace
    tt = load_tree_trace(ROOT / "traces" / "qwc-0.5b-1.5b_tree_moe.npz")
    n = len(tt)
    a, b = int(tt.round_node_offset[n - 32]), int(tt.round_node_offset[n - 1] + tt.round_n_nodes[n - 1])
    lp = LearnedPredictor(tt.node_tok[a:b], tt.node_moe_ids[a:b], tt.n_experts)
    cal = UnionCalibrator(tt.moe_k, half_life_passes=64)
    resident = np.zeros((tt.n_layers, tt.n_experts), dtype=bool)
    sizes = (4, 8, 16, 32)
    for r in range(80):
        tr = tree_of_round(tt, r)
        rows = _top_n(tr, sizes[r % 4])
        cal.observe(lp.predict_tokens(tr.extras["tok"])[rows], tr.experts[rows], resident)
        lp.observe_verified(tr.experts[rows])
    assert cal.union_scale > 2.0 and cal.miss_scale > 1.5
    for size in sizes:
        est = raw = true = 0.0
        for r in range(80, 160):
            tr = tree_of_round(tt, r)
            rows = _top_n(tr, size)
            pred = lp.predict_tokens(tr.extras["tok"])[rows]
            est += cal.expected_union(pred)
            raw += sum(len(np.unique(pred[:, layer])) for layer in range(tt.n_layers))
            true += sum(len(np.unique(tr.experts[rows][:, layer])) for layer in range(tt.n_layers))
        assert abs(est / true - 1) < 0.15, (size, est / true)
        assert raw / true < 0.6, (size, raw / true)


def test_calibrator_hand_case_and_oracle_is_exact():
    """k 2, 1 layer, 4 experts, expert 0 resident. Verified rows: root predicted {0, 1} true {0, 1};
    a node predicted {0, 1} true {2, 3}. Predicted union 2 (adds 0 beyond k), true 4 (adds 2):
    no predicted growth yet -> union_scale stays 1 (no denominator). Misses: predicted {1} = 1,
    true {1, 2, 3} = 3 -> miss_scale 3. A second pass, node predicted {2, 3} true {2, 3}: union
    sums pred 0 + 2, true 2 + 2 -> 2. With exact predictions both scales are 1."""
    from ahasd_sim.moe.calibration import UnionCalibrator
    res = np.array([[True, False, False, False]])
    c = UnionCalibrator(2, half_life_passes=1e9)
    c.observe(np.array([[[0, 1]], [[0, 1]]]), np.array([[[0, 1]], [[2, 3]]]), res)
    assert (c.union_scale, c.miss_scale) == (1.0, 3.0)
    c.observe(np.array([[[0, 1]], [[2, 3]]]), np.array([[[0, 1]], [[2, 3]]]), res)
    assert c.union_scale == pytest.approx(2.0)
    exact = UnionCalibrator(2)
    for _ in range(3):
        exact.observe(np.array([[[0, 1]], [[2, 3]]]), np.array([[[0, 1]], [[2, 3]]]), res)
    assert (exact.union_scale, exact.miss_scale) == (1.0, 1.0)


@pytest.mark.parametrize("policy", ["specfit", "ecospec", "eagle_dynamic", "expert_budget", "no_draft"])
def test_no_policy_reads_the_routing_of_an_unverified_node(trace_path, monkeypatch, policy):
    """Learned predictor, calibrated costs, next-layer prefetch: scrambling the recorded routing of
    every trace node no pass verified (neither a pass's root nor a selected node) changes nothing
    in the run -- the policies, the predictor, the calibrator and the cache never read it."""
    import ahasd_sim.modes.moe.offload as mo
    modes = []
    real_init, real_tree = mo.MoeOffloadMode.__init__, mo.tree_of_round

    def init(self, *a, **k):
        real_init(self, *a, **k)
        modes.append(self)
    monkeypatch.setattr(mo.MoeOffloadMode, "__init__", init)
    sets = [f"run.policy={policy}", "moe.predictor=learned", "moe.overlap=next_layer", "moe.prefetch=false",
            "moe.trace_end_round=8", "run.generated_tokens=70"]
    a = run_simulation(_cfg(trace_path, *sets)).summary
    verified = set(modes[-1].verified_nodes)
    first, last = 0, 8

    def tree_of_round(tt, r):
        t = real_tree(tt, r)
        if first <= r < last:
            ex = t.experts.copy()
            rng = np.random.default_rng(r)
            for i, g in enumerate(t.extras["gid"]):
                if int(g) not in verified:
                    ex[i] = rng.integers(0, E, size=ex[i].shape)
            t = DraftTree(parent=t.parent, q_prob=t.q_prob, correct=t.correct, experts=ex, kv_len=t.kv_len,
                          index=t.index, extras=t.extras, recorded_accepted=t.recorded_accepted)
        return t
    monkeypatch.setattr(mo, "tree_of_round", tree_of_round)
    b = run_simulation(_cfg(trace_path, *sets)).summary
    assert len(verified) > 0
    for key in ("decode_makespan_s", "generated_tokens", "expert_h2d_bytes", "expert_cache_hit_rate"):
        assert a[key] == b[key], key
    assert a["policy_stats"] == b["policy_stats"]
    verified = set()                      # the test can fail: scrambling every node changes the run
    c = run_simulation(_cfg(trace_path, *sets)).summary
    assert c["decode_makespan_s"] != a["decode_makespan_s"]


# ------------------------------------------------------------------ CPU experts
def _qwen3_cm(*sets):
    cfg = load_config(ROOT / "hw_configs" / "moe_offload_qwen3_laptop.yaml",
                      ["moe.weight_bytes_per_param=2", *sets])
    target = with_precision(get_model("qwen3-30b-a3b"), 2.0, 2.0)
    return MoeCostModel(Platform.build(cfg), target, target, cfg.moe, cpu=cfg.host_cpu), cfg


def test_cpu_expert_time_is_bytes_over_ddr_bandwidth_for_one_expert():
    """Qwen3-30B-A3B BF16 expert: 3 x 2048 x 768 x 2 B = 9,437,184 B. Dual-channel DDR5-5600 peak
    89.6 GB/s x 0.75 = 67.2 GB/s -> 140.43 us at one token (9.44 MFLOP / 600 GFLOP/s = 15.7 us
    does not bind). At 64 tokens the FLOPs bind: 64 x 2 x 4,718,592 / 600e9 = 1006.6 us."""
    cm, cfg = _qwen3_cm()
    assert cm.expert_bytes == 3 * 2048 * 768 * 2
    assert cm.cpu_expert_time_s(1) == cm.expert_bytes / (89.6e9 * 0.75)
    assert cm.cpu_expert_time_s(1) == pytest.approx(140.43e-6, rel=1e-4)
    assert cm.cpu_expert_time_s(64) == 64 * 2 * 4_718_592 / 600e9


def test_cpu_experts_run_the_misses_on_the_cpu_in_parallel_with_the_gpu():
    """One layer used (the rest empty), 1 token, union {0, 1, 2}, expert 0 resident: the GPU runs
    expert 0 after the dense part; the CPU runs 1 and 2 after the hand-off, one after another:
    layer end = dense + max(GPU expert time(1 expert, 1 pair), hand-off + 2 x CPU expert time).
    Nothing is copied; the cache is unchanged."""
    from ahasd_sim.moe.cache import ExpertCache
    from ahasd_sim.moe.cost import schedule_verify
    cm, _ = _qwen3_cm("moe.expert_execution=cpu")
    pop = np.zeros((48, 128))
    pop[0, 0] = 1.0
    cache = ExpertCache(48, 128, 48, "lru", "per_layer", pop, fill=True)
    unions = [np.array([0, 1, 2])] + [np.array([], dtype=int)] * 47
    res = schedule_verify(cm, cache, unions, 1, 100, 0.0, 0.0, execution="cpu", token_counts=[{0: 1, 1: 1, 2: 1}] + [{}] * 47)
    dense, head = cm.dense_times(1, 100)
    cpu = cm.cpu_handoff_s(1) + 2 * cm.cpu_expert_time_s(1)
    layer0 = dense + max(cm.expert_time_s(1, 1, 1), cpu)
    assert res.copied_experts == 0 and res.cpu_experts == 2 and (res.hits, res.misses) == (1, 2)
    assert res.end_s == pytest.approx(layer0 + 47 * dense + head, rel=1e-12)
    assert res.cpu_busy_s == pytest.approx(2 * cm.cpu_expert_time_s(1), rel=1e-12)


def test_mixed_execution_copies_only_where_a_copy_beats_the_cpu():
    """INT4 expert 2.36 MB: a copy at ~23 GB/s (~110 us) never beats the CPU's 35 us at 1 token;
    with 400 tokens on one expert the CPU needs 400 x 9.44 MFLOP / 600 GFLOP/s = 6.3 ms, so mixed
    copies it."""
    from ahasd_sim.moe.cache import ExpertCache
    from ahasd_sim.moe.cost import schedule_verify
    cfg = load_config(ROOT / "hw_configs" / "moe_offload_qwen3_laptop.yaml", ["moe.expert_execution=mixed"])
    target = with_precision(get_model("qwen3-30b-a3b"), 0.5, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe, cpu=cfg.host_cpu)
    assert cm.copy_s > cm.cpu_expert_time_s(1) and cm.copy_s < cm.cpu_expert_time_s(400)
    for n, copies in ((1, 0), (400, 1)):
        cache = ExpertCache(48, 128, 480, "lru", "per_layer", None, fill=False)
        unions = [np.array([5])] + [np.array([], dtype=int)] * 47
        res = schedule_verify(cm, cache, unions, n, 100, 0.0, 0.0, execution="mixed",
                              token_counts=[{5: n}] + [{}] * 47)
        assert (res.copied_experts, res.cpu_experts) == (copies, 1 - copies)


# ------------------------------------------------------------------ composed offloaded pass (measure moe --passes)
def test_pass_points_and_the_model_of_a_composed_pass():
    """The points cover a decode step and tree verifications, each with 0, a quarter and all of
    the layer's experts missing. The model's pass with m missing experts per layer takes exactly
    L x (one isolated + (m - 1) pipelined copies) longer than the all-resident pass (overlap none:
    the expert compute of each layer waits for its copies; the next layer's copies find the
    stream idle)."""
    from ahasd_sim.measure.moe_gpu import pass_points
    from ahasd_sim.validate_moe import model_pass_s
    pts = pass_points(False, 8, 128)
    assert {n for n, _, _ in pts} == {1, 8, 32} and all(m in (0, u // 4, u) for _, u, m in pts)
    cfg_path = str(PLATFORM)
    cfg = load_config(PLATFORM, ["moe.weight_bytes_per_param=2"])
    target = with_precision(get_model("qwen3-30b-a3b"), 2.0, 2.0)
    cm = MoeCostModel(Platform.build(cfg), target, target, cfg.moe)
    base = model_pass_s(cfg_path, 8, 21, 0, 1024)
    assert model_pass_s(cfg_path, 8, 21, 5, 1024) - base == pytest.approx(48 * (cm.copy_s + 4 * cm.copy_b2b_s),
                                                                           rel=1e-9)


def test_synthetic_routing_is_said_in_the_run_summary_and_keeps_the_trees():
    """A run's console summary names synthetic routing; the synthetic trace keeps the recorded
    trees (parents, verdicts, tokens) and draws top-k ids for the target's shape, distinct per
    (node, layer), reproducibly."""
    from ahasd_sim.checks import summary_trace_line
    from ahasd_sim.moe.synthetic import synthetic_routing
    assert "SYNTHETIC" in summary_trace_line({"trace": "t.npz", "mode_stats": {"routing": "synthetic"}})
    assert "SYNTHETIC" not in summary_trace_line({"trace": "t.npz", "mode_stats": {"routing": "recorded"}})
    h, c = example_tree_trace(n_prompts=1, n_rounds=4, depth=2, top_k=2, drf_top_k=2, n_layers=2, moe_k=2,
                              n_experts=4, seed=1)
    from ahasd_sim.traces.tree import TreeTrace
    tt = TreeTrace(c, h)
    a = synthetic_routing(tt, 3, 16, 4, 0.5, 0.45, 7)
    assert a.shape == (len(c["node_tok"]), 3, 4) and np.array_equal(a, synthetic_routing(tt, 3, 16, 4, 0.5, 0.45, 7))
    assert all(len(set(row)) == 4 for row in a.reshape(-1, 4).tolist()) and a.min() >= 0 and a.max() < 16
    full = synthetic_routing(tt, 3, 16, 4, 1.0, 0.45, 7)      # locality 1: a child repeats its parent's experts
    par = c["node_parent"].astype(int)
    off = c["round_node_offset"].astype(int)
    for r in range(len(off)):
        o, n = int(off[r]), int(c["round_n_nodes"][r])
        for j in range(1, n):
            assert sorted(full[o + j, 0]) == sorted(full[o + par[o + j], 0])
