"""The shortcuts the per-token paths take (docs/performance.md) against the plain definitions
they replace: each test fails if a shortcut drifts from what it stands for."""
from __future__ import annotations

import gc
import random
from pathlib import Path

import numpy as np
import pytest

import ahasd_sim.metrics.stats as stats_mod

from ahasd_sim.config import load_config
from ahasd_sim.modes.config import EdcConfig
from ahasd_sim.modes.soc.controls.edc import EntropyHistoryControl
from ahasd_sim.modes.replay import TraceReplay
from ahasd_sim.policies.base import new_view
from ahasd_sim.simulation import load_run_trace, run_simulation
from ahasd_sim.traces.format import load_trace

ROOT = Path(__file__).resolve().parent.parent
GREEDY = ROOT / "traces" / "qwc-0.5b-1.5b_greedy.npz"
DEFAULT_JOB = ROOT / "hw_configs" / "ahasd_mobile.yaml"


def _index_from_scratch(e: EntropyHistoryControl) -> int:
    """EDC's PHT index by its definition: {avg(older half), avg(recent half), LLR}, rounded down."""
    half = e.history_len // 2
    recent = sum(e.leht[:half]) // half
    older = sum(e.leht[half:]) // (e.history_len - half)
    return (older << (e.cfg.bucket_bits + e.cfg.llr_bits)) | (recent << e.cfg.llr_bits) | e.llr


@pytest.mark.parametrize("history_len", [2, 5, 8])
def test_edc_running_half_sums_give_the_defined_index(history_len):
    # predict keeps LEHT's half sums up to date instead of summing the halves per batch; rollbacks
    # (LEHT <- LCEHT) and direct inserts make it recompute them
    rnd = random.Random(history_len)
    e = EntropyHistoryControl(EdcConfig(history_len=history_len, pht_counter_init=2))
    pending = []
    for step in range(3000):
        if pending and rnd.random() < 0.4:
            idx, bucket, cont = pending.pop(rnd.randrange(len(pending)))
            e.resolve(idx, bucket, cont, fully_accepted=rnd.random() < 0.6, killed=rnd.random() < 0.2)
        elif rnd.random() < 0.02:
            e._insert(e.leht, rnd.randrange(e.n_buckets), "leht")
        else:
            h = rnd.uniform(-0.5, 1.2 * e.cfg.entropy_max_nats)
            cont, idx, bucket = e.predict(h, rnd.randrange(12))
            assert bucket == e.bucket(h)
            assert idx == _index_from_scratch(e), step
            pending.append((idx, bucket, cont))


def test_drafter_views_built_from_chain_bounds_equal_replay_views():
    # the drafter builds on-path and recorded off-path views from TraceReplay.chain_bounds and
    # the column accessors; beyond the rollout it asks view() (synthetic fallback)
    trace = load_trace(GREEDY).take(4000)
    replay = TraceReplay(trace, 4000, seed=3)
    H, p_tok, p_top1, topk = replay.on_path_columns()
    ro_H, ro_p = replay.rollout_columns()
    rnd = random.Random(0)
    kinds = {"on": 0, "rollout": 0, "none": 0}
    for _ in range(400):
        start = rnd.randrange(len(trace) + 5)
        end, wrong, ro_off, ro_len = replay.chain_bounds(start)
        for pos in range(start, min(start + 60, len(trace) + 3)):
            ref = replay.view(pos, start, 2, 1.5)
            if pos >= end:
                assert ref is None
                kinds["none"] += 1
            elif pos <= wrong:
                assert ref == new_view(2, H[pos], p_tok[pos], p_top1[pos], topk[pos], 1.5)
                kinds["on"] += 1
            elif pos - wrong - 1 < ro_len:
                k = ro_off + pos - wrong - 1
                assert ref == new_view(2, ro_H[k], ro_p[k], ro_p[k], (), 1.5)
                assert not replay.is_synthetic(pos, start)
                kinds["rollout"] += 1
            else:
                assert replay.is_synthetic(pos, start)
    assert min(kinds.values()) > 50


