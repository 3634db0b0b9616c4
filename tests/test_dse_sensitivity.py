"""Sensitivity: paired OAT differences, constraint-aware Sobol sampling, the convergence check,
and a non-zero exit listing every failed point."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("optuna")
pytest.importorskip("SALib")

from ahasd_sim.__main__ import main  # noqa: E402
from ahasd_sim.dse.evaluate import DesignPoint  # noqa: E402
from ahasd_sim.metrics.stats import mean_t_interval  # noqa: E402
from ahasd_sim.dse.sensitivity import (paired_difference, run_sensitivity, saltelli_blocks,  # noqa: E402
                                       sobol_indices)

ROOT = Path(__file__).resolve().parent.parent
SMOKE_TRACE = ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"
PAPER_PLATFORM = ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"

# pinned placement (no tuning runs: fast); pim.ranks 2 cannot hold the models (infeasible)
STUDY = f"""
name: sens2
base:
  config: {PAPER_PLATFORM}
  set:
    run.trace: {SMOKE_TRACE}
    run.generated_tokens: 16
    run.timeline: false
    run.policy: adaedl
    run.draft_model: llama2-7b
    run.target_model: llama2-13b
    pim.partition_policy: proportional
runs:
  ahasd: {{run.mode: ahasd}}
  sync: {{run.mode: operator_sync}}
windows: [0, 1]
space:
  pim.unit_gops_int8: {{low: 25.6, high: 409.6, log: true}}
  pim.ranks: {{choices: [2, 16], base: 16}}
objectives:
  - {{name: speedup, metric: throughput_tok_s, run: ahasd, over: sync, direction: maximize}}
"""


def write(tmp_path: Path, text: str = STUDY) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    return p


def _pt(key, xs, windows=(0, 1, 2)):
    pt = DesignPoint(key, {})
    pt.values, pt.samples, pt.windows = [float(np.mean(xs))], [list(xs)], list(windows)
    return pt


def test_paired_difference_hand_example():
    base, pt = _pt("b", [1.0, 2.0, 3.0]), _pt("p", [2.0, 4.0, 3.0])
    m, (lo, hi) = paired_difference(pt, base, 0)
    # differences 1, 2, 0: mean 1, sd 1, t(2) = 4.303 -> [1 - 4.303 / sqrt(3), 1 + 4.303 / sqrt(3)]
    h = 4.302652729749464 / np.sqrt(3)
    assert m == pytest.approx(1.0) and lo == pytest.approx(1.0 - h, rel=1e-12) and hi == pytest.approx(1.0 + h, rel=1e-12)
    # windows that move together: the paired interval is far narrower than the unpaired ones
    base, pt = _pt("b", [1.0, 5.0, 9.0]), _pt("p", [1.1, 5.1, 9.2])
    m, (lo, hi) = paired_difference(pt, base, 0)
    assert (hi - lo) / 2 < mean_t_interval([1.0, 5.0, 9.0])[1] / 20
    # two windows: below the t interval's minimum, no interval
    assert paired_difference(_pt("p", [2.0, 4.0], (0, 1)), _pt("b", [1.0, 2.0], (0, 1)), 0)[1] is None
    with pytest.raises(ValueError, match="windows"):
        paired_difference(_pt("p", [1.0, 2.0], (0, 5)), _pt("b", [1.0, 2.0], (0, 1)), 0)


def test_saltelli_blocks_follow_salib_order():
    from SALib.analyze import sobol as sa
    X = saltelli_blocks(3, 4, seed=1)
    assert X.shape == (4, 5, 3)
    for blk in X:
        a, b = blk[0], blk[-1]
        for i in range(3):
            want = a.copy()
            want[i] = b[i]
            np.testing.assert_array_equal(blk[1 + i], want)
    # continuing the sequence gives the next blocks of the same sequence
    np.testing.assert_array_equal(saltelli_blocks(3, 2, seed=1, start=2), X[2:])
    # SALib recovers the indices of an additive function from this layout: y = x0 + 0 * x1 + 2 x2
    X = saltelli_blocks(3, 256, seed=0).reshape(-1, 3)
    Y = X[:, 0] + 2 * X[:, 2]
    res = sa.analyze({"num_vars": 3, "names": list("abc"), "bounds": [[0, 1]] * 3}, Y, calc_second_order=False,
                     print_to_console=False, seed=0)
    assert res["ST"][1] == pytest.approx(0.0, abs=1e-12)
    assert res["S1"][2] == pytest.approx(0.8, abs=0.05) and res["S1"][0] == pytest.approx(0.2, abs=0.05)


def test_sobol_intervals_are_the_same_twice_with_seed_zero(tmp_path):
    """The study's seed (0 by default) fixes the bootstrap of S1_conf/ST_conf: SALib ignores a
    seed of 0, which left them to numpy's global generator (they moved by 25% between runs)."""
    from ahasd_sim.dse.study import load_study
    study = load_study(write(tmp_path))
    assert study.seed == 0
    d = len(study.space)
    rng = np.random.default_rng(3)
    blocks = []
    for _ in range(16):
        blk = [DesignPoint(f"k{len(blocks)}-{i}", {}) for i in range(d + 2)]
        for q in blk:
            q.values = [float(rng.random())]
        blocks.append(blk)
    np.random.seed(1)
    a = sobol_indices(study, blocks, 0)
    np.random.seed(2)                   # another global state: the intervals must not follow it
    b = sobol_indices(study, blocks, 0)
    for k in ("S1", "S1_conf", "ST", "ST_conf", "S1_ci95_low", "ST_ci95_high"):
        np.testing.assert_array_equal(a[k], b[k])
    # [low, high] within [0, 1], the range of an index, around the estimate where it lies inside
    for k in ("S1", "ST"):
        assert (a[f"{k}_ci95_low"] >= 0).all() and (a[f"{k}_ci95_high"] <= 1).all()
        assert (a[f"{k}_ci95_low"] <= np.clip(a[k], 0, 1)).all() and (np.clip(a[k], 0, 1) <= a[f"{k}_ci95_high"]).all()


