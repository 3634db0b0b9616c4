"""``python -m ahasd_sim optimize``: a multi-objective study with optuna on the sweep executor.

Study folder (default ``studies/<name>/``)::

    study.yaml      copy of the study file
    study.db        optuna RDB storage (SQLite): every trial, its parameters, state and values
    points/<hash>/  one run folder per distinct simulation (as in a sweep; reused, never rerun)
    trials.csv      all trials (tidy), pareto.csv (the non-dominated feasible trials)
    figures/        pareto_<a>__<b>.png|pdf per objective pair, parallel_front.png|pdf
    report.md       what was searched, how long it took, the front

Trials are asked from the sampler in batches (``batch_size``; for NSGA-II one generation,
``population_size``, by default). **Reproducible** (the default): a batch is asked, all its
simulations go to the executor together, and its trials are told to optuna in trial-number
order only when the whole batch is done; the sampler draws trial ``n``'s randomness from
(``seed``, ``n``) alone. So a seeded study gives the same trials whatever ``--workers``, the
executor or the timing, in one go or interrupted and resumed. ``--fastest``: the next batch is
asked and planned while this one runs and each trial is told as soon as its last simulation
ends (the pool never waits for a batch's slowest simulation); the trials then depend on timing.

Interrupted (Ctrl-C, a kill, a crash): the storage keeps every told trial; the asked-but-untold
trials stay ``RUNNING`` there and are evaluated first on the next invocation, under the same
trial number and parameters (their finished simulations are read back from ``points/``),
so no trial is lost or repeated. ``--trials N``: the study holds N finished trials
(complete, failed or infeasible) when the command ends; more than the study holds extends it.

Infeasible designs (a violated ``constraints:`` entry, or models that do not fit the PIM ranks:
:data:`~ahasd_sim.dse.evaluate.MEMORY_FIT`) are not simulated; they are told to optuna as
complete trials with their constraint violations (``Trial.set_constraint``; NSGA-II ranks them
by constrained domination below every feasible design, TPE keeps them out of its "good" set)
and placeholder objective values of -inf/+inf (the worst possible) that no table reports.
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
from .evaluate import DesignPoint, Executor, count_computed, evaluate, plan
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


DEFAULT_POPULATION = 50
DEFAULT_BATCH = 8          # reproducible mode, samplers without generations: independent of --workers


def trial_seed(seed: int, number: int) -> int:
    """The seed of trial ``number``'s random draws: a function of (study seed, trial number) only."""
    import numpy as np
    return int(np.random.SeedSequence([int(seed), int(number)]).generate_state(1)[0])


def suggest(trial, name: str, distribution) -> Any:
    """``trial``'s value of parameter ``name`` (sampled now, or the stored one) through the public
    ``Trial.suggest_*`` call for ``distribution`` (one of :func:`distributions`)."""
    from optuna.distributions import CategoricalDistribution, IntDistribution
    d = distribution
    if isinstance(d, CategoricalDistribution):
        return trial.suggest_categorical(name, d.choices)
    if isinstance(d, IntDistribution):
        return trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
    return trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)


# The one private optuna name dse reads (tests/test_dse_public_api.py allows exactly these): a
# sampler's random state. optuna can only reseed it randomly (``reseed_rng()``), and
# reproducibility needs it seeded from (seed, trial number); a sampler built anew per trial
# would seed its fallback random sampler differently and change every study's trials.
SAMPLER_RANDOM_STATE_ATTRS = ("_random_sampler", "_rng")


def reseed_for_trial(sampler, seed: int, number: int) -> None:
    """Reset every random state of ``sampler`` (and of the random sampler it falls back on) to
    :func:`trial_seed`: what it proposes for a trial then depends on the stored trials, never on
    how many draws earlier trials or an earlier process made."""
    s = trial_seed(seed, number)
    fallback, state = SAMPLER_RANDOM_STATE_ATTRS
    for k, obj in enumerate([sampler, getattr(sampler, fallback, None)]):
        rng = getattr(obj, state, None)
        if rng is not None and hasattr(rng, "rng"):
            rng.rng.seed((s + k) % 2**32)


