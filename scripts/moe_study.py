#!/usr/bin/env python3
"""MoE-offload study: ``compare`` of mode moe_offload at several settings.

Each setting runs :func:`ahasd_sim.compare_moe.run_compare_moe` (every family tuned on held-out
rounds, every row on the same reported rounds, every committed token generated, ratio estimators
with window-bootstrap CIs) and the rows go to ``docs/moe-offload/moe_baselines.csv``
(+ ``moe_baselines_tuning.csv``), stamped with the result fingerprint in
``docs/moe-offload/moe_baselines.md``; ``python scripts/docs.py`` renders the ``moe-baselines``
block of docs/moe_offload.md from the csv. Settings: the MoEfied Qwen2.5-Coder-1.5B on the H200
(recorded routing, the full grid); Qwen3-30B-A3B INT4 and BF16 on a 16 GB RTX 4090 Laptop and
BF16 on the H200 (synthetic routing, a small grid, fewer rounds); a sensitivity sweep of the
synthetic routing's locality and balance on the laptop BF16 setting (four families, untuned).

    python scripts/moe_study.py            # one process: ~13 min
    python scripts/moe_study.py --part 0 & python scripts/moe_study.py --part 1; wait
    python scripts/moe_study.py --merge     # the two parts in parallel: 450 s on 2 (shared) cores
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


def _small_grid() -> dict:
    """A reduced tuning grid for the Qwen3-30B-A3B settings (each run is 48 layers x 128 experts)."""
    from ahasd_sim.compare_moe import candidates
    c = candidates()
    pick = {"autoregressive": None, "eagle_tuned": ("eagle_dynamic N=8 depth=6", "eagle_dynamic N=16 depth=6",
                                                     "eagle_dynamic N=32 depth=6"),
            "specfit_tuned": ("specfit max_nodes=8", "specfit max_nodes=16"), "ecospec_tuned": ("ecospec mu=1", "ecospec mu=4"),
            "specfit_blind_tuned": ("specfit expert-blind max_nodes=8", "specfit expert-blind max_nodes=16"),
            "cpu_experts_tuned": ("no_draft experts=cpu", "specfit experts=cpu")}
    return {f: [x for x in c[f] if labels is None or x[0] in labels] for f, labels in pick.items()}


def _sens_grid() -> dict:
    """Sensitivity points: autoregressive, EAGLE, SpecFit and expert-blind SpecFit, one configuration each."""
    c = candidates_by_label()
    return {"autoregressive": [c["no_draft"]], "eagle_tuned": [c["eagle_dynamic N=16 depth=6"]],
            "specfit_tuned": [c["specfit max_nodes=16"]], "specfit_blind_tuned": [c["specfit expert-blind max_nodes=16"]]}


def candidates_by_label() -> dict:
    from ahasd_sim.compare_moe import candidates
    return {label: (label, o) for fam in candidates().values() for label, o in fam}


LAPTOP, H200Q = "moe_offload_qwen3_laptop.yaml", "moe_offload_qwen3_h200.yaml"
BF16 = ["moe.weight_bytes_per_param=2"]
# (label, config, overrides, grid, max_rounds): grid None = the full grid; ordered so that --part 0
# and --part 1 (every other setting) take about the same time
SETTINGS = [
    ("MoEfied Qwen2.5-Coder-1.5B, H200 + PCIe Gen5, cache 25% (recorded routing)", "moe_offload.yaml", [], None, 0),
    ("Qwen3-30B-A3B BF16, RTX 4090 Laptop 16 GB + PCIe Gen4, cache auto", LAPTOP, BF16, "small", 72),
    ("Qwen3-30B-A3B INT4, RTX 4090 Laptop 16 GB + PCIe Gen4, cache auto", LAPTOP, [], "small", 96),
    ("Qwen3-30B-A3B BF16, H200 + PCIe Gen5, cache auto (fits: resident)", H200Q, [], "small", 96),
    ("sensitivity: laptop BF16, locality 0 (no consecutive-token reuse)", LAPTOP,
     BF16 + ["moe.synthetic_locality=0"], "sens", 48),
    ("sensitivity: laptop BF16, locality 0.4", LAPTOP, BF16 + ["moe.synthetic_locality=0.4"], "sens", 48),
    ("sensitivity: laptop BF16, balanced experts (Zipf s 0)", LAPTOP, BF16 + ["moe.synthetic_zipf_s=0"], "sens", 48),
    ("sensitivity: laptop BF16, skewed experts (Zipf s 0.9)", LAPTOP, BF16 + ["moe.synthetic_zipf_s=0.9"], "sens", 48),
]


def main(args) -> int:
    from ahasd_sim.config.loader import load_config
    from ahasd_sim.compare_moe import run_compare_moe
    global OUT
    if args.out:
        OUT = Path(args.out)
    if args.merge:
        return merge()
    settings = SETTINGS if args.part is None else SETTINGS[args.part::args.parts]
    for label, conf, o, grid, max_rounds in settings:
        cfg = load_config(ROOT / "hw_configs" / conf, ["run.timeline=false", *o])
        g = {"small": _small_grid, "sens": _sens_grid}[grid]() if grid else None
        with tempfile.TemporaryDirectory() as d:
            table, tune, _ = run_compare_moe(cfg, Path(d) / "cmp", grid=g, max_rounds=max_rounds,
                                             references=grid is None)
        t = table.assign(setting=label, ci95_low=[c[0] for c in table.ci95], ci95_high=[c[1] for c in table.ci95],
                         vs_best_baseline_ci95_low=[c[0] for c in table.vs_best_baseline_ci95],
                         vs_best_baseline_ci95_high=[c[1] for c in table.vs_best_baseline_ci95],
                         vs_expert_blind_ci95_low=[c[0] for c in table.vs_expert_blind_ci95],
                         vs_expert_blind_ci95_high=[c[1] for c in table.vs_expert_blind_ci95]
                         ).drop(columns=["ci95", "vs_best_baseline_ci95", "vs_expert_blind_ci95"])
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
    doc = OUT / "moe_baselines.md"
    if OUT.resolve() != (ROOT / "docs" / "moe-offload").resolve():     # a trial run: no stamp
        for a, b in parts:
            a.unlink()
            b.unlink()
        return 0
    fp, _ = fingerprint.compute()
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
    p.add_argument("--out", default=None, help="write the csv/md here instead of docs/moe-offload (a trial run)")
    return p


if __name__ == "__main__":
    sys.exit(run_script(parser(), main))
