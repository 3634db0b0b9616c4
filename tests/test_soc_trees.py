"""Draft trees on the mobile SoC: one-pass tree verification costs, the hardware-aware
selector against brute force, and the KV of the accepted path only."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import ROOT

from ahasd_sim.config import load_config
from ahasd_sim.hw.platform import Platform
from ahasd_sim.modes.costs import StepCosts
from ahasd_sim.modes.soc.tree_sync import kept_kv_nodes, tree_mask
from ahasd_sim.moe.tree import DraftTree, accepted_length
from ahasd_sim.policies.tree_select import best_by_size, brute_force
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import OpKind

PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"
MATRIX = (OpKind.GEMM, OpKind.GEMV)


def _costs(*sets):
    cfg = load_config(PLATFORM, ["pim.partition_policy=striped", *sets])
    return StepCosts(Platform.build(cfg), get_model("llama2-7b"), get_model("llama2-13b"), cfg), cfg


@pytest.mark.parametrize("k", [1, 4, 8])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 17, 65])
def test_tree_verify_on_k_vector_pim_reads_the_weights_ceil_n_over_k_times(k, n):
    """A pass over n tree tokens on PIM units holding k input vectors re-reads every weight
    matrix once per k vectors: the bank bytes of the weight ops are ceil(n / k) x the target's
    matrix weights (LLaMA2-13B has no biases, so rows x cols x 1 byte each)."""
    costs, _ = _costs(f"pim.vectors_per_weight_read={k}")
    ops = [o for o in costs.ops(costs.target, n, costs._kv(256)) if o.kind in MATRIX and o.weight_bytes > 0]
    pim = costs.p.pim
    read = sum(pim.bytes_read(o) * o.layer_repeat for o in ops)
    weights = sum(o.weight_bytes * o.layer_repeat for o in ops)
    assert read == math.ceil(n / k) * weights
    # and the tree pass is what tree_pim runs
    assert costs.tree_verify(n, 256, "pim") is costs.preverify(n, 256)


@pytest.mark.parametrize("n", [1, 8, 33, 65])
def test_tree_verify_on_the_npu_streams_the_weights_once(n):
    """On the NPU a pass over n <= 65 tree tokens streams every weight once (activations fit
    half of the scratchpad, so no chunking): bus bytes = the weights + the KV read + nothing
    that grows with the weights per token."""
    costs, _ = _costs()
    npu = costs.p.npu
    ops = costs.ops(costs.target, n, costs._kv(256))
    for o in ops:
        if o.kind in MATRIX and o.weight_bytes > 0:
            assert npu.analyse(o, costs.bus_bw).weight_reads == 1, o.name
    t = costs.tree_verify(n, 256, "npu")
    weights = sum(o.weight_bytes * o.layer_repeat for o in ops)
    kv = sum(o.kv_bytes * o.layer_repeat for o in ops)
    assert t.offchip_bytes >= weights
    assert t.offchip_bytes - weights - kv < 0.01 * weights


def _random_tree(rng, n):
    parent = np.array([-1] + [int(rng.integers(0, v)) for v in range(1, n + 1)])
    q = np.concatenate([[1.0], rng.uniform(0.05, 1.0, n)])
    correct = np.concatenate([[True], rng.random(n) < 0.6])
    return DraftTree(parent=parent, q_prob=q, correct=correct, experts=np.zeros((n + 1, 1, 1), dtype=np.int64))


@pytest.mark.parametrize("seed", range(25))
def test_hw_selector_matches_brute_force_on_small_trees_for_the_soc_cost(seed):
    """SoC cost: drafting so far + a verify pass of n nodes, either the NPU's (affine in n, one
    weight stream) or a k-vector PIM's step function a + b * ceil((n + 1) / k). best_by_size
    finds the same best E/T as enumerating every ancestor-closed subtree."""
    rng = np.random.default_rng(seed)
    tree = _random_tree(rng, int(rng.integers(1, 10)))
    nodes = list(range(1, len(tree.parent)))
    k = int(rng.integers(1, 5))
    a, b, draft = rng.uniform(0.5, 2), rng.uniform(0.05, 1.0), rng.uniform(0, 1)
    for t_of_n in (lambda n: draft + a + b * math.ceil((n + 1) / k), lambda n: draft + a + 0.1 * b * (n + 1)):
        r, sel = best_by_size(nodes, tree.parent, tree.path_prob, tree.depth, t_of_n)
        rb, selb = brute_force(nodes, tree.parent, tree.path_prob, lambda s: t_of_n(len(s)))
        assert r == pytest.approx(rb, rel=1e-12)
        assert (1 + sum(tree.path_prob[v] for v in sel)) / t_of_n(len(sel)) == pytest.approx(rb, rel=1e-12)


def test_kv_of_rejected_branches_is_discarded():
    """Root 0; 1 (rejected) and 2 (accepted) are its children; 3 is 1's child (accepted by the
    target's verdict at 1's context, but 1 was rejected), 4 is 2's child (accepted), 5 is 4's
    child (rejected). Accepted path: 0 -> 2 -> 4. The KV kept is exactly that path; every
    accepted token's attention row in the tree mask reads only kept nodes (never 1, 3 or 5)."""
    parent = np.array([-1, 0, 0, 1, 2, 4])
    correct = np.array([True, False, True, True, True, False])
    tree = DraftTree(parent=parent, q_prob=np.array([1, .5, .4, .9, .8, .7]), correct=correct,
                     experts=np.zeros((6, 1, 1), dtype=np.int64))
    sel = [1, 2, 3, 4, 5]
    assert accepted_length(tree, sel) == 2
    kept = kept_kv_nodes(tree, sel)
    assert kept == [0, 2, 4]
    rows = [0, *sel]
    mask = tree_mask(parent, rows)
    for v in kept:
        used = {rows[j] for j in np.flatnonzero(mask[rows.index(v)])}
        assert used <= set(kept), (v, used)
    # node 3 (a rejected branch's child) attends to 1: its KV must not survive
    assert 1 in {rows[j] for j in np.flatnonzero(mask[rows.index(3)])} and 3 not in kept


