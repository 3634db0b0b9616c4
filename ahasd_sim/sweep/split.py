"""Sweep points split into units that a process pool's workers share (docs/performance.md, sweeps).

A point is a chain of pure functions: *plan* (resolve the config, count its trace windows,
build the rank-placement candidates' tuning configs), one *tune* unit per placement candidate
(``pim.partition_policy: auto``), one *window* unit per trace window (with the chosen
placement), and *finish* (combine the windows, write the point folder). Each unit is what
:func:`ahasd_sim.simulation.run_simulation` does for that part of the point, with the same
functions, so a point's files are byte for byte those of the whole-point path (meta.json's
``wall_time_s`` is the sum of the units' times). Spreading units instead of points keeps every
worker busy when a sweep has few points per worker and leaves no tail of one long point at the
end.

Units of points already started go first (finish, then windows, then tuning), a new point is
started only when nothing of an open one is ready, so at most about twice as many points as
workers are open (their window results wait in the parent) at any time. While points are still
waiting to start, a point's windows and its finish run as one unit (they share the worker's
cost table of the point's config: measured on 16 cores, spreading every window cost more
in rebuilt tables than it saved); once none waits, windows go out one by one, so the last
points spread over the workers that would otherwise idle.

Points whose tuning runs are the same simulations (equal
:func:`ahasd_sim.modes.placement.tuning_key`: they differ only in the reported trace, its start
prompt, window count or length, as a design-space study's windows of one design do) tune once:
the first such point runs the candidates, the others wait for its outcomes (the same values
their own tuning runs would give: each is a pure function of its config) and choose from them.

A unit that raises sends its point to the whole-point path (:func:`ahasd_sim.sweep.worker.run_point`),
which reproduces the error record a point would have had; a broken pool (a worker killed) sends
every point not finished to it too, where a death is pinned on the point that caused it.
"""
from __future__ import annotations

import concurrent.futures as cf
from concurrent.futures.process import BrokenProcessPool
import heapq
import itertools
import time
from collections import deque
from pathlib import Path
from typing import Any, Callable

from .worker import ERROR, RUNNING, task_config

# priorities: lower runs first
_FINISH, _WINDOW, _TUNE, _PLAN = 0, 1, 2, 3


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def _windows(cfg):
    """The point's windows as run_simulation replays them."""
    from ..simulation import load_run_windows, replayed_windows
    return replayed_windows(cfg, load_run_windows(cfg))


def unit_plan(task: dict, mark: bool = True) -> dict:
    """``mark``: leave the running marker in the point folder (removed by :func:`unit_finish`;
    a killed sweep's markers by the next run), as the one-point-per-task path does."""
    from ..modes.placement import CANDIDATES, needs_tuning, resolve_placement, tuning_configs, tuning_key
    if mark:
        d = Path(task["dir"])
        d.mkdir(parents=True, exist_ok=True)
        (d / RUNNING).touch()
    cfg = task_config(task)
    starts = [p for p, _ in _windows(cfg)]
    candidates = key = None
    if needs_tuning(cfg):
        cfgs = tuning_configs(cfg)
        candidates = [cfgs[c] for c in CANDIDATES]
        key = tuning_key(cfg)
    elif cfg.pim.enabled:
        resolve_placement(cfg)   # pinned or unused: checked here as run_simulation does
    return {"config": cfg, "starts": starts, "candidates": candidates, "tuning_key": key}


def unit_tune(candidate_cfg):
    from ..modes.placement import _candidate
    return _candidate(candidate_cfg)


def unit_window(cfg, placement, index: int, start: int, events: bool = False):
    """Window ``index`` of the point, starting at prompt ``start`` (only its slice is cut);
    ``events``: with its event rows (the point writes events.csv)."""
    from ..modes.placement import remember_placement
    from ..simulation import _run_window_rows, load_run_trace
    if placement is not None:
        remember_placement(cfg, placement)
    return _run_window_rows(cfg, load_run_trace(cfg, start), index, events=events)


def unit_finish(cfg, placement, out_dir: str, results: list, starts: list, wall_s: float,
                events: bool = False) -> dict:
    """Combine the point's window ``results`` (windows starting at prompts ``starts``) and write
    its folder."""
    from ..modes.placement import remember_placement
    from ..output import write_run
    from ..simulation import combine_windows
    if placement is not None:
        remember_placement(cfg, placement)
    t0 = time.perf_counter()
    result = combine_windows(cfg, results, starts)
    wall_s += time.perf_counter() - t0
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stale = out / ERROR          # an earlier attempt's error (run_point removes it the same way)
    if stale.exists():
        stale.unlink()
    write_run(result, cfg, out, wall_s, events=events)
    (out / RUNNING).unlink(missing_ok=True)
    return {"status": "ok", "wall_time_s": wall_s}


