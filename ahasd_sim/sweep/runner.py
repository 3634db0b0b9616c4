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
import csv
import datetime as _dt
import itertools
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import pandas as pd

from ..cli_common import raise_if_interrupted
from ..config.errors import InputError, OutputError
from ..outdir import apply_umask, check_not_locked, check_writable_dir, lock_dir
from ..output import atomic_write_text, to_json
from .progress import Progress, fmt_duration
from .results import build_table, write_table
from .spec import SEED_COL, Point, SweepSpec, count_points, iter_points, load_sweep_spec, spec_identity
from .worker import RUNNING as _WORKER_RUNNING
from .worker import SUMMARY
from .worker import error_record, is_done, one_line, materialise, run_point, run_point_files, task_config, write_error

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


SWEEP_JSON = "sweep.json"
#: above this many points a sweep warns (set-up alone takes minutes) ...
LARGE_SWEEP_POINTS = 10_000
#: ... and above this many it refuses (split it, or zip axes instead of crossing them)
MAX_SWEEP_POINTS = 250_000


def _check_folder(spec: SweepSpec, out: Path, flag: str = "--out") -> None:
    """Refuse a folder that holds a different sweep, or something that is not a sweep."""
    if not out.is_dir() or not any(p for p in out.iterdir() if p.name != ".lock"):
        return
    ident = spec_identity(spec)
    meta = out / SWEEP_JSON
    old_spec = out / "spec.yaml"
    if meta.is_file():
        try:
            old = json.loads(meta.read_text()).get("spec_sha256_12")
        except (OSError, ValueError):
            old = None
        if old == ident:
            return
        raise OutputError(f"{flag} {out}: holds another sweep (from {json.loads(meta.read_text()).get('spec_file')!s}, "
                          f"spec {old}; this one is {ident}); a changed sweep goes into a new --out (or remove "
                          "the folder to start over)")
    if old_spec.is_file():   # a folder written before sweep.json existed
        import yaml
        try:
            same = yaml.safe_load(old_spec.read_text(errors="replace")) == spec.raw
        except yaml.YAMLError:
            same = False
        if same:
            return
        raise OutputError(f"{flag} {out}: holds another sweep (its spec.yaml differs from {spec.source}); "
                          "use another --out, or remove the folder to start over")
    first = sorted(p.name for p in out.iterdir())[0]
    raise OutputError(f"{flag} {out}: folder exists and is not a sweep folder (it contains '{first}'); "
                      "choose a new folder")


def _clean_stale(points_dir: Path) -> None:
    """Markers and staging folders of points whose worker was killed (we hold the lock)."""
    if not points_dir.is_dir():
        return
    for d in points_dir.iterdir():
        if not d.is_dir():
            continue
        for x in d.iterdir():
            if x.name == RUNNING:
                x.unlink()
            elif x.name.startswith(".staging-") and x.is_dir():
                shutil.rmtree(x, ignore_errors=True)
            elif x.name.startswith(".") and x.name.endswith(".tmp"):
                x.unlink()


def _clean_stale_files(out: Path) -> None:
    """Temporary files (``.NAME.*.tmp``) a killed sweep left in its folder (we hold the lock, so
    no live writer owns them)."""
    for x in out.glob(".*.tmp"):
        if x.is_file() and not x.is_symlink():
            x.unlink(missing_ok=True)