def make_sampler(study: Study, seed: int | None = None):
    optuna = import_optuna()
    s = study.sampler
    name = s["name"]
    seed = study.seed if seed is None else seed

    class _Grid(optuna.samplers.GridSampler):
        def after_trial(self, study, trial, state, values):  # noqa: D401
            """No ``study.stop()`` when the grid is exhausted (that only works inside ``optimize``);
            trials beyond the grid repeat grid points and reuse their runs."""

    if name == "nsga2":
        cls, kw = optuna.samplers.NSGAIISampler, {"population_size": s.get("population_size", DEFAULT_POPULATION)}
    elif name == "tpe":
        cls, kw = optuna.samplers.TPESampler, {"n_startup_trials": s.get("n_startup_trials", 10)}
    elif name == "random":
        cls, kw = optuna.samplers.RandomSampler, {}
    else:
        cls, kw = _Grid, {"search_space": {p.name: p.labels for p in study.space}}

    def before_trial(self, ostudy, trial):  # noqa: D401
        reseed_for_trial(self, seed, trial.number)
        cls.before_trial(self, ostudy, trial)

    # ``cls`` whose random state is reset per trial from (seed, trial number). It carries
    # ``cls``'s name: NSGA-II names its storage keys after the class ("NSGAIISampler:generation"),
    # so stored studies and tests read the plain sampler's keys.
    per_trial_seeded = type(cls.__name__, (cls,), {
        "__qualname__": cls.__name__, "before_trial": before_trial,
        "__doc__": f"{cls.__name__} whose random state is reset per trial from (seed, trial number)."})
    return per_trial_seeded(seed=seed, **kw)


def default_batch(study: Study) -> int:
    """Reproducible mode's batch: ``batch_size:``, else one NSGA-II generation, else
    :data:`DEFAULT_BATCH` (never derived from ``--workers``: the trials must not depend on it)."""
    if study.batch_size:
        return study.batch_size
    if study.sampler["name"] == "nsga2":
        return int(study.sampler.get("population_size", DEFAULT_POPULATION))
    return DEFAULT_BATCH


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
    return open_study_and_storage(study, out)[0]


def open_study_and_storage(study: Study, out: Path, owned: bool = False):
    """(optuna study, its storage) of ``out/study.db``: the storage's public methods map trial
    numbers to the trial ids a :class:`optuna.trial.Trial` is built from. ``owned``: the caller
    holds the folder's :class:`StudyLock`, so no other process writes the database and reads
    come from memory (:class:`~ahasd_sim.dse.storage.OwnedStudyStorage`; writes go through)."""
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
    if owned:
        from .storage import OwnedStudyStorage
        storage = OwnedStudyStorage(storage)
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
    seed = ostudy.user_attrs.get("seed")
    if seed is None:
        ostudy.set_user_attr("seed", study.seed)
    elif seed != study.seed:
        raise ConfigError(str(study.source), "seed", f"the study folder {out} holds trials of seed {seed}, "
                          f"not {study.seed}; use a new --out (or --seeds, one folder per seed)")
    # a resumed study needs no reseeding: the sampler seeds each trial from (seed, trial number)
    return ostudy, storage


def trial_id_lookup(ostudy, storage):
    """``number -> trial id`` of ``ostudy``'s trials (optuna keeps the id private on its trial
    objects; the storage answers it)."""
    study_id = storage.get_study_id_from_name(ostudy.study_name)
    return lambda number: storage.get_trial_id_from_study_id_trial_number(study_id, number)


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


def constraint_violations(study: Study, pt: DesignPoint) -> dict[str, float]:
    """optuna's constraint values of a planned point (<= 0: satisfied), by constraint name."""
    from .evaluate import MEMORY_FIT
    out = {}
    if MEMORY_FIT in pt.constraint_values:
        out[MEMORY_FIT] = float(pt.constraint_values[MEMORY_FIT])
    for c in study.constraints:
        if c.name in pt.constraint_values:
            out[c.name] = c.violation(pt.constraint_values[c.name])
    return out


