"""timeline.json covers every trace window (one process per window) and carries counter tracks
whose integrals are the run's own totals: each device's dynamic power integrates to its dynamic
energy, the off-chip bandwidth to the off-chip bytes (to the counters' 6 significant digits)."""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run():
    from ahasd_sim.config import load_config
    from ahasd_sim.simulation import run_simulation
    cfg = load_config(ROOT / "hw_configs" / "ahasd_mobile.yaml",
                      ["run.generated_tokens=96", "run.windows=3", "run.timeline=true"])
    return run_simulation(cfg)


def _integrals(events):
    """{(pid, counter name): integral of the step function} (the last step is back to 0)."""
    series = defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            series[(e["pid"], e["name"])].append((e["ts"] * 1e-6, next(iter(e["args"].values()))))
    out = {}
    for k, pts in series.items():
        pts.sort()
        assert pts[-1][1] == 0.0, k
        out[k] = sum((b[0] - a[0]) * a[1] for a, b in zip(pts, pts[1:]))
    return out


def test_every_window_is_a_track_group(run):
    ev = run.timeline["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    assert names == {w + 1: f"window {w}: ahasd/adaedl" for w in range(3)}
    for pid in names:                         # each window has busy intervals of its own
        assert any(e["ph"] == "X" and e["pid"] == pid for e in ev)
    # the busy intervals of each window add up to the window's device busy time
    busy = defaultdict(float)
    devs = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in ev:
        if e["ph"] == "X":
            busy[devs[(e["pid"], e["tid"])]] += e["dur"] * 1e-6
    for dev, b in run.summary["device_busy_s"].items():
        assert busy[dev] == pytest.approx(b, rel=1e-6), dev


def test_counters_integrate_to_the_energy_and_bytes(run):
    s = run.summary
    total = defaultdict(float)
    for (_pid, name), v in _integrals(run.timeline["traceEvents"]).items():
        total[name] += v
    for dev in ("npu", "pim", "lpddr5"):
        assert total[f"{dev} dynamic power (W)"] == pytest.approx(s["energy_breakdown_j"][dev]["dynamic"], rel=1e-5)
    assert total["off-chip bandwidth (GB/s)"] * 1e9 == pytest.approx(s["offchip_bytes"], rel=1e-5)


def test_gantt_loader_reads_one_window(run, tmp_path):
    import json

    from ahasd_sim.plots.timeline import load_timeline
    f = tmp_path / "timeline.json"
    f.write_text(json.dumps(run.timeline))
    w0, w2 = load_timeline(f), load_timeline(f, window=2)
    n = defaultdict(int)
    for e in run.timeline["traceEvents"]:
        if e["ph"] == "X":
            n[e["pid"]] += 1
    assert len(w0) == n[1] and len(w2) == n[3]
