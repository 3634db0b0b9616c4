"""Design-space exploration: study validation, Pareto fronts vs brute force, resume after a kill,
failing trials, the sweep cache identity, sensitivity (OAT + Sobol)."""
from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

optuna = pytest.importorskip("optuna")

from ahasd_sim.__main__ import main  # noqa: E402
from ahasd_sim.config.errors import ConfigError  # noqa: E402
from ahasd_sim.metrics.stats import mean_t_interval  # noqa: E402
from ahasd_sim.dse.optimize import open_study, run_optimize  # noqa: E402
from ahasd_sim.metrics.pareto import dominates, pareto_mask  # noqa: E402
from ahasd_sim.dse.study import load_study  # noqa: E402
from ahasd_sim.sweep import run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"

BASE = f"""
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 16
    run.timeline: false
    run.mode: ahasd
    run.policy: adaedl
    run.draft_model: llama2-7b
    run.target_model: llama2-13b
"""

# 2 x 3 x 2 = 12 design points; pim.ranks 2 cannot hold the models: those trials are infeasible
# (decided before running; the sweep below, which runs them, sees them fail).
TINY = "name: tiny\n" + BASE + """
runs:
  ahasd: {run.mode: ahasd}
  sync: {run.mode: operator_sync}
space:
  pim.unit_gops_int8: {choices: [51.2, 409.6]}
  memory.channels: {choices: [2, 4, 8]}
  pim.ranks: {choices: [2, 16]}
objectives:
  - {name: speedup, metric: throughput_tok_s, run: ahasd, over: sync, direction: maximize}
  - {name: ahasd_energy, metric: energy_per_token_j, run: ahasd, direction: minimize}
sampler: grid
seed: 3
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ------------------------------------------------------------------ Pareto sets
def brute_front(values, directions):
    n = len(values)
    return [i for i in range(n) if not any(dominates(values[j], values[i], directions) for j in range(n) if j != i)]


@pytest.mark.parametrize("directions", [["maximize", "maximize"], ["minimize", "maximize"],
                                        ["minimize", "minimize", "maximize"]])
def test_pareto_mask_equals_brute_force(directions):
    rng = np.random.default_rng(7)
    for _ in range(20):
        v = rng.integers(0, 6, size=(40, len(directions))).astype(float)   # many ties
        assert list(np.flatnonzero(pareto_mask(v, directions))) == brute_front(v.tolist(), directions)


def test_pareto_mask_hand_example_and_nan():
    v = [[1, 5], [2, 4], [2, 3], [0, 0], [3, 1], [3, 1], [float("nan"), 9]]
    # maximise both: (2,3) is dominated by (2,4); (0,0) by all; ties (3,1) both kept; NaN never on the front
    assert pareto_mask(v, ["maximize", "maximize"]).tolist() == [True, True, False, False, True, True, False]
    assert pareto_mask(v, ["minimize", "minimize"]).tolist() == [False, False, False, True, False, False, False]


def test_mean_t_interval_matches_student_t():
    # t(2 df) has the closed form q' / sqrt(2 q (1 - q)) with q' = 2q - 1: 4.3026527297494...
    m, h = mean_t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and h == pytest.approx(0.95 / np.sqrt(2 * 0.975 * 0.025) / np.sqrt(3), rel=1e-12)
    assert np.isnan(mean_t_interval([5.0])[1])


# ------------------------------------------------------------------ tiny problem vs enumeration
def test_tiny_study_front_equals_enumeration_with_sweep_run_identities(tmp_path):
    study = write(tmp_path, TINY)
    out = tmp_path / "st"
    stats = run_optimize(study, out, trials=12, workers=1, progress=False)
    assert stats["finished"] == 12 and stats["told"] == {"ok": 6, "failed": 0, "infeasible": 6}
    trials = pd.read_csv(out / "trials.csv")
    failed = trials[trials["status"] == "infeasible"]
    assert set(failed["pim.ranks"]) == {2} and failed["error"].str.contains("pim_memory_fit").all()
    assert (failed["constraint:pim_memory_fit"] > 0).all()
    assert (trials.loc[trials["status"] == "ok", "constraint:pim_memory_fit"] <= 0).all()
    # nothing of an infeasible design was simulated
    assert not any((out / "points" / h.split(":")[1]).exists() for r in failed["runs"] for h in r.split())
    ok = trials[trials["status"] == "ok"]
    # the grid sampler visits every design point exactly once
    assert sorted(map(tuple, ok[["pim.unit_gops_int8", "memory.channels"]].values.tolist())) == \
        sorted(itertools.product([51.2, 409.6], [2, 4, 8]))

    # Brute force: the same 12 points as a grid sweep. Its point folders are named by the same
    # run identity as the study's simulations (so both reuse each other's results).
    sweep = write(tmp_path, "name: enum\n" + BASE + """