def test_replay_tables_are_built_once_per_trace_and_shared():
    trace = load_trace(GREEDY).take(500)
    a, b = TraceReplay(trace, 500, seed=1), TraceReplay(trace, 500, seed=2)
    assert a._H_list is b._H_list and a._next_wrong_list is b._next_wrong_list
    assert a._synth is not b._synth                       # per-run state stays per run
    fresh = TraceReplay(load_trace(GREEDY).take(500), 500, seed=1)
    assert fresh._H_list == a._H_list and fresh._next_wrong_list == a._next_wrong_list


def test_garbage_collector_is_paused_while_a_window_runs_and_restored_after(monkeypatch):
    import simpy
    seen = []
    real_run = simpy.Environment.run

    def run(self, until=None):
        seen.append(gc.isenabled())
        return real_run(self, until)

    monkeypatch.setattr(simpy.Environment, "run", run)
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=64", "run.windows=1", "run.timeline=false",
                                    "pim.partition_policy=striped"])     # no tuning runs
    assert gc.isenabled()
    run_simulation(cfg, load_run_trace(cfg))
    assert seen == [False] and gc.isenabled()
    # a caller that disabled the collector itself keeps it disabled
    gc.disable()
    try:
        run_simulation(cfg, load_run_trace(cfg))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_finished_window_leaves_no_cyclic_garbage_behind():
    """The window's reference cycle (SimPy processes, environment, mode) is collected as the
    window returns, while it is young: nothing of it is left for a later collection to walk."""
    import weakref

    import ahasd_sim.simulation as sim
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=64", "run.windows=1", "run.timeline=false",
                                    "pim.partition_policy=striped"])
    parts = load_run_trace(cfg)
    envs = []
    real_build = sim.build_window

    def build(*a, **k):
        w = real_build(*a, **k)
        envs.append(weakref.ref(w.env))
        return w

    sim.build_window = build
    try:
        gc.collect()
        sim._run_window_rows(cfg, parts, 0)
    finally:
        sim.build_window = real_build
    assert len(envs) == 1 and envs[0]() is None          # freed without a full collection


def test_a_window_ends_with_one_young_collection_and_no_automatic_one():
    """The window's garbage is collected once, generation 0, before the collector is back on: a
    collector switched on first is set off by the next allocation (its counter is far past the
    threshold after a window), often for an older generation that walks every long-lived object."""
    import ahasd_sim.simulation as sim
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=512", "run.windows=1", "run.timeline=false",
                                    "pim.partition_policy=striped"])
    parts = load_run_trace(cfg)
    sim._run_window_rows(cfg, parts, 0)   # warm: costs and tables made outside the measured call
    seen = []

    def on_gc(phase, info):
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(on_gc)
    try:
        sim._run_window_rows(cfg, parts, 0)
    finally:
        gc.callbacks.remove(on_gc)
    assert seen == [0] and gc.isenabled()


def test_an_error_inside_a_window_restores_the_collector(monkeypatch):
    import simpy

    def boom(self, until=None):
        raise RuntimeError("planted")

    monkeypatch.setattr(simpy.Environment, "run", boom)
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=64", "run.windows=1", "run.timeline=false"])
    with pytest.raises(RuntimeError, match="planted"):
        run_simulation(cfg, load_run_trace(cfg))
    assert gc.isenabled()


def test_task_cost_memo_returns_what_the_cost_model_computes():
    from ahasd_sim.modes.costs import common as costs_mod
    from ahasd_sim.modes import get_mode
    from ahasd_sim.modes.costs import StepCosts
    from ahasd_sim.simulation import build_platform
    from ahasd_sim.workload.models import get_model
    cfg = load_config(DEFAULT_JOB, ["run.kv_len_quantum_tokens=64"])
    plat = build_platform(cfg, get_mode("ahasd"))
    args = (plat, get_model(cfg.run.draft_model), get_model(cfg.run.target_model), cfg)
    asks = [(n, kv) for n in (3, 5) for kv in (100, 120, 129)]

    def ask(c):
        return [(c.verify(n, kv), c.preverify(n, kv), c.layer_split("verify", n, kv),
                 c.layer_split("preverify", n, kv), c.draft_token(kv)) for n, kv in asks]

    costs_mod._TASK_COST_TABLES.clear()
    a = StepCosts(*args)
    first = ask(a)
    again = ask(StepCosts(*args))              # a later window: answered from the shared memos
    assert all(x is y for r1, r2 in zip(first, again) for x, y in zip(r1, r2))
    costs_mod._TASK_COST_TABLES.clear()        # computed from scratch, no memo, no table
    fresh = ask(StepCosts(*args))
    assert fresh == first
    assert a.verify(3, 100) is a.verify(3, 120)              # one KV quantum (65..128)
    assert a.verify(3, 129).duration_s > a.verify(3, 100).duration_s   # the next one costs more
    assert a.layer_split("verify", 3, 100) != a.layer_split("preverify", 3, 100)
    assert a.draft_costs_by_kv[100] is a.draft_token(100) and np.isfinite(a.draft_token(100).duration_s)


