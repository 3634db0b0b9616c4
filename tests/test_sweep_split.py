"""Sweep points split into units (ahasd_sim.sweep.split): the same files as one point per worker,
the unit graph of a point, the scheduling order, and the fall-back to the whole-point path."""
from __future__ import annotations

import concurrent.futures as cf
import json
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.sweep import split
from ahasd_sim.sweep.runner import run_sweep

ROOT = Path(__file__).resolve().parent.parent

SPEC = """\
name: split
base:
  config: {root}/hw_configs/ahasd_mobile.yaml
  set:
    run.trace: traces/qwc-0.5b-1.5b_greedy_smoke.npz
    run.generated_tokens: 24
    run.windows: 2
    run.timeline: false
    tuning.trace: traces/qwc-0.5b-1.5b_greedy_smoke.npz
    tuning.generated_tokens: 16
    tuning.windows: 2
modes: [ahasd, operator_sync]
axes:
  pim.ranks: [16, 2]
"""


def _spec(tmp_path):
    p = tmp_path / "split.yaml"
    p.write_text(SPEC.format(root=ROOT))
    return p


def _files(out: Path) -> dict[str, bytes]:
    files = {}
    for f in sorted((out / "points").rglob("*")):
        if f.is_file() and f.name != "meta.json":
            rel = str(f.relative_to(out))
            data = f.read_bytes()
            if f.name == "error.json":   # the traceback names frames of the path that raised
                rec = json.loads(data)
                data = json.dumps({k: rec[k] for k in ("type", "message", "input_error")}).encode()
            files[rel] = data
    return files


@pytest.mark.parametrize("full_points", [False, True])
def test_split_points_write_the_files_of_whole_points(tmp_path, full_points):
    """Tuned (auto placement) points, a mode without tuning and points no placement fits
    (pim.ranks 2: their error comes from the whole-point path the failed unit hands them to):
    every file but meta.json is byte-identical, and so is results.csv without the wall times;
    with ``full_points`` (events.csv) too, whose rows the window units build only then."""
    spec = _spec(tmp_path)
    a = run_sweep(spec, tmp_path / "split", workers=2, progress=False, split_points=True, full_points=full_points)
    b = run_sweep(spec, tmp_path / "whole", workers=2, progress=False, split_points=False, full_points=full_points)
    fa, fb = _files(tmp_path / "split"), _files(tmp_path / "whole")
    assert fa.keys() == fb.keys() and fa == fb
    assert any(k.endswith("/events.csv") for k in fa) == full_points
    ta = pd.read_csv(tmp_path / "split" / "results.csv").drop(columns=["wall_time_s"])
    tb = pd.read_csv(tmp_path / "whole" / "results.csv").drop(columns=["wall_time_s"])
    pd.testing.assert_frame_equal(ta, tb)
    assert sorted(ta["status"]) == ["failed", "failed", "ok", "ok"]
    assert a.n_computed == b.n_computed == 4
    tuned = [json.loads(p.read_text()) for p in (tmp_path / "split" / "points").glob("*/summary.json")]
    assert {s["pim_placement"]["chosen_by"] for s in tuned} == {"tuned"}
    for p in (tmp_path / "split" / "points").glob("*/meta.json"):   # wall time: the sum of the units' times
        assert json.loads(p.read_text())["wall_time_s"] > 0


