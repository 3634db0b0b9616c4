"""Issue 12 (LPDDR5X): a data-rate sweep through the sweep runner changes bandwidth and speed."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ahasd_sim.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def test_lpddr5x_data_rate_sweep_changes_bandwidth_and_throughput(tmp_path):
    spec = tmp_path / "sweep.yaml"
    spec.write_text(f"""
name: lpddr5x_rates
base:
  config: {ROOT / "hw_configs" / "platform_mobile_npu_lpddr5_pim.yaml"}
  set:
    run.trace: {ROOT / "traces" / "qwc-0.5b-1.5b_greedy_smoke.npz"}
    run.generated_tokens: 24
    run.timeline: false
    run.draft_model: llama2-7b
    run.target_model: llama2-13b
    memory.standard: LPDDR5X
modes: [operator_sync]
policies: [fixed]
axes:
  memory.data_rate_mts: [6400, 8533, 9600, 10667]
""")
    res = run_sweep(spec, tmp_path / "out", workers=1, progress=False)
    assert res.n_ok == 4
    df = pd.read_csv(tmp_path / "out" / "results.csv").sort_values("memory.data_rate_mts")
    bw = df["platform.memory_effective_bandwidth_gb_s"].to_numpy()
    # nCK timings scale with the clock: the bandwidth grows in proportion to the data rate
    assert bw == pytest.approx(bw[0] * df["memory.data_rate_mts"].to_numpy() / 6400, rel=1e-9)
    assert df["throughput_tok_s"].iloc[-1] > df["throughput_tok_s"].iloc[0]