def test_the_mutation_testing_reset_empties_every_process_wide_cost_cache():
    """conftest's reset (run per test under mutmut) must reach every module-level cache of
    ``modes/costs/``: a missed one hands mutants the unmutated costs (docs/testing.md)."""
    import importlib
    import pkgutil

    import ahasd_sim.modes.costs as costs_pkg
    from ahasd_sim.simulation import build_platform
    from ahasd_sim.modes import get_mode
    from ahasd_sim.workload.models import get_model
    from conftest import clear_cost_caches
    cfg = load_config(DEFAULT_JOB, [])
    c = costs_pkg.StepCosts(build_platform(cfg, get_mode("ahasd")), get_model(cfg.run.draft_model),
                            get_model(cfg.run.target_model), cfg)
    c.draft_token(100), c.verify(3, 100), c.opsync_forward("target", 3, 100, c.opsync_mapping(3))

    def caches():
        """Module-level dicts and lru_caches of the costs modules, with their sizes."""
        out = {}
        for info in pkgutil.iter_modules(costs_pkg.__path__):
            mod = importlib.import_module(f"{costs_pkg.__name__}.{info.name}")
            for name, value in vars(mod).items():
                if getattr(value, "__module__", mod.__name__) != mod.__name__:
                    continue              # imported from elsewhere
                if isinstance(value, dict) and not name.startswith("__"):    # a module-level dict is a cache
                    out[f"{info.name}.{name}"] = len(value)
                elif hasattr(value, "cache_info"):
                    out[f"{info.name}.{name}"] = value.cache_info().currsize
        return out

    warm = caches()
    assert {"common._OP_COST_CACHE", "common._TASK_COST_TABLES", "common._OPS_CACHE", "affine._affine_ops"} <= set(warm)
    assert all(warm.values()), warm
    clear_cost_caches()
    assert not any(caches().values()), caches()


def test_step_costs_parts_define_each_method_once_and_keep_no_state():
    """StepCosts is the union of its per-device parts: a name defined in two parts would be
    shadowed silently by the MRO, and a part with an ``__init__`` or ``__slots__`` of its own
    would change how instances are built."""
    from ahasd_sim.modes.costs import StepCosts
    from ahasd_sim.modes.costs.common import CommonCosts
    parts = StepCosts.__mro__[1:-1]
    assert StepCosts.__module__ == "ahasd_sim.modes.costs" and parts[-1] is CommonCosts
    assert [n for n in vars(StepCosts) if not (n.startswith("__") and n.endswith("__"))] == []
    seen: dict[str, str] = {}
    for part in parts:
        assert part.__bases__ == (object,), part
        own = {n for n in vars(part) if not (n.startswith("__") and n.endswith("__"))}
        assert not own & set(seen), {n: (seen[n], part.__name__) for n in own & set(seen)}
        seen.update(dict.fromkeys(own, part.__name__))
        if part is not CommonCosts:
            assert "__init__" not in vars(part) and "__slots__" not in vars(part), part
    assert {"draft_token", "verify", "gpu_verify", "target_forward", "opsync_forward", "ops"} <= set(seen)


def test_config_fingerprint_tells_configs_apart_and_is_stable():
    # it keys the process-wide task-cost tables: two configs that differ anywhere must differ
    base = load_config(DEFAULT_JOB)
    assert base.fingerprint() == load_config(DEFAULT_JOB).fingerprint()
    overrides = ["pim.aau.lanes=8", "memory.data_rate_mts=5500", "npu.freq_ghz=1.2",
                 "ahasd.edc_config.entropy_max_nats=9.0", "run.kv_len_quantum_tokens=32", "policy.max_tokens=9"]
    prints = {load_config(DEFAULT_JOB, [o]).fingerprint() for o in overrides}
    assert len(prints) == len(overrides) and base.fingerprint() not in prints
    assert "object at 0x" not in base.fingerprint()       # no identity-based repr


