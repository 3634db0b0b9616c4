"""The study database as its lock holder reads it (dse/storage.py): what optuna reads from
memory is what the database holds after every step of a study (asks, parameters, attributes,
constraints, tells, failures, a resumed study's running trials), the study asks the same
trials as on optuna's own storage, and a batch's reads do not go back to the database."""
from __future__ import annotations

import pytest

optuna = pytest.importorskip("optuna")

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution  # noqa: E402
from optuna.trial import TrialState  # noqa: E402

from ahasd_sim.dse.optimize import import_optuna  # noqa: E402
from ahasd_sim.dse.storage import OwnedStudyStorage  # noqa: E402

DISTS = {"x": FloatDistribution(0.1, 10.0, log=True), "n": IntDistribution(1, 8),
         "c": CategoricalDistribution(["a", "b", "c"])}


def _rdb(path):
    import_optuna()    # quiet
    return optuna.storages.RDBStorage(f"sqlite:///{path}")


def _study(storage, seed=3):
    return optuna.create_study(study_name="s", storage=storage, load_if_exists=True, directions=["maximize", "minimize"],
                               sampler=optuna.samplers.NSGAIISampler(population_size=4, seed=seed))


def _same_as_database(owned: OwnedStudyStorage, path, study_id: int) -> None:
    fresh = _rdb(path)            # another connection: what the file holds
    stored = fresh.get_all_trials(study_id)
    assert owned.get_all_trials(study_id, deepcopy=False) == stored
    assert owned.get_all_trials(study_id) == stored
    for t in stored:
        tid = fresh.get_trial_id_from_study_id_trial_number(study_id, t.number)
        assert owned.get_trial_id_from_study_id_trial_number(study_id, t.number) == tid
        assert owned.get_trial(tid) == t
    running = [t for t in stored if t.state == TrialState.RUNNING]
    assert owned.get_all_trials(study_id, states=(TrialState.RUNNING,)) == running
    fresh.remove_session()


def _generations(study, check, n_gen=3, fail_every=5):
    """Ask a generation of 4, set what our tell sets (a record, a constraint), tell them in
    trial order (one failed now and then); ``check`` after every step."""
    for _ in range(n_gen):
        trials = []
        for _ in range(4):
            trials.append(study.ask(DISTS))
            check()
        for tr in trials:
            # a tuple comes back from the database as a list (JSON): the cache must hold the list
            tr.set_user_attr("record", {"hashes": {"a@0": "x"}, "eval_s": 0.5, "nan": None, "pair": (1, 2)})
            check()
            tr.set_constraint("fit", float(tr.number % 3) - 1.0)
            check()
            if tr.number % fail_every == 4:
                study.tell(tr.number, state=TrialState.FAIL, skip_if_finished=True)
            else:
                study.tell(tr.number, [tr.params["x"] * tr.params["n"], float(len(tr.params["c"]))],
                           skip_if_finished=True)
            check()


def test_every_read_matches_the_database_after_every_step(tmp_path):
    path = tmp_path / "study.db"
    owned = OwnedStudyStorage(_rdb(path))
    study = _study(owned)
    sid = owned.get_study_id_from_name("s")
    _generations(study, lambda: _same_as_database(owned, path, sid))
    assert len(study.get_trials()) == 12


def test_a_study_asks_the_same_trials_as_on_optunas_storage(tmp_path):
    runs = []
    for name, wrap in (("plain", lambda s: s), ("owned", OwnedStudyStorage)):
        study = _study(wrap(_rdb(tmp_path / f"{name}.db")))
        _generations(study, lambda: None, n_gen=4)
        runs.append([(t.number, t.state, t.params, t.values, t.user_attrs, t.system_attrs)
                     for t in study.get_trials()])
    assert runs[0] == runs[1]
    assert len(runs[0]) == 16


def test_a_resumed_study_reads_the_interrupted_ones_running_trials(tmp_path):
    path = tmp_path / "study.db"
    first = _study(OwnedStudyStorage(_rdb(path)))
    _generations(first, lambda: None, n_gen=1)
    cut = [first.ask(DISTS) for _ in range(3)]          # asked, never told: the process "died"
    assert all(t.params for t in cut)
    owned = OwnedStudyStorage(_rdb(path))                # the next invocation
    study = _study(owned)
    sid = owned.get_study_id_from_name("s")
    _same_as_database(owned, path, sid)
    for t in cut:                                        # resumed: evaluated and told
        study.tell(t.number, [1.0, 2.0], skip_if_finished=True)
        _same_as_database(owned, path, sid)
    _generations(study, lambda: _same_as_database(owned, path, sid), n_gen=1)


class _Counting:
    """An RDBStorage whose trial-list reads are counted."""

    def __init__(self, backend):
        self.backend, self.lists = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def get_all_trials(self, *a, **k):
        self.lists += 1
        return self.backend.get_all_trials(*a, **k)


def test_a_batch_of_asks_reads_the_trial_list_from_the_database_once(tmp_path):
    counting = _Counting(_rdb(tmp_path / "study.db"))
    study = _study(OwnedStudyStorage(counting))
    for _ in range(8):                 # two generations asked, none told: all running
        study.ask(DISTS)
    assert counting.lists == 1         # the first read loads the study; the rest come from memory
    assert len(study.get_trials(states=(TrialState.RUNNING,))) == 8


def test_each_storage_write_is_read_back_as_the_database_holds_it(tmp_path):
    """The storage's own methods, called directly (not through optuna's trial objects, which also
    change the trial they hold): after every write a read equals the database."""
    import_optuna()
    path = tmp_path / "study.db"
    owned = OwnedStudyStorage(_rdb(path))
    sid = owned.create_new_study([optuna.study.StudyDirection.MAXIMIZE], "s")
    assert owned.get_all_trials(sid) == []             # the cache holds the (empty) study
    tid = owned.create_new_trial(sid)
    _same_as_database(owned, path, sid)
    writes = [
        lambda: owned.set_trial_param(tid, "x", 2.5, DISTS["x"]),
        lambda: owned.set_trial_param(tid, "n", 3.0, DISTS["n"]),
        lambda: owned.set_trial_param(tid, "c", 1, DISTS["c"]),        # an index: stored as a REAL
        lambda: owned.set_trial_user_attr(tid, "record", {"pair": (1, 2), "v": 0.1}),
        lambda: owned.set_trial_user_attr(tid, "record", {"pair": (3, 4)}),   # overwritten
        lambda: owned.set_trial_system_attr(tid, "constraints", (0.5,)),
        lambda: owned.set_trial_intermediate_value(tid, 1, 0.25),
        lambda: owned.set_trial_state_values(tid, TrialState.COMPLETE, [1.5]),
    ]
    for write in writes:
        write()
        _same_as_database(owned, path, sid)
    t = owned.get_trial(tid)
    assert t.params == {"x": 2.5, "n": 3, "c": "b"} and t.user_attrs == {"record": {"pair": [3, 4]}}
    assert t.system_attrs == {"constraints": [0.5]} and t.state == TrialState.COMPLETE