class _Recorder:
    """Stand-in units: a point with ``tune`` candidates and ``windows`` windows; records the
    order in which units start."""

    def __init__(self, monkeypatch, tune=4, windows=3, fail_plan=(), fail_window=(), keys=None, fail_tune=()):
        self.log: list[tuple] = []
        self.events: list[tuple] = []    # (unit, whether it was asked for event rows)
        rec = self

        def plan(task, mark=True):
            rec.log.append(("plan", task["hash"]))
            if task["hash"] in fail_plan:
                raise RuntimeError("plan failed")
            return {"config": task["hash"], "starts": list(range(windows)),
                    "candidates": [f"{task['hash']}-c{k}" for k in range(tune)] if tune else None,
                    "tuning_key": (keys or {}).get(task["hash"])}

        def tune_unit(ccfg):
            rec.log.append(("tune", ccfg))
            if ccfg in fail_tune:
                raise RuntimeError("tuning run failed")
            return {"throughput_tok_s": float(ccfg[-1])}

        def window(cfg, placement, i, start, events=False):
            rec.log.append(("window", cfg, i, placement))
            rec.events.append(("window", events))
            if (cfg, i) in fail_window:
                raise RuntimeError("window failed")
            return f"{cfg}-w{i}"

        def finish(cfg, placement, out_dir, results, starts, wall_s, events=False):
            rec.log.append(("finish", cfg, tuple(results)))
            return {"status": "ok", "wall_time_s": wall_s}

        def rest(cfg, placement, out_dir, wall_s, events=False, files_back=False):
            rec.log.append(("rest", cfg, placement))
            rec.events.append(("rest", events))
            if (cfg, "rest") in fail_window:
                raise RuntimeError("windows failed")
            return {"status": "ok", "wall_time_s": wall_s}

        def choose(cfg, outcomes):
            return ("chosen", cfg, tuple(o["throughput_tok_s"] for o in outcomes))

        monkeypatch.setattr(split, "unit_plan", plan)
        monkeypatch.setattr(split, "unit_tune", tune_unit)
        monkeypatch.setattr(split, "unit_window", window)
        monkeypatch.setattr(split, "unit_finish", finish)
        monkeypatch.setattr(split, "unit_windows_finish", rest)
        import ahasd_sim.modes.placement as placement
        monkeypatch.setattr(placement, "choose_placement", choose)


def _tasks(n):
    return [{"hash": f"p{i}", "dir": f"/nonexistent/p{i}"} for i in range(n)]


def test_unit_graph_of_a_tuned_point_in_order(monkeypatch):
    """One worker (a one-thread pool): plan, the 4 candidates, then, while another point waits
    to start, the windows and finish as one unit with the placement chosen from all four
    outcomes; the last point (none waits) sends each window alone, then finish with the
    windows in index order. The second point starts only when the first is done (with one
    worker a unit of the open point is always ready until its finish)."""
    r = _Recorder(monkeypatch, tune=4, windows=2)
    done = []
    with cf.ThreadPoolExecutor(1) as pool:
        left = split.run_split(_tasks(2), 1, done.append, pool)
    assert left == []
    tunes = [("tune", f"{p}-c{k}") for p in ("p0", "p1") for k in range(4)]
    chosen0, chosen1 = ("chosen", "p0", (0.0, 1.0, 2.0, 3.0)), ("chosen", "p1", (0.0, 1.0, 2.0, 3.0))
    assert r.log == [("plan", "p0"), *tunes[:4], ("rest", "p0", chosen0),
                     ("plan", "p1"), *tunes[4:], ("window", "p1", 0, chosen1), ("window", "p1", 1, chosen1),
                     ("finish", "p1", ("p1-w0", "p1-w1"))]
    assert [d["hash"] for d in done] == ["p0", "p1"] and all(d["status"] == "ok" for d in done)


def test_window_units_build_event_rows_only_for_points_that_write_events_csv(monkeypatch):
    """A point's window units (alone or together) get the point's ``events`` flag: event rows
    are built only for an events.csv (fails if the split path drops or inverts the flag)."""
    for events in (False, True):
        r = _Recorder(monkeypatch, tune=0, windows=2)
        tasks = [{**t, "events": events} for t in _tasks(2)]
        with cf.ThreadPoolExecutor(1) as pool:
            assert split.run_split(tasks, 1, lambda res: None, pool) == []
        assert {unit for unit, _ in r.events} == {"rest", "window"}    # windows together, then alone
        assert all(flag is events for _, flag in r.events)


def test_units_of_open_points_go_before_new_points_and_open_points_are_bounded(monkeypatch):
    """Two workers, ten untuned points of three windows: a plan starts only when no window or
    finish is ready, and never more than 2 x workers points are open at once."""
    r = _Recorder(monkeypatch, tune=0, windows=3)
    done = []
    with cf.ThreadPoolExecutor(2) as pool:
        left = split.run_split(_tasks(10), 2, done.append, pool)
    assert left == [] and sorted(d["hash"] for d in done) == sorted(f"p{i}" for i in range(10))
    open_points, peak = set(), 0
    for entry in r.log:
        if entry[0] == "plan":
            open_points.add(entry[1])
        elif entry[0] in ("finish", "rest"):
            open_points.discard(entry[1])
        peak = max(peak, len(open_points))
    assert peak <= 4
    finishes = [e for e in r.log if e[0] == "finish"]
    assert finishes and all(e[2] == tuple(f"{e[1]}-w{i}" for i in range(3)) for e in finishes)
    assert {e[1] for e in r.log if e[0] == "rest"} | {e[1] for e in finishes} == {f"p{i}" for i in range(10)}


