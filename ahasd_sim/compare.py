"""``compare``: several modes on the same config and trace windows, normalised to a baseline.

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
from .simulation import load_run_windows, run_simulation

COLUMNS = ["mode", "windows", "throughput_tok_s", "throughput_tok_s_ci95_low", "throughput_tok_s_ci95_high",
           "energy_per_token_j", "tokens_per_j", "tokens_per_j_ci95_low", "tokens_per_j_ci95_high", "makespan_s",
           "energy_j", "acceptance_rate", "mean_accepted_per_verify", "drafted_tokens", "wasted_draft_tokens",
           "duplicate_drafter_forwards"]


def parse_modes(text: str | list[str], baseline: str | None) -> tuple[list[str], str]:
    """(modes in order, baseline) from ``--modes``/``--baseline``; unknown or repeated modes are errors."""
    from .config.errors import did_you_mean
    from .modes import MODES
    modes = [m.strip() for m in text.split(",")] if isinstance(text, str) else list(text)
    if not modes or any(not m for m in modes):
        raise InputError(f"--modes: expected comma-separated mode names, got {text!r}; valid modes: "
                         f"{', '.join(sorted(MODES))}")
    for m in modes + ([baseline] if baseline else []):
        if m not in MODES:
            raise InputError(f"--modes: unknown mode '{m}'{did_you_mean(m, MODES)}; valid modes: "
                             f"{', '.join(sorted(MODES))}")
    dup = sorted({m for m in modes if modes.count(m) > 1})
    if dup:
        raise InputError(f"--modes: mode '{dup[0]}' is listed more than once")
    base = baseline or modes[0]
    if base not in modes:
        modes = [base, *modes]
    return modes, base


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
