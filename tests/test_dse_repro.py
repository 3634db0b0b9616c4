"""Seeded studies reproduce: in one go (whatever --workers), after an interruption and resume,
with lock-step batches; --fastest pipelines batches; duration_s is a trial's own time;
--seeds runs one study per search seed; CI-aware fronts and hypervolume."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

optuna = pytest.importorskip("optuna")

from ahasd_sim.__main__ import main  # noqa: E402
from ahasd_sim.dse.optimize import distributions, open_study, run_optimize  # noqa: E402
from ahasd_sim.metrics.pareto import ci_pareto_mask, hypervolume, pareto_mask  # noqa: E402
from ahasd_sim.dse.report import TIME_COLUMNS  # noqa: E402
from ahasd_sim.dse.study import load_study  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"

# NSGA-II, population 4: trials 0-3 are generation 0 (random), 4-7 generation 1 (children).
# pim.ranks 2 cannot hold the models: infeasible (constraints told to the sampler).
STUDY = f"""
name: repro
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 16
    run.timeline: false
    run.policy: adaedl
    run.draft_model: llama2-7b
    run.target_model: llama2-13b
runs:
  ahasd: {{run.mode: ahasd}}
  sync: {{run.mode: operator_sync}}
windows: [0, 1]
space:
  pim.unit_gops_int8: {{low: 25.6, high: 819.2, log: true}}
  memory.channels: {{choices: [2, 4, 8]}}
  pim.ranks: {{choices: [2, 16]}}
objectives:
  - {{name: speedup, metric: throughput_tok_s, run: ahasd, over: sync, direction: maximize}}
  - {{name: energy, metric: energy_per_token_j, run: ahasd, direction: minimize}}
