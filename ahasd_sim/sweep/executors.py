"""The sweep engine's executors as a public API: run a batch of point tasks and hand each
result to a callback. ``dse`` runs its design points through these, the sweep runner through
the same code (the functions look the runner's executors up when called, so both always use
one implementation).

A *task* is the dict the runner builds for one point (``hash``, ``dir``, the resolved config);
``on_done(result)`` is called once per task, in the parent process, as results arrive.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from . import runner as _runner

#: executor names the command lines accept
EXECUTORS = _runner.EXECUTORS

OnDone = Callable[[dict], None]


def run_serial(tasks: list[dict], on_done: OnDone) -> None:
    """Run the tasks one after another in this process."""
    _runner._run_serial(tasks, on_done)


def run_local(tasks: list[dict], workers: int, on_done: OnDone, split: bool = True) -> None:
    """Run the tasks in a pool of ``workers`` processes on this machine. ``split``: each point as
    units (placement tuning runs, windows) spread over the workers (:mod:`ahasd_sim.sweep.split`,
    the same files); else one point per task. A worker that dies is replaced and the point it
    ran is retried alone, then reported failed if it kills one again."""
    _runner._run_local(tasks, workers if split else min(workers, max(len(tasks), 1)), on_done, split=split)


def run_dask(tasks: list[dict], workers: int, scheduler: str | None, on_done: OnDone,
             client: Any = None, split: bool = True) -> None:
    """Run the tasks on Dask: ``client`` if given, else the cluster at ``scheduler``, else a
    local cluster of ``workers`` processes (started and closed here); ``split`` as in
    :func:`run_local`."""
    _runner._run_dask(tasks, workers, scheduler, on_done, client=client, split=split)


#: a ``distributed.Client`` of the scheduler at an address, refused in one line when it cannot
#: be reached or no worker joins it in time (``runner.DASK_WORKER_WAIT_S``)
connect_scheduler = _runner._connect

#: make a local cluster's workers ignore Ctrl-C and keep their loggers quiet (this process stops them)
quiet_local_workers = _runner.quiet_local_workers

#: a ``distributed.LocalCluster`` of single-thread workers set up as the sweep's own (the Dask
#: workers' statistical profiler off: :data:`DASK_WORKER_CONFIG`)
local_dask_cluster = _runner.local_dask_cluster
DASK_WORKER_CONFIG = _runner.DASK_WORKER_CONFIG


#: a local process pool kept over several :func:`run_tasks` calls (``close()`` ends it)
WorkerPool = _runner.WorkerPool


def run_tasks(tasks: list[dict], on_done: OnDone, *, executor: str = "local", workers: int = 1,
              scheduler: str | None = None, client: Any = None, split: bool = True,
              pool: "WorkerPool | None" = None) -> None:
    """Run ``tasks`` on ``executor`` (``local`` or ``dask``) as a sweep does: in this process with
    one worker, else split into units over ``workers`` processes (``split=False``: one point per
    task, in this process when there is one task, else in ``min(workers, len(tasks))`` processes).
    ``pool``: a :class:`WorkerPool` of ``workers`` processes that the split units of this and
    later calls share (its workers keep their caches between the calls); ignored by Dask and
    by ``split=False``."""
    _runner._run_tasks(tasks, on_done, executor=executor, workers=workers, scheduler=scheduler, client=client,
                       split=split, pool=pool)


def clean_stale(points_dir: str | Path) -> None:
    """Remove what killed workers left in ``points_dir`` (running markers, staging folders,
    temporary files); call it while holding the folder's lock."""
    _runner._clean_stale(Path(points_dir))