class _TaskSource:
    """The sweep's tasks, its points resolved one at a time as they are asked for (iterate it),
    so that workers can start on the first points while the parent resolves the rest (docs/performance.md:
    resolving 48 points took 0.27-0.47 s on the 16-core host before any worker started).
    points.csv is written as the points are resolved and put in place (atomically) when the
    last one is; ``points`` and ``cached`` grow as it goes, ``complete`` says whether every
    point has been resolved. Points already finished, duplicates and configs that do not
    resolve (which get their error.json here) are not tasks."""

    def __init__(self, spec: SweepSpec, out: Path, axis_cols: list[str], n_points: int, progress: bool, stream,
                 limit: int | None, events: bool = False, recompute: bool = False):
        self.points: list[Point] = []
        self.recompute = recompute
        self.cached = 0
        self.n_tasks = 0
        self.complete = False
        self._args = (spec, out, axis_cols, n_points, progress, stream, limit, events)
        self._gen = self._tasks()

    def __iter__(self):
        return self

    def __next__(self) -> dict:
        return next(self._gen)

    def rest(self) -> list[dict]:
        """Resolve every point not resolved yet; return the tasks among them."""
        return list(self._gen)

    def close(self) -> None:
        """Stop resolving (the partial points.csv is removed; the points resolved so far stay)."""
        self._gen.close()

    def list_every_point(self) -> None:
        """Resolve the points not resolved yet, running none of them, so that results.csv lists
        every point of an interrupted sweep (those never started as pending). Stop signals are
        held back meanwhile; if the resolution itself was interrupted (its generator ended with
        the exception), the points after the last one listed are resolved anew."""
        from ..cli_common import deferred_stop_signals
        if self.complete:
            return
        with deferred_stop_signals():
            self.rest()
            if not self.complete:
                spec = self._args[0]
                self.points.extend(itertools.islice(iter_points(spec, keep_config=False), len(self.points), None))

    def _tasks(self):
        spec, out, axis_cols, n_points, progress, stream, limit, events = self._args
        points_dir = out / "points"
        prog = Progress(n_points, enabled=progress and n_points >= 200, stream=stream, desc=f"{spec.name}: resolving")
        seen: set[str] = set()
        fd, tmp = tempfile.mkstemp(prefix=".points.csv.", suffix=".tmp", dir=out)
        os.close(fd)
        cols = ["index", "point", "config_file", *axis_cols, "overrides"]
        try:
            with open(tmp, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(cols)
                for pt in iter_points(spec, keep_config=False):
                    self.points.append(pt)
                    prog.update("ok")
                    w.writerow([pt.index, pt.hash, str(pt.config_path), *[pt.labels.get(c) for c in axis_cols],
                                " ".join(pt.overrides)])
                    if pt.hash in seen:
                        continue
                    seen.add(pt.hash)
                    d = points_dir / pt.hash
                    if not pt.valid:   # a config that does not resolve fails without running
                        write_error(d, error_record(pt.error, tb=""))
                        continue
                    if is_done(d, events):
                        if not self.recompute:
                            self.cached += 1
                            continue
                        (d / SUMMARY).unlink()    # unfinished until computed again (an interrupt keeps it so)
                    if limit is None or self.n_tasks < limit:
                        self.n_tasks += 1
                        yield {"hash": pt.hash, "dir": str(d), "config_path": str(pt.config_path),
                               "overrides": list(pt.overrides), "seed": pt.seed, "events": events,
                               "source": str(spec.source) if spec.source else None}
            apply_umask(Path(tmp))
            os.replace(tmp, out / "points.csv")
            self.complete = True
        finally:
            prog.close()
            if os.path.exists(tmp):
                os.unlink(tmp)


def _prepare(spec: SweepSpec, out: Path, axis_cols: list[str], n_points: int, progress: bool, stream,
             limit: int | None, events: bool = False) -> tuple[list[Point], list[dict], int]:
    """Resolve every point (lazily, with progress), write points.csv; return (points without
    configs, tasks to run, number of finished points)."""
    src = _TaskSource(spec, out, axis_cols, n_points, progress, stream, limit, events)
    tasks = src.rest()
    return src.points, tasks, src.cached


class _Pending:
    """Tasks from a list or a lazy source, taken one at a time (``popleft``); truth-testing it
    takes the next task from the source when none is buffered (for a :class:`_TaskSource`:
    resolves the next point)."""

    def __init__(self, tasks: Iterable[dict]):
        self._buf: deque = deque(tasks) if isinstance(tasks, (list, tuple, deque)) else deque()
        self._it = None if isinstance(tasks, (list, tuple, deque)) else iter(tasks)

    @classmethod
    def of(cls, tasks: "Iterable[dict] | _Pending") -> "_Pending":
        return tasks if isinstance(tasks, cls) else cls(tasks)

    def __bool__(self) -> bool:
        if not self._buf and self._it is not None:
            try:
                self._buf.append(next(self._it))
            except StopIteration:
                self._it = None
        return bool(self._buf)

    def __iter__(self):
        while self:
            yield self._buf.popleft()

    def prefetch(self, most: int) -> bool:
        """Take one more task from a lazy source into the buffer, if it holds fewer than ``most``;
        whether it did."""
        if self._it is None or len(self._buf) >= most:
            return False
        try:
            self._buf.append(next(self._it))
        except StopIteration:
            self._it = None
            return False
        return True

    def first(self) -> dict | None:
        return self._buf[0] if self else None

    def popleft(self) -> dict:
        if not self:
            raise IndexError("no task left")
        return self._buf.popleft()

    def rest(self) -> list[dict]:
        """Every task left (resolving the rest of a lazy source); empties this."""
        out = list(self._buf)
        self._buf.clear()
        if self._it is not None:
            out.extend(self._it)
            self._it = None
        return out


# ---------------------------------------------------------------- executors
def _run_serial(tasks: Iterable[dict], on_done: Callable[[dict], None]) -> None:
    for t in (tasks.rest() if isinstance(tasks, _Pending) else tasks):
        raise_if_interrupted()
        on_done(run_point(t))


RUNNING = _WORKER_RUNNING   # marker a pool worker keeps in a point folder while it runs the point


def _watch_parent(parent_pid: int) -> None:
    """Exit when the sweep's parent process is gone (killed with SIGKILL, crashed): a pool
    worker must never outlive the sweep and keep writing into its folder."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(1)


def _worker_init(parent_pid: int) -> None:
    """Pool workers: default SIGTERM (the parent stops them), ignore SIGINT (Ctrl-C reaches
    the whole process group; the parent decides), die with the parent."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:   # Linux: the kernel sends SIGTERM when the parent dies
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError, TypeError):    # not Linux (Windows: CDLL(None) is a TypeError)
        pass
    if os.getppid() != parent_pid:
        os._exit(1)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