modes: [ahasd, operator_sync]
axes:
  pim.unit_gops_int8: [51.2, 409.6]
  memory.channels: [2, 4, 8]
  pim.ranks: [2, 16]
""", "sweep.yaml")
    res = run_sweep(sweep, tmp_path / "enum", workers=1, progress=False)
    assert res.n_ok == 12 and res.n_failed == 12
    study_hashes = {h.split(":")[1] for r in trials["runs"] for h in r.split()}
    assert study_hashes == set(res.table["point"])
    # the memory-fit constraint holds exactly where the simulations run: infeasible <=> they fail
    bad = {h.split(":")[1] for r in failed["runs"] for h in r.split()}
    assert bad == set(res.table.loc[res.table["status"] != "ok", "point"])
    t = res.table[res.table["status"] == "ok"]
    keys = ["pim.unit_gops_int8", "memory.channels"]
    a = t[t["run.mode"] == "ahasd"].set_index(keys)
    s = t[t["run.mode"] == "operator_sync"].set_index(keys)
    enum = pd.DataFrame({"speedup": a["throughput_tok_s"] / s["throughput_tok_s"],
                         "ahasd_energy": a["energy_per_token_j"]}).reset_index()
    front_idx = brute_front(enum[["speedup", "ahasd_energy"]].values.tolist(), ["maximize", "minimize"])
    expected = sorted(map(tuple, enum.loc[front_idx, keys].values.tolist()))
    pareto = pd.read_csv(out / "pareto.csv")
    assert sorted(map(tuple, pareto[keys].values.tolist())) == expected
    assert 1 <= len(expected) < 6
    # objective values in trials.csv are the enumeration's ratios
    m = ok.merge(enum, on=keys, suffixes=("", "_enum"))
    np.testing.assert_allclose(m["speedup"], m["speedup_enum"], rtol=1e-12)
    # figures and report
    assert (out / "figures" / "pareto_speedup__ahasd_energy.png").is_file()
    assert (out / "figures" / "parallel_front.png").is_file()
    rep = (out / "report.md").read_text()
    assert "## Pareto front (" in rep and "6 infeasible designs" in rep and "## Failed trials" not in rep
    # one window: no intervals, so the interval-level front is the point front
    assert (trials["pareto"] == trials["pareto_ci"]).all()


# ------------------------------------------------------------------ resume
RESUMABLE = "name: res\n" + BASE + """
space:
  pim.unit_gops_int8: {low: 25.6, high: 819.2, log: true}
  pim.internal_bw_gb_s: {low: 32.0, high: 1024.0, log: true}
  ahasd.max_verify_tokens: {low: 4, high: 32}
objectives:
  - {metric: throughput_tok_s, direction: maximize}
  - {metric: energy_per_token_j, direction: minimize}
