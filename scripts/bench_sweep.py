#!/usr/bin/env python3
"""Benchmark: how a sweep scales with workers, and how much of a point is not simulation (issue 30).

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
worker processes (the `dask` extra). ``--granularity``: ``split`` (a point's tuning runs and
windows spread over the workers, the default of ``sweep``), ``whole`` (one point per task,
``sweep --whole-points``) or both, measured in turn at every worker count (interleaved, so both
see the same machine load); the 1-worker run is in-process and the same for both.
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
                           loop_timer, split, args.seeds).result()


def _child(sweep, overrides, executor, workers, limit, loop_timer, split=True, seeds=None) -> dict:
    import argparse
    return _one(_spec(argparse.Namespace(sweep=sweep, overrides=overrides, seeds=seeds)), executor, workers, limit,
                loop_timer, split)


def _one(spec, executor: str, workers: int, limit, loop_timer: bool, split: bool = True) -> dict:
    from ahasd_sim.sweep.runner import run_sweep
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as d:
        t = time.perf_counter()
        if loop_timer:
            with _LoopTimer() as lt:
                res = run_sweep(spec, Path(d) / "s", workers=workers, executor=executor, progress=False,
                                limit=limit, split_points=split)
            loop_s = lt.total_s
        else:
            res = run_sweep(spec, Path(d) / "s", workers=workers, executor=executor, progress=False, limit=limit,
                            split_points=split)
            loop_s = None
        wall = time.perf_counter() - t
    n = res.n_computed
    row = {"executor": executor, "granularity": "split" if split and workers > 1 else ("whole" if workers > 1 else "-"),
           "workers": workers, "points": n, "failed": res.n_failed, "wall_s": wall,
           "points_per_s": n / wall if wall > 0 else None}
    if loop_s is not None:
        row["event_loop_s"] = loop_s
        row["overhead_share"] = 1.0 - loop_s / wall if wall > 0 else None
    return row


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
    print(f"{'executor':8s} {'units':>5s} {'workers':>7s} {'points':>6s} {'wall s':>8s} {'points/s':>9s} "
          f"{'efficiency':>10s} {'overhead/point':>14s}")
    for ex in executors:
        base_wall = None
        for w in counts:
            for g in (grains if w > 1 else grains[:1]):
                row = _fresh(args, ex, w, loop_timer=(ex == "local" and w == 1), split=(g == "split"))
                if w == 1:
                    base_wall = row["wall_s"]
                row["efficiency"] = base_wall / (w * row["wall_s"]) if base_wall and row["wall_s"] > 0 else None
                rows.append(row)
                ov = f"{100 * row['overhead_share']:.1f}%" if row.get("overhead_share") is not None else "-"
                print(f"{ex:8s} {row['granularity']:>5s} {w:7d} {row['points']:6d} {row['wall_s']:8.2f} "
                      f"{row['points_per_s']:9.2f} {row['efficiency']:10.2f} {ov:>14s}", flush=True)
    if args.out:
        atomic_write_text(Path(args.out), to_json({"sweep": str(args.sweep), "cpus": os.cpu_count(),
                                                   "load_1min": os.getloadavg()[0], "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(run_script(parser(), body))
