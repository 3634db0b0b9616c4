"""Evaluating design points: resolve configs, run them on the sweep executor, compute objectives.

A design point (one optimiser trial, or one point of a sensitivity analysis) is the base
config + ``base.set`` + the sampled parameter values. It is simulated once per named run
(``runs:``, e.g. ``ahasd`` and ``operator_sync``) and per trace window (``windows:``); each
simulation is one sweep point, stored in ``points/<run identity hash>/`` exactly as a sweep
stores it (:func:`ahasd_sim.output.run_identity_hash`), so an unchanged simulation is never
run twice, across trials, resumed studies and sensitivity analyses sharing a folder.

Objectives: a rate (a metric of :data:`ahasd_sim.metrics.stats.RATIOS`, e.g. throughput_tok_s,
tokens_per_j) is the ratio estimator over the study's windows, total tokens / total decode time
or energy of the run (docs/modeling.md, Statistics), and a ratio objective divides two runs' ratio estimators over
the same windows; another metric is the mean over windows. From
:data:`~ahasd_sim.metrics.stats.MIN_T_SAMPLES` windows on, the 95% interval ``[low, high]`` of the
per-window values (Student t, :func:`~ahasd_sim.metrics.stats.t_interval`; on the log scale for a
rate or a ratio, so it is never negative) is reported next to it: one trace window is one sample.
The per-window values are kept (``DesignPoint.samples``) so that two points evaluated on the same
windows can be compared pairwise (sensitivity's OAT differences).
Without study windows, a plain objective takes the interval the simulator reports for it
(``<metric>_ci95`` of summary.json, over the run's own trace windows) where there is one.

A design point whose two models cannot be placed in the PIM ranks of one of its runs (no
candidate placement of ``pim.partition_policy`` fits weights + KV reserve) is **infeasible**
(constraint :data:`MEMORY_FIT`), decided before anything runs, not a failed simulation.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..config.errors import ConfigError, InputError
from ..metrics.stats import t_interval
from ..sweep.results import flatten
from ..sweep.worker import ERROR, SUMMARY, is_done
from .study import DERIVED, Study, config_value, eval_expr, quantities

RUNNING = ".running"
META = "meta.json"          # a run folder's wall_time_s (the trial's own evaluation time)

#: the built-in constraint of every study whose runs place models in PIM ranks
MEMORY_FIT = "pim_memory_fit"


@dataclass
class DesignPoint:
    """One point of the design space and everything needed to evaluate it."""

    key: Any                                   # trial number, or a label (sensitivity)
    params: dict[str, Any]                     # parameter name -> value (label for categorical)
    overrides: list[str] = field(default_factory=list)
    configs: dict[tuple[str, int | None], Any] = field(default_factory=dict)   # (run, window) -> SimConfig
    hashes: dict[tuple[str, int | None], str] = field(default_factory=dict)
    constraint_values: dict[str, float] = field(default_factory=dict)
    infeasible: str | None = None              # why a constraint rejects the point (not simulated)
    error: str | None = None                   # config resolution / run failure (one line)
    values: list[float] | None = None          # objective means (study order)
    ci95: list[list[float] | None] | None = None   # objective 95% intervals [low, high] over windows (None: too few)
    metrics: dict[str, float] = field(default_factory=dict)   # "<run>/<metric>" means, for the tables
    samples: list[list[float]] | None = None   # per objective, its value per window (window order)
    windows: list[int | None] = field(default_factory=list)
    eval_s: float | None = None                # the point's own simulation time: sum of its runs' wall_time_s
    placements: dict[str, str] = field(default_factory=dict)   # run -> PIM placement it ran with ("/"-joined per window)

    @property
    def status(self) -> str:
        if self.infeasible:
            return "infeasible"
        if self.error:
            return "failed"
        return "ok" if self.values is not None else "pending"


def windows_of(study: Study, windows: list[int] | None = None) -> list[int | None]:
    w = windows if windows is not None else study.windows
    return list(w) if w else [None]


def window_overrides(cfg, window: int | None) -> list[str]:
    """Overrides that make a run replay exactly one trace window starting at prompt ``window``
    (``run.windows=1`` where the simulator has built-in multi-window runs)."""
    if window is None:
        return []
    one = ["run.windows=1"] if hasattr(cfg.run, "windows") else []
    return [*one, f"run.trace_start_prompt={window}"]


def memory_shortfall_ranks(cfg) -> float | None:
    """How many ranks' worth of PIM capacity ``cfg``'s draft + target model (weights + KV reserve,
    as :func:`ahasd_sim.modes.placement.place_models` places them) lack: > 0 when no candidate
    placement fits (infeasible), <= 0 when one does (minus the spare capacity in ranks). ``None``
    when the run places no models in PIM ranks (PIM disabled, or a mode without placement)."""
    from ..hw.platform import Platform
    from ..modes.placement import CANDIDATES, mode_uses_placement, place_models
    if not cfg.pim.enabled or not mode_uses_placement(cfg.run.mode):
        return None
    try:
        from ..simulation import run_model
        draft, target = run_model(cfg, cfg.run.draft_model), run_model(cfg, cfg.run.target_model)
    except ValueError:
        return None                      # reported by the run itself, with its file and key
    pim = Platform.build(cfg).pim
    if pim is None:
        return None
    policy = cfg.pim.partition_policy
    cands = CANDIDATES if policy == "auto" else (policy,)
    fits = False
    for cand in cands:
        try:
            place_models(pim, draft, target, cfg, cand)
            fits = True
            break
        except ConfigError:
            continue
    tokens = cfg.pim.kv_reserve_tokens
    need = (draft.weight_bytes() + target.weight_bytes()
            + (draft.kv_bytes_per_token() + target.kv_bytes_per_token()) * tokens)
    cap = float(pim.rank_capacity_bytes)
    slack = need / cap - cfg.pim.ranks      # ranks' worth of capacity missing (negative: spare)
    if fits:
        return min(slack, 0.0)
    # rank granularity (each model in whole ranks) can make a placement fail with capacity to spare
    whole = math.ceil((draft.weight_bytes() + draft.kv_bytes_per_token() * tokens) / cap) + \
        math.ceil((target.weight_bytes() + target.kv_bytes_per_token() * tokens) / cap) - cfg.pim.ranks
    return max(slack, float(whole), 1e-6)


def plan(study: Study, key: Any, params: dict[str, Any], windows: list[int] | None = None) -> DesignPoint:
    """Resolve the configs of a design point and check the constraints (nothing runs): the
    study's ``constraints:`` and :data:`MEMORY_FIT` (the models fit the PIM ranks of every run)."""
    from ..output import run_identity_hash
    pt = DesignPoint(key, dict(params))
    for p in study.space:
        pt.overrides += p.overrides(params[p.name])
    try:
        for run, ovr in study.runs.items():
            for w in windows_of(study, windows):
                extra = window_overrides(study.base, w)
                cfg = study.base.replace([*pt.overrides, *ovr, *extra], source=None)
                cfg.source_file = study.base.source_file
                pt.configs[(run, w)] = cfg
                pt.hashes[(run, w)] = run_identity_hash(cfg)
        pt.windows = windows_of(study, windows)
        shorts = [memory_shortfall_ranks(pt.configs[(run, pt.windows[0])]) for run in study.runs]
        shorts = [x for x in shorts if x is not None]
        if shorts:
            pt.constraint_values[MEMORY_FIT] = max(shorts)
            if max(shorts) > 0:
                pt.infeasible = (f"{MEMORY_FIT}: the draft and target models need {max(shorts):.3g} more "
                                 "PIM ranks' capacity than the design has (no rank placement fits)")
        if study.constraints:   # on the design point itself (base + set + sampled values)
            point_cfg = study.base.replace(pt.overrides, source=None)
            point_cfg.source_file = study.base.source_file
        for c in study.constraints:
            v = eval_expr(c.tree, quantities(point_cfg, c.names))
            pt.constraint_values[c.name] = v
            if c.violation(v) > 0:
                bound = f">= {c.min:g}" if c.min is not None and v < c.min else f"<= {c.max:g}"
                pt.infeasible = pt.infeasible or f"{c.name} = {v:.4g}, needs {bound}"
    except InputError as exc:
        pt.error = str(exc).strip().strip('"').splitlines()[0]
    except (ZeroDivisionError, OverflowError, ValueError) as exc:
        pt.error = f"constraint cannot be evaluated: {exc}"
    return pt


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _pooled(summaries: dict, windows: list, run: str, metric: str) -> float | None:
    """``metric`` of ``run`` as total / total over ``windows`` (metrics.stats.RATIOS), or None
    when it is not a rate or a summary lacks the totals."""
    from ..metrics.stats import RATIOS, ratio_of_totals
    if metric not in RATIOS:
        return None
    num, den = RATIOS[metric]
    nums = [summaries[(run, w)].get(num) for w in windows]
    dens = [summaries[(run, w)].get(den) for w in windows]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in nums + dens):
        return None
    return ratio_of_totals(nums, dens)


