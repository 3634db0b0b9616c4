#!/usr/bin/env python3
"""MoE-offload baselines study: ``compare`` of mode moe_offload at several settings.

Each setting runs :func:`ahasd_sim.compare_moe.run_compare_moe` (baselines tuned on held-out
rounds, every row on the same reported rounds, ratio estimators with window-bootstrap CIs) and
the rows go to ``docs/moe-offload/moe_baselines.csv`` (+ ``moe_baselines_tuning.csv``), stamped
with the result fingerprint in ``docs/moe-offload/moe_baselines.md``; ``python scripts/docs.py``
renders the ``moe-baselines`` block of docs/moe_offload.md from the csv.

    python scripts/moe_study.py            # ~15 min on 2 idle cores
    python scripts/moe_study.py --part 0 & python scripts/moe_study.py --part 1; wait
    python scripts/moe_study.py --merge
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
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.compare_moe import run_compare_moe
    if args.merge:
        return merge()
    settings = SETTINGS if args.part is None else SETTINGS[args.part::args.parts]
    for label, o in settings:
        cfg = load_config(ROOT / "hw_configs" / "moe_offload.yaml", ["run.timeline=false", *o])
        with tempfile.TemporaryDirectory() as d:
            table, tune, _ = run_compare_moe(cfg, Path(d) / "cmp")
        t = table.assign(setting=label, ci95_low=[c[0] for c in table.ci95], ci95_high=[c[1] for c in table.ci95],
                         vs_best_baseline_ci95_low=[c[0] for c in table.vs_best_baseline_ci95],
                         vs_best_baseline_ci95_high=[c[1] for c in table.vs_best_baseline_ci95]
                         ).drop(columns=["ci95", "vs_best_baseline_ci95"])
        OUT.mkdir(parents=True, exist_ok=True)
        i = [s[0] for s in SETTINGS].index(label)
        atomic_write(OUT / f".part{i}.csv", lambda fh: t.to_csv(fh, index=False, float_format="%.6g"))
        atomic_write(OUT / f".part{i}_tuning.csv",
                     lambda fh: tune.assign(setting=label).to_csv(fh, index=False, float_format="%.6g"))
        print(f"{label}: best baseline {t.best_baseline.iloc[0]}", flush=True)
    return merge() if args.part is None else 0


def _docs_script():
    import importlib.util
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    docs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docs)
    return docs


def merge() -> int:
    """Join the per-setting parts (in SETTINGS order) into the committed csv files and stamp them."""
    import pandas as pd
    from ahasd_sim import fingerprint
    from ahasd_sim.config.errors import InputError
    parts = [(OUT / f".part{i}.csv", OUT / f".part{i}_tuning.csv") for i in range(len(SETTINGS))]
    missing = [str(a) for a, b in parts if not (a.is_file() and b.is_file())]
    if missing:
        raise InputError(f"moe_study: missing parts {', '.join(missing)}; run the remaining --part")
    allr = pd.concat([pd.read_csv(a) for a, _ in parts])
    allt = pd.concat([pd.read_csv(b) for _, b in parts])
    atomic_write(OUT / "moe_baselines.csv", lambda fh: allr.to_csv(fh, index=False, float_format="%.6g"))
    atomic_write(OUT / "moe_baselines_tuning.csv", lambda fh: allt.to_csv(fh, index=False, float_format="%.6g"))
    fp, _ = fingerprint.compute()
    doc = OUT / "moe_baselines.md"
    docs = _docs_script()            # the stamp names the command docs.STAMPED gives for this file
    atomic_write_text(doc, docs.stamp_line(fp, docs.STAMPED[doc.relative_to(ROOT).as_posix()])
                      + f"Made by `python scripts/moe_study.py` at revision {git_revision() or 'unknown'}: "
                      f"`moe_baselines.csv` (rows per setting), `moe_baselines_tuning.csv` (the tuning grids); "
                      f"rendered into docs/moe_offload.md by `python scripts/docs.py`.\n")
    for a, b in parts:
        a.unlink()
        b.unlink()
    return 0


def parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("--part", type=int, default=None, help="run only settings part, part + parts, ... (parallel halves)")
    p.add_argument("--parts", type=int, default=2, help="number of parts (with --part)")
    p.add_argument("--merge", action="store_true", help="only join the parts run before and stamp them")
    return p


if __name__ == "__main__":
    sys.exit(run_script(parser(), main))
