"""ahasd_sim.sweep.executors: the public face of the sweep runner's executors (dse uses it)."""
from __future__ import annotations

from ahasd_sim.sweep import executors, runner


def _recording(monkeypatch):
    calls = []

    def n(tasks):   # the executors may get the runner's lazy pending tasks, which have no len()
        return len(list(tasks))

    monkeypatch.setattr(runner, "_run_serial", lambda tasks, on_done: calls.append(("serial", n(tasks))))
    monkeypatch.setattr(runner, "_run_local", lambda tasks, w, on_done, split=False, kept=None:
                        calls.append(("local", n(tasks), w, split)))
    monkeypatch.setattr(runner, "_run_dask", lambda tasks, w, s, on_done, client=None, split=False:
                        calls.append(("dask", n(tasks), w, s, client, split)))
    return calls


def test_run_tasks_picks_the_executor_like_the_sweep(monkeypatch):
    calls = _recording(monkeypatch)
    t = [{"hash": str(i)} for i in range(3)]
    executors.run_tasks([], print, workers=4)                 # nothing to run: no executor started
    executors.run_tasks(t, print, workers=1)                  # one worker: in this process
    executors.run_tasks(t[:1], print, workers=4)              # one task, split: its units use the 4 workers
    executors.run_tasks(t, print, workers=8)                  # split: every worker, however few points
    executors.run_tasks(t[:1], print, workers=4, split=False)  # one point per task: one task in this process
    executors.run_tasks(t, print, workers=8, split=False)     # a pool no larger than the batch (3)
    executors.run_tasks(t, print, executor="dask", workers=2, scheduler="tcp://x:1", client="C")
    assert calls == [("serial", 3), ("local", 1, 4, True), ("local", 3, 8, True), ("serial", 1),
                     ("local", 3, 3, False), ("dask", 3, 2, "tcp://x:1", "C", True)]


def test_serial_runs_the_points_and_hands_each_result_back(monkeypatch):
    monkeypatch.setattr(runner, "run_point", lambda task: {"hash": task["hash"], "status": "ok"})
    got = []
    executors.run_serial([{"hash": "a"}, {"hash": "b"}], got.append)
    assert got == [{"hash": "a", "status": "ok"}, {"hash": "b", "status": "ok"}]


def test_clean_stale_removes_markers_and_keeps_results(tmp_path):
    d = tmp_path / "points" / "p1"
    (d / ".staging-x").mkdir(parents=True)
    (d / runner.RUNNING).write_text("")
    (d / "summary.json").write_text("{}")
    executors.clean_stale(str(tmp_path / "points"))
    assert sorted(x.name for x in d.iterdir()) == ["summary.json"]
    assert executors.EXECUTORS == ("local", "dask")