def unit_windows_finish(cfg, placement, out_dir: str, wall_s: float, events: bool = False,
                        files_back: bool = False) -> dict:
    """Every window of the point, then :func:`unit_finish` (or :func:`unit_finish_files`), in
    one unit: the windows share this worker's cost table of the point's config (a window sent
    to another worker would build it again there)."""
    from ..modes.placement import remember_placement
    from ..simulation import _run_window_rows
    t0 = time.perf_counter()
    if placement is not None:
        remember_placement(cfg, placement)
    windows = _windows(cfg)
    results = [_run_window_rows(cfg, parts, i, events=events) for i, (_p, parts) in enumerate(windows)]
    wall_s += time.perf_counter() - t0
    return (unit_finish_files if files_back else unit_finish)(cfg, placement, out_dir, results,
                                                               [p for p, _ in windows], wall_s, events)


def unit_finish_files(cfg, placement, out_dir: str, results: list, starts: list, wall_s: float,
                      events: bool = False) -> dict:
    """:func:`unit_finish` into a private temporary folder; the files come back as bytes
    (``files``), for workers that need not share the client's file system (Dask)."""
    import shutil
    import tempfile
    tmp = Path(tempfile.mkdtemp(prefix="ahasd-split-"))
    try:
        info = unit_finish(cfg, placement, str(tmp / "point"), results, starts, wall_s, events)
        files = {p.name: p.read_bytes() for p in sorted((tmp / "point").iterdir())
                 if p.is_file() and not p.name.startswith(".")}
        return {**info, "files": files}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Point:
    """A point in progress: what its finished units returned, and how many are still out."""
    __slots__ = ("task", "cfg", "placement", "outcomes", "tunes_left", "starts", "results", "left", "wall_s",
                 "tuning_key")

    def __init__(self, task: dict):
        self.task = task
        self.tuning_key = None        # set while this point runs the tuning other points wait for
        self.cfg = None
        self.placement = None
        self.outcomes: list = []     # tuning outcome per placement candidate
        self.tunes_left = 0
        self.starts: list = []        # the windows' start prompts (their count: the window units)
        self.results: list = []      # window results, by window index
        self.left = 0                # windows not finished
        self.wall_s = 0.0            # the units' times so far


