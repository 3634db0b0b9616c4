"""``compare``: several modes on the same config and trace, normalised to a baseline."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .output import atomic_write, default_out_dir, write_run
from .simulation import load_run_trace, run_simulation

COLUMNS = ["mode", "throughput_tok_s", "energy_per_token_j", "tokens_per_j", "makespan_s", "energy_j",
           "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens", "wasted_draft_tokens"]


def run_compare(cfg, modes: list[str], baseline: str | None, out: str | None):
    """Run each mode (same trace slice, same seed); return (table, output dir)."""
    if not modes:
        from .config.errors import InputError
        raise InputError("compare: --modes needs at least one mode name")
    base_mode = baseline or modes[0]
    if base_mode not in modes:
        modes = [base_mode, *modes]
    out_dir = Path(out) if out else default_out_dir(cfg).with_name(default_out_dir(cfg).name + "_compare")
    trace_parts = load_run_trace(cfg)
    rows = []
    for mode in modes:
        mcfg = cfg.replace([f"run.mode={mode}"])
        t0 = time.perf_counter()
        res = run_simulation(mcfg, trace_parts)
        write_run(res, mcfg, out_dir / mode, time.perf_counter() - t0)
        rows.append({k: res.summary[k] for k in COLUMNS})
    table = pd.DataFrame(rows, columns=COLUMNS)
    ref = table.set_index("mode").loc[base_mode]
    table["throughput_vs_" + base_mode] = table["throughput_tok_s"] / ref["throughput_tok_s"]
    table["energy_efficiency_vs_" + base_mode] = table["tokens_per_j"] / ref["tokens_per_j"]
    atomic_write(out_dir / "compare.csv", lambda fh: table.to_csv(fh, index=False))
    return table, out_dir