def _tell(ostudy, trial_id_of: dict[int, int], pt: DesignPoint, study: Study | None = None) -> str:
    optuna = import_optuna()
    from optuna.trial import TrialState
    num = int(pt.key)
    tr = optuna.trial.Trial(ostudy, trial_id_of[num])
    rec: dict[str, Any] = {"hashes": {f"{r}@{w}" if w is not None else r: h for (r, w), h in pt.hashes.items()},
                           "constraints": pt.constraint_values, "metrics": pt.metrics, "eval_s": pt.eval_s,
                           "placements": pt.placements}
    if pt.ci95 is not None:
        rec["ci95"] = [None if c is None else [float(c[0]), float(c[1])] for c in pt.ci95]   # [low, high] or None
    if pt.samples is not None:
        rec["samples"] = pt.samples
        rec["windows"] = pt.windows
    if pt.infeasible:
        rec["infeasible"] = pt.infeasible
    elif pt.error or pt.values is None:
        rec["error"] = pt.error or "no result"
    tr.set_user_attr("record", rec)     # one commit per trial
    if pt.error and not pt.infeasible:
        ostudy.tell(num, state=TrialState.FAIL, skip_if_finished=True)
        return "failed"
    if study is not None:
        have = tr.constraints
        for name, v in constraint_violations(study, pt).items():
            if name not in have:     # a resumed trial may have them already
                tr.set_constraint(name, v)
    if pt.infeasible:
        # the sampler learns the region from the constraint violations; the values are placeholders
        # (the worst possible), never reported: trials.csv reads the status from the record
        worst = [float("-inf") if d == "maximize" else float("inf") for d in study.directions] if study else None
        if worst is None:
            ostudy.tell(num, state=TrialState.PRUNED, skip_if_finished=True)
        else:
            ostudy.tell(num, worst, skip_if_finished=True)
        return "infeasible"
    if pt.values is None:
        ostudy.tell(num, state=TrialState.FAIL, skip_if_finished=True)
        return "failed"
    ostudy.tell(num, pt.values, skip_if_finished=True)
    return "ok"


