"""Energy / power per device and busy time per task (plots.breakdown), from constructed run
folders whose sums are known by hand, and the script on a real run."""
from __future__ import annotations

import json
import subprocess
import sys

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from ahasd_sim.plots import breakdown  # noqa: E402
from conftest import ROOT  # noqa: E402


def _run(d, energy, tokens, makespan_s, events=None, windows=None):
    d.mkdir()
    pd.DataFrame(energy, columns=["device", "kind", "energy_j"]).to_csv(d / "energy_breakdown.csv", index=False)
    s = {"generated_tokens": tokens, "makespan_s": makespan_s, "mode": "ahasd", "policy": "adaedl"}
    if windows:
        s["windows"] = len(windows)
        pd.DataFrame({"window": range(len(windows)), "generated_tokens": windows}).to_csv(d / "windows.csv", index=False)
    (d / "summary.json").write_text(json.dumps(s))
    if events is not None:
        ev = [{"ph": "M", "name": "thread_name", "pid": 0, "tid": i + 1, "args": {"name": dev}}
              for i, dev in enumerate(["npu", "pim"])]
        tid = {"npu": 1, "pim": 2}
        ev += [{"ph": "X", "pid": 0, "tid": tid[dev], "ts": a * 1e6, "dur": (b - a) * 1e6, "name": t}
               for dev, t, a, b in events]
        (d / "timeline.json").write_text(json.dumps({"traceEvents": ev}))
    return d


def _bars(fig, ax):
    return [p for p in ax.patches if p.get_height() > 0]


def test_energy_stack_heights_are_the_hand_sums(tmp_path, monkeypatch):
    """Run a: NPU 2 J dynamic + 1 J static, PIM 1 J dynamic, over 100 tokens in 2 s: the stack is
    20 + 10 + 10 = 40 mJ/token and 1 + 0.5 + 0.5 = 2 W; a device of zero energy is not drawn."""
    a = _run(tmp_path / "a", [["npu", "dynamic", 2.0], ["npu", "static", 1.0], ["pim", "dynamic", 1.0],
                              ["gts", "dynamic", 0.0]], 100, 2.0)
    figs = []
    monkeypatch.setattr(breakdown, "save_figure", lambda fig, out: figs.append(fig) or [])
    breakdown.energy_breakdown({"a": a}, tmp_path / "e")
    fig = figs[-1]
    e_ax, p_ax = fig.axes
    tops = max(p.get_y() + p.get_height() for p in _bars(fig, e_ax))
    assert tops == pytest.approx(40.0, rel=1e-12)
    assert sorted(round(p.get_height(), 12) for p in _bars(fig, e_ax)) == [10.0, 10.0, 20.0]
    assert max(p.get_y() + p.get_height() for p in _bars(fig, p_ax)) == pytest.approx(2.0, rel=1e-12)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == ["NPU", "PIM", "static (hatched)"]           # no GTS: it used no energy
    assert e_ax.get_ylabel() == "Energy per token (mJ)" and p_ax.get_ylabel() == "Mean power (W)"


def test_task_stack_uses_the_first_windows_tokens(tmp_path, monkeypatch):
    """timeline.json records window 0 only: NPU verify 0-3 ms and draft 3-4 ms, PIM draft 0-2 ms,
    over window 0's 10 tokens (the run has 30 in all): NPU 0.3 + 0.1 = 0.4 ms/token, PIM 0.2."""
    a = _run(tmp_path / "a", [["npu", "dynamic", 1.0]], 30, 1.0,
             events=[("npu", "verify", 0.0, 0.003), ("npu", "draft", 0.003, 0.004), ("pim", "draft", 0.0, 0.002)],
             windows=[10, 20])
    tab = breakdown.task_table({"a": a}).set_index(["device", "task"])["ms_per_token"]
    assert tab[("npu", "verify")] == pytest.approx(0.3) and tab[("npu", "draft")] == pytest.approx(0.1)
    assert tab[("pim", "draft")] == pytest.approx(0.2)
    figs = []
    monkeypatch.setattr(breakdown, "save_figure", lambda fig, out: figs.append(fig) or [])
    breakdown.latency_breakdown({"a": a}, tmp_path / "t")
    fig = figs[-1]
    assert [ax.get_title() for ax in fig.axes] == ["NPU", "PIM"]
    assert max(p.get_y() + p.get_height() for p in _bars(fig, fig.axes[0])) == pytest.approx(0.4)
    assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == ["draft", "verify"]


def test_script_on_a_real_run_and_a_bad_folder(tmp_path):
    run = tmp_path / "run"
    env = {"PYTHONPATH": str(ROOT)}
    import os
    env = {**os.environ, **env}
    subprocess.run([sys.executable, "-m", "ahasd_sim", "--config", str(ROOT / "hw_configs" / "ahasd_mobile.yaml"),
                    "--set", "run.generated_tokens=32", "--set", "run.windows=1", "--out", str(run)],
                   check=True, capture_output=True, env=env, cwd=ROOT)
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_breakdown.py"), str(run), "--columns", "one",
                        "--out", str(tmp_path / "f" / "b")], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    for stem in ("b_energy", "b_tasks"):
        assert (tmp_path / "f" / f"{stem}.png").is_file()
    e = breakdown.energy_table({"r": run})
    s = json.loads((run / "summary.json").read_text())
    # the stack's total is the run's whole energy (prefill included) per generated token
    assert e["mj_per_token"].sum() == pytest.approx(s["energy_j"] / s["generated_tokens"] * 1e3, rel=1e-9)
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "plot_breakdown.py"), str(tmp_path),
                          "--out", str(tmp_path / "g")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
    assert np.isfinite(e["mean_w"]).all()