sampler: {{name: nsga2, population_size: 4}}
seed: 5
"""


def write(tmp_path: Path, text: str = STUDY, name: str = "study.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def table(out: Path) -> pd.DataFrame:
    """trials.csv without the measured times (the only columns allowed to differ)."""
    df = pd.read_csv(out / "trials.csv")
    assert set(TIME_COLUMNS) <= set(df.columns)
    return df.drop(columns=list(TIME_COLUMNS))


def test_two_seeded_runs_give_identical_trials_whatever_the_workers(tmp_path):
    study = write(tmp_path)
    a = run_optimize(study, tmp_path / "a", trials=8, workers=1, progress=False)
    run_optimize(study, tmp_path / "b", trials=8, workers=2, progress=False)
    ta, tb = table(tmp_path / "a"), table(tmp_path / "b")
    pd.testing.assert_frame_equal(ta, tb)
    assert a["mode"] == "reproducible" and a["batch_size"] == 4       # one NSGA-II generation per batch
    # the second generation really is bred from the first (not all random), and not all feasible
    assert ta["status"].nunique() >= 2 or len(ta.drop_duplicates(["pim.unit_gops_int8"])) < 8
    assert (tmp_path / "a" / "hypervolume.csv").is_file()


def test_batches_are_lock_step_each_generation_asked_after_the_last_told(tmp_path):
    """The causality the reproducibility rests on: no trial of batch k+1 is asked before every
    trial of batch k is told (with --fastest the next batch is asked while this one runs)."""
    study = load_study(write(tmp_path))
    run_optimize(study, tmp_path / "s", trials=8, workers=1, progress=False)
    trials = open_study(study, tmp_path / "s").get_trials()
    first, second = trials[:4], trials[4:]
    assert max(t.datetime_complete for t in first) <= min(t.datetime_start for t in second)
    gen = [t.system_attrs.get("NSGAIISampler:generation") for t in trials]
    assert gen == [0, 0, 0, 0, 1, 1, 1, 1]
    fast = run_optimize(study, tmp_path / "f", trials=8, workers=1, progress=False, fastest=True, batch_size=4)
    assert fast["mode"] == "fastest" and fast["finished"] == 8
    tf = open_study(study, tmp_path / "f").get_trials()
    # pipelined: the second batch was asked while the first was still running
    assert min(t.datetime_start for t in tf[4:]) < max(t.datetime_complete for t in tf[:4])


def test_interrupted_and_resumed_study_equals_the_uninterrupted_one(tmp_path, monkeypatch):
    study = load_study(write(tmp_path))
    run_optimize(study, tmp_path / "ref", trials=8, workers=1, progress=False)
    ref = table(tmp_path / "ref")

    # (1) Ctrl-C in the middle of the second batch's simulations
    import ahasd_sim.dse.evaluate as ev
    real = ev.finish

    def finish_then_stop(study_, pt, *a, **k):
        if int(pt.key) >= 4:         # the first finished trial of the second batch
            raise KeyboardInterrupt
        return real(study_, pt, *a, **k)

    monkeypatch.setattr(ev, "finish", finish_then_stop)
    with pytest.raises(KeyboardInterrupt):
        run_optimize(study, tmp_path / "cut", trials=8, workers=1, progress=False)
    monkeypatch.setattr(ev, "finish", real)
    states = [t.state.name for t in open_study(study, tmp_path / "cut").get_trials()]
    assert states == ["COMPLETE"] * 4 + ["RUNNING"] * 4
    st = run_optimize(study, tmp_path / "cut", trials=8, workers=1, progress=False)
    assert st["resumed"] == 4
    pd.testing.assert_frame_equal(table(tmp_path / "cut"), ref)

    # (2) killed while asking the second batch (2 of its 4 trials asked), then resumed
    run_optimize(study, tmp_path / "ask", trials=4, workers=1, progress=False)
    ost = open_study(study, tmp_path / "ask")
    for _ in range(2):
        ost.ask(distributions(study))
    run_optimize(study, tmp_path / "ask", trials=8, workers=1, progress=False)
    pd.testing.assert_frame_equal(table(tmp_path / "ask"), ref)

    # (3) extended in two steps (4 trials, then 8) = in one go
    run_optimize(study, tmp_path / "ext", trials=4, workers=1, progress=False)
    run_optimize(study, tmp_path / "ext", trials=8, workers=1, progress=False)
    pd.testing.assert_frame_equal(table(tmp_path / "ext"), ref)


def test_duration_is_the_trials_own_simulation_time(tmp_path):
    import json
    out = tmp_path / "s"
    run_optimize(write(tmp_path), out, trials=4, workers=1, progress=False)
    df = pd.read_csv(out / "trials.csv")
    for _, r in df[df["status"] == "ok"].iterrows():
        walls = [json.loads((out / "points" / h.split(":")[1] / "meta.json").read_text())["wall_time_s"]
                 for h in r["runs"].split()]
        assert len(walls) == 4 and r["duration_s"] == pytest.approx(sum(walls), rel=1e-9)
        # the time from ask to tell includes waiting for the rest of the batch
        assert r["ask_to_tell_s"] >= r["duration_s"] * 0.5
    assert df.loc[df["status"] == "infeasible", "duration_s"].isna().all()


def test_seeds_option_runs_one_study_per_seed_and_compares_hypervolumes(tmp_path, capsys):
    out = tmp_path / "multi"
    rc = main(["optimize", "--config", str(write(tmp_path)), "--trials", "4", "--workers", "1",
               "--out", str(out), "--no-progress", "--seeds", "1,2"])
    assert rc == 0
    seeds = pd.read_csv(out / "seeds.csv")
    assert seeds["seed"].tolist() == [1, 2] and (seeds["trials"] == 4).all()
    assert (out / "seed-1" / "trials.csv").is_file() and (out / "points").is_dir()
    assert not (out / "seed-1" / "points").exists()
    a, b = (pd.read_csv(out / f"seed-{s}" / "trials.csv") for s in (1, 2))
    assert a["pim.unit_gops_int8"].tolist() != b["pim.unit_gops_int8"].tolist()
    # a seeded folder refuses another seed; a bad --seeds is a one-line error
    capsys.readouterr()
    assert main(["optimize", "--config", str(write(tmp_path)), "--trials", "4", "--out", str(out / "seed-1"),
                 "--no-progress"]) == 2
    assert "seed" in capsys.readouterr().err
    assert main(["optimize", "--config", str(write(tmp_path)), "--out", str(out), "--seeds", "1,x"]) == 2
    err = capsys.readouterr().err.strip()
    errors = [x for x in err.splitlines() if not x.startswith("warning:")]   # (a 2-window study warns)
    assert len(errors) == 1 and "--seeds" in errors[0]


# ------------------------------------------------------------------ interval-level front, hypervolume
def test_ci_front_hand_example():
    v = np.array([[2.0, 2.0], [1.0, 1.0], [1.5, 1.9]])
    # point estimates: (2,2) dominates both others
    assert pareto_mask(v, ["maximize", "maximize"]).tolist() == [True, False, False]
    # with +-0.3: (1,1)'s best end 1.3 < (2,2)'s worst end 1.7 -> dominated; (1.5,1.9) overlaps -> kept
    h = np.full_like(v, 0.3)
    assert ci_pareto_mask(v, h, ["maximize", "maximize"]).tolist() == [True, False, True]
    # zero widths = the point front; NaN widths = no interval
    assert ci_pareto_mask(v, np.zeros_like(v), ["maximize"] * 2).tolist() == [True, False, False]
    assert ci_pareto_mask(v, np.full_like(v, np.nan), ["maximize"] * 2).tolist() == [True, False, False]
    # minimisation flips the sides
    assert ci_pareto_mask(-v, h, ["minimize", "minimize"]).tolist() == [True, False, True]


def test_ci_front_contains_point_front_random():
    rng = np.random.default_rng(3)
    for _ in range(20):
        v = rng.normal(size=(30, 2))
        h = rng.uniform(0, 0.5, size=(30, 2))
        pm, cm = pareto_mask(v, ["maximize", "minimize"]), ci_pareto_mask(v, h, ["maximize", "minimize"])
        assert (cm | ~pm).all() and cm.sum() >= pm.sum()


def test_hypervolume_exact_small_cases():
    # two boxes from ref (0,0): (3,1) area 3, (1,2) area 2, overlap 1 -> 4
    assert hypervolume([[3, 1], [1, 2]], [0, 0]) == pytest.approx(4.0)
    # a dominated point adds nothing; a point not beyond the reference adds nothing
    assert hypervolume([[3, 1], [1, 2], [1, 1], [-1, 5]], [0, 0]) == pytest.approx(4.0)
    # 3-D: unit cube + box (2,1,1) -> 2; plus (1,1,3) -> 2 + 2 = 4
    assert hypervolume([[1, 1, 1], [2, 1, 1], [1, 1, 3]], [0, 0, 0]) == pytest.approx(4.0)
    assert hypervolume([], [0, 0]) == 0.0


def test_hypervolume_history_is_monotone_and_ends_at_the_front(tmp_path):
    from ahasd_sim.dse.report import hypervolume_reference
    study = load_study(write(tmp_path))
    run_optimize(study, tmp_path / "s", trials=8, workers=1, progress=False)
    hv = pd.read_csv(tmp_path / "s" / "hypervolume.csv")
    df = pd.read_csv(tmp_path / "s" / "trials.csv")
    assert hv["trial"].tolist() == list(range(8)) and (np.diff(hv["hypervolume"]) >= -1e-15).all()
    ok = df[df["status"] == "ok"]
    ref = hypervolume_reference(study, df)
    pts = ok[ok["pareto"]][["speedup", "energy"]].to_numpy() * [1, -1]
    assert hv["hypervolume"].iloc[-1] == pytest.approx(hypervolume(pts, np.array(ref) * [1, -1]))
    rep = (tmp_path / "s" / "report.md").read_text()
    assert "## Hypervolume history" in rep and "interval level" in rep