def run_split(tasks, workers: int, on_done: Callable[[dict], None], pool: cf.Executor,
              check_interrupt: Callable[[], None] = lambda: None, files_back: bool = False,
              units_ahead: int = 0) -> list[dict]:
    """Run ``tasks`` as units on ``pool`` (``workers`` processes; any executor whose futures are
    ``concurrent.futures`` futures, e.g. a Dask client's ``get_executor()``); call ``on_done``
    per finished point. ``tasks``: a list, or anything with truth-testing and ``popleft`` and
    ``rest`` (the runner's lazy pending points: a point is resolved when a worker needs one, so
    the first units start while the parent resolves the rest). ``files_back``: the finish unit
    returns the point's files, written here (workers without the client's file system).
    ``units_ahead``: units submitted beyond ``workers`` (an executor whose workers would
    otherwise wait a round trip to this process for their next unit, e.g. Dask). Returns
    the tasks left to the whole-point path: points a unit failed for, and every point not
    finished when the pool broke."""
    from .worker import materialise
    finish = unit_finish_files if files_back else unit_finish
    pending = deque(tasks) if isinstance(tasks, (list, tuple)) else tasks
    ready: list[tuple] = []                 # (priority, seq, point id, (kind, index), fn, args)
    seq = itertools.count()
    points: dict[int, _Point] = {}
    running: dict[cf.Future, tuple[int, tuple[str, Any]]] = {}
    fallback: list[dict] = []
    ids = itertools.count()
    max_open = 2 * workers
    # Points whose tuning runs are the same simulations (equal placement.tuning_key: they differ
    # only in the reported trace, window or length, e.g. a study's windows) tune once: the
    # candidates' outcomes of the first are every such point's
    tuned: dict[str, list] = {}              # tuning key -> the candidates' outcomes
    waiting: dict[str, list[int]] = {}       # tuning key -> points waiting for the point tuning it

    def n_waiting() -> int:
        return sum(len(w) for w in waiting.values())

    def push(prio, pid, kind, fn, *args):
        heapq.heappush(ready, (prio, next(seq), pid, kind, fn, args))

    def fail(pid):
        pt = points.pop(pid, None)
        if pt is not None:
            if not files_back:   # the one-point-per-task path keeps its own marker
                (Path(pt.task["dir"]) / RUNNING).unlink(missing_ok=True)
            fallback.append(pt.task)
            if pt.tuning_key is not None:    # the points waiting for its tuning go with it
                for w in waiting.pop(pt.tuning_key, []):
                    fail(w)

    def placed(pid, pt):
        """The point's candidates have their outcomes: choose its placement, queue its windows."""
        from ..modes.placement import choose_placement
        try:
            pt.placement = choose_placement(pt.cfg, pt.outcomes)
        except Exception:  # noqa: BLE001 - nothing fits: the whole-point path says so
            fail(pid)
            return
        queue_windows(pid, pt)

    def queue_windows(pid, pt):
        if pending:   # other points will keep the workers busy: the windows stay together
            push(_WINDOW, pid, ("rest", None), unit_windows_finish, pt.cfg, pt.placement, pt.task["dir"], pt.wall_s,
                 bool(pt.task.get("events", False)), files_back)
            return
        pt.results = [None] * len(pt.starts)
        pt.left = len(pt.starts)
        for i in range(len(pt.starts)):
            push(_WINDOW, pid, ("window", i), unit_window, pt.cfg, pt.placement, i, pt.starts[i],
                 bool(pt.task.get("events", False)))

    from ..cli_common import deferred_stop_signals
    try:
        with deferred_stop_signals():
            while pending or ready or running:
                check_interrupt()
                while len(running) < workers + units_ahead:
                    # points waiting for another's tuning hold no worker: they do not count as open
                    if not ready and pending and len(points) - n_waiting() < max_open:
                        pid = next(ids)
                        points[pid] = _Point(pending.popleft())
                        push(_PLAN, pid, ("plan", None), unit_plan, points[pid].task, not files_back)
                    if not ready:
                        break
                    _prio, _s, pid, kind, fn, args = heapq.heappop(ready)
                    if pid not in points:      # its point went to the whole-point path meanwhile
                        continue
                    running[pool.submit(_timed, fn, *args)] = (pid, kind)
                if not running:
                    continue
                # with a timeout: a stop signal is only recorded here (deferred_stop_signals)
                # and raised by check_interrupt between waits; while every worker is busy, a lazy
                # source resolves its next points (then only polls), so a worker that frees up
                # does not wait for the parent to resolve one
                prefetch = getattr(pending, "prefetch", None)
                timeout = 0 if prefetch is not None and prefetch(workers + units_ahead) else 0.2
                done, _ = cf.wait(list(running), timeout=timeout, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    pid, (kind, index) = running.pop(fut)
                    pt = points.get(pid)
                    try:
                        value, unit_s = fut.result()
                    except BrokenProcessPool:
                        raise
                    except Exception:  # noqa: BLE001 - the whole-point path reports it exactly
                        fail(pid)
                        continue
                    if pt is None:
                        continue
                    pt.wall_s += unit_s
                    if kind == "plan":
                        pt.cfg = value["config"]
                        pt.starts = value["starts"]
                        key = value.get("tuning_key")
                        if value["candidates"] is None:
                            queue_windows(pid, pt)
                        elif key in tuned:             # tuned by an earlier point
                            pt.outcomes = list(tuned[key])
                            placed(pid, pt)
                        elif key in waiting:           # another point is tuning it now
                            waiting[key].append(pid)
                        else:
                            if key is not None:
                                waiting[key] = []
                                pt.tuning_key = key
                            pt.outcomes = [None] * len(value["candidates"])
                            pt.tunes_left = len(value["candidates"])
                            for k, ccfg in enumerate(value["candidates"]):
                                push(_TUNE, pid, ("tune", k), unit_tune, ccfg)
                    elif kind == "tune":
                        pt.outcomes[index] = value
                        pt.tunes_left -= 1
                        if pt.tunes_left == 0:
                            key, pt.tuning_key = pt.tuning_key, None
                            if key is not None:
                                tuned[key] = pt.outcomes
                                for w in waiting.pop(key, []):
                                    wpt = points[w]
                                    wpt.outcomes = list(pt.outcomes)
                                    placed(w, wpt)
                            placed(pid, pt)
                    elif kind == "window":
                        pt.results[index] = value
                        pt.left -= 1
                        if pt.left == 0:
                            push(_FINISH, pid, ("finish", None), finish, pt.cfg, pt.placement, pt.task["dir"],
                                 pt.results, pt.starts, pt.wall_s, bool(pt.task.get("events", False)))
                    else:   # "finish", or "rest" (the windows and finish in one unit)
                        points.pop(pid)
                        if files_back:
                            try:
                                materialise(value.pop("files"), Path(pt.task["dir"]))
                            except Exception:  # noqa: BLE001 - e.g. a full disk: the whole-point path reports it
                                fallback.append(pt.task)
                                continue
                        on_done({"hash": pt.task["hash"], **value})
    except BrokenProcessPool:
        fallback.extend(pt.task for pt in points.values())
        fallback.extend(pending.rest() if hasattr(pending, "rest") else pending)
        points.clear()
    return fallback

