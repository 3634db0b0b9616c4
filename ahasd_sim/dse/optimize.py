"""``python -m ahasd_sim optimize``: a multi-objective study with optuna on the sweep executor.

Study folder (default ``studies/<name>/``)::

    study.yaml      copy of the study file
    study.db        optuna RDB storage (SQLite): every trial, its parameters, state and values
    points/<hash>/  one run folder per distinct simulation (as in a sweep; reused, never rerun)
    trials.csv      all trials (tidy), pareto.csv (the non-dominated feasible trials)
    figures/        pareto_<a>__<b>.png|pdf per objective pair, parallel_front.png|pdf
    report.md       what was searched, how long it took, the front

Trials are asked from the sampler in batches; each batch's simulations go to the executor
together and a trial is told to optuna as soon as its last simulation ends. Interrupted
(Ctrl-C, a kill, a crash): the storage keeps every told trial; the asked-but-untold trials
stay ``RUNNING`` there and are evaluated first on the next invocation, under the same
trial number and parameters (their finished simulations are read back from ``points/``),
so no trial is lost or repeated. ``--trials N``: the study holds N finished trials
(complete, failed or infeasible) when the command ends; more than the study holds extends it.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ..cli_common import raise_if_interrupted
from ..config.errors import ConfigError, InputError, OutputError
from ..output import atomic_write_text
from ..sweep.progress import Progress, fmt_duration
from .evaluate import DesignPoint, Executor, evaluate, plan
from .study import Study, load_study

LOCK = "study.lock"


def import_optuna():
    try:
        import optuna
    except ImportError:
        raise InputError("optimize needs optuna: pip install 'ahasd_sim[dse]'") from None
    optuna.logging.set_verbosity(optuna.logging.ERROR)   # failures are reported by our summary
    return optuna


def default_out_dir(study: Study) -> Path:
    return Path("studies") / study.name


def distributions(study: Study) -> dict[str, Any]:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    out = {}
    for p in study.space:
        if p.kind == "categorical":
            out[p.name] = CategoricalDistribution(p.labels)
        elif p.kind == "int":
            out[p.name] = IntDistribution(int(p.low), int(p.high), log=p.log, step=int(p.step or 1))
        else:
            out[p.name] = FloatDistribution(float(p.low), float(p.high), log=p.log, step=p.step)
    return out


def make_sampler(study: Study, seed: int | None = None):
    optuna = import_optuna()
    s = study.sampler
    name = s["name"]
    seed = study.seed if seed is None else seed
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=s.get("population_size", 50))
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=s.get("n_startup_trials", 10))
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)

    class _Grid(optuna.samplers.GridSampler):
        def after_trial(self, study, trial, state, values):  # noqa: D401
            """No ``study.stop()`` when the grid is exhausted (that only works inside ``optimize``);
            trials beyond the grid repeat grid points and reuse their runs."""

    return _Grid({p.name: p.labels for p in study.space}, seed=seed)


def space_fingerprint(study: Study) -> str:
    """What must not change under a study's stored trials: space, objectives, runs, windows, base."""
    desc = {
        "space": [[p.name, p.kind, p.low, p.high, p.log, p.step, p.labels] for p in study.space],
        "objectives": [[o.name, o.metric, o.run, o.over, o.direction] for o in study.objectives],
        "runs": study.runs, "windows": study.windows, "base_set": study.base_set,
        "base_config": study.base_config.name,
        "constraints": [[c.name, c.expr, c.min, c.max] for c in study.constraints],
    }
    return hashlib.sha256(json.dumps(desc, sort_keys=True, default=str).encode()).hexdigest()[:12]


