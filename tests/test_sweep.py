"""Sweep spec validation, expansion, parallel execution, resume, failures, results.csv, Dask."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.config.errors import ConfigError
from ahasd_sim.sweep import expand, load_sweep_spec, run_sweep
from ahasd_sim.sweep import runner as runner_mod
from ahasd_sim.sweep.progress import Progress

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"

BASE = f"""
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 24
    run.timeline: false
    run.draft_model: llama2-7b
    run.target_model: llama2-13b
"""

SPEC16 = "name: s16\n" + BASE + """
modes: [async, ahasd]
policies: [adaedl, svip]
axes:
  ahasd.max_verify_tokens: [8, 32]
seeds: [0, 1]
"""


def write(tmp_path: Path, text: str, name: str = "sweep.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def summaries(out: Path) -> dict[str, float]:
    return {p.parent.name: p.stat().st_mtime_ns for p in (out / "points").glob("*/summary.json")}


# ------------------------------------------------------------------ spec
def test_expansion_counts_columns_and_hashes(tmp_path):
    spec = load_sweep_spec(write(tmp_path, SPEC16))
    pts = expand(spec)
    assert len(pts) == 16
    assert all(p.valid for p in pts)
    assert len({p.hash for p in pts}) == 16
    assert spec.axis_columns() == ["run.mode", "run.policy", "ahasd.max_verify_tokens"]
    first = pts[0]
    assert first.labels == {"run.mode": "async", "run.policy": "adaedl", "ahasd.max_verify_tokens": 8, "seed": 0}
    assert first.config.run.mode == "async" and first.config.ahasd.max_verify_tokens == 8
    assert first.config.run.generated_tokens == 24
    # same spec -> same hashes (a point's folder is stable across invocations)
    assert [p.hash for p in expand(load_sweep_spec(tmp_path / "sweep.yaml"))] == [p.hash for p in pts]


def test_zip_and_multi_key_axes_and_model_pairs(tmp_path):
    spec = load_sweep_spec(write(tmp_path, "name: z\n" + BASE + """
combine: zip
axes:
  pim.unit_gops_int8: [51.2, 102.4, 204.8]
  ahasd.max_verify_tokens: [8, 16, 32]
model_pairs:
  - [opt-1.3b, opt-6.7b]
  - llama2-7b/llama2-13b
  - {draft: palm-like-8b, target: palm-like-30b}
"""))
    pts = expand(spec)
    assert len(pts) == 9
    combos = {(p.labels["pim.unit_gops_int8"], p.labels["ahasd.max_verify_tokens"]) for p in pts}
    assert combos == {(51.2, 8), (102.4, 16), (204.8, 32)}
    assert {p.labels["model_pair"] for p in pts} == {"opt-1.3b/opt-6.7b", "llama2-7b/llama2-13b",
                                                     "palm-like-8b/palm-like-30b"}
    p = next(p for p in pts if p.labels["model_pair"] == "opt-1.3b/opt-6.7b")
    assert (p.config.run.draft_model, p.config.run.target_model) == ("opt-1.3b", "opt-6.7b")

    spec = load_sweep_spec(write(tmp_path, "name: m\n" + BASE + """
axes:
  "pim.aau.enabled,pim.gts.enabled": [[false, false], [true, true]]
  ahasd.tvc: [false, true]
"""))
    pts = expand(spec)
    assert len(pts) == 4
    assert {(p.config.pim.aau.enabled, p.config.pim.gts.enabled) for p in pts} == {(False, False), (True, True)}


def test_variants_override_config_file(tmp_path):
    spec = load_sweep_spec(write(tmp_path, "name: v\n" + BASE + f"""
variants:
  ar_npu: {{config: {ROOT / 'hw_configs' / 'platform_mobile_npu_lpddr5.yaml'}, set: {{run.mode: autoregressive}}}}
  ahasd: {{set: {{run.mode: ahasd}}}}