def test_sobol_samples_is_a_budget():
    """--sobol-samples caps the sample: with a tolerance the loop starts at sobol_samples but
    never passes the budget (the cap at 8 of a study that starts at 32 runs 8, not 32 doubling
    to 128); without a tolerance the whole budget runs at once; the study's own cap otherwise."""
    from ahasd_sim.dse.sensitivity import sobol_budget
    cfg = {"sobol_samples": 32, "sobol_tolerance": 0.05, "sobol_max_samples": 128}
    assert sobol_budget(cfg, 8) == (8, 8)
    assert sobol_budget(cfg, 64) == (32, 64)
    assert sobol_budget(cfg, None) == (32, 128)
    assert sobol_budget(cfg, 0) == (0, 0)
    assert sobol_budget({"sobol_samples": 16}, None) == (16, 16)
    assert sobol_budget({"sobol_samples": 16}, 4) == (4, 4)


def test_sensitivity_help_states_the_point_count():
    import argparse

    from ahasd_sim.dse.cli import sensitivity_arguments
    p = argparse.ArgumentParser()
    sensitivity_arguments(p)
    text = " ".join(p.format_help().split())
    assert "hard cap" in text and "N x (D + 2) design points" in text and "x runs x windows simulations" in text


def test_oat_is_paired_and_sobol_skips_infeasible_blocks_and_checks_convergence(tmp_path):
    text = STUDY + "sensitivity: {sobol_samples: 2, sobol_tolerance: 0.000001, sobol_max_samples: 4}\n"
    st = run_sensitivity(write(tmp_path, text), tmp_path / "st", workers=1, progress=False)
    oat = st["oat"].set_index(["parameter", "value"], drop=False)
    base = oat.iloc[0]
    # the OAT point at ranks 2 is infeasible, not failed, and not in the tornado
    assert oat.loc[("pim.ranks", 2), "status"] == "infeasible" and st["failed"] == 0
    # paired: mean difference = difference of the means (same windows), interval from the differences
    for _, r in st["oat"][st["oat"]["status"] == "ok"].iterrows():
        assert r["speedup_diff"] == pytest.approx(r["speedup"] - base["speedup"], abs=1e-12)
    torn = st["tornado"].set_index("parameter")
    assert torn.loc["pim.unit_gops_int8", "low"] == pytest.approx(
        base["speedup"] + torn.loc["pim.unit_gops_int8", "low_diff"])
    # Sobol: every point run is feasible; blocks with a ranks-2 point were skipped, not run
    assert st["sobol_skipped_blocks"] > 0 and len(st["sobol"]) == 2
    points = [k for k in (tmp_path / "st" / "points").iterdir()]
    assert st["sobol_points"] == 4 * 4      # doubled once (N = 2 -> 4), 4 points per block (D + 2)
    # tolerance 1e-6 cannot be met: doubled to sobol_max_samples and said so
    assert st["sobol_samples"] == 4 and st["sobol_converged"] is False
    conv = st["convergence"]
    assert sorted(conv["n"].unique()) == [2, 4]
    rep = (tmp_path / "st" / "sensitivity" / "sensitivity.md").read_text()
    assert "NOT converged" in rep and "blocks skipped" in rep and "paired" in rep
    assert (tmp_path / "st" / "sensitivity" / "sobol_convergence.csv").is_file()
    assert len(points) > 0
    # each distinct simulation ran once (one folder in points/ each) and is reused by a second
    # invocation, whose report says it ran none
    assert st["computed_runs"] == len(points)
    again = run_sensitivity(write(tmp_path, text), tmp_path / "st", workers=1, progress=False)
    assert again["computed_runs"] == 0
    assert "this invocation ran 0 simulations" in (tmp_path / "st" / "sensitivity" / "sensitivity.md").read_text()