def _metric(study: Study, pt: DesignPoint, fields: dict[str, Any], run: str, w, metric: str) -> float:
    if metric in DERIVED:
        return float(quantities(pt.configs[(run, w)], {metric})[metric])
    v = fields.get(metric)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"summary.json of run '{run}' has no numeric '{metric}'")
    return float(v)


#: per-run metrics copied into trials.csv next to the objectives
TABLE_METRICS = ("throughput_tok_s", "tokens_per_j", "energy_per_token_j", "acceptance_rate")


def finish(study: Study, pt: DesignPoint, points_dir: Path) -> None:
    """Read the finished run folders of ``pt`` and set its objective values (or its error)."""
    summaries: dict[tuple[str, int | None], dict] = {}
    for rw, h in pt.hashes.items():
        d = points_dir / h
        s = _read_json(d / SUMMARY)
        if s is None:
            err = _read_json(d / ERROR) or {}
            pt.error = f"run '{rw[0]}'" + (f" window {rw[1]}" if rw[1] is not None else "") + \
                f" failed: {err.get('type', 'error')}: {err.get('message', 'no summary.json')}"
            return
        summaries[rw] = flatten(s)
    walls = [(_read_json(points_dir / h / META) or {}).get("wall_time_s") for h in pt.hashes.values()]
    pt.eval_s = float(sum(walls)) if all(isinstance(w, (int, float)) for w in walls) else None
    windows = sorted({w for (_, w) in pt.hashes}, key=lambda x: -1 if x is None else x)
    values, cis, samples = [], [], []
    try:
        for o in study.objectives:
            per_w = []
            for w in windows:
                num = _metric(study, pt, summaries[(o.run, w)], o.run, w, o.metric)
                if o.over:
                    den = _metric(study, pt, summaries[(o.over, w)], o.over, w, o.metric)
                    num = num / den if den != 0 else float("nan")
                per_w.append(num)
            m = sum(per_w) / len(per_w)
            pooled = _pooled(summaries, windows, o.run, o.metric)
            if pooled is not None:          # a rate: ratio of totals over the windows, not a mean of ratios
                if o.over:
                    den = _pooled(summaries, windows, o.over, o.metric)
                    m = pooled / den if den else float("nan")
                else:
                    m = pooled
            # a rate or a ratio of rates is positive: its interval on the log scale, never below 0
            m, ci = t_interval(per_w, positive=pooled is not None or o.is_ratio, center=m)
            if len(windows) == 1 and not o.is_ratio:   # the simulator's own interval over its windows
                own = summaries[(o.run, windows[0])].get(f"{o.metric}_ci95")
                if isinstance(own, (list, tuple)) and len(own) == 2 and all(
                        isinstance(v, (int, float)) and not isinstance(v, bool) for v in own):
                    ci = [float(own[0]), float(own[1])]
            values.append(m)
            cis.append(ci)
            samples.append(per_w)
        for run in study.runs:
            pol = list(dict.fromkeys(str(summaries[(run, w)].get("pim_placement.policy")) for w in windows
                                     if summaries[(run, w)].get("pim_placement.policy") is not None))
            if pol:
                pt.placements[run] = "/".join(pol)
            for mname in TABLE_METRICS:
                vals = [summaries[(run, w)].get(mname) for w in windows]
                if all(isinstance(v, (int, float)) for v in vals):
                    pt.metrics[f"{run}/{mname}"] = sum(vals) / len(vals)
    except ValueError as exc:
        pt.error = str(exc)
        return
    if any(not math.isfinite(v) for v in values):
        pt.error = "an objective is not finite (a ratio over a zero denominator?)"
        return
    pt.values, pt.ci95, pt.samples, pt.windows = values, cis, samples, windows