def run_optimize(study: Study | str | Path, out_dir: str | Path | None = None, *, trials: int | None = None,
                 workers: int | None = None, executor: str = "local", scheduler: str | None = None,
                 progress: bool = True, dask_client: Any = None, batch_size: int | None = None,
                 write_outputs: bool = True, stream=None, fastest: bool = False,
                 points_dir: str | Path | None = None) -> dict[str, Any]:
    """Run (or resume, or extend) a study until it holds ``trials`` finished trials; write the
    outputs. Returns a dict with counts and timings. ``fastest``: pipeline the batches (not
    reproducible, see the module docstring)."""
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
    if fastest:
        batch = batch_size or study.batch_size or max(4, 4 * ex.workers)
    else:
        batch = batch_size or default_batch(study)
    points_dir = Path(points_dir) if points_dir is not None else out / "points"
    stats = {"out_dir": out, "computed_runs": 0, "told": {"ok": 0, "failed": 0, "infeasible": 0}, "resumed": 0,
             "mode": "fastest" if fastest else "reproducible", "batch_size": batch}
    t0 = time.perf_counter()
    with StudyLock(out):
        ostudy, storage = open_study_and_storage(study, out, owned=True)   # refuses a different study before anything is written
        trial_id = trial_id_lookup(ostudy, storage)
        from .folders import clean_stale_points
        clean_stale_points(points_dir)      # staging folders of points whose process was killed
        atomic_write_text(out / "study.yaml", study.source.read_text())
        from optuna.trial import TrialState
        dists = distributions(study)
        stale = [t for t in ostudy.get_trials(deepcopy=False) if t.state == TrialState.RUNNING]
        stats["resumed"] = len(stale)
        todo_resume = [(t.number, trial_id(t.number), dict(t.params)) for t in stale]
        n_before = finished_count(ostudy)
        stats["finished_before"] = n_before
        n_new = max(0, n_target - n_before - len(todo_resume))
        prog = Progress(n_new + len(todo_resume), enabled=progress, stream=stream, desc=study.name)

        on_run = count_computed(stats, "computed_runs")

        def batch_points(chunk: list[tuple]):
            """The next batch's design points, planned (configs resolved and hashed: the parent's
            share of the work) one at a time as they are taken; ``chunk`` collects each trial's
            (number, trial id, params). Interrupted trials first, then new ones up to the target.
            The evaluation takes a point when its workers need runs, so the first runs start
            while later trials are still being asked and planned (the trials are the same: no
            trial is told before the whole batch is asked)."""
            nonlocal todo_resume
            resumed = todo_resume[:batch]
            todo_resume = todo_resume[batch:]
            # every stored trial is finished, running (this batch) or queued for resumption: new
            # trials make up the difference to the target (race-free: only this thread asks)
            k = min(batch - len(resumed), n_target - len(ostudy.get_trials(deepcopy=False)))
            # the resumed trials' missing parameters first, in trial order, as the uninterrupted
            # study suggested them (before any later trial was asked: NSGA-II picks a generation's
            # parents at its first suggestion, on that trial's random state)
            for num, tid, params in resumed:
                missing = [p.name for p in study.space if p.name not in params]
                if missing:   # a trial asked by an interrupted process before its params were stored
                    reseed_for_trial(ostudy.sampler, study.seed, num)
                    tr = import_optuna().trial.Trial(ostudy, tid)
                    for name in missing:
                        params[name] = suggest(tr, name, dists[name])
            for entry in resumed:
                chunk.append(entry)
                yield plan(study, entry[0], entry[2])
            for _ in range(max(0, k)):
                t = ostudy.ask(dists)
                chunk.append((t.number, trial_id(t.number), dict(t.params)))
                yield plan(study, t.number, chunk[-1][2])

        def ask_and_plan() -> tuple[list[tuple], list[DesignPoint]]:
            """The whole next batch, asked and planned (``--fastest`` plans it while the last runs)."""
            chunk: list[tuple] = []
            pts = list(batch_points(chunk))
            return chunk, pts

        def tell(pt: DesignPoint, ids: dict[int, int]) -> None:
            raise_if_interrupted()   # before telling: the trial is resumed, not lost
            status = _tell(ostudy, ids, pt, study)
            stats["told"][status] += 1
            if status == "failed":
                stats.setdefault("failures", []).append((pt.key, pt.error or "no result"))
            prog.update("failed" if status == "failed" else "ok")

        worker = None
        try:
            if not fastest:
                # lock-step: ask a batch (its first runs start while the rest is asked), run it,
                # tell it in trial order, then ask the next
                while True:
                    chunk = []
                    pts = evaluate(study, batch_points(chunk), points_dir, ex, on_run=on_run)
                    if not chunk:
                        break
                    ids = {num: tid for num, tid, _ in chunk}
                    for pt in sorted(pts, key=lambda q: int(q.key)):
                        tell(pt, ids)
            else:
                ahead: dict[str, Any] = {}

                def plan_ahead() -> None:
                    try:
                        ahead["result"] = ask_and_plan()
                    except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
                        ahead["error"] = exc

                chunk, pts = ask_and_plan()
                while chunk:
                    trial_id_of = {num: tid for num, tid, _ in chunk}
                    # Ask and plan the next batch while this one runs (the pool would idle meanwhile);
                    # NSGA-II and TPE take trials still running into account as optuna does with n_jobs.
                    ahead.clear()
                    worker = threading.Thread(target=plan_ahead, daemon=True)
                    worker.start()
                    evaluate(study, pts, points_dir, ex, on_point=lambda pt, ids=trial_id_of: tell(pt, ids),
                             on_run=on_run)
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
             + f"); {stats['computed_runs']} simulations run in {fmt_duration(stats['wall_s'])}"
             + (f" ({stats['mode']})" if stats.get("mode") else ""),
             f"trials: {out / 'trials.csv'}  pareto: {out / 'pareto.csv'}  report: {out / 'report.md'}"]
    return "\n".join(lines)


def parse_seeds(text: str) -> list[int]:
    try:
        # every item counts: '' and '1,,2' are typos, not "no seeds" or "seeds 1 and 2"
        seeds = [int(x) for x in text.split(",")]
    except ValueError:
        seeds = []
    if not seeds or any(x < 0 for x in seeds) or len(set(seeds)) != len(seeds):
        raise InputError(f"--seeds: expected distinct integers >= 0 separated by commas, got {text!r}")
    return seeds


