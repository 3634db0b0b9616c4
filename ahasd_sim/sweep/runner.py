"""Run a sweep: expand the spec, skip finished points, execute the rest, tabulate.

Layout of a sweep folder (default ``sweeps/<name>/``)::

    spec.yaml          copy of the sweep file as given
    points.csv         every point: index, folder, axis values, overrides (written first)
    points/<hash>/     one folder per resolved config (ahasd_sim.output.write_run files,
                       or error.json for a failed point)
    results.csv        tidy table, one row per point (written atomically at the end, also
                       after Ctrl-C with the unfinished points as ``pending``)

Executors: ``local`` (``concurrent.futures.ProcessPoolExecutor``, ``workers`` processes,
default ``os.cpu_count()``; ``workers=1`` runs in-process) and ``dask``
(``distributed.Client`` on ``scheduler`` or a ``LocalCluster`` of ``workers`` processes;
results come back to the client as file contents, so the workers need the trace files
but not the sweep folder).
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from ..config.errors import InputError
from ..output import atomic_write_text
from .progress import Progress, fmt_duration
from .results import build_table, write_table
from .spec import SEED_COL, Point, SweepSpec, expand, load_sweep_spec
from .worker import error_record, is_done, materialise, run_point, run_point_files, write_error

EXECUTORS = ("local", "dask")


@dataclass
class SweepResult:
    out_dir: Path
    points: list[Point]
    table: pd.DataFrame
    n_cached: int = 0            # finished before this invocation
    n_computed: int = 0          # run by this invocation (ok or failed)
    wall_s: float = 0.0
    failed_dirs: list[Path] = field(default_factory=list)

    @property
    def n_points(self) -> int:
        return len(self.table)

    def count(self, status: str) -> int:
        return int((self.table["status"] == status).sum()) if len(self.table) else 0

    @property
    def n_ok(self) -> int:
        return self.count("ok")

    @property
    def n_failed(self) -> int:
        return self.count("failed")

    @property
    def n_pending(self) -> int:
        return self.count("pending")

    @property
    def points_per_s(self) -> float | None:
        return self.n_computed / self.wall_s if self.n_computed and self.wall_s > 0 else None


def default_out_dir(spec: SweepSpec) -> Path:
    return Path("sweeps") / spec.name


def _write_manifest(spec: SweepSpec, points: list[Point], out: Path, axis_cols: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "spec.yaml", spec.source.read_text())
    rows = []
    for pt in points:
        row = {"index": pt.index, "point": pt.hash, "config_file": str(pt.config_path)}
        row.update({c: pt.labels.get(c) for c in axis_cols})
        row["overrides"] = " ".join(pt.overrides)
        rows.append(row)
    df = pd.DataFrame(rows)
    from ..output import atomic_write
    atomic_write(out / "points.csv", lambda fh: df.to_csv(fh, index=False))


def _unique_tasks(points: list[Point], points_dir: Path) -> tuple[list[dict], int, list[Point]]:
    """(tasks to run, number of distinct finished points, invalid points)."""
    tasks: list[dict] = []
    seen: set[str] = set()
    cached = 0
    invalid = []
    for pt in points:
        if pt.hash in seen:
            continue
        seen.add(pt.hash)
        d = points_dir / pt.hash
        stale = d / RUNNING
        if stale.exists():
            stale.unlink()
        if not pt.valid:
            invalid.append(pt)
            continue
        if is_done(d):
            cached += 1
            continue
        tasks.append({"hash": pt.hash, "dir": str(d), "config": pt.config})
    return tasks, cached, invalid


# ---------------------------------------------------------------- executors
def _run_serial(tasks: list[dict], on_done: Callable[[dict], None]) -> None:
    for t in tasks:
        on_done(run_point(t))


RUNNING = ".running"   # marker a pool worker keeps in a point folder while it runs the point


def _pool_entry(task: dict) -> dict:
    """What a pool worker runs: mark the point as started (so that a worker death can be
    pinned on it), then run it."""
    d = Path(task["dir"])
    d.mkdir(parents=True, exist_ok=True)
    marker = d / RUNNING
    marker.touch()
    try:
        return run_point(task)
    finally:
        try:
            marker.unlink()
        except FileNotFoundError:
            pass


def _died(t: dict, on_done: Callable[[dict], None]) -> None:
    exc = RuntimeError("worker process died while running this point (killed, or out of memory?)")
    rec = error_record(exc, tb="")
    write_error(Path(t["dir"]), rec)
    on_done({"hash": t["hash"], "status": "failed", "error_type": rec["type"], "error": rec["message"]})


def _run_local(tasks: list[dict], workers: int, on_done: Callable[[dict], None]) -> None:
    """Process pool. A worker that dies (killed, out of memory, a crash in native code) breaks
    the pool: points that had not started are resubmitted to a fresh pool; points that were
    running are re-run one at a time in a pool of their own, so a second death is pinned on
    the point that caused it, which is then reported as failed."""
    todo = list(tasks)
    suspects: list[dict] = []
    while todo or suspects:
        if todo:
            broken = _pool_round(todo, workers, on_done)
            todo = []
            for t in broken:
                marker = Path(t["dir"]) / RUNNING
                if marker.exists():
                    marker.unlink()
                    suspects.append(t)
                else:
                    todo.append(t)
            if todo:
                continue
        while suspects:
            t = suspects.pop(0)
            if _pool_round([t], 1, on_done):
                _died(t, on_done)


def _pool_round(todo: list[dict], workers: int, on_done: Callable[[dict], None]) -> list[dict]:
    """Run ``todo`` in one pool; return the tasks lost to a broken pool."""
    broken: list[dict] = []
    pool = cf.ProcessPoolExecutor(max_workers=workers)
    try:
        futs = {pool.submit(_pool_entry, t): t for t in todo}
        for fut in cf.as_completed(futs):
            t = futs[fut]
            try:
                res = fut.result()
            except cf.process.BrokenProcessPool:
                broken.append(t)
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. the task could not be pickled
                rec = error_record(exc)
                write_error(Path(t["dir"]), rec)
                res = {"hash": t["hash"], "status": "failed", "error_type": rec["type"], "error": rec["message"]}
            on_done(res)
    except BaseException:
        # Ctrl-C: drop queued points, let the running ones end (they get the SIGINT too),
        # so results.csv is a consistent snapshot. A second Ctrl-C stops the wait.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return broken


def _run_dask(tasks: list[dict], workers: int, scheduler: str | None, on_done: Callable[[dict], None],
              client: Any = None) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise InputError("--executor dask needs Dask distributed: pip install 'ahasd_sim[dask]'") from None
    own_client = own_cluster = None
    if client is None:
        if scheduler:
            try:
                own_client = client = Client(scheduler, timeout="20s")
            except (OSError, TimeoutError) as exc:
                raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
        else:
            own_cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
            own_client = client = Client(own_cluster)
    try:
        by_key = {}
        futs = []
        for t in tasks:
            f = client.submit(run_point_files, t, key=f"ahasd-point-{t['hash']}", pure=False)
            by_key[f.key] = t
            futs.append(f)
        for fut in as_completed(futs):
            t = by_key[fut.key]
            try:
                res = fut.result()
                files = res.pop("files", {})
                materialise(files, Path(t["dir"]))
            except Exception as exc:  # noqa: BLE001 - a lost worker, a pickling problem ...
                rec = error_record(exc)
                write_error(Path(t["dir"]), rec)
                res = {"hash": t["hash"], "status": "failed", "error_type": rec["type"], "error": rec["message"]}
            on_done(res)
    except BaseException:
        for f in futs if "futs" in locals() else []:
            f.cancel()
        raise
    finally:
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            own_cluster.close()


# ---------------------------------------------------------------- driver
def run_sweep(spec: SweepSpec | str | Path, out_dir: str | Path | None = None, *, workers: int | None = None,
              executor: str = "local", scheduler: str | None = None, progress: bool = True,
              limit: int | None = None, dask_client: Any = None, stream=None) -> SweepResult:
    """Run every unfinished point of ``spec`` and write ``results.csv``.

    ``limit`` runs at most that many of the unfinished points (the rest stay ``pending``;
    used to run a sweep in slices and by the resume tests). ``dask_client`` reuses an
    existing ``distributed.Client``. A KeyboardInterrupt writes results.csv (unfinished
    points ``pending``) before it propagates.
    """
    if not isinstance(spec, SweepSpec):
        spec = load_sweep_spec(spec)
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor '{executor}' (expected one of {', '.join(EXECUTORS)})")
    if workers is None:
        workers = os.cpu_count() or 1
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec)
    points_dir = out / "points"
    t0 = time.perf_counter()

    points = expand(spec)
    axis_cols = [*spec.axis_columns(), SEED_COL]
    _write_manifest(spec, points, out, axis_cols)

    tasks, cached, invalid = _unique_tasks(points, points_dir)
    for pt in invalid:   # configs that do not resolve fail without running
        write_error(points_dir / pt.hash, error_record(pt.error, tb=""))
    if limit is not None:
        tasks = tasks[: max(0, int(limit))]

    prog = Progress(len(tasks), enabled=progress, stream=stream, desc=spec.name)
    computed = 0

    def on_done(res: dict) -> None:
        nonlocal computed
        computed += 1
        prog.update(res.get("status", "failed"))

    result = SweepResult(out, points, pd.DataFrame())
    try:
        if tasks:
            if executor == "dask":
                _run_dask(tasks, workers, scheduler, on_done, client=dask_client)
            elif workers == 1 or len(tasks) == 1:
                _run_serial(tasks, on_done)
            else:
                _run_local(tasks, min(workers, len(tasks)), on_done)
    finally:
        prog.close()
        table = build_table(points, points_dir, axis_cols)
        write_table(table, out / "results.csv")
        result.table = table
        result.n_cached = cached
        result.n_computed = computed
        result.wall_s = time.perf_counter() - t0
        result.failed_dirs = sorted({points_dir / h for h in table.loc[table["status"] == "failed", "point"]})
    return result


def summarize(result: SweepResult) -> str:
    rate = result.points_per_s
    lines = [f"sweep {result.out_dir}: {result.n_points} points, {result.n_ok} ok, {result.n_failed} failed"
             + (f", {result.n_pending} pending" if result.n_pending else "")
             + f"; computed {result.n_computed}, reused {result.n_cached} finished"
             + f" in {fmt_duration(result.wall_s)}"
             + (f" ({rate:.2f} points/s)" if rate else ""),
             f"results: {result.out_dir / 'results.csv'}"]
    if result.n_failed:
        failed = result.table[result.table["status"] == "failed"]
        lines.append(f"{result.n_failed} point(s) failed; see error.json in:")
        for _, row in failed.drop_duplicates("point").head(10).iterrows():
            lines.append(f"  {result.out_dir / 'points' / row['point']}: {row['error_type']}: {row['error']}")
        more = failed["point"].nunique() - 10
        if more > 0:
            lines.append(f"  ... and {more} more (status column of results.csv)")
    return "\n".join(lines)


def run_sweep_cli(args) -> int:
    """``python -m ahasd_sim sweep``: 0 if every point succeeded, 1 if some failed."""
    spec = load_sweep_spec(args.config)
    try:
        res = run_sweep(spec, args.out, workers=args.workers, executor=args.executor, scheduler=args.scheduler,
                        progress=not args.no_progress)
    except KeyboardInterrupt:
        out = Path(args.out) if args.out else default_out_dir(spec)
        print(f"interrupted: finished points are kept in {out / 'points'}; run the same command again to "
              "compute only the missing ones", file=sys.stderr)
        raise
    print(summarize(res))
    if getattr(args, "debug", False) and res.n_failed:
        for d in res.failed_dirs:
            tb = (d / "error.json").read_text() if (d / "error.json").is_file() else ""
            print(tb, file=sys.stderr)
    return 0 if res.n_failed == 0 and res.n_pending == 0 else 1


__all__ = ["SweepResult", "run_sweep", "run_sweep_cli", "summarize", "default_out_dir", "EXECUTORS"]


def iter_point_dirs(result: SweepResult) -> Iterable[Path]:
    for h in result.table["point"].unique():
        yield result.out_dir / "points" / h
