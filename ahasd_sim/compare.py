"""``compare``: several modes (or drafting policies) on the same config and trace, normalised to a baseline."""
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


#: extra columns reported when the runs have them (mode moe_offload)
MOE_COLUMNS = ["accepted_length_per_round", "expert_h2d_bytes", "expert_cache_hit_rate",
               "experts_touched_per_verify", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high"]


def run_compare_policies(cfg, policies: list[str], baseline: str | None, out: str | None):
    """Run each drafting policy with the config's mode (same trace, cache, seed); return (table, dir)."""
    if not policies:
        from .config.errors import InputError
        raise InputError("compare: --policies needs at least one policy name")
    base = baseline or policies[0]
    if base not in policies:
        policies = [base, *policies]
    out_dir = Path(out) if out else default_out_dir(cfg).with_name(default_out_dir(cfg).name + "_compare")
    trace_parts = load_run_trace(cfg)
    rows = []
    for pol in policies:
        pcfg = cfg.replace([f"run.policy={pol}"])
        t0 = time.perf_counter()
        res = run_simulation(pcfg, trace_parts)
        write_run(res, pcfg, out_dir / pol, time.perf_counter() - t0)
        row = {"policy": pol, **{k: res.summary[k] for k in COLUMNS if k != "mode"}}
        row.update({k: res.summary[k] for k in MOE_COLUMNS if k in res.summary})
        rows.append(row)
    table = pd.DataFrame(rows)
    ref = table.set_index("policy").loc[base]
    table["throughput_vs_" + base] = table["throughput_tok_s"] / ref["throughput_tok_s"]
    table["energy_efficiency_vs_" + base] = table["tokens_per_j"] / ref["tokens_per_j"]
    atomic_write(out_dir / "compare.csv", lambda fh: table.to_csv(fh, index=False))
    return table, out_dir