def test_failed_points_exit_1_with_one_line_each(tmp_path, capsys, monkeypatch):
    import ahasd_sim.dse.evaluate as ev
    real = ev.finish

    def fail_big_gops(study, pt, *a, **k):
        real(study, pt, *a, **k)
        if pt.params.get("pim.unit_gops_int8", 0) > 400:
            pt.values, pt.error = None, "run 'ahasd' failed: injected"

    monkeypatch.setattr(ev, "finish", fail_big_gops)
    rc = main(["sensitivity", "--config", str(write(tmp_path)), "--out", str(tmp_path / "st"), "--workers", "1",
               "--no-progress", "--sobol-samples", "0"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    # the study's 2 windows give no t interval: said once, up front
    assert err[0].startswith("warning: ") and "2 trace windows per design point" in err[0]
    err = err[1:]
    assert err[0].startswith("1 design point(s) failed")
    assert len(err) == 2 and err[1].startswith("error: oat pim.unit_gops_int8=409.6 failed: ") and "injected" in err[1]


def test_bad_sensitivity_keys_are_one_line_errors(tmp_path, capsys):
    for body, key in (("{sobol_samples: 4, sobol_max_samples: 2}", "sensitivity.sobol_max_samples"),
                      ("{sobol_tolerance: 0.1}", "sensitivity.sobol_tolerance"),
                      ("{sobol_samples: 4, sobol_tolerance: 2}", "sensitivity.sobol_tolerance")):
        p = write(tmp_path, STUDY + f"sensitivity: {body}\n")
        rc = main(["sensitivity", "--config", str(p), "--out", str(tmp_path / "o"), "--no-progress"])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and len(err.splitlines()) == 1 and f"{key}:" in err, err


def test_trials_and_sensitivity_report_the_placement_each_run_used(tmp_path):
    from ahasd_sim.dse.optimize import run_optimize
    text = STUDY.replace("pim.ranks: {choices: [2, 16], base: 16}", "pim.ranks: {choices: [16]}")
    run_optimize(write(tmp_path, text + "sampler: random\n"), tmp_path / "o", trials=1, workers=1, progress=False)
    tr = pd.read_csv(tmp_path / "o" / "trials.csv")
    # pinned in the study's base.set: both runs used it on both windows
    assert tr["ahasd/placement"].tolist() == ["proportional"] and tr["sync/placement"].tolist() == ["proportional"]
