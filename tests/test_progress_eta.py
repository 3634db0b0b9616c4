"""Progress: an honest ETA or none. The start-up before the first finished point (worker
processes, traces, placement tuning) is not counted as work; no ETA before three points; a total
that is only an upper bound (points still being resolved) is shown as one and gives no ETA."""
from __future__ import annotations

import io

import pytest

from ahasd_sim.sweep import progress as P


@pytest.fixture()
def clock(monkeypatch):
    t = [0.0]
    monkeypatch.setattr(P.time, "perf_counter", lambda: t[0])
    return t


def test_startup_is_not_work_and_no_eta_before_three_points(clock):
    pr = P.Progress(10, stream=io.StringIO(), use_tqdm=False, min_interval_s=0.0)
    clock[0] = 60.0                 # a minute of start-up, then points every 2 s
    pr.update("ok")
    assert pr.rate is None and pr.eta_s is None
    clock[0] = 62.0
    pr.update("ok")
    assert pr.rate == pytest.approx(0.5) and pr.eta_s is None
    clock[0] = 64.0
    pr.update("ok")
    assert pr.eta_s == pytest.approx(7 * 2.0)     # 7 left at 2 s each (a rate from the start: 7 x 21 s)


def test_a_bound_total_is_shown_as_such_until_known(clock):
    buf = io.StringIO()
    pr = P.Progress(252, stream=buf, use_tqdm=False, min_interval_s=0.0, bound=True)
    for i in range(4):
        clock[0] = 2.0 * i
        pr.update("ok")
    assert pr.eta_s is None and "4/<=252" in buf.getvalue()
    pr.set_total(240)
    clock[0] = 8.0
    pr.update("ok")
    assert not pr.bound and pr.eta_s == pytest.approx(235 * 2.0) and "5/240" in buf.getvalue()


def test_tqdm_bar_shows_our_eta(clock):
    pytest.importorskip("tqdm")
    buf = io.StringIO()
    pr = P.Progress(10, stream=buf, use_tqdm=True)
    try:
        clock[0] = 60.0
        pr.update("ok")
        d = pr._bar.format_dict
        assert d["eta_h"] == "--:--" and d["total_h"] == "10"
    finally:
        pr.close()


class _Counter:
    def __init__(self):
        self.total, self.done = None, 0

    def set_total(self, n):
        self.total = n

    def update(self, status):
        self.done += 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_run_reports_each_trace_window(workers):
    from pathlib import Path

    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    root = Path(__file__).resolve().parent.parent
    cfg = load_config(root / "hw_configs" / "ahasd_mobile.yaml",
                      ["run.generated_tokens=32", "run.windows=3", "run.timeline=false", "pim.partition_policy=striped"])
    c = _Counter()
    run_simulation(cfg, workers=workers, progress=c)
    assert (c.total, c.done) == (3, 3)