def run_seeds(study: Study, out: Path, seeds: list[int], **kw) -> tuple[list[dict[str, Any]], Path]:
    """The study once per search seed, in ``out/seed-<S>/`` (simulations shared in ``out/points/``);
    ``out/seeds.csv``: per seed, its trials, front sizes and hypervolume, all against one reference
    point (the worst evaluated value of each objective over every seed)."""
    import dataclasses

    import pandas as pd

    from .report import _csv, hypervolume_history, hypervolume_reference, trials_table
    runs, tables = [], {}
    from .folders import check_study_folder
    check_study_folder(out, study.name, "optimize")
    # the whole folder is this command's while it runs: a plain optimize (or sensitivity) into it
    # is refused, as one into any folder a study command is writing
    with StudyLock(out):
        for sd in seeds:
            st = dataclasses.replace(study, seed=sd)
            stats = run_optimize(st, out / f"seed-{sd}", points_dir=out / "points", **kw)
            runs.append(stats)
            with StudyLock(out / f"seed-{sd}"):
                tables[sd] = (st, trials_table(st, open_study(st, out / f"seed-{sd}")))
    ref = hypervolume_reference(study, pd.concat([t for _, t in tables.values()]))
    rows = []
    for sd, (st, df) in tables.items():
        hv = hypervolume_history(st, df, ref)
        rows.append({"seed": sd, "trials": len(df), "ok": int((df["status"] == "ok").sum()),
                     "infeasible": int((df["status"] == "infeasible").sum()),
                     "failed": int((df["status"] == "failed").sum()),
                     "front_size": int(df["pareto"].sum()) if len(df) else 0,
                     "front_ci_size": int(df["pareto_ci"].sum()) if len(df) else 0,
                     "hypervolume": float(hv["hypervolume"].iloc[-1]) if len(hv) else float("nan")})
    table = pd.DataFrame(rows)
    for o, v in zip(study.objectives, ref or []):
        table[f"ref:{o.name}"] = v
    _csv(table, out / "seeds.csv")
    return runs, out / "seeds.csv"


def windows_warning(study: Study, windows: list | None, what: str) -> str | None:
    """The warning when ``windows`` per design point are too few for the objectives' intervals."""
    from ..metrics.stats import MIN_T_SAMPLES
    if not windows:           # no study windows: the simulator's own windows of each run give the intervals
        return None
    n = len(windows)
    if n >= MIN_T_SAMPLES:
        return None
    return (f"{study.source}: {what}: {n} trace window{'s' if n != 1 else ''} per design point: the objectives get "
            f"no 95% interval (Student t needs {MIN_T_SAMPLES} windows, one sample each); list more windows")


def run_optimize_cli(args) -> int:
    study = load_study(args.config)
    from ..cli_common import warn
    if (msg := windows_warning(study, study.windows, "windows")):
        warn(msg)
    out = Path(args.out) if args.out else default_out_dir(study)
    kw = dict(trials=args.trials, workers=args.workers, executor=args.executor, scheduler=args.scheduler,
              progress=not args.no_progress, fastest=getattr(args, "fastest", False))
    from .folders import names_the_folder
    try:
        with names_the_folder(out, "optimize"):
            if getattr(args, "seeds", None) is not None:
                runs, table = run_seeds(study, out, parse_seeds(args.seeds), **kw)
            else:
                runs, table = [run_optimize(study, out, **kw)], None
    except KeyboardInterrupt:
        print(f"interrupted: told trials are kept in the study.db of {out}; run the same command again to "
              "finish the interrupted trials and the missing ones", file=sys.stderr)
        raise
    for stats in runs:
        print(summarize(stats))
        for num, why in stats.get("failures", []):   # one line per failed trial, on stderr
            print(f"error: trial {num} failed: {' '.join(str(why).split())}", file=sys.stderr)
    if table is not None:
        print(f"seeds: {table}")
    return 0 if all(st["told"]["failed"] == 0 for st in runs) else 1