def _stop_workers(pool: cf.ProcessPoolExecutor) -> None:
    """Terminate the pool's processes now (Ctrl-C, SIGTERM): running points stay pending.

    A worker stopped while it sends a result (a window's rows are tens of kB, more than one
    write to the pipe) leaves a message cut short, and the pool's manager thread, already
    reading it, would wait for the rest forever: ``shutdown`` (and the interpreter's exit,
    which joins that thread) hung. This process holds the pipe's last write end once the
    workers are gone, so closing it ends that read (end of file: the pool is broken and shuts
    down). ``tests/test_faults.py`` stops a worker in mid-message."""
    procs = list((getattr(pool, "_processes", None) or {}).values())   # None once the pool is shut down
    for proc in procs:
        try:
            proc.terminate()
        except (OSError, AttributeError):
            pass
    for proc in procs:
        try:
            proc.join(timeout=5)
            if proc.is_alive():   # SIGTERM is the workers' default action; this is a last resort
                proc.kill()
                proc.join(timeout=5)
        except (OSError, AttributeError, AssertionError, ValueError):
            pass
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None and not any(_is_alive(p) for p in procs):
        try:
            writer.close()
        except OSError:
            pass


def _is_alive(proc) -> bool:
    try:
        return proc.is_alive()
    except (OSError, ValueError, AssertionError):
        return False


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


def _run_local(tasks: Iterable[dict], workers: int, on_done: Callable[[dict], None], split: bool = False,
               kept: WorkerPool | None = None) -> None:
    """Process pool (``kept``'s, for the split units, if given). With ``split``, the points'
    units first (:mod:`ahasd_sim.sweep.split`;
    ``tasks`` may be a lazy :class:`_TaskSource`, taken as workers need points); what that
    leaves (a unit failed, the pool broke) runs one point per task: a worker that dies
    (killed, out of memory, a crash in native code) breaks the pool: points that had not started
    are resubmitted to a fresh pool; points that were running are re-run one at a time in a pool
    of their own, so a second death is pinned on the point that caused it, which is then
    reported as failed."""
    import gc
    pending = _Pending.of(tasks)
    suspects: list[dict] = []
    if kept is not None and split and pending:
        kept.pool(pending.first())
        todo = _split_round(pending, workers, on_done, kept)
        _run_pools(todo, suspects, min(workers, max(len(todo), 1)), on_done)
        return
    _warm_parent(pending.first())
    try:
        todo = _split_round(pending, workers, on_done) if split and pending else pending.rest()
        _run_pools(todo, suspects, min(workers, max(len(todo), 1)), on_done)
    finally:
        gc.unfreeze()   # the caller's objects are the collector's again (a sweep run inside a longer process)


def _run_pools(todo: list[dict], suspects: list[dict], workers: int, on_done: Callable[[dict], None]) -> None:
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


def _warm_parent(task: dict | None) -> None:
    """Before the pool forks: import the simulator and read the traces of the first point (run
    and tuning trace) in the parent, so that every forked worker inherits them instead of each
    importing and parsing them again (0.3-0.5 s per worker, paid 16 times on 16 workers); then
    move what is alive to the collector's permanent generation (``gc.freeze``), so the workers'
    collections never walk, nor copy-on-write touch, the inherited objects. Best effort: a point
    that cannot be resolved or loaded reports its own error when it runs."""
    if task is None or _pool_context().get_start_method() != "fork":
        return
    import gc
    _warm_traces(task)
    gc.collect()
    gc.freeze()


def _pool_context():
    """Fork where the platform has it (workers inherit the parent's imports and traces: see
    :func:`_warm_parent`), else the platform's default start method."""
    import multiprocessing as mp
    try:
        return mp.get_context("fork")
    except ValueError:   # pragma: no cover - no fork (Windows)
        return mp.get_context()


#: how long a pool whose worker died may take to find out by itself before :func:`_watch_pool`
#: breaks it (it takes milliseconds unless its manager thread waits for a half-sent result)
DEAD_WORKER_GRACE_S = 2.0


