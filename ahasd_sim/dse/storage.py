"""The study database as the one process that holds a study folder's lock sees it.

optuna wraps an :class:`~optuna.storages.RDBStorage` in a cache that trusts only *finished*
trials: every read of the trial list (several per ``ask``) loads every unfinished trial again
from SQLite, with its parameters and attributes, because another process might have changed
it. A lock-step batch holds its whole generation unfinished (40 trials in
``where_ahasd_wins``), so asking a batch costs O(batch^2) trial loads: 34 ms per trial on
2 cores, the larger part of a study's parent-process time (docs/performance.md, fourth round).

A study folder has one writer (:class:`~ahasd_sim.dse.optimize.StudyLock`), this process.
:class:`OwnedStudyStorage` therefore writes through to the database as before (every write
is committed when optuna makes it: an interrupted study resumes from the same file) and
serves the study's trials from memory: a trial is loaded from the database when first read and
again after a change of its state (``get_trial``: the stored form, timestamps included); a new
parameter or attribute is added to the cached trial as the database returns it (a parameter's
value through a REAL column and its distribution through JSON, an attribute through JSON). So
what optuna reads is what the database holds, trial for trial: tests/test_dse_storage.py
compares the two after every step of a study. optuna's public storage API only.
"""
from __future__ import annotations

import copy
import json
import threading
from typing import Any, Container, Sequence

from optuna.distributions import distribution_to_json, json_to_distribution
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState


class OwnedStudyStorage(BaseStorage):
    """Write-through :class:`RDBStorage` whose trials of one study are read from memory, for a
    database only this process writes (the study folder's lock holder). Other studies of the
    database (a study folder holds one) are read from the database."""

    def __init__(self, backend: RDBStorage):
        self._backend = backend
        self._lock = threading.RLock()              # ask (a planning thread) and tell may overlap
        self._study_id: int | None = None            # the cached study: the first one read
        self._trials: dict[int, FrozenTrial] = {}    # its trials by number ...
        self._number: dict[int, int] = {}            # ... the numbers of the trial ids met ...
        self._ids: dict[int, int] = {}               # ... and those ids by number
        self._stale: set[int] = set()                # trial ids written since they were loaded

    @property
    def backend(self) -> RDBStorage:
        return self._backend

    # ---------------------------------------------------------------- the cache
    def _cached_trials(self, study_id: int) -> dict[int, FrozenTrial] | None:
        """The cached study's trials by number, written ones reloaded (one query each); None for
        another study. Caller holds the lock."""
        if self._study_id is None:
            self._study_id = study_id
            self._trials = {t.number: t for t in self._backend.get_all_trials(study_id, deepcopy=False)}
        elif study_id != self._study_id:
            return None
        for trial_id in sorted(self._stale):
            t = self._backend.get_trial(trial_id)
            if self._number_in_study(trial_id, t.number):
                self._trials[t.number] = t
        self._stale.clear()
        return self._trials

    def _number_in_study(self, trial_id: int, number: int) -> bool:
        """Whether ``trial_id`` (trial ``number`` of its study) is a trial of the cached study."""
        if trial_id not in self._number:
            if self._backend.get_trial_id_from_study_id_trial_number(self._study_id, number) != trial_id:
                return False
            self._number[trial_id] = number
            self._ids[number] = trial_id
        return True

    def _written(self, trial_id: int) -> None:
        with self._lock:
            if self._study_id is not None:
                self._stale.add(trial_id)

    # ---------------------------------------------------------------- studies: the database's
    def create_new_study(self, directions, study_name=None) -> int:
        return self._backend.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        with self._lock:
            if study_id == self._study_id:
                self._study_id, self._trials, self._number, self._ids = None, {}, {}, {}
                self._stale.clear()
        self._backend.delete_study(study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self._backend.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self._backend.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self._backend.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self._backend.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int):
        return self._backend.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self._backend.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self._backend.get_study_system_attrs(study_id)

    def get_all_studies(self):
        return self._backend.get_all_studies()

    # ---------------------------------------------------------------- trial writes: through
    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        trial_id = self._backend.create_new_trial(study_id, template_trial)
        with self._lock:
            if study_id == self._study_id:
                t = self._backend.get_trial(trial_id)
                self._trials[t.number] = t
                self._number[trial_id] = t.number
                self._ids[t.number] = trial_id
        return trial_id

    def _update_cached(self, trial_id: int, change) -> None:
        """Apply ``change`` to a copy of the cached trial (a new object, as a reload gives: a trial
        handed out before stays as it was); a trial not cached or already stale is reloaded at
        the next read instead."""
        with self._lock:
            number = self._number.get(trial_id)
            if number is None or trial_id in self._stale or number not in self._trials:
                self._written(trial_id)
                return
            new = copy.copy(self._trials[number])
            change(new)
            self._trials[number] = new

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float, distribution) -> None:
        self._backend.set_trial_param(trial_id, param_name, param_value_internal, distribution)
        # A study sets one parameter after another and reads the trial between them: the cached
        # trial gets the parameter as the database returns it (the value through a REAL column,
        # the distribution through its JSON) instead of a reload per parameter.
        stored = json_to_distribution(distribution_to_json(distribution))

        def add(t: FrozenTrial) -> None:
            t.params = {**t.params, param_name: stored.to_external_repr(float(param_value_internal))}
            t.distributions = {**t.distributions, param_name: stored}
        self._update_cached(trial_id, add)

    def set_trial_state_values(self, trial_id: int, state: TrialState, values: Sequence[float] | None = None) -> bool:
        try:
            return self._backend.set_trial_state_values(trial_id, state=state, values=values)
        finally:
            self._written(trial_id)

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        self._backend.set_trial_intermediate_value(trial_id, step, intermediate_value)
        self._written(trial_id)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._backend.set_trial_user_attr(trial_id, key, value)
        self._cache_attr(trial_id, "user_attrs", key, value)

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        self._backend.set_trial_system_attr(trial_id, key, value)
        self._cache_attr(trial_id, "system_attrs", key, value)

    def _cache_attr(self, trial_id: int, field: str, key: str, value: Any) -> None:
        """The cached trial's attribute ``key`` (``field``: user_attrs or system_attrs) as the
        database returns it: the value through its JSON text."""
        stored = json.loads(json.dumps(value))

        def put(t: FrozenTrial) -> None:
            setattr(t, field, {**getattr(t, field), key: stored})
        self._update_cached(trial_id, put)

    # ---------------------------------------------------------------- trial reads: memory
    def get_trial(self, trial_id: int) -> FrozenTrial:
        with self._lock:
            number = self._number.get(trial_id)
            if number is not None:
                trials = self._cached_trials(self._study_id)
                if number in trials:
                    return trials[number]
        t = self._backend.get_trial(trial_id)
        with self._lock:   # a trial of the cached study met by its id for the first time
            if self._study_id is not None and self._number_in_study(trial_id, t.number):
                self._trials[t.number] = t
        return t

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        with self._lock:
            trials = self._cached_trials(study_id)
            if trials is not None:
                out = [trials[n] for n in sorted(trials) if states is None or trials[n].state in states]
        if trials is None:
            return self._backend.get_all_trials(study_id, deepcopy=deepcopy, states=states)
        return copy.deepcopy(out) if deepcopy else out

    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        with self._lock:
            if study_id == self._study_id and trial_number in self._ids:
                return self._ids[trial_number]
        trial_id = self._backend.get_trial_id_from_study_id_trial_number(study_id, trial_number)
        with self._lock:
            if study_id == self._study_id:
                self._number[trial_id] = trial_number
                self._ids[trial_number] = trial_id
        return trial_id

    def remove_session(self) -> None:
        self._backend.remove_session()