sampler: {name: nsga2, population_size: 6}
batch_size: 3
seed: 11
"""


def _trials(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        rows = con.execute("SELECT number, state FROM trials ORDER BY number").fetchall()
    finally:
        con.close()
    return rows


def test_running_trials_of_an_interrupted_process_are_finished_not_repeated(tmp_path):
    study = load_study(write(tmp_path, RESUMABLE))
    out = tmp_path / "st"
    run_optimize(study, out, trials=4, workers=1, progress=False)
    # a process that asked two trials and died before telling them
    ost = open_study(study, out)
    from ahasd_sim.dse.optimize import distributions
    asked = [ost.ask(distributions(study)) for _ in range(2)]
    params = {t.number: dict(t.params) for t in asked}
    stats = run_optimize(study, out, trials=7, workers=1, progress=False)
    assert stats["resumed"] == 2 and sum(stats["told"].values()) == 3
    trials = optuna.load_study(study_name="res", storage=f"sqlite:///{out / 'study.db'}").get_trials()
    assert [t.number for t in trials] == list(range(7))
    assert all(t.state.name == "COMPLETE" for t in trials)
    for num, p in params.items():
        assert trials[num].params == p
    # the resumed trials' simulations are reused on a second identical request: nothing runs
    again = run_optimize(study, out, trials=7, workers=1, progress=False)
    assert again["computed_runs"] == 0 and sum(again["told"].values()) == 0


def _start_and_interrupt(cmd, db: Path, sig: int, min_complete: int) -> int:
    """Start ``cmd``; once the storage holds ``min_complete`` more complete trials, send ``sig``."""
    start = sum(1 for _, s in _trials(db) if s == "COMPLETE") if db.is_file() else 0
    # A suite run as a background job (`cmd &` in a script) starts with SIGINT ignored (POSIX), and
    # Python then installs no Ctrl-C handler in the child: give the child the default disposition.
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    try:
        while time.time() < deadline and proc.poll() is None:
            try:
                if db.is_file() and sum(1 for _, s in _trials(db) if s == "COMPLETE") >= start + min_complete:
                    break
            except sqlite3.Error:
                pass
            time.sleep(0.05)
        assert proc.poll() is None, "the study finished before it could be interrupted"
        os.kill(proc.pid, sig)
        return proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_resume_after_ctrl_c_and_kill_loses_and_repeats_no_trial(tmp_path):
    study = write(tmp_path, RESUMABLE)
    out = tmp_path / "st"
    db = out / "study.db"
    cmd = [sys.executable, "-m", "ahasd_sim", "optimize", "--config", str(study), "--trials", "60",
           "--workers", "1", "--out", str(out), "--no-progress"]
    # Ctrl-C: exit 130, the tables are written with what is finished, the lock is released
    assert _start_and_interrupt(cmd, db, signal.SIGINT, 3) == 130
    assert (out / "trials.csv").is_file() and not (out / "study.lock").exists()
    # kill -9 in the middle of the resumed study: the lock stays behind, stale
    assert _start_and_interrupt(cmd, db, signal.SIGKILL, 3) == -signal.SIGKILL
    killed = _trials(db)
    done_before = {n for n, s in killed if s == "COMPLETE"}
    ost = optuna.load_study(study_name="res", storage=f"sqlite:///{db}")
    vals_before = {t.number: (t.params, t.values) for t in ost.get_trials() if t.number in done_before}
    n = len(killed) + 3
    stats = run_optimize(study, out, trials=n, workers=1, progress=False)
    after = optuna.load_study(study_name="res", storage=f"sqlite:///{db}").get_trials()
    assert [t.number for t in after] == list(range(n))           # nothing lost, nothing added twice
    assert all(t.state.is_finished() for t in after)
    assert stats["resumed"] == sum(1 for _, s in killed if s == "RUNNING")
    for t in after:
        if t.number in vals_before:
            assert (t.params, t.values) == vals_before[t.number]
    trials = pd.read_csv(out / "trials.csv")
    assert len(trials) == n and trials["trial"].is_unique
    assert not (out / "study.lock").exists()


# ------------------------------------------------------------------ invalid study files
BAD = [
    ("space:\n  pim.unit_gops_int8: {low: 1, high: 2}\nobjectives: [{metric: throughput_tok_s, direction: maximize}]\n"
     "colour_by: x\n", "colour_by", "unknown key"),
    ("space:\n  pim.unit_gops_int8: {low: 200.0, high: 100.0}\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "space.pim.unit_gops_int8", "empty range"),
    ("space:\n  pim.unit_gops_int8: {choices: []}\nobjectives: [{metric: throughput_tok_s, direction: maximize}]\n",
     "space.pim.unit_gops_int8.choices", "non-empty"),
    ("space:\n  pim.unit_gops: {low: 1.0, high: 2.0}\nobjectives: [{metric: throughput_tok_s, direction: maximize}]\n",
     "space.pim.unit_gops", "did you mean 'pim.unit_gops_int8'"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0}\n"
     "objectives: [{metric: throughput_toks, direction: maximize}]\n", "objectives[0].metric",
     "not a field of summary.json (run 'main') (did you mean 'throughput_tok_s'?)"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0}\n"
     "objectives: [{metric: throughput_tok_s, direction: up}]\n", "objectives[0].direction", "maximize or minimize"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0, log: true, stepp: 1}\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "space.pim.unit_gops_int8.stepp",
     "unknown key"),
    ("space:\n  pim.unit_gops_int8: {low: 0.0, high: 2.0, log: true}\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "space.pim.unit_gops_int8.low", "log range"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0}\nconstraints: [{expr: pim.rankz * 2, max: 3}]\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "constraints[0].expr", "pim.rankz"),
    ("space:\n  pim.partition_policy: {choices: [min_fit, best_fit]}\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "space.pim.partition_policy",
     "value 'best_fit' does not resolve"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0}\nsampler: nsga3\n"
     "objectives: [{metric: throughput_tok_s, direction: maximize}]\n", "sampler.name", "nsga2"),
    ("space:\n  pim.unit_gops_int8: {low: 1.0, high: 2.0}\n"
     "objectives: [{metric: throughput_tok_s, run: fast, direction: maximize}]\n", "objectives[0].run", "fast"),
]


@pytest.mark.parametrize("body,key,hint", BAD)
def test_invalid_study_exits_2_with_one_line_naming_file_and_key(tmp_path, capsys, body, key, hint):
    p = write(tmp_path, "name: bad\n" + BASE + body)
    rc = main(["optimize", "--config", str(p), "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"error: {p}: {key}:") and hint in err, err
    assert not (tmp_path / "o").exists()          # nothing runs, nothing is written


def test_changed_space_in_an_existing_study_folder_is_refused(tmp_path):
    out = tmp_path / "st"
    run_optimize(write(tmp_path, RESUMABLE), out, trials=1, workers=1, progress=False)
    changed = RESUMABLE.replace("high: 32}", "high: 64}")
    before = (out / "study.yaml").read_text()
    with pytest.raises(ConfigError, match="different search space"):
        run_optimize(write(tmp_path, changed, "s2.yaml"), out, trials=2, workers=1, progress=False)
    assert (out / "study.yaml").read_text() == before and not (out / "study.lock").exists()


def test_area_constraint_prunes_without_running(tmp_path):
    text = TINY.replace("sampler: grid", "sampler: grid\nconstraints:\n  - {expr: added_area_mm2, max: 1.0}")
    # 16 ranks x 1 AAU each is above 1 mm^2 (hw.area); 2 ranks is below
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.hw.area import area_table
    area = {r: float(area_table(load_config(PAPER_PLATFORM, [f"pim.ranks={r}"])).set_index("unit").loc["total",
                                                                                                         "area_mm2"])
            for r in (2, 16)}
    assert area[2] < 1.0 < area[16]
    stats = run_optimize(write(tmp_path, text), tmp_path / "st", trials=12, workers=1, progress=False)
    # 16 ranks break the area budget; 2 ranks cannot hold the models (pim_memory_fit)
    assert stats["told"]["infeasible"] == 12
    tr = pd.read_csv(tmp_path / "st" / "trials.csv")
    inf = tr[(tr["status"] == "infeasible") & (tr["pim.ranks"] == 16)]
    assert len(inf) == 6 and inf["error"].str.startswith("added_area_mm2").all()
    assert inf["runs"].str.contains("ahasd:").all()
    # the sampler is told the violations (optuna constraints), not a failure
    ost = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path / 'st' / 'study.db'}")
    for t in ost.get_trials():
        c = t.constraints                                   # name -> violation (> 0: violated)
        assert t.state.name == "COMPLETE" and max(c.values()) > 0
        ranks = t.params["pim.ranks"]
        assert (c["pim_memory_fit"] > 0) == (ranks == 2)
        assert c["added_area_mm2"] == pytest.approx(area[ranks] - 1.0)
    assert not any((tmp_path / "st" / "points" / h.split(":")[1]).exists()
                   for r in inf["runs"] for h in r.split())
    np.testing.assert_allclose(inf["constraint:added_area_mm2"], area[16])


def test_dask_executor(tmp_path):
    distributed = pytest.importorskip("distributed")
    study = write(tmp_path, TINY.replace("pim.ranks: {choices: [2, 16]}", "pim.ranks: {choices: [16]}"))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        st = run_optimize(study, tmp_path / "dk", trials=3, executor="dask", dask_client=client, progress=False)
    local = run_optimize(study, tmp_path / "loc", trials=3, workers=1, progress=False)
    assert st["told"]["ok"] == local["told"]["ok"] == 3
    a = pd.read_csv(tmp_path / "dk" / "trials.csv").sort_values("trial")
    b = pd.read_csv(tmp_path / "loc" / "trials.csv").sort_values("trial")
    np.testing.assert_allclose(a["speedup"], b["speedup"], rtol=1e-12)


# ------------------------------------------------------------------ sensitivity
SENS = "name: sens\n" + BASE + """
runs:
  ahasd: {run.mode: ahasd}
  sync: {run.mode: operator_sync}