class _WatchedPool(cf.ProcessPoolExecutor):
    """A process pool that cannot hang on a dead worker. A worker that dies while it sends a
    result (killed for memory, a crash) leaves half a message; the pool's manager thread, already
    reading it, waits for the rest for ever, so the pool never notices the death and the sweep
    waits for the unit for ever. A watcher thread, started once the workers exist (a thread
    running while the pool forks them could leave the children a lock it held), breaks such a
    pool (:func:`_stop_workers`): the pending units fail with ``BrokenProcessPool`` and go the
    way of any broken pool's."""

    _watcher: threading.Thread | None = None

    def submit(self, fn, /, *args, **kwargs):
        fut = super().submit(fn, *args, **kwargs)
        if self._watcher is None:
            self._watcher = threading.Thread(target=_watch_pool, args=(weakref.ref(self),), daemon=True,
                                             name="ahasd-pool-watch")
            self._watcher.start()
        return fut


def _watched(pool_ref):
    """The pool behind ``pool_ref`` while it needs watching: None once it is collected, shut
    down or broken."""
    pool = pool_ref()
    if pool is None or getattr(pool, "_shutdown_thread", True) or getattr(pool, "_broken", True):
        return None
    return pool


def _watch_pool(pool_ref) -> None:
    """(The watcher thread of a :class:`_WatchedPool`.) Wait for a worker to end; if the pool has
    not found out by itself after :data:`DEAD_WORKER_GRACE_S`, break it. Holds no reference to
    the pool while it waits: a pool nobody uses is collected as before."""
    from multiprocessing.connection import wait
    while True:
        pool = _watched(pool_ref)
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        del pool
        if not procs:
            time.sleep(0.2)
            continue
        try:
            if not wait([p.sentinel for p in procs], timeout=0.5):
                continue
        except (OSError, ValueError):   # a process closed meanwhile: the pool is shutting down
            return
        deadline = time.monotonic() + DEAD_WORKER_GRACE_S
        while time.monotonic() < deadline:
            if _watched(pool_ref) is None:
                return
            time.sleep(0.05)
        pool = _watched(pool_ref)
        if pool is not None:
            _stop_workers(pool)
        return


def _new_pool(workers: int) -> cf.ProcessPoolExecutor:
    return _WatchedPool(max_workers=workers, initializer=_worker_init, initargs=(os.getpid(),),
                        mp_context=_pool_context())


#: units handed to the executor beyond one per worker (local process, Dask thread): the next unit
#: already waits in the pool's queue or on the scheduler, so a worker that finishes one starts the
#: next at once instead of after a round trip to this process, which shares the CPUs with the
#: workers (16 workers on 16 cores: they were idle 10% of the sweep's span without)
UNITS_AHEAD_PER_WORKER = 1


def _split_round(todo: "_Pending | list[dict]", workers: int, on_done: Callable[[dict], None],
                 kept: "WorkerPool | None" = None) -> list[dict]:
    """The points' units on one pool (``kept``'s, which stays up afterwards); return the points
    left to the one-point-per-task path."""
    from .split import run_split
    pool = kept.pool(None) if kept is not None else _new_pool(workers)
    try:
        left = run_split(todo, workers, on_done, pool, raise_if_interrupted,
                         units_ahead=UNITS_AHEAD_PER_WORKER * workers)
    except BaseException:   # Ctrl-C or SIGTERM: as in _pool_round
        _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        if kept is not None:
            kept.forget()
        raise
    if kept is None:
        pool.shutdown(wait=True)
    elif left and not _alive_pool(pool):   # a worker died: the next batch gets fresh workers
        kept.discard()
    return left


def _alive_pool(pool: cf.ProcessPoolExecutor) -> bool:
    """Whether ``pool`` still runs tasks (a worker's death breaks it)."""
    try:
        pool.submit(int).result()
        return True
    except (cf.process.BrokenProcessPool, RuntimeError):
        return False


