"""``compare``: several modes (or drafting policies) on the same config and trace windows, normalised to a baseline.

Every mode replays the same trace windows (``run.windows``), so ratios are paired: each
window's ratio to the baseline is one sample, and the table gives their mean with a 95%
confidence interval (Student t over windows).
"""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from .config.errors import InputError
from .metrics.stats import mean_ci95
from .outdir import OutputFolder
from .output import atomic_write, default_out_dir, write_run
from .simulation import load_run_trace, load_run_windows, run_simulation

COLUMNS = ["mode", "windows", "throughput_tok_s", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high",
           "energy_per_token_j", "tokens_per_j", "tokens_per_j_ci95_low", "tokens_per_j_ci95_high", "makespan_s",
           "energy_j", "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens", "wasted_draft_tokens",
           "duplicate_drafter_forwards"]


def _parse_names(text: str | list[str], baseline: str | None, registry, flag: str,
                 noun: str, plural: str) -> tuple[list[str], str]:
    """(names in order, baseline) from a comma-separated option; unknown or repeated names are errors."""
    from .config.errors import did_you_mean
    valid = ", ".join(sorted(registry))
    names = [m.strip() for m in text.split(",")] if isinstance(text, str) else list(text)
    if not names or any(not m for m in names):
        raise InputError(f"{flag}: expected comma-separated {noun} names, got {text!r}; valid {plural}: {valid}")
    for m in names + ([baseline] if baseline else []):
        if m not in registry:
            raise InputError(f"{flag}: unknown {noun} '{m}'{did_you_mean(m, registry)}; valid {plural}: {valid}")
    dup = sorted({m for m in names if names.count(m) > 1})
    if dup:
        raise InputError(f"{flag}: {noun} '{dup[0]}' is listed more than once")
    base = baseline or names[0]
    if base not in names:
        names = [base, *names]
    return names, base


def parse_modes(text: str | list[str], baseline: str | None) -> tuple[list[str], str]:
    """(modes in order, baseline) from ``--modes``/``--baseline``."""
    from .modes import MODES
    return _parse_names(text, baseline, MODES, "--modes", "mode", "modes")


def default_compare_dir(cfg) -> Path:
    d = default_out_dir(cfg)
    return d.with_name(d.name + "_compare")


def run_compare(cfg, modes: list[str] | str, baseline: str | None, out: str | Path | None):
    """Run each mode (same trace windows, same seed); return (table, output dir). The output
    folder is checked and locked before the first simulation and filled in one swap."""
    modes, base_mode = parse_modes(modes, baseline)
    out_dir = Path(out) if out else default_compare_dir(cfg)
    windows = load_run_windows(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        rows, per_window = [], {}
        for mode in modes:
            mcfg = cfg.replace([f"run.mode={mode}"])
            t0 = time.perf_counter()
            res = run_simulation(mcfg, windows)
            write_run(res, mcfg, folder.stage / mode, time.perf_counter() - t0)
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
        atomic_write(folder.stage / "compare.csv", lambda fh: table.to_csv(fh, index=False))
        folder.commit()
    return table, out_dir


#: extra columns reported when the runs have them (mode moe_offload)
MOE_COLUMNS = ["accepted_length_per_round", "expert_h2d_bytes", "expert_cache_hit_rate",
               "experts_touched_per_verify", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high"]


def parse_policies(text: str | list[str], baseline: str | None) -> tuple[list[str], str]:
    """(policies in order, baseline) from ``--policies``/``--baseline``."""
    from .policies import POLICIES
    return _parse_names(text, baseline, POLICIES, "--policies", "policy", "policies")


def run_compare_policies(cfg, policies: list[str] | str, baseline: str | None, out: str | Path | None):
    """Run each drafting policy with the config's mode (same trace slice, cache, seed); return
    (table, output dir). Extra MoE columns (accepted length per round, H2D bytes, hit rate, CIs)
    appear when the runs report them."""
    policies, base = parse_policies(policies, baseline)
    out_dir = Path(out) if out else default_compare_dir(cfg)
    trace_parts = load_run_trace(cfg)
    with OutputFolder(out_dir, "compare") as folder:
        rows = []
        for pol in policies:
            pcfg = cfg.replace([f"run.policy={pol}"])
            t0 = time.perf_counter()
            res = run_simulation(pcfg, trace_parts)
            write_run(res, pcfg, folder.stage / pol, time.perf_counter() - t0)
            row = {"policy": pol, **{k: res.summary[k] for k in COLUMNS if k != "mode"}}
            row.update({k: res.summary[k] for k in MOE_COLUMNS if k in res.summary})
            rows.append(row)
        table = pd.DataFrame(rows)
        ref = table.set_index("policy").loc[base]
        table["throughput_vs_" + base] = table["throughput_tok_s"] / ref["throughput_tok_s"]
        table["energy_efficiency_vs_" + base] = table["tokens_per_j"] / ref["tokens_per_j"]
        atomic_write(folder.stage / "compare.csv", lambda fh: table.to_csv(fh, index=False))
        folder.commit()
    return table, out_dir
