"""scripts/confirm_study_winners.py: which designs it re-runs, the orientation of the ratios,
and one-line errors on a trials table that is not the study's."""
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "confirm_study_winners.py"
STUDY = ROOT / "hw_configs" / "studies" / "where_ahasd_wins.yaml"
PARAMS = {"pim.unit_gops_int8": 61.724876, "pim.internal_bw_gb_s": 67.021863, "pim.ranks": 12,
          "pim.partition_policy": "min_fit", "memory.channels": 8,
          "memory.standard,memory.data_rate_mts": "LPDDR5/4266",
          "run.draft_model,run.target_model": "llama2-7b/llama2-13b", "run.policy": "banditspec"}


def _run(tmp_path, trials):
    path = tmp_path / "trials.csv"
    trials.to_csv(path, index=False)
    out = tmp_path / "confirmed.csv"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(STUDY), str(path), "--out", str(out),
                           "--tokens", "256", "--windows", "2"], capture_output=True, text=True, cwd=tmp_path)
    return proc, out


def test_only_designs_better_on_both_are_rerun_and_ratios_are_run_over_reference(tmp_path):
    rows = [dict(PARAMS, trial=0, status="ok", throughput_ratio=1.1, energy_efficiency_ratio=1.4),
            dict(PARAMS, trial=1, status="ok", throughput_ratio=1.1, energy_efficiency_ratio=1.4),   # duplicate
            dict(PARAMS, trial=2, status="ok", throughput_ratio=0.9, energy_efficiency_ratio=1.4,
                 **{"run.policy": "fixed"}),                                                      # loses on one
            dict(PARAMS, trial=3, status="failed", throughput_ratio=2.0, energy_efficiency_ratio=2.0,
                 **{"run.policy": "svip"})]
    proc, out = _run(tmp_path, pd.DataFrame(rows))
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out)
    assert df["trial"].tolist() == [0]
    # the same two runs simulated directly: AHASD over operator_sync, the ratio of their ratio
    # estimators over the same 2 windows (total tokens / total decode time)
    from ahasd_sim.dse.evaluate import plan
    from ahasd_sim.dse.study import load_study
    from ahasd_sim.simulation import run_simulation
    pt = plan(load_study(STUDY), 0, PARAMS, windows=[None])
    w = {run: run_simulation(cfg.replace(["run.generated_tokens=256", "run.windows=2"])).windows
         for (run, _), cfg in pt.configs.items()}
    a, b = w["ahasd"], w["operator_sync"]
    want = (a["generated_tokens"].sum() / a["decode_makespan_s"].sum()) / (
        b["generated_tokens"].sum() / b["decode_makespan_s"].sum())
    assert df["windows"].iloc[0] == 2
    assert math.isclose(df["throughput_ratio"].iloc[0], want, rel_tol=1e-12)
    lo, hi = df["throughput_ratio_ci95_low"].iloc[0], df["throughput_ratio_ci95_high"].iloc[0]
    # 2 windows are below the bootstrap's minimum (5): no interval, never a 2-window "interval"
    assert math.isnan(lo) and math.isnan(hi)


def test_a_table_without_the_study_columns_is_a_one_line_error(tmp_path):
    proc, out = _run(tmp_path, pd.DataFrame([{"trial": 0, "status": "ok", "throughput_ratio": 1.2}]))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "trials.csv" in proc.stderr and "pim.unit_gops_int8" in proc.stderr
    assert not out.exists()


def test_select_front_reruns_the_interval_level_front_not_the_winners(tmp_path):
    rows = [dict(PARAMS, trial=0, status="ok", pareto_ci=True, throughput_ratio=0.5, energy_efficiency_ratio=0.6),
            dict(PARAMS, trial=1, status="ok", pareto_ci=False, throughput_ratio=1.5, energy_efficiency_ratio=1.6,
                 **{"run.policy": "fixed"})]
    path = tmp_path / "trials.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    out = tmp_path / "front.csv"
    cmd = [sys.executable, str(SCRIPT), str(STUDY), str(path), "--out", str(out), "--tokens", "64",
           "--windows", "2", "--select", "front"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert pd.read_csv(out)["trial"].tolist() == [0]
    pd.DataFrame(rows).drop(columns=["pareto_ci"]).to_csv(path, index=False)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "pareto_ci" in proc.stderr