class WorkerPool:
    """A local process pool kept for several batches of tasks (a design-space study's batches):
    forked once, from this process warmed by the first batch's first point, so that its workers
    keep what they built (cost tables, trace slices, placement choices) from batch to batch
    instead of a new pool forking and building them again for every batch. A batch that leaves
    points to the whole-point path because a worker died gets the pool replaced.
    ``close()`` shuts it down."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: cf.ProcessPoolExecutor | None = None

    def pool(self, first: dict | None) -> cf.ProcessPoolExecutor:
        """The pool (started now, after warming this process with ``first``, if it is not up)."""
        if self._pool is None:
            _warm_parent(first)
            self._pool = _new_pool(self.workers)
        return self._pool

    def forget(self) -> None:
        """The pool was shut down elsewhere (an interrupted batch)."""
        self._pool = None

    def discard(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        import gc
        self.discard()
        gc.unfreeze()


def _pool_round(todo: list[dict], workers: int, on_done: Callable[[dict], None]) -> list[dict]:
    """Run ``todo`` in one pool; return the tasks lost to a broken pool."""
    broken: list[dict] = []
    pool = _new_pool(workers)
    try:
        futs = {pool.submit(_pool_entry, t): t for t in todo}
        for fut in cf.as_completed(futs):
            raise_if_interrupted()
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
        # Ctrl-C or SIGTERM: drop queued points and stop the running ones (they stay pending
        # and are computed on the next run), so results.csv is written promptly and no
        # worker outlives the sweep.
        _stop_workers(pool)
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return broken


def _run_tasks(tasks: Iterable[dict], on_done: Callable[[dict], None], *, executor: str, workers: int,
               scheduler: str | None, client: Any, split: bool, pool: WorkerPool | None = None) -> None:
    """Run ``tasks`` on ``executor``: in this process with one worker; else split into units over
    every worker (a point's units use them all, however few points; ``tasks`` may then be a lazy
    :class:`_TaskSource`, its points resolved as workers need them; ``pool``: a kept local pool
    of ``workers`` processes), or with ``split=False`` one point per task (in this process for
    one task, else a pool no larger than the batch)."""
    pending = _Pending.of(tasks)
    if not pending:
        return
    if executor == "dask":
        _run_dask(pending, workers, scheduler, on_done, client=client, split=split)
        return
    if not split:
        pending = pending.rest()
    if workers == 1 or (not split and len(pending) == 1):
        _run_serial(pending, on_done)
    else:
        _run_local(pending, workers if split else min(workers, len(pending)), on_done, split=split,
                   kept=pool if split else None)


def _warm_traces(task: dict) -> None:
    """In this process (the parent before forking, a Dask worker): import the simulator and read
    the first point's run and tuning traces
    (best effort: a point reports its own errors when it runs)."""
    try:
        from ..modes.placement import needs_tuning
        from ..paths import resolve_data_path
        from ..traces.format import load_trace
        cfg = task_config(task)
        load_trace(resolve_data_path(cfg.run.trace, cfg.source_file))     # the process-wide trace cache
        if needs_tuning(cfg):
            load_trace(resolve_data_path(cfg.tuning.trace, cfg.source_file))
    except Exception:  # noqa: BLE001 - warming is an optimisation only
        pass


#: Dask settings of the clusters the simulator starts: the workers' statistical profiler samples
#: the running task's stack every 10 ms; a simulation's deep generator stacks made that about a
#: tenth of a point's time (pim_design_space on one worker, 2-core machine: 31.1 -> 27.7 s, docs/performance.md)
DASK_WORKER_CONFIG = {"distributed.worker.profile.enabled": False}


def local_dask_cluster(workers: int):
    """A ``distributed.LocalCluster`` of ``workers`` single-thread worker processes with
    :data:`DASK_WORKER_CONFIG` (a cluster started elsewhere takes it from its own Dask config)."""
    import dask
    from distributed import LocalCluster
    with dask.config.set(DASK_WORKER_CONFIG):   # the nannies hand the config to their workers
        return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)


def _ignore_sigint() -> None:
    import logging
    import signal
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:   # not the worker's main thread: leave it
        pass
    # a point that fails is reported by the sweep (error.json, one line); what the worker's own
    # loggers add, and their heartbeat errors while the cluster is closed, is noise
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def quiet_local_workers(client) -> None:
    """Ctrl-C reaches the whole process group: each worker process of a local cluster printed a
    KeyboardInterrupt traceback (about 70 lines for two workers). Its workers ignore SIGINT;
    this process handles Ctrl-C and closes them (a worker started elsewhere is left alone)."""
    try:
        client.run(_ignore_sigint)
    except Exception:   # noqa: BLE001 - best effort: a worker that did not answer prints as before
        pass


def _run_dask(tasks: Iterable[dict], workers: int, scheduler: str | None, on_done: Callable[[dict], None],
              client: Any = None, split: bool = False) -> None:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InputError("--executor dask needs Dask distributed: pip install 'ahasd_sim[dask]'") from None
    own_client = own_cluster = None
    if client is None:
        if scheduler:
            own_client = client = _connect(scheduler)
        else:
            own_cluster = local_dask_cluster(workers)
            own_client = client = Client(own_cluster)
            quiet_local_workers(client)
    tasks = _Pending.of(tasks)
    try:
        if tasks:   # every worker imports the simulator and reads the first point's traces once, in parallel
            client.run(_warm_traces, tasks.first())
        if split and tasks:   # the points' units over the cluster's threads; what fails goes on as whole points
            from .split import run_split
            threads = sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values())
            tasks = run_split(tasks, max(threads, 1), on_done, client.get_executor(pure=False),
                              raise_if_interrupted, files_back=True,
                              units_ahead=UNITS_AHEAD_PER_WORKER * max(threads, 1))
        else:
            tasks = tasks.rest()
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
_SCHEDULER_RE = re.compile(r"^((tcp|tls|ws|wss|ucx|inproc)://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


def check_sweep_args(executor: str, workers: int | None, scheduler: str | None) -> None:
    if executor not in EXECUTORS:
        raise InputError(f"unknown executor '{executor}' (expected one of {', '.join(EXECUTORS)})")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if scheduler and executor != "dask":
        raise InputError(f"--scheduler {scheduler} needs --executor dask (the local executor has no scheduler)")
    if scheduler and not _SCHEDULER_RE.match(scheduler):
        raise InputError(f"--scheduler {scheduler!r}: expected a Dask scheduler address such as tcp://host:8786 "
                         "(protocol://host:port, or host:port)")
    if executor == "dask":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("--executor dask needs Dask distributed: pip install 'ahasd_sim[dask]'") from None


def announce(spec: SweepSpec, n_points: int, stream=None) -> None:
    """Say how big the sweep is before any work; warn about very large ones, refuse absurd ones."""
    stream = stream if stream is not None else sys.stderr
    if n_points > MAX_SWEEP_POINTS:
        raise InputError(f"{spec.source}: the sweep has {n_points:,} points, more than {MAX_SWEEP_POINTS:,}; "
                         "split it into several sweeps or use combine: zip")
    if n_points > LARGE_SWEEP_POINTS:
        print(f"warning: {spec.source}: {n_points:,} points; resolving them alone takes a while and the sweep "
              "folder grows by a run folder per point (progress follows)", file=stream)


def run_sweep(spec: SweepSpec | str | Path, out_dir: str | Path | None = None, *, workers: int | None = None,
              executor: str = "local", scheduler: str | None = None, progress: bool = True,
              limit: int | None = None, dask_client: Any = None, stream=None,
              split_points: bool = True, full_points: bool = False, recompute: bool = False) -> SweepResult:
    """Run every unfinished point of ``spec`` (``recompute``: every point) and write ``results.csv``.

    A point folder holds summary.json, windows.csv, energy_breakdown.csv, config.resolved.yaml,
    meta.json (and timeline.json with ``run.timeline``); ``full_points`` adds events.csv (a
    finished point without it is then computed again).

    ``split_points`` (several workers, local or Dask): spread each point's tuning runs and
    windows over the workers (:mod:`ahasd_sim.sweep.split`; the same files as one point per
    worker, which ``split_points=False`` keeps).

    The output folder is checked (writable, not another sweep's) and locked before anything
    is resolved; points are resolved one at a time with progress. ``limit`` runs at most that
    many of the unfinished points (the rest stay ``pending``; used to run a sweep in slices
    and by the resume tests). ``dask_client`` reuses an existing ``distributed.Client``. A
    KeyboardInterrupt (Ctrl-C, or SIGTERM via :mod:`ahasd_sim.cli_common`) stops the workers
    and writes results.csv (unfinished points ``pending``) before it propagates.
    """
    if not isinstance(spec, SweepSpec):
        spec = load_sweep_spec(spec)
    if dask_client is None:
        check_sweep_args(executor, workers, scheduler)
    if workers is None:
        workers = os.cpu_count() or 1
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec)
    points_dir = out / "points"
    t0 = time.perf_counter()

    check_writable_dir(out)
    _check_folder(spec, out)
    n_points = count_points(spec)
    announce(spec, n_points, stream)
    axis_cols = [*spec.axis_columns(), SEED_COL]
    own_client = None
    if executor == "dask" and dask_client is None and scheduler:
        dask_client = own_client = _connect(scheduler)   # an unreachable scheduler fails before any file is written
    try:
        return _run_locked(spec, out, points_dir, axis_cols, n_points, t0, workers=workers, executor=executor,
                           scheduler=scheduler, progress=progress, limit=limit, dask_client=dask_client,
                           stream=stream, split_points=split_points, full_points=full_points,
                           recompute=recompute)
    finally:
        if own_client is not None:
            own_client.close()


#: seconds a sweep or study waits for the first Dask worker of a scheduler it connects to
DASK_WORKER_WAIT_S = 60.0


def _connect(scheduler: str):
    """A client of the Dask scheduler at ``scheduler`` with at least one worker: an unreachable
    scheduler, or one no worker joins within :data:`DASK_WORKER_WAIT_S` (tasks would wait for
    ever), is one line before anything is written."""
    from distributed import Client
    try:
        client = Client(scheduler, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
    try:
        client.wait_for_workers(1, timeout=DASK_WORKER_WAIT_S)
    except (TimeoutError, OSError):
        client.close()
        raise InputError(f"--scheduler {scheduler}: no Dask worker joined within {DASK_WORKER_WAIT_S:g} s; start "
                         f"workers with `dask worker {scheduler}`, or leave --scheduler out for a local "
                         "cluster") from None
    except BaseException:
        client.close()
        raise
    return client


def _capped_workers(workers: int, first: dict | None, n_points: int) -> int:
    """No more worker processes than units that can run at once: a point runs its tuning
    candidates, then its windows, side by side, so ``n_points`` points like ``first`` keep at most
    ``n_points x max(windows, candidates)`` busy (4 one-window points forked 64 workers, 60 of
    them idle)."""
    if first is None:
        return workers
    try:
        from .split import unit_plan
        plan = unit_plan(first, mark=False)
        per_point = max(len(plan["starts"]), len(plan["candidates"] or ()), 1)
    except Exception:  # noqa: BLE001 - the point reports its own error when it runs
        return workers
    return max(1, min(workers, n_points * per_point))


def _run_locked(spec: SweepSpec, out: Path, points_dir: Path, axis_cols: list[str], n_points: int, t0: float, *,
                workers: int, executor: str, scheduler: str | None, progress: bool, limit: int | None,
                dask_client: Any, stream, split_points: bool = True, full_points: bool = False,
                recompute: bool = False) -> SweepResult:
    with lock_dir(out):
        _check_folder(spec, out)   # again, under the lock
        _clean_stale(points_dir)
        _clean_stale_files(out)    # .points.csv.*.tmp, .results.csv.*.tmp of a killed sweep
        atomic_write_text(out / "spec.yaml", spec.source.read_text(encoding="utf-8"))
        if not (out / SWEEP_JSON).is_file():
            atomic_write_text(out / SWEEP_JSON, to_json({
                "spec_file": str(spec.source), "spec_sha256_12": spec_identity(spec), "name": spec.name,
                "points": n_points,
                "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}))
        result = SweepResult(out, [], pd.DataFrame())
        computed = 0
        prog = None
        # split over several workers, the points are resolved as the workers need them (the
        # first units start at once); else all of them first, and the counts are printed
        lazy = split_points and (workers > 1 or executor == "dask")
        src = _TaskSource(spec, out, axis_cols, n_points, progress and not lazy, stream, limit, full_points,
                          recompute)
        result.points = src.points
        try:
            tasks = src if lazy else src.rest()
            err = stream if stream is not None else sys.stderr
            if progress and lazy:
                print(f"{spec.name}: {n_points} points, folder {out} (resolved as the workers start)",
                      file=err, flush=True)
            elif progress:
                print(f"{spec.name}: {n_points} points, {len(tasks)} to run, {src.cached} finished earlier, "
                      f"folder {out}", file=err, flush=True)
            # lazily: the number to run is not known yet (at most every point; the bar's total
            # is corrected when the last point is resolved)
            prog = Progress(len(tasks) if not lazy else (n_points if limit is None else min(n_points, limit)),
                            enabled=progress, stream=stream, desc=spec.name, bound=lazy)

            def on_done(res: dict) -> None:
                nonlocal computed
                computed += 1
                if src.complete:
                    prog.set_total(src.n_tasks)
                prog.update(res.get("status", "failed"))

            if lazy and executor == "local":
                tasks = _Pending.of(tasks)
                n_run = n_points if limit is None else min(n_points, limit)
                workers = _capped_workers(workers, tasks.first(), n_run)
            _run_tasks(tasks, on_done, executor=executor, workers=workers, scheduler=scheduler,
                       client=dask_client, split=split_points)
            if lazy:
                src.rest()   # points the executor never asked for (a --limit): still listed
        finally:
            if lazy and sys.exc_info()[0] is not None:
                src.list_every_point()   # interrupted: the points not resolved yet are listed as pending
            src.close()
            result.n_cached = src.cached
            if prog is not None:
                prog.close()
            points = src.points
            if points:
                table = build_table(points, points_dir, axis_cols)
                write_table(table, out / "results.csv")
                result.table = table
                result.failed_dirs = sorted({points_dir / h for h in table.loc[table["status"] == "failed", "point"]})
            result.n_computed = computed
            result.wall_s = time.perf_counter() - t0
    return result


#: most points ``--dry-run`` checks one by one (about 25 points per second on one core)
DRY_RUN_MAX_POINTS = 5000


def dry_run_sweep(spec: SweepSpec, out_dir: str | Path | None = None, stream=None, progress: bool = True) -> int:
    """Resolve every point and build what its run needs (hardware, trace slice, costs, policy;
    :func:`ahasd_sim.checks.dry_run`) without simulating or writing anything; print a report.
    Returns 0 if every point would start, 2 if some would fail."""
    from ..checks import dry_run
    out = Path(out_dir) if out_dir is not None else default_out_dir(spec)
    check_writable_dir(out)
    check_not_locked(out / ".lock", f"--out {out}")   # the run would be refused: so is its dry run
    _check_folder(spec, out)
    n_points = count_points(spec)
    if n_points > DRY_RUN_MAX_POINTS:
        # every point is built and checked (tens per second): refuse now rather than run for hours
        raise InputError(f"{spec.source}: --dry-run checks every point, and this sweep has {n_points} "
                         f"(more than {DRY_RUN_MAX_POINTS}, about {n_points / 25 / 3600:.1f} h of checking); "
                         "dry-run a sweep with fewer axis values, then run the full one")
    announce(spec, n_points, stream)
    prog = Progress(n_points, enabled=progress and n_points >= 50, stream=stream, desc=f"{spec.name}: checking")
    bad: list[tuple[Point, BaseException]] = []
    hashes: set[str] = set()
    done = 0
    try:
        for pt in iter_points(spec, keep_config=True):
            prog.update("ok")
            if not pt.valid:
                bad.append((pt, pt.error))
                continue
            if pt.hash in hashes:
                continue
            hashes.add(pt.hash)
            done += is_done(out / "points" / pt.hash)
            try:
                dry_run(pt.config)
            except Exception as exc:  # noqa: BLE001 - reported per point, like a failing point
                bad.append((pt, exc))
            pt.config = None
    finally:
        prog.close()
    print(f"sweep {spec.name} ({spec.source}): {n_points} points, {len(hashes)} distinct runs, "
          f"{len(bad)} would fail; output folder {out}: {done} of them already finished there")
    print("axes: " + ", ".join(spec.axis_columns() + [SEED_COL]))
    for pt, exc in bad[:10]:
        labels = ", ".join(f"{k}={v}" for k, v in pt.labels.items())
        print(f"  point {pt.index} ({labels}): {one_line(exc)}")
    if len(bad) > 10:
        print(f"  ... and {len(bad) - 10} more")
    print("dry run: nothing was simulated or written")
    return 0 if not bad else 2


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
    check_sweep_args(args.executor, args.workers, args.scheduler)
    if getattr(args, "dry_run", False):
        return dry_run_sweep(spec, args.out, progress=not args.no_progress)
    try:
        res = run_sweep(spec, args.out, workers=args.workers, executor=args.executor, scheduler=args.scheduler,
                        progress=not args.no_progress, split_points=not getattr(args, "whole_points", False),
                        full_points=getattr(args, "full_points", False),
                        recompute=getattr(args, "recompute", False))
    except KeyboardInterrupt:
        out = Path(args.out) if args.out else default_out_dir(spec)
        if (out / "results.csv").is_file():
            print(f"stopped: finished points are kept in {out / 'points'} and listed in {out / 'results.csv'}; "
                  "run the same command again to compute only the missing ones", file=sys.stderr)
        raise
    print(summarize(res))
    if getattr(args, "debug", False) and res.n_failed:
        for d in res.failed_dirs:
            tb = (d / "error.json").read_text() if (d / "error.json").is_file() else ""
            print(tb, file=sys.stderr)
    return 0 if res.n_failed == 0 and res.n_pending == 0 else 1


def stale_points(out: str | Path, spec: SweepSpec | str | Path | None = None) -> list[Path]:
    """Point folders of the sweep folder ``out`` that no point of ``spec`` references at this code
    (default spec: the file the folder was last run from, as sweep.json records it): left behind by
    an edit of the spec, of a config or trace it reads, or of the simulator code a run executes."""
    out = Path(out)
    if not (out / SWEEP_JSON).is_file():
        raise OutputError(f"{out}: not a sweep folder (no {SWEEP_JSON})")
    if spec is None:
        spec = json.loads((out / SWEEP_JSON).read_text()).get("spec_file")
        if not spec or not Path(spec).is_file():
            raise InputError(f"{out}: the sweep file it was run from ({spec}) is gone; give it with --config")
    if not isinstance(spec, SweepSpec):
        spec = load_sweep_spec(spec)
    current = {pt.hash for pt in iter_points(spec, keep_config=False)}
    points_dir = out / "points"
    if not points_dir.is_dir():
        return []
    return sorted(d for d in points_dir.iterdir() if d.is_dir() and d.name not in current)


def prune_cli(args) -> int:
    """``python -m ahasd_sim prune SWEEP_DIR``: list (default) or ``--delete`` stale point folders."""
    def size(d: Path) -> int:
        return sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
    total_n = total_b = 0
    for folder in args.folders:
        out = Path(folder)
        with lock_dir(out, "prune"):      # no sweep may write into it meanwhile
            stale = stale_points(out, args.config)
            n_all = sum(1 for d in (out / "points").iterdir() if d.is_dir()) if (out / "points").is_dir() else 0
            nbytes = sum(size(d) for d in stale)
            for d in stale:
                print(f"{'deleting' if args.delete else 'would delete'} {d}")
                if args.delete:
                    shutil.rmtree(d)
        total_n += len(stale)
        total_b += nbytes
        print(f"{out}: {len(stale)} of {n_all} point folders unreferenced by the current spec and code "
              f"({nbytes / 1e6:.1f} MB){'' if args.delete else '; nothing deleted (add --delete)'}")
    return 0


__all__ = ["SweepResult", "run_sweep", "run_sweep_cli", "summarize", "default_out_dir", "EXECUTORS",
           "stale_points", "prune_cli"]


def iter_point_dirs(result: SweepResult) -> Iterable[Path]:
    for h in result.table["point"].unique():
        yield result.out_dir / "points" / h
