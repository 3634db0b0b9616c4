"""dse speaks optuna's public API only (issue 32): no private attribute of an optuna object, no
private optuna module; the one exception is a sampler's random state (``reseed_for_trial``).
And the path that used ``Trial._suggest`` (a trial asked by a killed process before any of its
parameters were stored) still resumes into the uninterrupted study."""
from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from test_dse_repro import table, write

ROOT = Path(__file__).resolve().parent.parent
DSE = ROOT / "ahasd_sim" / "dse"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def optuna_private_attributes() -> set[str]:
    """Private attribute names of the optuna objects dse meets: a study, its storage, a trial,
    a frozen trial and each sampler (instances: ``_rng`` and the like are set in ``__init__``)."""
    from ahasd_sim.dse.optimize import import_optuna
    optuna = import_optuna()      # quiet: no "A new study created" line
    study = optuna.create_study(directions=["minimize", "minimize"])
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    objects = [study, optuna.storages.InMemoryStorage(), trial, study.get_trials()[0],
               optuna.samplers.NSGAIISampler(seed=0), optuna.samplers.TPESampler(seed=0),
               optuna.samplers.RandomSampler(seed=0), optuna.samplers.GridSampler({"x": [0, 1]}, seed=0)]
    names = set()
    for obj in objects:
        names |= {n for n in dir(obj) if _is_private(n)} | {n for n in vars(obj) if _is_private(n)}
    return names


def private_uses(source: str, filename: str = "<src>", optuna_private: set[str] = frozenset()) -> list[str]:
    """Private names ``source`` (a module of ``ahasd_sim/dse``) reaches: ``x._name`` (``x`` not
    ``self``), a string naming one of ``optuna_private`` (what getattr/hasattr/setattr would be
    given), imports of private optuna modules or names, and private names imported from outside
    ``dse`` (the sweep's executors: ``sweep/executors.py``'s public API only)."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        where = f"{filename}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in optuna_private:
            found.append(f"{where}: {node.value!r}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "optuna" and any(_is_private(p) for p in parts):
                    found.append(f"{where}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and (node.level >= 2 or (node.level == 0 and node.module
                                                                       and node.module.startswith("ahasd_sim.")
                                                                       and not node.module.startswith("ahasd_sim.dse"))):
            found += [f"{where}: from {'.' * node.level}{node.module or ''} import {a.name}"
                      for a in node.names if _is_private(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "optuna":
                if any(_is_private(p) for p in parts):
                    found.append(f"{where}: from {node.module} import ...")
                found += [f"{where}: from {node.module} import {a.name}" for a in node.names if _is_private(a.name)]
    return found


def test_the_checker_finds_each_kind_of_private_use():
    planted = """
import optuna._imports
from optuna.storages._cached_storage import _CachedStorage
from optuna.trial import _trial
def f(self, study, trial, tid):
    study._storage.get_trial_system_attrs(tid)
    trial._suggest("x", None)
    getattr(trial, "_trial_id")
    self._own = 1
    trial.__class__
    row["speedup_ci95"], row["_ci95"]
    from ..sweep.runner import _run_tasks
    from ..sweep import executors, runner
    runner._run_tasks([], None)
    from .report import _csv