def test_a_failed_unit_hands_its_point_to_the_whole_point_path(monkeypatch):
    r = _Recorder(monkeypatch, tune=2, windows=2, fail_plan={"p1"}, fail_window={("p2", "rest")})
    done = []
    with cf.ThreadPoolExecutor(1) as pool:
        left = split.run_split(_tasks(4), 1, done.append, pool)
    assert [t["hash"] for t in left] == ["p1", "p2"]
    assert [d["hash"] for d in done] == ["p0", "p3"]
    assert not any(e[0] == "finish" and e[1] in ("p1", "p2") for e in r.log)


def test_a_failed_window_of_the_last_point_hands_it_over(monkeypatch):
    r = _Recorder(monkeypatch, tune=0, windows=3, fail_window={("p0", 1)})
    done = []
    with cf.ThreadPoolExecutor(2) as pool:
        left = split.run_split(_tasks(1), 2, done.append, pool)
    assert [t["hash"] for t in left] == ["p0"] and done == []
    assert not any(e[0] == "finish" for e in r.log)


class _BrokenAfter(cf.ThreadPoolExecutor):
    """A pool whose futures fail with BrokenProcessPool from the ``n``-th submission on."""

    def __init__(self, n):
        super().__init__(1)
        self.n = n

    def submit(self, fn, *args):
        self.n -= 1
        if self.n < 0:
            fut = cf.Future()
            fut.set_exception(__import__("concurrent.futures.process").futures.process.BrokenProcessPool("a worker died"))
            return fut
        return super().submit(fn, *args)


def test_a_broken_pool_hands_every_unfinished_point_back(monkeypatch):
    """Point p0 finishes with its plan and windows+finish units; the 3rd submission (p1's plan)
    breaks the pool: p1 and the not yet started p2 go back, in order, and only p0 is reported."""
    _Recorder(monkeypatch, tune=0, windows=2)
    done = []
    pool = _BrokenAfter(2)
    try:
        left = split.run_split(_tasks(3), 1, done.append, pool)
    finally:
        pool.shutdown()
    assert [d["hash"] for d in done] == ["p0"]
    assert [t["hash"] for t in left] == ["p1", "p2"]


@pytest.mark.parametrize("flag, expected", [([], True), (["--whole-points"], False)])
def test_cli_whole_points_flag(monkeypatch, tmp_path, flag, expected):
    from ahasd_sim import __main__ as cli
    from ahasd_sim.sweep import runner
    seen = {}

    def fake_run_sweep(spec, out, **kw):
        seen.update(kw)
        raise SystemExit(0)

    monkeypatch.setattr(runner, "run_sweep", fake_run_sweep)
    with pytest.raises(SystemExit):
        cli.main(["sweep", "--config", str(ROOT / "hw_configs/sweeps/smoke.yaml"), "--out", str(tmp_path / "o"),
                  "--no-progress", *flag])
    assert seen["split_points"] is expected


