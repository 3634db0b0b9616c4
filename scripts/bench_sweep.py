#!/usr/bin/env python3
"""Benchmark: how a sweep scales with workers, and how much of a point is not simulation (docs/performance.md).

Usage: python scripts/bench_sweep.py [--sweep hw_configs/sweeps/pim_design_space.yaml]
       [--workers 1,2,4,8,16] [--executor local|dask|both] [--set KEY=VALUE ...] [--limit N]
       [--granularity split,whole] [--seeds N] [--out results/bench_sweep.json]

Runs the same sweep from scratch (a fresh temporary folder each time) at every worker count and
prints, per executor and worker count: wall time, points/s and parallel efficiency
(wall(1) / (workers x wall(workers)), against the 1-worker run of the same executor).
Each measurement runs in a freshly spawned interpreter (cold caches, as a new sweep command).
The 1-worker local run is in-process and also measures the **overhead share per point**:
1 - (time inside SimPy's event loop, tuning runs included) / (the point's wall time), i.e.
configuration, cost tables, trace slicing, result files; the event-loop time is read by
wrapping ``simpy.Environment.run`` in this process only. ``--set`` overrides the sweep's base
(e.g. ``run.generated_tokens=1024``). Dask: a ``distributed.LocalCluster`` of single-thread
worker processes (the `dask` extra), started before the clock starts and reached by its address
as a running cluster would be, its workers holding the simulator's modules, not yet the traces
(``--dask-cold``: the cluster's start and the imports timed too). ``--granularity``: ``split`` (a point's tuning runs and
windows spread over the workers, the default of ``sweep``), ``whole`` (one point per task,
``sweep --whole-points``) or both, measured in turn at every worker count (interleaved, so both
see the same machine load); the 1-worker run is in-process and the same for both.

``--ceiling`` (default on) also measures what the host itself allows at every worker count: N
processes run the same work at once with nothing to schedule (the sweep's first R points one
after another, ``--ceiling-repeats``, after an untimed run of the next one in each process), and
the **host ceiling** is the time of that work alone over its mean time with N copies running (1.0 if N cores each ran as fast as one alone). A CPU whose clock
drops as more of its cores are busy, or cores that share caches and memory bandwidth, lower it;
no scheduler can do better than it, so the table also shows the **scheduling efficiency**,
efficiency / ceiling: what the sweep's own overheads (resolving points, starting workers, units
repeating work, an idle tail) leave of the hardware's scaling.
A benchmark, not a test: it never fails on speed.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402


def parser():
    import argparse
    p = script_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sweep", default="hw_configs/sweeps/pim_design_space.yaml", help="sweep spec")
    p.add_argument("--workers", default="1,2,4", help="comma-separated worker counts (>= 1)")
    p.add_argument("--executor", default="local", choices=("local", "dask", "both"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a key of the sweep's base (repeatable)")
    p.add_argument("--limit", type=int, default=None, help="run only the first N points (>= 1)")
    p.add_argument("--seeds", type=int, default=None, metavar="N",
                   help="run every point with seeds 0..N-1 (N times the points: a larger sweep)")
    p.add_argument("--granularity", default="split", help="split, whole or split,whole (interleaved)")
    p.add_argument("--dask-cold", action="store_true",
                   help="Dask: time the cluster's start too (default: the sweep connects to a running "
                        "cluster of single-thread workers, started before the clock starts)")
    p.add_argument("--ceiling", action=argparse.BooleanOptionalAction, default=True,
                   help="measure the host ceiling at every worker count (default on)")
    p.add_argument("--ceiling-repeats", type=int, default=3, metavar="R",
                   help="points each process runs, timed, for the ceiling (default 3)")
    p.add_argument("--out", default=None, help="write the results as JSON to this file")
    return p


class _LoopTimer:
    """Wraps simpy.Environment.run to add up the time spent inside event loops (this process)."""

    def __init__(self):
        import simpy
        self.total_s = 0.0
        self._env = simpy.Environment
        self._orig = simpy.Environment.run
        timer = self

        def run(env, until=None):
            t = time.perf_counter()
            try:
                return timer._orig(env, until)
            finally:
                timer.total_s += time.perf_counter() - t
        self._wrapped = run

    def __enter__(self):
        self._env.run = self._wrapped
        return self

    def __exit__(self, *exc):
        self._env.run = self._orig


def _spec(args):
    """The sweep spec, with ``--set`` applied to its base (written to a temporary copy whose
    base config path is absolute, so it resolves as the original does)."""
    from ahasd_sim.sweep.spec import load_sweep_spec
    spec = load_sweep_spec(args.sweep)
    seeds = getattr(args, "seeds", None)
    if not args.overrides and not seeds:
        return spec
    import yaml
    base = dict(spec.raw.get("base", {}) or {})
    base_set = dict(base.get("set", {}) or {})
    for item in args.overrides:
        k, sep, v = item.partition("=")
        if not sep or not k:
            from ahasd_sim.config.errors import InputError
            raise InputError(f"--set {item!r}: expected KEY=VALUE")
        base_set[k] = yaml.safe_load(v)
    base["set"] = base_set
    if "config" in base:
        base["config"] = str((Path(args.sweep).resolve().parent / base["config"]).resolve())
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-spec-")) / Path(args.sweep).name
    raw = {**spec.raw, "base": base}
    if seeds:
        raw["seeds"] = list(range(seeds))
    tmp.write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_sweep_spec(tmp)


def _fresh(args, executor: str, workers: int, loop_timer: bool, split: bool = True) -> dict:
    """:func:`_one` in a freshly spawned interpreter: no measurement inherits the caches (traces,
    cost tables, placement choices) an earlier one warmed."""
    import concurrent.futures as cf
    import multiprocessing as mp
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(_child, args.sweep, list(args.overrides), executor, workers, args.limit,
                           loop_timer, split, args.seeds, args.dask_cold).result()


def _child(sweep, overrides, executor, workers, limit, loop_timer, split=True, seeds=None, dask_cold=False) -> dict:
    import argparse
    return _one(_spec(argparse.Namespace(sweep=sweep, overrides=overrides, seeds=seeds)), executor, workers, limit,
                loop_timer, split, dask_cold)


def _import_simulator() -> None:
    import ahasd_sim.simulation  # noqa: F401
    import ahasd_sim.sweep.split  # noqa: F401


def _one(spec, executor: str, workers: int, limit, loop_timer: bool, split: bool = True,
         dask_cold: bool = False) -> dict:
    from ahasd_sim.sweep.runner import run_sweep
    cluster = None
    scheduler = None
    if executor == "dask" and not dask_cold:   # a cluster already running, as `dask scheduler` + workers
        from ahasd_sim.sweep.executors import local_dask_cluster
        cluster = local_dask_cluster(workers)   # as the sweep starts its own (profiler off)
        scheduler = cluster.scheduler_address
        from distributed import Client
        with Client(cluster) as c:   # workers that have run a sweep before hold the simulator's modules
            c.run(_import_simulator)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-sweep-") as d:
            t = time.perf_counter()
            if loop_timer:
                with _LoopTimer() as lt:
                    res = run_sweep(spec, Path(d) / "s", workers=workers, executor=executor, progress=False,
                                    limit=limit, split_points=split, scheduler=scheduler)
                loop_s = lt.total_s
            else:
                res = run_sweep(spec, Path(d) / "s", workers=workers, executor=executor, progress=False, limit=limit,
                                split_points=split, scheduler=scheduler)
                loop_s = None
            wall = time.perf_counter() - t
    finally:
        if cluster is not None:
            cluster.close()
    n = res.n_computed
    row = {"executor": executor, "granularity": "split" if split and workers > 1 else ("whole" if workers > 1 else "-"),
           "workers": workers, "points": n, "failed": res.n_failed, "wall_s": wall,
           "points_per_s": n / wall if wall > 0 else None}
    if loop_s is not None:
        row["event_loop_s"] = loop_s
        row["overhead_share"] = 1.0 - loop_s / wall if wall > 0 else None
    return row


def _ceiling_fresh(args, workers: int) -> dict:
    """:func:`_ceiling_child` in a freshly spawned interpreter."""
    import concurrent.futures as cf
    import multiprocessing as mp
    with cf.ProcessPoolExecutor(1, mp_context=mp.get_context("spawn")) as pool:
        return pool.submit(_ceiling_child, args.sweep, list(args.overrides), workers, args.ceiling_repeats).result()


def _ceiling_copy(tasks: list[dict], barrier, out_q) -> None:
    from ahasd_sim.sweep.worker import run_point
    base = Path(tasks[0]["dir"]) / f"copy-{os.getpid()}"
    run_point(dict(tasks[-1], dir=str(base / "warm")))     # untimed: this process's shared caches filled
    barrier.wait()
    t, c = time.perf_counter(), time.process_time()
    for r, task in enumerate(tasks[:-1]):
        run_point(dict(task, dir=str(base / f"r{r}")))
    out_q.put((time.perf_counter() - t, time.process_time() - c))


def _ceiling_child(sweep, overrides, workers: int, repeats: int) -> dict:
    """``workers`` forked copies of the same work, started together: the sweep's first
    ``repeats`` points one after another, after an untimed run of the next point (a point is run
    once per process: a second run of it would reuse its placement choice). Mean wall time per
    point (the parent loads the simulator and the traces first, as a sweep does)."""
    import argparse
    import itertools
    import multiprocessing as mp
    from ahasd_sim.sweep.runner import _warm_traces
    from ahasd_sim.sweep.spec import iter_points
    spec = _spec(argparse.Namespace(sweep=sweep, overrides=overrides, seeds=None))
    pts = list(itertools.islice((p for p in iter_points(spec, keep_config=False) if p.valid), repeats + 1))
    with tempfile.TemporaryDirectory(prefix="bench-ceiling-") as d:
        tasks = [{"hash": pt.hash, "dir": d, "config_path": str(pt.config_path), "overrides": list(pt.overrides),
                  "seed": pt.seed, "events": False, "source": str(spec.source) if spec.source else None} for pt in pts]
        _warm_traces(tasks[0])
        ctx = mp.get_context("fork")
        barrier, out_q = ctx.Barrier(workers), ctx.Queue()
        procs = [ctx.Process(target=_ceiling_copy, args=(tasks, barrier, out_q)) for _ in range(workers)]
        for pr in procs:
            pr.start()
        res = [out_q.get() for _ in procs]
        for pr in procs:
            pr.join()
    n = max(len(pts) - 1, 1)
    walls = [w / n for w, _ in res]
    return {"workers": workers, "points_per_copy": n, "point_wall_s": sum(walls) / len(walls),
            "point_wall_max_s": max(walls), "point_cpu_s": sum(c / n for _, c in res) / len(res)}


def body(args) -> int:
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.output import atomic_write_text, to_json
    try:
        counts = [int(x) for x in args.workers.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"--workers {args.workers!r}: expected comma-separated integers") from None
    if not counts or min(counts) < 1:
        raise InputError(f"--workers {args.workers!r}: every count must be >= 1")
    if args.seeds is not None and args.seeds < 1:
        raise InputError(f"--seeds {args.seeds}: expected >= 1")
    if args.ceiling_repeats < 1:
        raise InputError(f"--ceiling-repeats {args.ceiling_repeats}: expected >= 1")
    if args.limit is not None and args.limit < 1:
        raise InputError(f"--limit {args.limit}: expected >= 1")
    grains = [g.strip() for g in args.granularity.split(",") if g.strip()]
    if not grains or any(g not in ("split", "whole") for g in grains):
        raise InputError(f"--granularity {args.granularity!r}: expected split, whole or split,whole")
    if args.out:
        check_output_file(args.out)
    spec = _spec(args)                  # checked here: a bad spec fails before any child starts
    executors = ("local", "dask") if args.executor == "both" else (args.executor,)
    counts = sorted(set(counts) | {1})
    rows = []
    print(f"sweep {spec.name} ({args.sweep}); {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.2f}; "
          f"python {platform.python_version()}")
    ceiling = {}
    if args.ceiling:
        alone = None
        for w in counts:
            c = _ceiling_fresh(args, w)
            alone = alone or c["point_wall_s"]
            c["ceiling"] = alone / c["point_wall_s"]
            ceiling[w] = c
            print(f"host ceiling at {w:3d} workers: {c['ceiling']:.2f} (a point {c['point_wall_s']:.3f} s, "
                  f"slowest copy {c['point_wall_max_s']:.3f} s, {c['point_cpu_s']:.3f} CPU-s)", flush=True)
    print(f"{'executor':8s} {'units':>5s} {'workers':>7s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} "
          f"{'efficiency':>10s} {'ceiling':>7s} {'sched.eff':>9s} {'overhead/point':>14s}")
    for ex in executors:
        base_wall = None
        for w in counts:
            for g in (grains if w > 1 else grains[:1]):
                row = _fresh(args, ex, w, loop_timer=(ex == "local" and w == 1), split=(g == "split"))
                if w == 1:
                    base_wall = row["wall_s"]
                row["efficiency"] = base_wall / (w * row["wall_s"]) if base_wall and row["wall_s"] > 0 else None
                if w in ceiling:
                    row["host_ceiling"] = ceiling[w]["ceiling"]
                    row["scheduling_efficiency"] = row["efficiency"] / ceiling[w]["ceiling"]
                rows.append(row)
                ov = f"{100 * row['overhead_share']:.1f}%" if row.get("overhead_share") is not None else "-"
                ce = f"{row['host_ceiling']:7.2f} {row['scheduling_efficiency']:9.2f}" if w in ceiling else f"{'-':>7s} {'-':>9s}"
                print(f"{ex:8s} {row['granularity']:>5s} {w:7d} {row['points']:6d} {row['wall_s']:8.2f} "
                      f"{row['points_per_s']:9.2f} {row['efficiency']:10.2f} {ce} {ov:>14s}", flush=True)
    if args.out:
        atomic_write_text(Path(args.out), to_json({"sweep": str(args.sweep), "cpus": os.cpu_count(),
                                                   "load_1min": os.getloadavg()[0], "rows": rows,
                                                   "host_ceiling": list(ceiling.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(parser(), body))