# ---------------------------------------------------------------- execution
class Executor:
    """The sweep executor (local process pool, in-process, or Dask) for batches of runs.

    A Dask cluster, or a local process pool, is started once and kept for all batches
    (``close()`` ends it)."""

    def __init__(self, executor: str = "local", workers: int | None = None, scheduler: str | None = None,
                 dask_client: Any = None):
        import os
        from ..sweep.executors import EXECUTORS
        if executor not in EXECUTORS:
            raise InputError(f"unknown executor '{executor}' (expected one of {', '.join(EXECUTORS)})")
        self.executor = executor
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        if self.workers < 1:
            raise InputError(f"--workers must be >= 1, got {self.workers}")
        self.scheduler = scheduler
        self.client = dask_client
        self._own: list[Any] = []
        # local: one pool for every batch (its workers keep their cost tables between batches)
        self._pool = None
        if executor == "local" and self.workers > 1:
            from ..sweep.executors import WorkerPool
            self._pool = WorkerPool(self.workers)
            self._own.append(self._pool)

    def _dask_client(self):
        if self.client is None:
            try:
                from distributed import Client
            except ImportError:
                raise InputError("--executor dask needs Dask distributed: pip install 'ahasd_sim[dask]'") from None
            if self.scheduler:
                from ..sweep.executors import connect_scheduler
                self.client = connect_scheduler(self.scheduler)
                self._own.append(self.client)
            else:
                from ..sweep.executors import local_dask_cluster
                cluster = local_dask_cluster(self.workers)
                self.client = Client(cluster)
                from ..sweep.executors import quiet_local_workers
                quiet_local_workers(self.client)
                self._own += [self.client, cluster]
        return self.client

    def run(self, tasks: Iterable[dict], on_done: Callable[[dict], None]) -> None:
        """Run ``tasks`` (a list, or an iterable taken as workers need points), ``on_done`` per result."""
        from ..sweep.executors import run_tasks
        if isinstance(tasks, list) and not tasks:
            return
        run_tasks(tasks, on_done, executor=self.executor, workers=self.workers, scheduler=self.scheduler,
                  client=self._dask_client() if self.executor == "dask" else None, pool=self._pool)

    def close(self) -> None:
        for obj in self._own:
            try:
                obj.close()
            except Exception:  # noqa: BLE001 - shutting down
                pass
        self._own = []
        self.client = None