def test_dask_split_points_write_the_files_of_local_whole_points(tmp_path):
    """The split units on a Dask cluster (in-process, two threads), the files coming back to
    the client: the same files as the local one-point-per-task path."""
    distributed = pytest.importorskip("distributed")
    spec = _spec(tmp_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        a = run_sweep(spec, tmp_path / "dask", executor="dask", dask_client=client, progress=False)
    b = run_sweep(spec, tmp_path / "whole", workers=2, progress=False, split_points=False)
    assert _files(tmp_path / "dask") == _files(tmp_path / "whole")
    assert a.n_computed == 4 and (a.n_ok, a.n_failed) == (2, 2)


def test_finish_files_returns_the_point_folder_as_bytes(tmp_path, monkeypatch):
    """unit_finish_files = unit_finish into a private folder, read back (no hidden staging files)."""
    def fake_finish(cfg, placement, out_dir, results, starts, wall_s, events=False):
        d = Path(out_dir)
        d.mkdir(parents=True)
        (d / "summary.json").write_text("{}")
        (d / ".staging-x").mkdir()
        return {"status": "ok", "wall_time_s": wall_s}

    monkeypatch.setattr(split, "unit_finish", fake_finish)
    out = split.unit_finish_files(None, None, str(tmp_path / "unused"), [], [], 1.5)
    assert out == {"status": "ok", "wall_time_s": 1.5, "files": {"summary.json": b"{}"}}
    assert not (tmp_path / "unused").exists()


def test_stop_signals_are_deferred_inside_the_unit_loop():
    """Inside deferred_stop_signals a SIGTERM is only recorded (no exception inside a pool's
    locking); raise_if_interrupted raises it at the loop's safe point; the handlers come back."""
    import os
    import signal

    from ahasd_sim import cli_common
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    cli_common.install_signal_handlers()
    try:
        with cli_common.deferred_stop_signals():
            os.kill(os.getpid(), signal.SIGTERM)        # handled at once on the main thread: recorded only
            assert cli_common._PendingSignal.signum == signal.SIGTERM
            with pytest.raises(cli_common.Terminated):
                cli_common.raise_if_interrupted()
        assert signal.getsignal(signal.SIGTERM) is cli_common._on_stop_signal
    finally:
        cli_common._PendingSignal.signum = None
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_point_error_names_the_sweep_file_for_its_overrides(tmp_path):
    """A value from the sweep's axes that does not resolve, or that no placement can run, is
    the sweep file's: the errors name it, not the base config file."""
    spec = _spec(tmp_path)
    res = run_sweep(spec, tmp_path / "out", workers=2, progress=False)
    failed = res.table[res.table["status"] == "failed"]
    assert len(failed) == 2
    for msg in failed["error"]:
        assert msg.startswith(f"{spec}: pim.ranks: no rank placement"), msg
    bad = tmp_path / "bad.yaml"
    bad.write_text(SPEC.format(root=ROOT).replace("pim.ranks: [16, 2]", "pim.ranks: [0]"))
    res = run_sweep(bad, tmp_path / "bad", workers=1, progress=False)
    (msg,) = set(res.table["error"])
    assert msg.startswith(f"{bad}: pim.ranks: expected >= "), msg


class _LazyTasks:
    """A lazy task source (as the runner's _TaskSource): records how many tasks were taken."""

    def __init__(self, n):
        self.n, self.taken = n, 0

    def __iter__(self):
        for t in _tasks(self.n):
            self.taken += 1
            yield t


def test_a_lazy_source_is_taken_as_workers_need_points(monkeypatch):
    """Six untuned points from a lazy source on one worker: the first plan runs when only the
    first task has been taken (the parent does not resolve every point before a worker starts),
    and points are taken one or two ahead of the one running (a prefetch while the worker is busy)."""
    from ahasd_sim.sweep.runner import _Pending
    r = _Recorder(monkeypatch, tune=0, windows=2)
    src = _LazyTasks(6)
    taken_at_plan = []
    plan = split.unit_plan

    def plan_counting(task, mark=True):
        taken_at_plan.append(src.taken)
        return plan(task, mark)

    monkeypatch.setattr(split, "unit_plan", plan_counting)
    done = []
    with cf.ThreadPoolExecutor(1) as pool:
        left = split.run_split(_Pending(src), 1, done.append, pool)
    assert left == [] and [d["hash"] for d in done] == [f"p{i}" for i in range(6)]
    assert taken_at_plan[0] == 1
    assert all(i + 1 <= taken <= i + 2 for i, taken in enumerate(taken_at_plan))
    assert [e[1] for e in r.log if e[0] == "plan"] == [f"p{i}" for i in range(6)]


def test_a_broken_pool_hands_back_the_points_a_lazy_source_still_holds(monkeypatch):
    """As test_a_broken_pool_hands_every_unfinished_point_back, from a lazy source: the points
    not yet taken from it go back too, in order."""
    from ahasd_sim.sweep.runner import _Pending
    _Recorder(monkeypatch, tune=0, windows=2)
    done = []
    pool = _BrokenAfter(2)
    try:
        left = split.run_split(_Pending(_LazyTasks(5)), 1, done.append, pool)
    finally:
        pool.shutdown()
    assert [d["hash"] for d in done] == ["p0"]
    assert [t["hash"] for t in left] == ["p1", "p2", "p3", "p4"]


def test_a_lazy_sweep_lists_every_point_and_counts_finished_ones(tmp_path):
    """With two workers the points are resolved while the workers run: points.csv and
    results.csv still list every point in order (a --limit run leaves the rest pending), the
    progress line names the folder, and a second run reuses what the first finished (its
    failed point, pim.ranks 2, runs again)."""
    import io
    spec = _spec(tmp_path)
    out = tmp_path / "lazy"
    buf = io.StringIO()
    a = run_sweep(spec, out, workers=2, progress=True, stream=buf, limit=2)
    assert f"split: 4 points, folder {out} (resolved as the workers start)" in buf.getvalue()
    assert list(pd.read_csv(out / "points.csv")["index"]) == [0, 1, 2, 3]
    assert len(a.table) == 4 and a.n_computed == 2 and a.n_pending == 2 and a.n_cached == 0
    assert not list(out.glob(".points.csv.*"))
    assert (a.n_ok, a.n_failed) == (1, 1)
    b = run_sweep(spec, out, workers=2, progress=False)
    assert b.n_cached == 1 and b.n_computed == 3 and b.n_pending == 0
    assert list(b.table["point"]) == list(a.table["point"])


def test_progress_total_can_be_corrected():
    import io
    from ahasd_sim.sweep.progress import Progress
    buf = io.StringIO()
    p = Progress(10, stream=buf, use_tqdm=False, min_interval_s=0.0)
    p.set_total(2)
    p.update("ok")
    p.update("ok")
    assert p.total == 2 and "2/2 (100%)" in buf.getvalue()


def test_a_kept_pool_serves_several_batches_with_the_same_workers(tmp_path):
    """Two batches through run_tasks with one WorkerPool: the second batch runs on the workers
    forked for the first (no new pool), and the files equal those of a run without the pool."""
    from ahasd_sim.sweep.executors import WorkerPool, run_tasks
    from ahasd_sim.sweep.runner import _prepare
    from ahasd_sim.sweep.spec import load_sweep_spec
    spec = load_sweep_spec(_spec(tmp_path))
    outs = {}
    for name in ("kept", "fresh"):
        out = tmp_path / name
        out.mkdir()
        _points, tasks, _cached = _prepare(spec, out, [], 4, False, None, None)
        done = []
        kept = WorkerPool(2) if name == "kept" else None
        try:
            run_tasks(tasks[:2], done.append, workers=2, pool=kept)
            pids = set(kept._pool._processes) if kept is not None else None
            run_tasks(tasks[2:], done.append, workers=2, pool=kept)
            if kept is not None:
                assert kept._pool is not None and set(kept._pool._processes) == pids
        finally:
            if kept is not None:
                kept.close()
        assert kept is None or kept._pool is None
        assert sorted(d["hash"] for d in done) == sorted(t["hash"] for t in tasks)
        outs[name] = {k.split("/", 1)[1]: v for k, v in _files(out).items()}
    assert outs["kept"] == outs["fresh"]


def test_a_kept_pool_whose_worker_died_is_replaced(tmp_path):
    """A worker of the kept pool killed between batches: the next batch's points still finish
    (on the whole-point path) and the broken pool is dropped; the batch after gets a new one."""
    import os
    import signal
    from ahasd_sim.sweep.executors import WorkerPool, run_tasks
    from ahasd_sim.sweep.runner import _prepare
    from ahasd_sim.sweep.spec import load_sweep_spec
    spec = load_sweep_spec(_spec(tmp_path))
    out = tmp_path / "out"
    out.mkdir()
    _points, tasks, _cached = _prepare(spec, out, [], 4, False, None, None)
    kept = WorkerPool(2)
    done = []
    try:
        run_tasks(tasks[:1], done.append, workers=2, pool=kept)
        first = kept._pool
        os.kill(next(iter(first._processes)), signal.SIGKILL)
        run_tasks(tasks[1:3], done.append, workers=2, pool=kept)
        assert kept._pool is None
        run_tasks(tasks[3:], done.append, workers=2, pool=kept)
        assert kept._pool is not None and kept._pool is not first
    finally:
        kept.close()
    assert sorted(d["hash"] for d in done) == sorted(t["hash"] for t in tasks)
    assert [d["status"] for d in done if d["hash"] == tasks[2]["hash"]] == ["ok"]


@pytest.mark.parametrize("killed_in_resolution", [False, True])
def test_an_interrupted_lazy_source_still_lists_every_point(tmp_path, killed_in_resolution):
    """A sweep stopped while its points are resolved lazily lists every point in results.csv:
    the points not resolved yet are resolved (none run), in order and with the hashes a full
    resolution gives, also when the stop signal ended the resolving generator itself."""
    from ahasd_sim.sweep.runner import _TaskSource
    from ahasd_sim.sweep.spec import expand, load_sweep_spec
    spec = load_sweep_spec(_spec(tmp_path))
    out = tmp_path / "out"
    (out / "points").mkdir(parents=True)
    src = _TaskSource(spec, out, [], 4, False, None, None)
    first = next(src)
    if killed_in_resolution:
        with pytest.raises(KeyboardInterrupt):
            src._gen.throw(KeyboardInterrupt())
    src.list_every_point()
    assert [p.hash for p in src.points] == [p.hash for p in expand(spec)]
    assert first["hash"] == src.points[0].hash
    assert src.complete == (not killed_in_resolution)
    assert not list(out.glob(".points.csv.*"))


class _SyncPool:
    """A pool that runs each unit when it is submitted: its future is done at once, so every unit
    submitted in one round of the scheduler is finished when the scheduler next looks (two plans
    submitted together both return before either point's tuning runs start)."""

    def submit(self, fn, *args):
        fut = cf.Future()
        try:
            fut.set_result(fn(*args))
        except Exception as exc:  # noqa: BLE001 - handed back as a unit's failure
            fut.set_exception(exc)
        return fut


def test_points_of_one_tuning_key_tune_once(monkeypatch):
    """p0, p1 and p3 share a tuning key (e.g. a study's windows of one design), p2 has its own.
    p0 and p1 are planned together: one of them runs the tuning, the other waits for it and
    starts none of its own; p3 comes later and takes the outcomes at once. Each chooses its
    placement from the shared outcomes; every point finishes."""
    r = _Recorder(monkeypatch, tune=2, windows=1, keys={"p0": "A", "p1": "A", "p2": "B", "p3": "A"})
    done = []
    left = split.run_split(_tasks(4), 2, done.append, _SyncPool())
    assert left == [] and sorted(d["hash"] for d in done) == ["p0", "p1", "p2", "p3"]
    tuners = sorted({e[1][:2] for e in r.log if e[0] == "tune"})
    assert len(tuners) == 2 and "p2" in tuners and len([e for e in r.log if e[0] == "tune"]) == 4
    tuner_a = next(t for t in tuners if t != "p2")
    placements = {e[1]: e[-1] for e in r.log if e[0] in ("rest", "window")}
    assert placements == {p: ("chosen", p, (0.0, 1.0)) for p in ("p0", "p1", "p2", "p3")}
    # both p0 and p1 were planned before the first tuning run: the other one waited
    order = [(e[0], e[1]) for e in r.log]
    assert max(order.index(("plan", "p0")), order.index(("plan", "p1"))) < order.index(("tune", f"{tuner_a}-c0"))
    # no point of key A runs a window before the tuning it uses has ended
    last_tune_a = max(i for i, e in enumerate(order) if e == ("tune", f"{tuner_a}-c1"))
    assert all(i > last_tune_a for i, e in enumerate(order) if e[0] in ("rest", "window") and e[1] in ("p0", "p1", "p3"))


def test_a_point_tuned_earlier_is_reused_with_one_worker(monkeypatch):
    """One worker: p1 (same key as p0) starts after p0 has finished, and runs no tuning."""
    r = _Recorder(monkeypatch, tune=2, windows=1, keys={"p0": "A", "p1": "A"})
    done = []
    with cf.ThreadPoolExecutor(1) as pool:
        assert split.run_split(_tasks(2), 1, done.append, pool) == []
    assert [e[1] for e in r.log if e[0] == "tune"] == ["p0-c0", "p0-c1"]
    assert {e[1]: e[-1] for e in r.log if e[0] in ("rest", "window")}["p1"] == ("chosen", "p1", (0.0, 1.0))


def test_a_failed_tuning_sends_its_waiting_points_to_the_whole_point_path(monkeypatch):
    """The tuning run of the key-A point raises: it and the point waiting for it go back to the
    whole-point path; p2 (another key) is not affected."""
    _Recorder(monkeypatch, tune=2, windows=1, keys={"p0": "A", "p1": "A", "p2": "B"},
              fail_tune=("p0-c1", "p1-c1"))
    done = []
    left = split.run_split(_tasks(3), 2, done.append, _SyncPool())
    assert sorted(t["hash"] for t in left) == ["p0", "p1"]
    assert [d["hash"] for d in done] == ["p2"]


def test_a_study_s_windows_tune_once_and_write_the_files_of_separate_tunings(tmp_path, monkeypatch):
    """A sweep over the reported window (run.trace_start_prompt, one window each): per mode the
    placement is tuned once for the three windows (the tuning runs never use the reported start
    prompt), and every file equals that of the whole-point path (where each point tunes for
    itself in a fresh worker) and of the in-process run."""
    spec = tmp_path / "w.yaml"
    spec.write_text(SPEC.replace("    run.windows: 2\n", "    run.windows: 1\n").replace(
        "axes:\n  pim.ranks: [16, 2]\n", "axes:\n  run.trace_start_prompt: [0, 1, 2]\n").format(root=ROOT))
    import ahasd_sim.modes.placement as placement
    log = tmp_path / "tuned.log"
    candidate = placement._candidate

    def counting(ccfg):   # the pool's workers inherit it (fork): counted in a file
        with open(log, "a") as fh:
            fh.write(ccfg.run.mode + "\n")
        return candidate(ccfg)

    monkeypatch.setattr(placement, "_candidate", counting)
    a = run_sweep(spec, tmp_path / "split", workers=2, progress=False, split_points=True)
    assert sorted(log.read_text().split()) == ["ahasd"] * 4 + ["operator_sync"] * 4   # 4 candidates per mode
    monkeypatch.setattr(placement, "_candidate", candidate)
    b = run_sweep(spec, tmp_path / "whole", workers=2, progress=False, split_points=False)
    c = run_sweep(spec, tmp_path / "serial", workers=1, progress=False)
    assert a.n_ok == b.n_ok == c.n_ok == 6
    strip = lambda files: {k.split("/", 1)[1]: v for k, v in files.items()}  # noqa: E731
    assert strip(_files(tmp_path / "split")) == strip(_files(tmp_path / "whole")) == strip(_files(tmp_path / "serial"))


def test_units_ahead_keep_more_units_out_than_workers(monkeypatch):
    """One worker: without units ahead the second point's plan waits until nothing of the first
    is ready; with one unit ahead (Dask: the next unit waits on the scheduler) the first round
    hands out both plans. Every point finishes either way."""
    for ahead, second in ((0, ("tune", "p0-c0")), (1, ("plan", "p1"))):
        r = _Recorder(monkeypatch, tune=2, windows=1)
        done = []
        assert split.run_split(_tasks(2), 1, done.append, _SyncPool(), units_ahead=ahead) == []
        assert sorted(d["hash"] for d in done) == ["p0", "p1"]
        assert [(e[0], e[1]) for e in r.log][:2] == [("plan", "p0"), second]


def test_the_sweep_s_own_dask_cluster_runs_without_the_workers_profiler():
    """The workers of a cluster the sweep (or a study) starts have Dask's statistical profiler
    off (a tenth of a point's time on a simulation's deep stacks)."""
    distributed = pytest.importorskip("distributed")
    from ahasd_sim.sweep.executors import local_dask_cluster

    def profiler_enabled():
        import dask
        return dask.config.get("distributed.worker.profile.enabled")

    with local_dask_cluster(1) as cluster, distributed.Client(cluster) as client:
        assert list(client.run(profiler_enabled).values()) == [False]
