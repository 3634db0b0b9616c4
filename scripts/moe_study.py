#!/usr/bin/env python3
"""MoE-offload baselines study (issue 27): ``compare`` of mode moe_offload at several settings.

Each setting runs :func:`ahasd_sim.moe.compare.run_compare_moe` (baselines tuned on held-out
rounds, every row on the same reported rounds, ratio estimators with window-bootstrap CIs) and
the rows go to ``docs/moe-offload/moe_baselines.csv`` (+ ``moe_baselines_tuning.csv``), stamped
with the result fingerprint in ``docs/moe-offload/moe_baselines.md``; ``python scripts/docs.py``
renders the ``moe-baselines`` block of docs/moe_offload.md from the csv.

    python scripts/moe_study.py            # ~10 min on 2 cores
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.output import atomic_write, atomic_write_text, git_revision  # noqa: E402

OUT = ROOT / "docs" / "moe-offload"
SETTINGS = [
    ("cache 25% per-layer LRU, 55.3 GB/s (default)", []),
    ("cache 10%", ["moe.cache_capacity=0.1"]),
    ("cache 100%", ["moe.cache_capacity=1.0"]),
    ("H2D 6 GB/s", ["h2d.effective_gb_s=6"]),
    ("activation-aware cache", ["moe.cache_policy=activation"]),
    ("oracle routing (recall 1)", ["moe.predictor=recall", "moe.predictor_recall=1.0"]),
]


def main(args) -> int:
    import pandas as pd
    from ahasd_sim import fingerprint
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.moe.compare import run_compare_moe
    rows, tunes = [], []
    settings = SETTINGS if not args.only else [s for s in SETTINGS if s[0] in args.only.split(";")]
    for label, o in settings:
        cfg = load_config(ROOT / "hw_configs" / "moe_offload.yaml", ["run.timeline=false", *o])
        with tempfile.TemporaryDirectory() as d:
            table, tune, _ = run_compare_moe(cfg, Path(d) / "cmp")
        t = table.assign(setting=label, ci95_low=[c[0] for c in table.ci95], ci95_high=[c[1] for c in table.ci95],
                         vs_best_baseline_ci95_low=[c[0] for c in table.vs_best_baseline_ci95],
                         vs_best_baseline_ci95_high=[c[1] for c in table.vs_best_baseline_ci95]
                         ).drop(columns=["ci95", "vs_best_baseline_ci95"])
        rows.append(t)
        tunes.append(tune.assign(setting=label))
        print(f"{label}: best baseline {t.best_baseline.iloc[0]}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    allr, allt = pd.concat(rows), pd.concat(tunes)
    atomic_write(OUT / "moe_baselines.csv", lambda fh: allr.to_csv(fh, index=False, float_format="%.6g"))
    atomic_write(OUT / "moe_baselines_tuning.csv", lambda fh: allt.to_csv(fh, index=False, float_format="%.6g"))
    fp, _ = fingerprint.compute()
    atomic_write_text(OUT / "moe_baselines.md", f"<!-- fingerprint: {fp} (python scripts/moe_study.py) -->\n"
                      f"Made by `python scripts/moe_study.py` at revision {git_revision() or 'unknown'}: "
                      f"`moe_baselines.csv` (rows per setting), `moe_baselines_tuning.csv` (the tuning grids); "
                      f"rendered into docs/moe_offload.md by `python scripts/docs.py`.\n")
    return 0


def parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("--only", default=None, help="semicolon-separated setting labels")
    return p


if __name__ == "__main__":
    sys.exit(run_script(parser(), main))
