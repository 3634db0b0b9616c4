"""Task costs of the modes (``modes/costs/``) against the hardware units they compose (issue 19).

Each expectation is built here from the unit models (``Platform.pim_op_cost``, ``Npu.op_cost``,
``Gpu.forward_cost``, ``Link.isolated_transfer_cost``, ``Gts.switch_cost``) and the operator
graph (``forward_ops``), following the mapping rules in the module docstring of
``modes/costs/__init__.py``: a forward is its operators one after the other (``layer_repeat`` times
each), drafting runs on the drafter's ranks, verification on the NPU, pre-verification on the
target's ranks, GPU forwards stream what does not fit over H2D, and an operator_sync tier takes
the longer of its two devices plus a barrier. The small analytic helpers are checked on numbers
worked out by hand.
"""
from __future__ import annotations

import itertools
import math

import pytest

from ahasd_sim.config import ConfigError, load_config
from ahasd_sim.hw.platform import Platform
from ahasd_sim.modes.base import TaskCost
from ahasd_sim.hw.sharing import FlowSpec, maxmin_rates, two_flow_span
from ahasd_sim.modes.costs import StepCosts
from ahasd_sim.modes.costs.affine import _AffineOps
from ahasd_sim.workload.models import get_model
from ahasd_sim.workload.ops import OpKind, forward_ops
from conftest import PAPER_PLATFORM, ROOT

LAPTOP = ROOT / "hw_configs" / "platform_laptop_rtx4090.yaml"
SPECPIM = ROOT / "hw_configs" / "platform_specpim_gpu_pim.yaml"
NPU_ONLY = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5.yaml"

_ELEMENTWISE = (OpKind.NONLINEAR, OpKind.REDUCTION)


def _sc(path=PAPER_PLATFORM, *overrides):
    # the exact checks here are of one pinned placement (per-mode placement: test_fair_baselines.py)
    # (and serial weight streaming: the overlapped form is checked in test_fair_baselines.py)
    cfg = load_config(path, ["pim.partition_policy=striped", "gpu.weight_streaming=serial",
                             *overrides])
    p = Platform.build(cfg)
    return cfg, p, StepCosts(p, get_model(cfg.run.draft_model), get_model(cfg.run.target_model), cfg)