class StudyLock:
    """One process per study folder: ``study.lock`` holds the owner's pid; a stale lock (its
    process is gone, e.g. after a kill) is taken over."""

    def __init__(self, out: Path):
        self.path = out / LOCK

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                return self
            except FileExistsError:
                try:
                    pid = int(self.path.read_text().strip() or "0")
                except (OSError, ValueError):
                    pid = 0
                if pid and pid != os.getpid() and _alive(pid):
                    raise InputError(f"{self.path.parent}: study in use by process {pid} "
                                     f"(remove {self.path} if that is not an ahasd_sim process)")
                self.path.unlink(missing_ok=True)
        raise InputError(f"{self.path}: cannot take the study lock")

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def open_study(study: Study, out: Path):
    """The optuna study stored in ``out/study.db`` (created on first use)."""
    optuna = import_optuna()
    out.mkdir(parents=True, exist_ok=True)
    db = out / "study.db"
    if db.exists():
        # a study.db that is not SQLite (or is empty) is refused: optuna would raise a database
        # error or, for a 0-byte file, silently start a new study over the old folder
        with open(db, "rb") as fh:
            head = fh.read(16)
        if head != b"SQLite format 3\x00":
            what = "empty (0 bytes)" if not head else "not an SQLite database"
            raise OutputError(f"{db}: {what}; it is not a study of this tool (move it away, or use a new --out)")
    try:
        storage = optuna.storages.RDBStorage(f"sqlite:///{db.resolve()}",
                                             engine_kwargs={"connect_args": {"timeout": 30}})
    except Exception as exc:     # sqlalchemy errors on a damaged database
        raise OutputError(f"{db}: cannot open the study database ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:120]})") from None
    _fast_sqlite(storage)
    fp = space_fingerprint(study)
    ostudy = optuna.create_study(study_name=study.name, storage=storage, load_if_exists=True,
                                 directions=study.directions, sampler=make_sampler(study))
    stored = ostudy.user_attrs.get("space_fingerprint")
    if stored is None:
        ostudy.set_user_attr("space_fingerprint", fp)
        ostudy.set_user_attr("objectives", [o.name for o in study.objectives])
    elif stored != fp:
        raise ConfigError(str(study.source), "space", f"the study folder {out} holds trials of a different "
                          "search space, objectives, runs or base settings; use a new --out (or delete the folder)")
    if [d.name.lower() for d in ostudy.directions] != study.directions:
        raise ConfigError(str(study.source), "objectives", f"directions differ from the stored study in {out}")
    n = len(ostudy.get_trials(deepcopy=False))
    if n:   # a resumed study: a fresh sampler seeded like the first run would propose its first trials again
        ostudy.sampler = make_sampler(study, seed=(study.seed * 1_000_003 + n) % 2**32)
    return ostudy


def _fast_sqlite(storage) -> None:
    """Write-ahead log with ``synchronous=NORMAL``: every committed trial survives a killed
    process (the log is in the OS page cache); only a power cut may lose the last commits,
    which then rerun from their cached simulations. Cuts the per-commit fsyncs."""
    try:
        from sqlalchemy import event
        engine = storage.engine
    except (ImportError, AttributeError):  # pragma: no cover - other optuna versions
        return

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn, _rec):  # noqa: ANN001
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    engine.dispose()   # connections opened before the listener get the pragmas too


def finished_count(ostudy) -> int:
    return sum(1 for t in ostudy.get_trials(deepcopy=False) if t.state.is_finished())


def _tell(ostudy, trial_id_of: dict[int, int], pt: DesignPoint) -> str:
    optuna = import_optuna()
    from optuna.trial import TrialState
    num = int(pt.key)
    tr = optuna.trial.Trial(ostudy, trial_id_of[num])
    rec: dict[str, Any] = {"hashes": {f"{r}@{w}" if w is not None else r: h for (r, w), h in pt.hashes.items()},
                           "constraints": pt.constraint_values, "metrics": pt.metrics}
    if pt.ci95 is not None:
        rec["ci95"] = [None if v != v else v for v in pt.ci95]   # NaN is not JSON
    if pt.infeasible:
        rec["infeasible"] = pt.infeasible
    elif pt.error or pt.values is None:
        rec["error"] = pt.error or "no result"
    tr.set_user_attr("record", rec)     # one commit per trial
    if pt.infeasible:
        ostudy.tell(num, state=TrialState.PRUNED, skip_if_finished=True)
        return "infeasible"
    if pt.error or pt.values is None:
        ostudy.tell(num, state=TrialState.FAIL, skip_if_finished=True)
        return "failed"
    ostudy.tell(num, pt.values, skip_if_finished=True)
    return "ok"