"""))
    pts = expand(spec)
    assert [p.labels["variant"] for p in pts] == ["ar_npu", "ahasd"]
    assert pts[0].config.pim.enabled is False and pts[0].config.run.mode == "autoregressive"
    assert pts[1].config.pim.enabled is True
    # base.set applies to every variant
    assert pts[0].config.run.generated_tokens == 24


@pytest.mark.parametrize("body,key,hint", [
    ("nme: x\n", "nme", "did you mean 'name'"),
    ("name: x\n" + BASE + "axes: {pim.rank: [1, 2]}\n", "axes.pim.rank", "did you mean 'pim.ranks'"),
    ("name: x\n" + BASE + "combine: zipp\n", "combine", "did you mean 'zip'"),
    ("name: x\n" + BASE + "polices: [svip]\n", "polices", "did you mean 'policies'"),
    ("name: x\n" + BASE + "axes: {pim.ranks: [1, 2], pim.clock_ghz: [1.0]}\ncombine: zip\n", "combine", "equal length"),
    ("name: x\n" + BASE + "seeds: [0, 0]\n", "seeds", "duplicate"),
    ("name: x\n" + BASE + "modes: [ahasd]\nvariants: {a: {set: {run.mode: async}}}\n", "variants.a.set", "also swept"),
    ("name: x\nbase: {config: nowhere.yaml}\n", "base.config", "not found"),
    ("name: x\n" + BASE + "model_pairs: [opt-1.3b]\n", "model_pairs[0]", "draft"),
    ("name: x\n" + BASE + "variants: {a: {sett: {}}}\n", "variants.a.sett", "did you mean 'set'"),
])
def test_spec_errors_are_one_line_with_file_and_key(tmp_path, body, key, hint):
    p = write(tmp_path, body)
    with pytest.raises(ConfigError) as ei:
        load_sweep_spec(p)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{p}: {key}:"), msg
    assert hint in msg


def test_bad_base_set_key(tmp_path):
    p = write(tmp_path, f"name: x\nbase: {{config: {PAPER_PLATFORM}, set: {{npu.freq: 2}}}}\n")
    with pytest.raises(ConfigError, match=r"base\.set\.npu\.freq: unknown config key 'npu.freq' \(did you mean 'npu.freq_ghz'\?\)"):
        load_sweep_spec(p)


# ------------------------------------------------------------------ execution
def test_16_point_sweep_on_2_workers_and_results_columns(tmp_path):
    spec = write(tmp_path, SPEC16)
    out = tmp_path / "out"
    res = run_sweep(spec, out, workers=2, progress=False)
    assert (res.n_ok, res.n_failed, res.n_pending, res.n_computed) == (16, 0, 0, 16)
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 16
    lead = ["point", "status", "run.mode", "run.policy", "ahasd.max_verify_tokens", "seed", "error_type", "error",
            "wall_time_s"]
    assert list(df.columns[: len(lead)]) == lead
    for col in ("throughput_tok_s", "tokens_per_j", "energy_j", "acceptance_rate", "device_utilization.npu",
                "device_utilization.pim", "energy_breakdown_j.pim.dynamic", "makespan_s", "generated_tokens"):
        assert col in df.columns, col
    assert (df["status"] == "ok").all()
    assert (df["generated_tokens"] == 24 * df["windows"]).all()
    assert sorted(df["seed"].unique()) == [0, 1]
    # one folder per point with the run files; summary metrics match the table
    for _, row in df.iterrows():
        d = out / "points" / row["point"]
        assert {p.name for p in d.iterdir()} == {"summary.json", "config.resolved.yaml", "windows.csv",
                                                 "energy_breakdown.csv", "meta.json"}   # no events.csv by default
        s = json.loads((d / "summary.json").read_text())
        assert s["throughput_tok_s"] == pytest.approx(row["throughput_tok_s"])
        assert s["mode"] == row["run.mode"] and s["policy"] == row["run.policy"]
    assert (out / "points.csv").is_file() and (out / "spec.yaml").is_file()
    assert res.points_per_s == pytest.approx(res.n_computed / res.wall_s, rel=1e-12) and res.n_computed == len(res.table)


def test_resume_runs_only_missing_points(tmp_path):
    spec = write(tmp_path, SPEC16)
    out = tmp_path / "out"
    first = run_sweep(spec, out, workers=2, progress=False, limit=6)      # "killed" after 6 points
    assert (first.n_ok, first.n_pending) == (6, 10)
    df = pd.read_csv(out / "results.csv")
    assert (df["status"] == "pending").sum() == 10
    done = summaries(out)
    assert len(done) == 6
    second = run_sweep(spec, out, workers=2, progress=False)
    assert (second.n_ok, second.n_computed, second.n_cached) == (16, 10, 6)
    after = summaries(out)
    assert all(after[h] == t for h, t in done.items())    # finished points were not recomputed
    third = run_sweep(spec, out, workers=2, progress=False)
    assert third.n_computed == 0 and third.n_cached == 16


def test_interrupt_keeps_finished_points_and_writes_pending_table(tmp_path, monkeypatch):
    spec = write(tmp_path, SPEC16)
    out = tmp_path / "out"
    real = runner_mod.run_point
    calls = {"n": 0}

    def flaky(task):
        calls["n"] += 1
        if calls["n"] > 5:
            # a half-written point: files but no summary.json -> must be recomputed
            Path(task["dir"]).mkdir(parents=True, exist_ok=True)
            (Path(task["dir"]) / "events.csv").write_text("partial")
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(runner_mod, "run_point", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, workers=1, progress=False)
    df = pd.read_csv(out / "results.csv")
    assert (df["status"] == "ok").sum() == 5 and (df["status"] == "pending").sum() == 11
    monkeypatch.setattr(runner_mod, "run_point", real)
    res = run_sweep(spec, out, workers=2, progress=False)
    assert (res.n_ok, res.n_computed, res.n_cached) == (16, 11, 5)


def test_failing_points_are_reported_and_others_complete(tmp_path, capsys):
    spec = write(tmp_path, "name: f\n" + BASE + """