windows: [0, 1]
space:
  pim.unit_gops_int8: {low: 25.6, high: 409.6, log: true}
  area.die_area_mm2: {low: 40.0, high: 66.0}
  memory.channels: {choices: [2, 4, 8]}
objectives:
  - {name: speedup, metric: throughput_tok_s, run: ahasd, over: sync, direction: maximize}
sensitivity: {sobol_samples: 2}
"""


def test_sensitivity_ranks_an_inert_knob_last_with_zero_effect(tmp_path):
    pytest.importorskip("SALib")
    from ahasd_sim.dse.sensitivity import run_sensitivity
    st = run_sensitivity(write(tmp_path, SENS), tmp_path / "st", workers=1, progress=False)
    torn = st["tornado"].set_index("parameter")
    # the die area only scales the area percentage: no effect on any simulated time
    assert torn.loc["area.die_area_mm2", "span"] == 0.0
    assert torn.loc["pim.unit_gops_int8", "span"] > 0 and torn.loc["memory.channels", "span"] > 0
    assert list(torn.index)[-1] == "area.die_area_mm2"
    oat = st["oat"]
    # tornado ends are the extremes of the OAT rows of that parameter (with the base point)
    for p in ("pim.unit_gops_int8", "memory.channels"):
        vals = pd.concat([oat.iloc[[0]], oat[oat["parameter"] == p]])["speedup"]
        assert torn.loc[p, "low"] == pytest.approx(vals.min(), rel=1e-12)
        assert torn.loc[p, "high"] == pytest.approx(vals.max(), rel=1e-12)
    # two windows are below the t interval's minimum (3): no interval on any point, nor on any
    # paired difference, and so no effect "excludes zero"
    assert oat["speedup_ci95_low"].isna().all() and oat["speedup_diff_ci95_low"].isna().all()
    assert not st["tornado"]["effect_excludes_zero"].any()
    sob = st["sobol"].set_index("parameter")
    assert abs(sob.loc["area.die_area_mm2", "ST"]) < 1e-12 and abs(sob.loc["area.die_area_mm2", "S1"]) < 1e-12
    assert sob.loc["pim.unit_gops_int8", "ST"] > 0.05
    out = tmp_path / "st" / "sensitivity"
    assert (out / "figures" / "tornado_speedup.png").is_file() and (out / "figures" / "sobol_speedup.png").is_file()
    # the sensitivity points are stored in the study folder and reused: a second call runs nothing
    again = run_sensitivity(write(tmp_path, SENS), tmp_path / "st", workers=1, progress=False)
    pd.testing.assert_frame_equal(again["tornado"], st["tornado"])


def test_param_unit_mapping_log_int_and_categorical():
    from ahasd_sim.dse.study import Param
    lg = Param("x", ("x",), "float", low=25.6, high=409.6, log=True)
    assert lg.from_unit(0.5) == pytest.approx(np.sqrt(25.6 * 409.6)) and lg.from_unit(1.0) == pytest.approx(409.6)
    it = Param("n", ("n",), "int", low=4, high=32, step=4)
    assert [it.from_unit(u) for u in (0.0, 0.49, 1.0)] == [4, 16, 32]
    cat = Param("c", ("c",), "categorical", choices=[2, 4, 8], labels=[2, 4, 8])
    assert [cat.from_unit(u) for u in (0.0, 0.33, 0.34, 0.99, 1.0)] == [2, 2, 4, 8, 8]
    pair = Param("a,b", ("a", "b"), "categorical", choices=[("p", "q")], labels=["p/q"])
    assert pair.overrides("p/q") == ["a=p", "b=q"]


# ------------------------------------------------------------------ shipped study
def _dse_studies() -> list[Path]:
    """The optimize/sensitivity study files (a speculation map, with its planes, is another kind:
    tests/test_speculation_map.py)."""
    import yaml
    return [p for p in sorted((ROOT / "hw_configs" / "studies").glob("*.yaml"))
            if "planes" not in (yaml.safe_load(p.read_text()) or {})]


@pytest.mark.parametrize("path", _dse_studies(), ids=lambda p: p.stem)
def test_shipped_study_validates_and_runs_two_trials(tmp_path, path):
    study = load_study(path)
    stats = run_optimize(study, tmp_path / "w", trials=2, workers=1, progress=False, batch_size=2)
    assert stats["finished"] == 2
    tr = pd.read_csv(tmp_path / "w" / "trials.csv")
    assert len(tr) == 2 and (tr["status"] != "pending").all()


def test_where_ahasd_wins_compares_ahasd_with_operator_sync_from_the_paper_platform():
    study = load_study(ROOT / "hw_configs" / "studies" / "where_ahasd_wins.yaml", check_metrics=False)
    assert [(o.metric, o.run, o.over, o.direction) for o in study.objectives] == [
        ("throughput_tok_s", "ahasd", "operator_sync", "maximize"), ("tokens_per_j", "ahasd", "operator_sync", "maximize")]
    # the sensitivity base point is the base config's platform (6400.0 in the config matches choice 6400)
    from ahasd_sim.dse.sensitivity import base_value
    assert base_value(study, study.param("memory.standard,memory.data_rate_mts")) == "LPDDR5/6400"
    assert base_value(study, study.param("run.draft_model,run.target_model")) == "llama2-7b/llama2-13b"
    assert base_value(study, study.param("pim.unit_gops_int8")) == 102.4


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_same_seed_same_trials_and_other_seed_differs(tmp_path, sampler):
    text = RESUMABLE.replace("sampler: {name: nsga2, population_size: 6}", f"sampler: {sampler}")
    runs = {}
    for tag, seed in (("a", 11), ("b", 11), ("c", 12)):
        p = write(tmp_path, text.replace("seed: 11", f"seed: {seed}"), f"{tag}.yaml")
        run_optimize(p, tmp_path / tag, trials=3, workers=1, progress=False, write_outputs=False)
        st = optuna.load_study(study_name="res", storage=f"sqlite:///{tmp_path / tag / 'study.db'}")
        runs[tag] = [(t.params, t.values) for t in st.get_trials()]
    assert runs["a"] == runs["b"]
    assert [p for p, _ in runs["a"]] != [p for p, _ in runs["c"]]


def test_an_extended_study_does_not_propose_its_first_trials_again(tmp_path):
    p = write(tmp_path, RESUMABLE.replace("sampler: {name: nsga2, population_size: 6}", "sampler: random"))
    run_optimize(p, tmp_path / "x", trials=3, workers=1, progress=False, write_outputs=False)
    run_optimize(p, tmp_path / "x", trials=6, workers=1, progress=False, write_outputs=False)
    trials = optuna.load_study(study_name="res", storage=f"sqlite:///{tmp_path / 'x' / 'study.db'}").get_trials()
    first, later = [t.params for t in trials[:3]], [t.params for t in trials[3:]]
    assert len(later) == 3 and not any(p in first for p in later)


@pytest.mark.parametrize("data, hint", [
    (b"name: a\nname: b\n", "duplicate key"),
    ("name: bad\n".encode("utf-16"), "UTF-16"),
])
def test_study_file_gets_the_strict_yaml_reader(tmp_path, capsys, data, hint):
    # the study loader shares the sweep/config YAML reader: duplicate keys and non-UTF-8 text
    # are one-line errors, as for every other input file
    p = tmp_path / "s.yaml"
    p.write_bytes(data)
    rc = main(["optimize", "--config", str(p), "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and hint in err, err
    assert not (tmp_path / "o").exists()


def _swallowed_ctrl_c():
    """What a library's ``__del__`` or sqlite callback does to a Ctrl-C that arrives inside it:
    Python prints "Exception ignored" and goes on."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass


def test_a_ctrl_c_swallowed_by_a_library_still_stops_the_study(tmp_path, monkeypatch):
    # seen in CI: a study ran all its trials and exited 0 after Ctrl-C
    import ahasd_sim.dse.evaluate as ev
    from ahasd_sim import cli_common
    study = load_study(write(tmp_path, RESUMABLE))
    out = tmp_path / "st"
    real = ev.finish
    calls = {"n": 0}

    def finish_then_lose_a_ctrl_c(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            _swallowed_ctrl_c()
        return real(*a, **k)

    monkeypatch.setattr(ev, "finish", finish_then_lose_a_ctrl_c)
    old = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        cli_common.install_signal_handlers()
        with pytest.raises(KeyboardInterrupt):
            run_optimize(study, out, trials=12, workers=1, progress=False)
        assert cli_common.run_guarded(lambda: 0) == 0   # handled: the next command is not stopped
    finally:
        signal.signal(signal.SIGINT, old)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if hasattr(signal, "SIGHUP"):
            signal.signal(signal.SIGHUP, signal.SIG_DFL)
    # stopped inside the first batch (batch_size 3; lock-step: a batch is told only when all of it
    # ran): its trials stay to be resumed, nothing after it was asked
    states = [s for _, s in _trials(out / "study.db")]
    assert states == ["RUNNING"] * 3


def test_a_rate_objective_is_a_ratio_of_totals_over_the_windows_not_a_mean_of_ratios():
    """Two windows: 100 tokens in 10 s and 100 tokens in 40 s. Ratio of totals 200 / 50 = 4 tok/s;
    the mean of the per-window rates (10 and 2.5) would be 6.25. A metric that is no rate
    (acceptance_rate) has no pooled form."""
    from ahasd_sim.dse.evaluate import _pooled
    s = {("a", 0): {"generated_tokens": 100, "decode_makespan_s": 10.0},
         ("a", 1): {"generated_tokens": 100, "decode_makespan_s": 40.0}}
    assert _pooled(s, [0, 1], "a", "throughput_tok_s") == 4.0
    assert _pooled(s, [0, 1], "a", "acceptance_rate") is None
    assert _pooled(s, [0, 1], "a", "tokens_per_j") is None          # no decode_energy_j: not pooled


def test_evaluate_takes_points_as_the_executor_needs_runs(tmp_path):
    """evaluate() over a generator of design points with an executor that runs each task the
    moment it takes it: a point is produced only when the runs before it have been handed out
    (the optimiser asks the next trial while the first ones run), a result that comes back
    while the generator is suspended finishes its point, a run two points share is run once
    (the second point, taken after it ended, just reads it), and every point is finished once."""
    from ahasd_sim.dse.evaluate import DesignPoint, evaluate

    log = []

    class Eager:
        def run(self, tasks, on_done):
            for t in tasks:
                log.append(("run", t["hash"]))
                on_done({"hash": t["hash"], "status": "failed"})

    def points():
        for key, hashes in (("p0", ("h1", "h2")), ("p1", ("h1", "h3")), ("p2", ())):
            log.append(("take", key))
            pt = DesignPoint(key, {})
            for run, h in zip(("a", "b"), hashes):
                pt.hashes[(run, None)] = h
                pt.configs[(run, None)] = None
            if not hashes:
                pt.infeasible = "does not fit"
            yield pt

    finished = []
    study = load_study(write(tmp_path, TINY))
    taken = evaluate(study, points(), tmp_path, Eager(), on_point=lambda pt: finished.append(pt.key))
    assert [p.key for p in taken] == ["p0", "p1", "p2"]
    assert log == [("take", "p0"), ("run", "h1"), ("run", "h2"), ("take", "p1"), ("run", "h3"), ("take", "p2")]
    assert sorted(finished) == ["p0", "p1", "p2"]