def _kvq(kv, q):
    """KV length rounded up to the quantum (at least one quantum): the documented cost key."""
    return max(q, -(-kv // q) * q)


def _expected_forward(ops, unit):
    """A forward run op after op: ``unit(op) -> (OpCost, busy device)``; everything x layer_repeat."""
    dur, energy, busy, nbytes = 0.0, {}, {}, 0.0
    for op in ops:
        c, dev = unit(op)
        r = op.layer_repeat
        dur += c.duration_s * r
        nbytes += c.bus_bytes * r
        busy[dev] = busy.get(dev, 0.0) + c.duration_s * r
        for d, e in c.energy_j_by_device.items():
            energy[d] = energy.get(d, 0.0) + e * r
    return dur, energy, busy, nbytes


def _assert_cost(cost: TaskCost, dur, energy, busy, nbytes=None):
    assert cost.duration_s == pytest.approx(dur, rel=1e-12)
    assert set(cost.energy_j) == set(energy)
    for d, e in energy.items():
        assert cost.energy_j[d] == pytest.approx(e, rel=1e-12), d
    assert set(cost.busy_s) == set(busy)
    for d, b in busy.items():
        assert cost.busy_s[d] == pytest.approx(b, rel=1e-12), d
    if nbytes is not None:
        assert cost.offchip_bytes == pytest.approx(nbytes, rel=1e-12)


# ------------------------------------------------------------------ analytic helpers
def shared_rank_span(t_a, rate_a, t_b, rate_b):
    """Reference, by hand: two tasks started together progress at rate_a / rate_b while both run,
    the one left then alone at rate 1: (span, time a ran, time b ran)."""
    if t_a <= 0 or t_b <= 0:
        return max(t_a, t_b), t_a, t_b
    fa, fb = t_a / rate_a, t_b / rate_b
    if fa <= fb:
        return fa + (t_b - rate_b * fa), fa, fa + (t_b - rate_b * fa)
    return fb + (t_a - rate_a * fb), fb + (t_a - rate_a * fb), fb


def _pair(share):
    return FlowSpec("host", {"ranks": 1.0}, share), FlowSpec("pim", {"ranks": 1.0}, 1.0 - share)


def test_two_flow_span_by_hand():
    # a: 2 s alone at rate 0.5 -> 4 s shared; b: 3 s alone at 0.5 -> 6 s. a ends at 4, b has done
    # 0.5 x 4 = 2 s of its 3 s, finishes the last 1 s alone: span 5; a ran 4 s, b 5 s.
    assert two_flow_span(2.0, 3.0, *_pair(0.5)) == pytest.approx((5.0, 4.0, 5.0))
    # weights 0.25 / 0.75 on one resource: rates 0.25 and 0.75. a: 3 s -> 12 s; b: 1 s -> 4/3 s
    # ends first; a did 1/3 s and finishes 8/3 s alone: span 4; a ran 4 s, b 4/3 s.
    assert maxmin_rates(_pair(0.25)) == pytest.approx([0.25, 0.75])
    assert two_flow_span(3.0, 1.0, *_pair(0.25)) == pytest.approx((4.0, 4.0, 4.0 / 3.0))
    assert two_flow_span(3.0, 1.0, *_pair(0.25)) == pytest.approx(shared_rank_span(3.0, 0.25, 1.0, 0.75))
    # one side idle: the other runs alone at full rate
    assert two_flow_span(0.0, 3.0, *_pair(0.5)) == (3.0, 0.0, 3.0)
    assert two_flow_span(2.0, 0.0, *_pair(0.5)) == (2.0, 2.0, 0.0)


def test_affine_ops_equal_the_graph_builder_at_every_kv():
    # the affine shortcut must reproduce forward_ops exactly, also at KV lengths it never probed
    for name, n in (("llama2-7b", 1), ("llama2-13b", 5)):
        m = get_model(name)
        aff = _AffineOps(m, n, 16)
        assert aff.exact and aff.varying       # attention ops vary with kv; without this the test is void
        for kv in (0, 1, 16, 17, 100, 513, 4097):
            assert aff.at(kv) == forward_ops(m, n, kv), (name, n, kv)


# ------------------------------------------------------------------ PIM and NPU tasks
def test_partition_reserves_kv_next_to_each_model():
    cfg, p, sc = _sc()
    tokens = cfg.pim.kv_reserve_tokens
    part = sc.partition
    assert part.draft_bytes == pytest.approx(sc.draft.weight_bytes() + sc.draft.kv_bytes_per_token() * tokens)
    assert part.target_bytes == pytest.approx(sc.target.weight_bytes() + sc.target.kv_bytes_per_token() * tokens)
    # striped: each model spans every rank the other does not need for itself
    cap = part.rank_capacity_bytes
    assert part.draft_ranks == cfg.pim.ranks - math.ceil(part.target_bytes / cap)
    assert part.target_ranks == cfg.pim.ranks - math.ceil(part.draft_bytes / cap)


def test_draft_verify_preverify_compose_their_unit_costs():
    cfg, p, sc = _sc()
    q = cfg.run.kv_len_quantum_tokens
    assert q > 1
    part, bw = sc.partition, p.memory.effective_bandwidth_bytes_s
    for kv in (0, q + 1, 500):
        k = _kvq(kv, q)
        exp = _expected_forward(forward_ops(sc.draft, 1, k), lambda op: (p.pim_op_cost(op, part.draft_ranks), "pim"))
        _assert_cost(sc.draft_token(kv), *exp)
        exp = _expected_forward(forward_ops(sc.target, 3, k),
                                lambda op: (p.pim_op_cost(op, part.target_ranks), "pim"))
        _assert_cost(sc.preverify(3, kv), *exp)
        exp = _expected_forward(forward_ops(sc.target, 4, k), lambda op: (p.npu.op_cost(op, bw), "npu"))
        assert exp[3] > 0                      # verification streams weights over the bus
        _assert_cost(sc.verify(4, kv), *exp)
    # every KV length inside one quantum costs the same; the next quantum costs more
    assert sc.verify(4, q + 1).duration_s == sc.verify(4, 2 * q).duration_s < sc.verify(4, 2 * q + 1).duration_s
    assert sc.draft_token(1).duration_s == sc.draft_token(q).duration_s < sc.draft_token(q + 1).duration_s


def test_without_aau_nonlinear_ops_of_pim_models_run_on_the_npu_vector_unit():
    cfg, p, sc = _sc(PAPER_PLATFORM, "pim.aau.enabled=false")
    ranks = sc.partition.draft_ranks
    exp = _expected_forward(forward_ops(sc.draft, 1, 512), lambda op: (
        p.offload_cost(op), "npu.vector") if op.kind in _ELEMENTWISE else (p.pim.gemv_cost(op, ranks), "pim"))
    assert exp[2]["npu.vector"] > 0 and exp[3] > 0     # offloaded operands cross the bus
    _assert_cost(sc.draft_token(512), *exp)


def test_layer_split_adds_up_to_the_pass():
    cfg, p, sc = _sc()
    bw = p.memory.effective_bandwidth_bytes_s
    ops = forward_ops(sc.target, 3, 512)
    body = [op for op in ops if op.per_layer]
    head = [op for op in ops if not op.per_layer]
    assert head and body
    for task, one in (("verify", lambda op: p.npu.op_cost(op, bw)),
                      ("preverify", lambda op: p.pim_op_cost(op, sc.partition.target_ranks))):
        n, layer_s, head_s = sc.layer_split(task, 3, 512)
        assert n == sc.target.n_layers == body[0].layer_repeat == 40
        assert layer_s == pytest.approx(sum(one(op).duration_s for op in body), rel=1e-12)
        assert head_s == pytest.approx(sum(one(op).duration_s for op in head), rel=1e-12)
        whole = sc.verify(3, 512) if task == "verify" else sc.preverify(3, 512)
        assert n * layer_s + head_s == pytest.approx(whole.duration_s, rel=1e-12)


def test_sharing_specs_from_the_striped_partition():
    cfg, p, sc = _sc()
    part = sc.partition
    share = cfg.pim.host_share_of_active_rank
    assert part.shared_ranks > 0 and share == 0.5 and sc.host_share == 0.5
    f = part.shared_ranks / part.target_ranks
    specs = sc.sharing_specs()
    # an NPU pass streams f of the target's bytes from the shared ranks, the rest from the
    # target-only ranks; a drafter forward keeps the shared ranks busy; weights 0.5 / 0.5
    assert specs["verify"].demand == pytest.approx({"shared": f, "target_only": 1 - f})
    assert specs["draft"].demand == {"shared": 1.0}
    assert specs["preverify"].demand == {"shared": 1.0, "target_only": 1.0}
    assert [specs[k].weight for k in ("verify", "draft", "preverify")] == [0.5, 0.5, 0.5]
    # an NPU pass next to a drafter forward: both at 1 / (1 + f) (the shared ranks saturate)
    assert maxmin_rates([specs["verify"], specs["draft"]]) == pytest.approx([1 / (1 + f)] * 2)
    _, _, off = _sc(PAPER_PLATFORM, "pim.shared_rank_contention=false")
    assert off.host_share == 1.0 and off.sharing_specs() is None
    _, _, tenth = _sc(PAPER_PLATFORM, "pim.host_share_of_active_rank=0.9")
    t = tenth.sharing_specs()
    # work-conserving: the host at weight 0.9 is capped at its full rate, the drafter gets what
    # the host leaves of the shared ranks (1 - f), not 0.1 of them
    assert maxmin_rates([t["verify"], t["draft"]]) == pytest.approx([1.0, 1 - f])


def test_gts_switch_occupies_pim_for_its_duration():
    cfg, p, sc = _sc()
    c = p.gts.switch_cost()
    assert c.duration_s > 0
    _assert_cost(sc.gts_switch(), c.duration_s, dict(c.energy_j_by_device), {"pim": c.duration_s}, 0.0)


def test_npu_prefill_is_one_forward_over_the_prompt():
    cfg, p, sc = _sc()
    q, bw = cfg.run.kv_len_quantum_tokens, p.memory.effective_bandwidth_bytes_s
    for role, model in (("draft", sc.draft), ("target", sc.target)):
        for n_prompt, n in ((37, 37), (0, 1)):       # an empty prompt still runs one token
            exp = _expected_forward(forward_ops(model, n, q), lambda op: (p.npu.op_cost(op, bw), "npu"))
            _assert_cost(sc.prefill(role, n_prompt), *exp)
    # the NPU baseline's autoregressive step and prefill are the target on the NPU
    _, _, sc = _sc(PAPER_PLATFORM, "baseline.device=npu")
    assert sc._baseline_device() == "npu"
    assert sc.target_forward(1, 300) == sc.verify(1, 300)
    assert sc.baseline_prefill(37) == sc.prefill("target", 37)


# ------------------------------------------------------------------ GPU forwards
def _gpu_expected(p, model, n, kv, stream_bytes):
    g = p.gpu.forward_cost(forward_ops(model, n, kv))
    energy = dict(g.energy_j_by_device)
    busy = {"gpu": g.duration_s}
    dur = g.duration_s
    if stream_bytes > 0:
        link = p.h2d.isolated_transfer_cost(stream_bytes)
        dur += link.duration_s
        busy["h2d"] = link.duration_s
        for d, e in link.energy_j_by_device.items():
            energy[d] = energy.get(d, 0.0) + e
    return dur, energy, busy, g.bus_bytes


def test_gpu_forwards_stream_what_does_not_fit_over_h2d():
    cfg, p, sc = _sc(LAPTOP)
    q = cfg.run.kv_len_quantum_tokens
    usable = (cfg.gpu.memory_gib - cfg.gpu.reserved_gib) * 2**30
    wd, wt = sc.draft.weight_bytes(), sc.target.weight_bytes()
    # drafter fits alone; drafter + target do not, and the target is loaded second
    assert wd < usable < wd + wt and wt < usable
    over = wd + wt - usable
    _assert_cost(sc.gpu_draft_token(500), *_gpu_expected(p, sc.draft, 1, _kvq(500, q), 0.0))
    _assert_cost(sc.gpu_verify(4, 500), *_gpu_expected(p, sc.target, 4, _kvq(500, q), over))
    assert sc.gpu_verify(4, 500).busy_s["h2d"] > 0
    _assert_cost(sc.gpu_prefill("target", 30), *_gpu_expected(p, sc.target, 30, q, over))
    _assert_cost(sc.gpu_prefill("draft", 0), *_gpu_expected(p, sc.draft, 1, q, 0.0))
    # autoregressive baseline: the target alone fits (no drafter resident)
    assert sc._baseline_device() == "gpu"
    _assert_cost(sc.target_forward(1, 500), *_gpu_expected(p, sc.target, 1, _kvq(500, q), 0.0))
    _assert_cost(sc.baseline_prefill(30), *_gpu_expected(p, sc.target, 30, q, 0.0))
    # a GPU too small for the target alone streams only the part of the target that does not fit,
    # never more than the target itself
    cfg2, p2, small = _sc(LAPTOP, "gpu.memory_gib=4.0", "gpu.reserved_gib=1.0")
    usable2 = 3 * 2**30
    _assert_cost(small.target_forward(1, 500), *_gpu_expected(p2, small.target, 1, _kvq(500, q), wt - usable2))
    _assert_cost(small.gpu_verify(2, 500), *_gpu_expected(p2, small.target, 2, _kvq(500, q), wt))
    # every GPU forward streams exactly its overflow (not a byte more: rel 1e-12 sees one byte)
    _assert_cost(small.baseline_prefill(0), *_gpu_expected(p2, small.target, 1, q, wt - usable2))
    _assert_cost(small.gpu_draft_token(500), *_gpu_expected(p2, small.draft, 1, _kvq(500, q), wd - usable2))
    _assert_cost(small.gpu_prefill("draft", 30), *_gpu_expected(p2, small.draft, 30, q, wd - usable2))
    _assert_cost(small.gpu_prefill("target", 0), *_gpu_expected(p2, small.target, 1, q, wt))
    _assert_cost(sc.baseline_prefill(0), *_gpu_expected(p, sc.target, 1, q, 0.0))
    # the host of a GPU-only platform prefills on the GPU too
    _assert_cost(small.prefill("target", 30), *_gpu_expected(p2, small.target, 30, q, min(wt, wd + wt - usable2)))
    _assert_cost(small.prefill("draft", 30), *_gpu_expected(p2, small.draft, 30, q, wd - usable2))


def test_gpu_overflow_without_h2d_and_missing_baseline_device_are_config_errors():
    cfg, p, sc = _sc(LAPTOP, "h2d.enabled=false")
    with pytest.raises(ConfigError) as e:
        sc.gpu_verify(4, 100)
    over = sc.draft.weight_bytes() + sc.target.weight_bytes() - (cfg.gpu.memory_gib - cfg.gpu.reserved_gib) * 2**30
    # the caller adds the file; the message names the key, the model and the missing GB
    assert str(e.value) == (f"gpu.memory_gib: llama2-13b needs {over / 1e9:.1f} GB more than the GPU holds "
                            f"and no h2d link is enabled to stream it")
    _, _, npu = _sc(PAPER_PLATFORM, "baseline.device=gpu")
    with pytest.raises(ConfigError) as e:
        npu.target_forward(1, 100)
    assert str(e.value) == ("baseline.device: is gpu, but this platform has no GPU (gpu.enabled is false); "
                            "use auto or a device the platform has")
    _, _, gpu = _sc(LAPTOP, "baseline.device=npu")
    with pytest.raises(ConfigError, match="^baseline.device: is npu, but this platform has no NPU "):
        gpu.baseline_prefill(10)
    # a device the platform has is used as asked
    _, _, npu_asked = _sc(PAPER_PLATFORM, "baseline.device=npu")
    assert npu_asked.target_forward(1, 100) == npu_asked.verify(1, 100)


# ------------------------------------------------------------------ operator_sync
def _tiers(ops):
    t: dict[tuple[int, int], list] = {}
    for op in ops:
        t.setdefault((op.layer_repeat, op.tier), []).append(op)
    return t


def test_operator_sync_with_contention_shares_the_ranks_in_each_tier():
    # contention on (paper platform): a tier's host and PIM ops share the ranks' time, host at
    # 0.5: shared_rank_span of the two sums; the barrier after every tier occurrence
    # (a barrier of its own: task-cost tables are shared per config, and the cache key of an
    # operator_sync forward does not hold the mapping, which a run derives from the config)
    cfg, p, sc = _sc(PAPER_PLATFORM, "operator_sync.barrier_ns=250.0")
    share, barrier = 0.5, 250e-9
    assert sc.host_share == share and barrier > 0
    bw, ranks = p.memory.effective_bandwidth_bytes_s, sc.partition.draft_ranks
    ops = forward_ops(sc.draft, 1, 512)
    # split every tier of two or more ops across the devices (q | k, v; gate | up)
    mapping = {op.name: ("pim" if i % 2 else "npu") for g in _tiers(ops).values() for i, op in enumerate(g)}
    dur = busy_n = busy_p = nbytes = 0.0
    energy: dict[str, float] = {}
    for (rep, _t), group in _tiers(ops).items():
        t_n = sum(p.npu.op_cost(op, bw).duration_s for op in group if mapping[op.name] == "npu")
        t_p = sum(p.pim_op_cost(op, ranks).duration_s for op in group if mapping[op.name] == "pim")
        for op in group:
            c = p.npu.op_cost(op, bw) if mapping[op.name] == "npu" else p.pim_op_cost(op, ranks)
            nbytes += c.bus_bytes * rep
            for d, e in c.energy_j_by_device.items():
                energy[d] = energy.get(d, 0.0) + e * rep
        span, a, b = shared_rank_span(t_n, share, t_p, 1 - share)
        dur += (span + barrier) * rep
        busy_n += a * rep
        busy_p += b * rep
    cost = sc.opsync_forward("draft", 1, 512, {"draft": mapping, "target": {}})
    assert nbytes > 0           # the NPU's operators stream their weights over the bus
    _assert_cost(cost, dur, energy, {"npu": busy_n, "pim": busy_p}, nbytes)
    # the devices overlap in the mixed tiers (shorter than their busy times added), and the
    # NPU's reads there were slowed by the PIM work: busier than its ops alone would take
    assert dur < busy_n + busy_p
    alone = sum(p.npu.op_cost(op, bw).duration_s * op.layer_repeat for op in ops if mapping[op.name] == "npu")
    assert busy_n > alone * 1.01


def test_operator_sync_mapping_is_the_best_split_of_every_tier():
    # the offline search must find, per tier, the split with the shortest span (brute force here)
    # min_fit gives the drafter 2 ranks and the target 4: there the contention changes the
    # best split (checked below), so a search that ignored it, or its shares, would be caught
    found = {}
    for path, extra in ((PAPER_PLATFORM, ()), (PAPER_PLATFORM, ("pim.shared_rank_contention=false",)),
                        (PAPER_PLATFORM, ("pim.partition_policy=min_fit",)),
                        (PAPER_PLATFORM, ("pim.partition_policy=min_fit", "pim.shared_rank_contention=false")),
                        (SPECPIM, ())):
        cfg, p, sc = _sc(path, *extra)
        k = cfg.operator_sync.mapping_draft_len
        kv = _kvq(cfg.ahasd.tvc_config.preload_kv_len, cfg.run.kv_len_quantum_tokens)
        host = "npu" if p.npu is not None else "gpu"
        share = sc.host_share if host == "npu" else 1.0
        bw = p.memory.effective_bandwidth_bytes_s
        mapping = sc.opsync_mapping(k)
        assert set(mapping) == {"draft", "target"}
        devices_used = set()
        for role, model, n, ranks in (("draft", sc.draft, 1, sc.partition.draft_ranks),
                                      ("target", sc.target, k + 1, sc.partition.target_ranks)):
            ops = forward_ops(model, n, kv)
            assert set(mapping[role]) == {op.name for op in ops}

            def t_on(op, dev):
                if dev == "pim":
                    return p.pim_op_cost(op, ranks).duration_s
                return p.npu.op_cost(op, bw).duration_s if host == "npu" else p.gpu.op_cost(op).duration_s

            def span(group, devs):
                t = {host: 0.0, "pim": 0.0}
                for op, d in zip(group, devs):
                    t[d] += t_on(op, d)
                return (shared_rank_span(t[host], share, t["pim"], 1 - share)[0] if share < 1.0
                        else max(t.values()))
            for group in _tiers(ops).values():
                chosen = [mapping[role][op.name] for op in group]
                devices_used.update(chosen)
                best = min(span(group, c) for c in itertools.product((host, "pim"), repeat=len(group)))
                assert span(group, chosen) == pytest.approx(best, rel=1e-12), (path, role, [o.name for o in group])
        assert devices_used == {host, "pim"}, path     # both devices used: the search is not trivial
        found[extra] = mapping
    assert found[("pim.partition_policy=min_fit",)] != found[("pim.partition_policy=min_fit",
                                                              "pim.shared_rank_contention=false")]


def test_operator_sync_on_a_gpu_host_streams_the_overflow_of_gpu_mapped_weights():
    # GPU host (no contention: the GPU has its own memory); GPU-mapped ops read GPU memory, and
    # the GPU-mapped weights of both models beyond its memory are streamed over H2D every
    # forward, split between the models by their GPU-mapped bytes
    cfg, p, sc = _sc(SPECPIM, "gpu.memory_gib=2.0", "gpu.reserved_gib=1.0")
    assert sc.host == "gpu" and p.npu is None
    kv = 512
    everything_gpu = {"draft": {op.name: "gpu" for op in forward_ops(sc.draft, 1, kv)},
                      "target": {op.name: "gpu" for op in forward_ops(sc.target, 1, kv)}}
    barrier = cfg.operator_sync.barrier_ns * 1e-9
    wd = sum(op.weight_bytes * op.layer_repeat for op in forward_ops(sc.draft, 1, kv))
    wt = sum(op.weight_bytes * op.layer_repeat for op in forward_ops(sc.target, 1, kv))
    over = wd + wt - 2**30
    for role, model, n in (("draft", sc.draft, 1), ("target", sc.target, 3)):
        ops = forward_ops(model, n, kv)
        # all on the GPU: each tier is the sum of its ops, then one barrier per tier occurrence
        body = sum((sum(p.gpu.op_cost(op).duration_s for op in g) + barrier) * rep
                   for (rep, _t), g in _tiers(ops).items())
        w = wd if role == "draft" else wt
        link = p.h2d.isolated_transfer_cost(over * w / (wd + wt))
        cost = sc.opsync_forward(role, n, kv, everything_gpu)
        assert cost.duration_s == pytest.approx(body + link.duration_s, rel=1e-12)
        assert cost.busy_s["h2d"] == pytest.approx(link.duration_s, rel=1e-12)
        assert cost.busy_s["gpu"] == pytest.approx(sum(p.gpu.op_cost(op).duration_s * op.layer_repeat
                                                       for op in ops), rel=1e-12)
        assert cost.busy_s["pim"] == 0.0
        h2d_e = sum(link.energy_j_by_device.values())
        gpu_e = sum(sum(p.gpu.op_cost(op).energy_j_by_device.values()) * op.layer_repeat for op in ops)
        assert sum(cost.energy_j.values()) == pytest.approx(gpu_e + h2d_e, rel=1e-12)
    # all on PIM: nothing on the GPU, nothing streamed (another barrier: a table of its own, see above)
    _, _, sc2 = _sc(SPECPIM, "gpu.memory_gib=2.0", "gpu.reserved_gib=1.0", "operator_sync.barrier_ns=101.0")
    all_pim = {r: {k: "pim" for k in m} for r, m in everything_gpu.items()}
    assert set(sc2.opsync_forward("draft", 1, kv, all_pim).busy_s) == {"gpu", "pim"}
    # a GPU-host tier split between GPU and PIM takes the longer of the two (the GPU reads
    # its own memory: no rank contention, whatever pim.host_share_of_active_rank says); ops
    # missing from the mapping run on the host
    draft_ops = forward_ops(sc2.draft, 1, kv)
    split = {op.name: ("pim" if i % 2 else "gpu") for g in _tiers(draft_ops).values() for i, op in enumerate(g)}
    partial = {k: v for k, v in split.items() if k != "o_proj"}      # o_proj is alone in its tier
    assert split["o_proj"] == "gpu" and cfg.pim.host_share_of_active_rank == 0.5
    _, _, sc3 = _sc(SPECPIM, "gpu.memory_gib=2.0", "gpu.reserved_gib=1.0", "operator_sync.barrier_ns=102.0")
    ranks = sc3.partition.draft_ranks
    dur = 0.0
    for (rep, _t), g in _tiers(draft_ops).items():
        t_g = sum(p.gpu.op_cost(op).duration_s for op in g if split[op.name] == "gpu")
        t_p = sum(p.pim_op_cost(op, ranks).duration_s for op in g if split[op.name] == "pim")
        dur += (max(t_g, t_p) + 102e-9) * rep
    # GPU-mapped weights: the drafter's split ops, and all the target's (mapped to the host)
    gd = sum(op.weight_bytes * op.layer_repeat for op in draft_ops if split[op.name] == "gpu")
    link = p.h2d.isolated_transfer_cost((gd + wt - 2**30) * gd / (gd + wt))
    cost = sc3.opsync_forward("draft", 1, kv, {"draft": partial, "target": {}})
    assert cost.duration_s == pytest.approx(dur + link.duration_s, rel=1e-12)
    # and without an h2d link the overflow is a config error naming h2d.enabled
    _, _, no_link = _sc(SPECPIM, "gpu.memory_gib=2.0", "gpu.reserved_gib=1.0", "h2d.enabled=false")
    with pytest.raises(ConfigError) as e:
        no_link.opsync_forward("draft", 1, kv, everything_gpu)
    assert str(e.value) == (f"h2d.enabled: operator_sync maps {(wd + wt) / 1e9:.1f} GB of weights to the GPU, "
                            f"{over / 1e9:.1f} GB more than it holds, and no h2d link is enabled to stream them")
    # ... but weights that fit (the drafter's alone, the target all on PIM) need no link
    _, _, fits = _sc(SPECPIM, "h2d.enabled=false")
    drafter_on_gpu = {"draft": everything_gpu["draft"], "target": all_pim["target"]}
    assert "h2d" not in fits.opsync_forward("draft", 1, kv, drafter_on_gpu).busy_s


def test_npu_costs_are_shared_across_pim_settings_and_follow_the_npu_and_memory():
    """The NPU's verification and prefill tables are keyed by what they depend on (the NPU, the
    LPDDR5 and the KV quantum): a configuration that differs in its PIM only reuses them (the same
    objects); one with other LPDDR5 timings or another NPU computes its own, each equal to the
    by-hand forward on its own platform."""
    q = load_config(PAPER_PLATFORM).run.kv_len_quantum_tokens
    k = _kvq(300, q)
    cfg_a, p_a, a = _sc(PAPER_PLATFORM)
    cfg_b, p_b, b = _sc(PAPER_PLATFORM, "pim.unit_gops_int8=409.6", "pim.internal_bw_gb_s=64.0")
    assert a.verify(4, 300) is b.verify(4, 300) and a.prefill("target", 9) is b.prefill("target", 9)
    assert a.layer_split("verify", 4, 300) == b.layer_split("verify", 4, 300)
    assert a.draft_token(300).duration_s != b.draft_token(300).duration_s      # the PIM's own costs differ
    for over in ("memory.data_rate_mts=3200", "npu.freq_ghz=0.5"):
        cfg_c, p_c, c = _sc(PAPER_PLATFORM, over)
        bw = p_c.memory.effective_bandwidth_bytes_s
        exp = _expected_forward(forward_ops(c.target, 4, k), lambda op: (p_c.npu.op_cost(op, bw), "npu"))
        _assert_cost(c.verify(4, 300), *exp)
        assert c.verify(4, 300).duration_s > a.verify(4, 300).duration_s, over