def test_a_task_recorded_over_its_layers_books_what_task_books():
    # Collector.task_over (a layer-pipelined pre-verification): the busy time is drawn over the
    # given intervals in proportion to their lengths; energy and bytes exactly as task()
    from ahasd_sim.metrics.collector import Collector, OverlapError
    from ahasd_sim.modes.base import TaskCost
    cost = TaskCost(10.0, {"pim": 3e-3, "memory": 1e-3}, {"pim": 2.0}, 64.0)
    a, b = Collector(devices=["pim"]), Collector(devices=["pim"])
    a.task(cost, "preverify", 1.3)
    b.task_over(cost, "preverify", 1.3, [(5.0, 5.5), (7.0, 8.5)])        # 2 s of intervals: drawn 1:1
    assert a.busy_intervals["pim"] == [(1.3, 1.3 + 2.0, "preverify")]
    assert b.busy_intervals["pim"] == [(5.0, 5.5, "preverify"), (7.0, 8.5, "preverify")]
    # the busy sum is task()'s to the last bit ((1.3 + 2) - 1.3 is not 2.0 in floats)
    assert a.busy_s("pim") == b.busy_s("pim") == (1.3 + 2.0) - 1.3 != 2.0
    assert a.dynamic_energy_by_label_j == b.dynamic_energy_by_label_j and a.offchip_bytes_by_task == b.offchip_bytes_by_task
    # 1 s of work over 2 s of layers: each layer drawn at half its length, from its start
    c = Collector(devices=["pim"])
    c.task_over(TaskCost(10.0, {}, {"pim": 1.0}), "preverify", 4.0, [(5.0, 5.5), (7.0, 8.5)])
    assert c.busy_intervals["pim"] == [(5.0, 5.25, "preverify"), (7.0, 7.75, "preverify")]
    # overlapping intervals (an inconsistent schedule) are drawn one after the other
    d = Collector(devices=["pim"])
    d.task_over(TaskCost(10.0, {}, {"pim": 1.0}), "preverify", 4.0, [(5.0, 5.5), (5.25, 5.75)])
    assert d.busy_intervals["pim"] == [(5.0, 5.5, "preverify"), (5.5, 6.0, "preverify")]
    # and the overlap check against earlier tasks still holds
    with pytest.raises(OverlapError):
        a.task_over(TaskCost(1.0, {}, {"pim": 1.0}), "preverify", 3.0, [(3.0, 4.0)])   # a busy until 3.3


def test_a_window_slice_is_cut_once_per_trace_and_equals_a_fresh_cut():
    """load_run_trace hands every run of a sweep the same slice objects of a file's trace (their
    replay tables are built once); the slices equal a fresh cut; a trace of writable in-memory
    arrays (which a caller may change in place) is cut afresh every time."""
    from ahasd_sim.traces.format import Trace
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=200"])
    full1, sim1, held1 = load_run_trace(cfg, 2)
    full2, sim2, held2 = load_run_trace(cfg, 2)
    assert full1 is not full2 and sim1 is sim2 and held1 is held2
    fresh = full1.take(200, 2)
    assert set(fresh.columns) == set(sim1.columns)
    for name in fresh.columns:
        np.testing.assert_array_equal(fresh.columns[name], sim1.columns[name])
    assert sim1.header == fresh.header
    assert load_run_trace(cfg, 3)[1] is not sim1                      # another window
    assert load_run_trace(cfg.replace(["run.generated_tokens=100"]), 2)[1] is not sim1
    writable = Trace({k: np.array(v) for k, v in full1.columns.items()}, dict(full1.header), full1.path,
                     full1.file_sha256)
    a, b = load_run_trace(cfg, 2, writable)[1], load_run_trace(cfg, 2, writable)[1]
    assert a is not b
    writable.columns["accept"][:] = False                               # changed in place
    assert not load_run_trace(cfg, 2, writable)[1].accept.any()


