"""``compare``: several modes on the same config and trace windows, normalised to a baseline.

Every mode replays the same trace windows (``run.windows``), so ratios are paired: each
window's ratio to the baseline is one sample, and the table gives their mean with a 95%
confidence interval (Student t over windows).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .metrics.stats import mean_ci95
from .output import atomic_write, default_out_dir, write_run
from .simulation import load_run_windows, run_simulation

COLUMNS = ["mode", "windows", "throughput_tok_s", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high",
           "energy_per_token_j", "tokens_per_j", "tokens_per_j_ci95_low", "tokens_per_j_ci95_high", "makespan_s",
           "energy_j", "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens", "wasted_draft_tokens",
           "duplicate_drafter_forwards"]


def run_compare(cfg, modes: list[str], baseline: str | None, out: str | None):
    """Run each mode (same trace windows, same seed); return (table, output dir)."""
    if not modes:
        from .config.errors import InputError
        raise InputError("compare: --modes needs at least one mode name")
    base_mode = baseline or modes[0]
    if base_mode not in modes:
        modes = [base_mode, *modes]
    out_dir = Path(out) if out else default_out_dir(cfg).with_name(default_out_dir(cfg).name + "_compare")
    windows = load_run_windows(cfg)
    rows, per_window = [], {}
    for mode in modes:
        mcfg = cfg.replace([f"run.mode={mode}"])
        t0 = time.perf_counter()
        res = run_simulation(mcfg, windows)
        write_run(res, mcfg, out_dir / mode, time.perf_counter() - t0)
        rows.append({k: res.summary.get(k) for k in COLUMNS})
        per_window[mode] = res.windows.set_index("window")
    table = pd.DataFrame(rows, columns=COLUMNS)
    ref = per_window[base_mode]
    for metric, name in (("throughput_tok_s", "throughput"), ("tokens_per_j", "energy_efficiency")):
        col = f"{name}_vs_{base_mode}"
        means, lows, highs = [], [], []
        for mode in table["mode"]:
            m, ci = mean_ci95(per_window[mode][metric] / ref[metric])   # paired, per window
            means.append(m)
            lows.append(ci[0] if ci else m)
            highs.append(ci[1] if ci else m)
        table[col], table[col + "_ci95_low"], table[col + "_ci95_high"] = means, lows, highs
    atomic_write(out_dir / "compare.csv", lambda fh: table.to_csv(fh, index=False))
    return table, out_dir