def count_computed(counts: dict, key: str) -> Callable[[dict], None]:
    """An ``on_run`` for :func:`evaluate` that counts in ``counts[key]`` the runs simulated by this
    call (ok or failed; a run a worker found finished comes back ``cached``)."""
    def on_run(res: dict) -> None:
        if res.get("status") in ("ok", "failed"):
            counts[key] += 1
    return on_run


def evaluate(study: Study, points: Iterable[DesignPoint], points_dir: Path, executor: Executor,
             on_point: Callable[[DesignPoint], None] | None = None,
             on_run: Callable[[dict], None] | None = None) -> list[DesignPoint]:
    """Run every unfinished simulation of ``points`` (each distinct config once) and finish the
    points as their runs complete (``on_point`` is called for each, in completion order).
    Infeasible and unresolvable points are finished at once without running. ``points`` may be
    a generator: a point is taken when the executor needs more runs (its first runs start while
    later points are still being produced, e.g. asked from the optimiser and planned). Returns
    the points taken, in order."""
    taken: list[DesignPoint] = []
    waiting: dict[str, list[DesignPoint]] = {}
    remaining: dict[int, set[str]] = {}
    queued: set[str] = set()
    ended: set[str] = set()          # runs whose result came back (ok or failed)

    def done_point(pt: DesignPoint) -> None:
        if not pt.infeasible and not pt.error:
            finish(study, pt, points_dir)
        if on_point:
            on_point(pt)

    def tasks():
        for pt in points:
            taken.append(pt)
            if pt.infeasible or pt.error:
                done_point(pt)
                continue
            # every run the point waits for is booked before any is handed out: a run's result
            # can come back while this generator is suspended at a yield
            need: set[str] = set()
            new: list[dict] = []
            for rw, h in pt.hashes.items():
                d = points_dir / h
                if h in ended:            # run (ok or failed) by an earlier point of this call
                    continue
                if h not in queued:
                    stale = d / RUNNING
                    if stale.exists():
                        stale.unlink()
                    if is_done(d):
                        continue
                    queued.add(h)
                    new.append({"hash": h, "dir": str(d), "config": pt.configs[rw]})
                need.add(h)
                waiting.setdefault(h, []).append(pt)
            if not need:
                done_point(pt)
                continue
            remaining[id(pt)] = need
            yield from new

    def on_done(res: dict) -> None:
        h = res.get("hash")
        ended.add(h)
        if on_run:
            on_run(res)
        for pt in waiting.pop(h, []):
            left = remaining[id(pt)]
            left.discard(h)
            if not left:
                done_point(pt)

    executor.run(tasks(), on_done)
    return taken


__all__ = ["DesignPoint", "Executor", "count_computed", "evaluate", "finish", "plan", "windows_of", "config_value"]