def run_optimize(study: Study | str | Path, out_dir: str | Path | None = None, *, trials: int | None = None,
                 workers: int | None = None, executor: str = "local", scheduler: str | None = None,
                 progress: bool = True, dask_client: Any = None, batch_size: int | None = None,
                 write_outputs: bool = True, stream=None) -> dict[str, Any]:
    """Run (or resume, or extend) a study until it holds ``trials`` finished trials; write the
    outputs. Returns a dict with counts and timings."""
    if not isinstance(study, Study):
        study = load_study(study)
    n_target = trials if trials is not None else study.trials
    if n_target is None:
        raise InputError(f"{study.source}: trials: give --trials N or 'trials:' in the study file")
    if n_target < 1:
        raise InputError(f"--trials must be >= 1, got {n_target}")
    out = Path(out_dir) if out_dir is not None else default_out_dir(study)
    from .folders import check_study_folder
    check_study_folder(out, study.name, "optimize")
    ex = Executor(executor, workers, scheduler, dask_client)
    batch = batch_size or study.batch_size or max(4, 4 * ex.workers)
    points_dir = out / "points"
    stats = {"out_dir": out, "computed_runs": 0, "told": {"ok": 0, "failed": 0, "infeasible": 0}, "resumed": 0}
    t0 = time.perf_counter()
    with StudyLock(out):
        ostudy = open_study(study, out)     # refuses a different study before anything is written
        from .folders import clean_stale_points
        clean_stale_points(points_dir)      # staging folders of points whose process was killed
        atomic_write_text(out / "study.yaml", study.source.read_text())
        from optuna.trial import TrialState
        dists = distributions(study)
        stale = [t for t in ostudy.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
        stats["resumed"] = len(stale)
        todo_resume = [(t.number, t._trial_id, dict(t.params)) for t in stale]
        n_before = finished_count(ostudy)
        stats["finished_before"] = n_before
        n_new = max(0, n_target - n_before - len(todo_resume))
        prog = Progress(n_new + len(todo_resume), enabled=progress, stream=stream, desc=study.name)

        def on_run(res: dict) -> None:
            if res.get("status") in ("ok", "failed"):
                stats["computed_runs"] += 1

        def ask_and_plan() -> tuple[list[tuple], list[DesignPoint]]:
            """The next chunk: interrupted trials first, then new ones up to the target; planned
            (configs resolved and hashed), which is the parent's share of the work."""
            nonlocal todo_resume
            chunk = todo_resume[:batch]
            todo_resume = todo_resume[batch:]
            # every stored trial is finished, running (this batch) or queued for resumption: new
            # trials make up the difference to the target (race-free: only this thread asks)
            k = min(batch - len(chunk), n_target - len(ostudy.get_trials(deepcopy=False)))
            for _ in range(max(0, k)):
                t = ostudy.ask(dists)
                chunk.append((t.number, t._trial_id, dict(t.params)))
            pts = []
            for num, tid, params in chunk:
                missing = [p.name for p in study.space if p.name not in params]
                if missing:   # a trial asked by an interrupted process before its params were stored
                    tr = import_optuna().trial.Trial(ostudy, tid)
                    for name in missing:
                        params[name] = tr._suggest(name, dists[name])
                pts.append(plan(study, num, params))
            return chunk, pts

        ahead: dict[str, Any] = {}

        def plan_ahead() -> None:
            try:
                ahead["result"] = ask_and_plan()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                ahead["error"] = exc

        worker = None
        try:
            chunk, pts = ask_and_plan()
            while chunk:
                trial_id_of = {num: tid for num, tid, _ in chunk}

                def on_point(pt: DesignPoint, ids=trial_id_of) -> None:
                    raise_if_interrupted()   # before telling: the trial is resumed, not lost
                    status = _tell(ostudy, ids, pt)
                    stats["told"][status] += 1
                    if status == "failed":
                        stats.setdefault("failures", []).append((pt.key, pt.error or "no result"))
                    prog.update("failed" if status == "failed" else "ok")

                # Ask and plan the next batch while this one runs (the pool would idle meanwhile);
                # NSGA-II and TPE take trials still running into account as optuna does with n_jobs.
                ahead.clear()
                worker = threading.Thread(target=plan_ahead, daemon=True)
                worker.start()
                evaluate(study, pts, points_dir, ex, on_point=on_point, on_run=on_run)
                worker.join()
                worker = None
                raise_if_interrupted()
                if "error" in ahead:
                    raise ahead["error"]
                chunk, pts = ahead["result"]
        except KeyboardInterrupt:
            stats["interrupted"] = True
            raise
        finally:
            if worker is not None:   # interrupted: let the planner finish its database calls
                worker.join(timeout=30)
            prog.close()
            ex.close()
            stats["wall_s"] = time.perf_counter() - t0
            stats["finished"] = finished_count(ostudy)
            if write_outputs:
                from .report import write_outputs as _write
                try:
                    _write(study, ostudy, out, stats)
                except KeyboardInterrupt:   # pragma: no cover - a second Ctrl-C
                    pass
    return stats


def summarize(stats: dict[str, Any]) -> str:
    told = stats["told"]
    out = stats["out_dir"]
    lines = [f"study {out}: {stats['finished']} finished trials ({stats.get('finished_before', 0)} before, "
             f"{sum(told.values())} now: {told['ok']} ok, {told['failed']} failed, {told['infeasible']} infeasible"
             + (f"; {stats['resumed']} interrupted trials resumed" if stats.get("resumed") else "")
             + f"); {stats['computed_runs']} simulations run in {fmt_duration(stats['wall_s'])}",
             f"trials: {out / 'trials.csv'}  pareto: {out / 'pareto.csv'}  report: {out / 'report.md'}"]
    return "\n".join(lines)


def run_optimize_cli(args) -> int:
    study = load_study(args.config)
    out = Path(args.out) if args.out else default_out_dir(study)
    try:
        stats = run_optimize(study, out, trials=args.trials, workers=args.workers, executor=args.executor,
                             scheduler=args.scheduler, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"interrupted: told trials are kept in {out / 'study.db'}; run the same command again to "
              "finish the interrupted trials and the missing ones", file=sys.stderr)
        raise
    print(summarize(stats))
    for num, why in stats.get("failures", []):   # one line per failed trial, on stderr
        print(f"error: trial {num} failed: {' '.join(str(why).split())}", file=sys.stderr)
    return 0 if stats["told"]["failed"] == 0 else 1