"""
    found = sorted(f.split(": ", 1)[1] for f in private_uses(planted, optuna_private={"_trial_id"}))
    assert found == sorted([
        "import optuna._imports", "from optuna.storages._cached_storage import ...",
        "from optuna.storages._cached_storage import _CachedStorage", "from optuna.trial import _trial",
        "._storage", "._suggest", "'_trial_id'", "from ..sweep.runner import _run_tasks", "._run_tasks"])


def test_the_private_names_include_the_ones_dse_used_to_reach():
    pytest.importorskip("optuna")
    assert {"_storage", "_trial_id", "_suggest", "_rng", "_random_sampler"} <= optuna_private_attributes()


def test_dse_uses_no_private_optuna_name_but_the_samplers_random_state():
    pytest.importorskip("optuna")
    from ahasd_sim.dse import optimize
    private = optuna_private_attributes()
    found = []
    for path in sorted(DSE.glob("*.py")):
        found += private_uses(path.read_text(), str(path.relative_to(ROOT)), private)
    line = next(i for i, text in enumerate((DSE / "optimize.py").read_text().splitlines(), 1)
                if text.startswith("SAMPLER_RANDOM_STATE_ATTRS = "))
    assert found == [f"ahasd_sim/dse/optimize.py:{line}: {name!r}" for name in optimize.SAMPLER_RANDOM_STATE_ATTRS]


def test_reseeding_reaches_the_samplers_random_state(tmp_path):
    """If optuna renamed the attributes, reseeding would silently do nothing and the studies would
    stop reproducing: the reseeded state must be the one the sampler draws from."""
    pytest.importorskip("optuna")
    import dataclasses

    from ahasd_sim.dse.optimize import SAMPLER_RANDOM_STATE_ATTRS, make_sampler, reseed_for_trial
    from ahasd_sim.dse.study import load_study
    fallback, state = SAMPLER_RANDOM_STATE_ATTRS
    study = load_study(write(tmp_path))
    for name in ("nsga2", "tpe", "random"):
        sampler = make_sampler(dataclasses.replace(study, sampler={"name": name}))
        for obj in (sampler, getattr(sampler, fallback, None)):
            if obj is None:      # RandomSampler has no fallback sampler
                continue
            draws = []
            for _ in range(2):
                reseed_for_trial(sampler, 5, 3)
                draws.append(getattr(obj, state).rng.random_sample(4).tolist())
            reseed_for_trial(sampler, 5, 4)
            assert draws[0] == draws[1] != getattr(obj, state).rng.random_sample(4).tolist(), name
    assert getattr(make_sampler(dataclasses.replace(study, sampler={"name": "nsga2"})), fallback) is not None


@pytest.fixture(scope="module")
def asked_without_parameters(tmp_path_factory):
    """(study, its uninterrupted 8 trials, the same study whose process was killed inside
    ``ask()`` twice after 4 trials, then resumed to 8). ``ask()`` stores a trial before its
    parameters, so a process killed in between leaves running trials without any; the next run
    suggests them (``Trial.suggest_*``)."""
    optuna = pytest.importorskip("optuna")
    from ahasd_sim.dse.optimize import open_study, run_optimize
    from ahasd_sim.dse.study import load_study
    tmp = tmp_path_factory.mktemp("asked")
    study = load_study(write(tmp))
    run_optimize(study, tmp / "ref", trials=8, workers=1, progress=False)
    run_optimize(study, tmp / "cut", trials=4, workers=1, progress=False)
    ost = open_study(study, tmp / "cut")
    for _ in range(2):
        assert ost.ask().params == {}
    stats = run_optimize(study, tmp / "cut", trials=8, workers=1, progress=False)
    trials = {name: optuna.load_study(study_name="repro", storage=f"sqlite:///{tmp / name / 'study.db'}").get_trials()
              for name in ("ref", "cut")}
    return tmp, stats, trials


def test_trials_asked_without_parameters_resume_with_the_uninterrupted_parameters(asked_without_parameters):
    _, stats, trials = asked_without_parameters
    assert stats["resumed"] == 2
    assert [t.state.name for t in trials["cut"]] == ["COMPLETE"] * 8
    for number in (4, 5):     # the two resumed trials
        ref, cut = trials["ref"][number], trials["cut"][number]
        assert set(cut.params) == {"pim.unit_gops_int8", "memory.channels", "pim.ranks"}
        assert (cut.params, cut.values) == (ref.params, ref.values)


def test_trials_asked_without_parameters_resume_into_the_uninterrupted_study(asked_without_parameters):
    """The whole resumed study equals the uninterrupted one, the trials asked after the resumed
    ones included (they were asked first, and NSGA-II then chose a generation's parents on a
    later trial's random state)."""
    tmp, _, _ = asked_without_parameters
    pd.testing.assert_frame_equal(table(tmp / "cut"), table(tmp / "ref"))