def test_a_run_without_intervals_has_the_same_points_and_no_intervals(monkeypatch):
    """Placement tuning runs skip the bootstrap (intervals=False): their rates are the same ratio
    estimators as a full run's, and no interval is claimed."""
    from ahasd_sim.simulation import WINDOW_RATES, load_run_windows
    import ahasd_sim.metrics.stats as stats_mod
    monkeypatch.setattr(stats_mod, "MIN_BOOTSTRAP_WINDOWS", 2)     # 3 windows keep the test short
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=96", "run.windows=3", "run.timeline=false",
                                    "pim.partition_policy=striped"])
    wins = load_run_windows(cfg)
    full = run_simulation(cfg, wins).summary
    bare = run_simulation(cfg, wins, intervals=False).summary
    assert full["ci_method"] != "none" and bare["ci_method"] == "none"
    for k in WINDOW_RATES:
        assert bare[k] == full[k]
        assert bare[f"{k}_ci95"] is None and full[f"{k}_ci95"] is not None
        assert bare[f"{k}_ci95_low"] is None and bare[f"{k}_ci95_high"] is None


_STRIPED = "pim.partition_policy=striped"   # no tuning runs


@pytest.mark.parametrize("config, sets", [
    (DEFAULT_JOB, ["run.mode=ahasd", _STRIPED]), (DEFAULT_JOB, ["run.mode=async", _STRIPED]),
    (DEFAULT_JOB, ["run.mode=operator_sync", _STRIPED]), (DEFAULT_JOB, ["run.mode=autoregressive", _STRIPED]),
    (ROOT / "hw_configs" / "hyco_mobile_cloud.yaml", []), (ROOT / "hw_configs" / "moe_offload.yaml", []),
])
def test_a_run_without_event_rows_differs_only_in_having_none(config, sets, tmp_path):
    """events=False (a sweep point that writes no events.csv, a tuning run) skips building the
    event rows: the summary and every other file are the same, and asking for the events is an
    error, not an empty table (fails if a mode's summary reads its event rows, or a skipped row
    was an empty events.csv)."""
    from ahasd_sim.output import write_run
    cfg = load_config(config, [*sets, "run.generated_tokens=96", "run.windows=2", "run.timeline=false"])
    full = run_simulation(cfg)
    quiet = run_simulation(cfg, events=False)
    assert len(full.events) > 0
    with pytest.raises(ValueError, match="without its event rows"):
        quiet.events
    for s in (full.summary, quiet.summary):
        s.pop("wall_time_s", None)
    assert quiet.summary == full.summary
    a, b = tmp_path / "a", tmp_path / "b"
    write_run(full, cfg, a, 0.0, events=False)
    write_run(quiet, cfg, b, 0.0, events=False)
    names = sorted(p.name for p in a.iterdir() if p.name != "meta.json")
    assert names == sorted(p.name for p in b.iterdir() if p.name != "meta.json") and "events.csv" not in names
    for n in names:
        if n != "summary.json":
            assert (a / n).read_bytes() == (b / n).read_bytes(), n


def test_sweep_points_and_tuning_runs_build_event_rows_only_for_an_events_csv(tmp_path, monkeypatch):
    """The collectors of a sweep point's windows keep event rows only when the point writes
    events.csv, and placement-tuning runs never (fails if the flag is dropped on the way)."""
    import ahasd_sim.simulation as sim
    from ahasd_sim.sweep.worker import run_point
    kept = []
    real = sim.Collector

    class Spy(real):
        def __post_init__(self):
            kept.append(self.keep_events)
            super().__post_init__()

    monkeypatch.setattr(sim, "Collector", Spy)
    from ahasd_sim.modes import placement
    placement._CHOICES.clear()
    cfg = load_config(DEFAULT_JOB, ["run.generated_tokens=48", "run.windows=2", "run.timeline=false",
                                    "tuning.generated_tokens=32", "tuning.windows=2"])
    assert placement.needs_tuning(cfg)
    for events in (False, True):
        kept.clear()
        placement._CHOICES.clear()
        res = run_point({"hash": f"p{events}", "dir": str(tmp_path / f"p{events}"), "config": cfg, "events": events})
        assert res["status"] == "ok", res
        n_tuning = len(placement.CANDIDATES) * 2
        assert kept[:n_tuning] == [False] * n_tuning          # the tuning runs' windows come first
        assert kept[n_tuning:] == [events] * 2                # the reported windows
        assert (tmp_path / f"p{events}" / "events.csv").is_file() == events