modes: [ahasd, warp_drive]
axes:
  pim.ranks: [16, 1]
  pim.aau.lanes: [16, 0]
""")
    out = tmp_path / "out"
    res = run_sweep(spec, out, workers=2, progress=False)
    df = pd.read_csv(out / "results.csv")
    assert len(df) == 8
    ok = df[df["status"] == "ok"]
    assert len(ok) == 1 and ok.iloc[0]["run.mode"] == "ahasd" and ok.iloc[0]["pim.ranks"] == 16
    failed = df[df["status"] == "failed"]
    assert len(failed) == 7 and res.n_failed == 7
    # the model does not fit in one rank
    r = failed[(failed["run.mode"] == "ahasd") & (failed["pim.ranks"] == 1) & (failed["pim.aau.lanes"] == 16)].iloc[0]
    assert r["error_type"] == "ConfigError" and "ranks" in r["error"]
    err = json.loads((out / "points" / r["point"] / "error.json").read_text())
    assert err["type"] == "ConfigError" and "\n" not in err["message"] and err["input_error"] is True
    # unknown mode
    r = failed[(failed["run.mode"] == "warp_drive") & (failed["pim.ranks"] == 16) & (failed["pim.aau.lanes"] == 16)].iloc[0]
    assert "unknown mode 'warp_drive'" in r["error"]
    # a value out of range does not resolve at all: it fails without running
    r = failed[failed["pim.aau.lanes"] == 0].iloc[0]
    assert r["point"].startswith("invalid-") and "pim.aau.lanes" in r["error"]

    # CLI: exit code 1, says how many failed and where
    from ahasd_sim.__main__ import main
    rc = main(["sweep", "--config", str(spec), "--out", str(out), "--workers", "1", "--no-progress"])
    text = capsys.readouterr().out
    assert rc == 1
    assert "7 point(s) failed" in text and str(out / "points") in text


def test_cli_success_and_bad_spec_exit_codes(tmp_path, capsys):
    from ahasd_sim.__main__ import main
    spec = write(tmp_path, "name: c\n" + BASE + "modes: [async, ahasd]\n")
    out = tmp_path / "out"
    assert main(["sweep", "--config", str(spec), "--out", str(out), "--workers", "2", "--no-progress"]) == 0
    assert "2 points, 2 ok, 0 failed" in capsys.readouterr().out
    bad = write(tmp_path, "name: c\n" + BASE + "modez: [async]\n", "bad.yaml")
    assert main(["sweep", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "modez" in err and "did you mean 'modes'" in err


def test_duplicate_configs_share_one_point_folder(tmp_path):
    spec = write(tmp_path, "name: d\n" + BASE + "variants: {a: {set: {run.mode: ahasd}}, b: {set: {run.mode: ahasd}}}\n")
    res = run_sweep(spec, tmp_path / "out", workers=2, progress=False)
    assert res.n_points == 2 and res.table["point"].nunique() == 1 and res.n_computed == 1
    assert list(res.table["variant"]) == ["a", "b"] and (res.table["status"] == "ok").all()


def test_progress_line_printer_shows_rate_and_eta():
    buf = io.StringIO()
    pr = Progress(4, enabled=True, stream=buf, desc="x", use_tqdm=False, min_interval_s=0.0)
    for s in ("ok", "failed", "ok", "ok"):
        pr.update(s)
    pr.close()
    text = buf.getvalue()
    assert "x: 4/4 (100%), 1 failed" in text and "pt/s" in text and "ETA" in text


def test_dask_executor_on_local_in_process_cluster(tmp_path):
    import distributed   # in the `test` extra: CI must run this test, never skip it
    spec = write(tmp_path, "name: dk\n" + BASE + "modes: [async, ahasd]\npolicies: [adaedl, svip]\n")
    out = tmp_path / "out"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        res = run_sweep(spec, out, executor="dask", dask_client=client, progress=False)
    assert (res.n_ok, res.n_failed) == (4, 0)
    for h in res.table["point"]:
        d = out / "points" / h
        assert (d / "summary.json").is_file() and (d / "windows.csv").is_file() and not (d / "events.csv").exists()
        assert not any(p.name.startswith(".") for p in d.iterdir())
    # same results as the local executor
    local = run_sweep(spec, tmp_path / "local", workers=1, progress=False)
    a = res.table.set_index("point")["throughput_tok_s"]
    b = local.table.set_index("point")["throughput_tok_s"]
    pd.testing.assert_series_equal(a.sort_index(), b.sort_index())


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 cores for the process pool path")
def test_default_workers_is_cpu_count(tmp_path, monkeypatch):
    seen = {}

    def fake_local(tasks, workers, on_done, split=False, kept=None):
        seen["workers"] = workers
        for t in tasks:
            on_done(runner_mod.run_point(t))

    monkeypatch.setattr(runner_mod, "_run_local", fake_local)
    spec = write(tmp_path, "name: w\n" + BASE + "modes: [async, ahasd, operator_sync]\n")
    run_sweep(spec, tmp_path / "out", progress=False)
    assert seen["workers"] == min(os.cpu_count() or 1, 3)


# hw_configs/paper/experiments.yaml is the paper's experiment definition, not a sweep
# (tests/test_paper_experiments.py loads it)
@pytest.mark.parametrize("path", sorted((ROOT / "hw_configs" / "sweeps").glob("*.yaml")) +
                         sorted(p for p in (ROOT / "hw_configs" / "paper").glob("*.yaml") if p.name != "experiments.yaml"),
                         ids=lambda p: p.name)
def test_shipped_sweep_files_resolve(path):
    spec = load_sweep_spec(path)
    pts = expand(spec)
    assert pts and all(p.valid for p in pts), [str(p.error) for p in pts if not p.valid][:3]


def test_shipped_smoke_sweep_runs(tmp_path):
    res = run_sweep(ROOT / "hw_configs" / "sweeps" / "smoke.yaml", tmp_path / "out", workers=2, progress=False)
    assert (res.n_points, res.n_ok) == (16, 16)


def _die_on_marker(task):
    """Worker function for the broken-pool test: a hard process exit for the marked point."""
    from ahasd_sim.sweep.worker import task_config
    if task_config(task).pim.ranks == 15:
        os._exit(3)
    from ahasd_sim.sweep.worker import run_point
    return run_point(task)


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(),
                    reason="the patched worker function reaches pool workers only through fork (POSIX)")
def test_worker_process_death_is_a_failed_point(tmp_path, monkeypatch):
    # Pool workers must see the patched run_point: the runner forks them where fork exists
    # (Python 3.14 defaults to forkserver on Linux, where a patch here would not reach them).
    assert runner_mod._pool_context().get_start_method() == "fork"
    monkeypatch.setattr(runner_mod, "run_point", _die_on_marker)
    spec = write(tmp_path, "name: k\n" + BASE + "axes: {pim.ranks: [16, 15, 14]}\n")
    res = run_sweep(spec, tmp_path / "out", workers=2, progress=False, split_points=False)
    t = res.table.set_index("pim.ranks")
    assert t.loc[15, "status"] == "failed" and "worker process died" in t.loc[15, "error"]
    assert t.loc[16, "status"] == "ok" and t.loc[14, "status"] == "ok"


def _die_in_plan(task):
    """First unit of a split point: a hard process exit for the marked point."""
    from ahasd_sim.sweep.worker import task_config
    if task_config(task).pim.ranks == 15:
        os._exit(3)
    return _REAL_PLAN(task)


from ahasd_sim.sweep import split as _split  # noqa: E402
_REAL_PLAN = _split.unit_plan


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(),
                    reason="the patched worker function reaches pool workers only through fork (POSIX)")
def test_worker_death_in_a_split_unit_goes_to_the_whole_point_path(tmp_path, monkeypatch):
    """A unit kills its worker: the pool breaks, every unfinished point goes to the
    one-point-per-task path, where the second death is pinned on the point that caused it."""
    from ahasd_sim.sweep import split
    monkeypatch.setattr(split, "unit_plan", _die_in_plan)
    monkeypatch.setattr(runner_mod, "run_point", _die_on_marker)
    spec = write(tmp_path, "name: k\n" + BASE + "axes: {pim.ranks: [16, 15, 14]}\n")
    res = run_sweep(spec, tmp_path / "out", workers=2, progress=False)
    t = res.table.set_index("pim.ranks")
    assert t.loc[15, "status"] == "failed" and "worker process died" in t.loc[15, "error"]
    assert t.loc[16, "status"] == "ok" and t.loc[14, "status"] == "ok"


def test_the_progress_bar_starts_no_thread():
    """A sweep or study forks its workers while its bar is up: tqdm's monitor thread, running at a
    fork, could leave the children a lock it held (Python 3.12 warns about it). The bar runs
    without one, and tqdm itself keeps its setting for other code (fails with a plain tqdm bar)."""
    tqdm = pytest.importorskip("tqdm").tqdm
    import io
    import threading
    before = set(threading.enumerate())
    pr = Progress(4, enabled=True, stream=io.StringIO(), desc="x", use_tqdm=True)
    try:
        assert pr._bar is not None
        pr.update("ok")
        assert set(threading.enumerate()) == before
    finally:
        pr.close()
    assert tqdm.monitor_interval != 0