def test_tree_modes_run_and_keep_only_the_accepted_path(tmp_path):
    from ahasd_sim.simulation import run_simulation
    for mode, pol in (("tree_sync", "eagle_dynamic"), ("tree_pim", "hw_tree")):
        s = run_simulation(load_config(PLATFORM, [f"run.mode={mode}", f"run.policy={pol}",
                                                  "pim.partition_policy=striped"])).summary
        ms = s["mode_stats"]
        assert ms["kv_kept_nodes"] == s["accepted_tokens"]
        assert ms["kv_kept_nodes"] + ms["kv_discarded_nodes"] == s["drafted_tokens"]
        assert s["windows"] >= 2 and s["throughput_tok_s_ci95_low"] <= s["throughput_tok_s"]


def test_hw_tree_on_one_vector_pim_verifies_smaller_trees_than_on_the_npu(tmp_path):
    """With k = 1 every extra node costs a full weight pass on PIM; on the NPU a node costs almost
    nothing until the pass turns compute-bound: the hardware-aware selector verifies fewer
    nodes per round on PIM."""
    from ahasd_sim.simulation import run_simulation
    got = {}
    for mode in ("tree_sync", "tree_pim"):
        s = run_simulation(load_config(PLATFORM, [f"run.mode={mode}", "run.policy=hw_tree",
                                                  "pim.partition_policy=striped"])).summary
        got[mode] = s["drafted_tokens"] / s["verifications"]
    assert got["tree_pim"] < got["tree_sync"]


def test_tree_modes_refuse_chain_policies_and_lookup():
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.simulation import run_simulation
    with pytest.raises(InputError, match="tree policy"):
        run_simulation(load_config(PLATFORM, ["run.mode=tree_sync", "run.policy=adaedl",
                                              "pim.partition_policy=striped"]))
    with pytest.raises(InputError, match="lookup"):
        run_simulation(load_config(PLATFORM, ["run.mode=tree_sync", "run.policy=hw_tree", "run.drafter=lookup",
                                              "pim.partition_policy=striped"]))


def test_compare_leaves_tree_modes_out_for_lookup_and_names_the_tree_trace():
    from ahasd_sim.compare import DEFAULT_MODES, expand_modes
    from ahasd_sim.config.errors import InputError
    cfg = load_config(PLATFORM, ["run.drafter=lookup"])
    rows = [r for r, _ in expand_modes(cfg, list(DEFAULT_MODES))]
    assert "task_sync" in rows and not any(r.startswith("tree_") for r in rows)
    with pytest.raises(InputError, match="lookup"):
        expand_modes(cfg, ["tree_sync"])
    rows = dict(expand_modes(load_config(PLATFORM, ["run.policy=hw_tree"]), ["tree_pim"]))
    assert list(rows) == ["tree_pim/hw_tree"]


def test_a_head_drafted_tree_is_a_what_if_of_the_tree_trace():
    from ahasd_sim.simulation import run_simulation
    s = run_simulation(load_config(PLATFORM, ["run.mode=tree_sync", "run.policy=eagle_dynamic",
                                              "run.drafter=head"])).summary
    assert s["trace"].endswith("_tree_moe.npz") and s["drafter"] == "head"
    assert s["acceptance_source"].startswith("what-if") and "Qwen2.5-Coder-0.5B" in s["acceptance_source"]


@pytest.mark.parametrize("seed", range(10))
def test_by_size_search_agrees_with_specfits_dinkelbach_on_an_affine_cost(seed):
    """Where the cost is affine in the node count (no per-node items), the by-size engine and
    SpecFit's Dinkelbach/min-cut engine solve the same problem: the same best E/T."""
    from ahasd_sim.moe.closure import dinkelbach
    rng = np.random.default_rng(100 + seed)
    tree = _random_tree(rng, int(rng.integers(2, 30)))
    nodes = list(range(1, len(tree.parent)))
    a, b = rng.uniform(0.5, 2), rng.uniform(0.01, 0.3)
    r, sel = best_by_size(nodes, tree.parent, tree.path_prob, tree.depth, lambda n: a + b * n)
    pp = np.array([tree.path_prob[v] for v in nodes])
    rd, seld, _ = dinkelbach(nodes, tree.parent, pp, np.zeros((len(nodes), 0), dtype=bool), np.zeros(0),
                             1.0, a, b, tol=1e-12)
    assert r == pytest.approx(rd, rel=1e-9)
