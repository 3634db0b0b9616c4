#!/usr/bin/env python3
"""Re-evaluate a finished study's winning designs over the whole trace, with paired 95% CIs.

An ``optimize`` study scores each design on a few short trace windows (cheap, so the search
can afford hundreds of trials); its interval over two windows is wide and the best of 200
noisy scores is biased upwards (winner's curse). This script takes the distinct designs that
beat the reference run on every objective in ``trials.csv``, re-runs both runs of the study on
every window of the trace (``run.windows`` default: the whole trace; ``--tokens`` per window),
pairs the two runs window by window and reports the ratio of their ratio estimators (total /
total over the same windows) with a paired bootstrap 95% interval over whole windows
(``ahasd_sim.metrics.stats.paired_metric_ci``), as ``compare`` does.

Usage:
  python scripts/confirm_study_winners.py hw_configs/studies/where_ahasd_wins.yaml \\
      studies/where_ahasd_wins/trials.csv --out docs/studies/where_ahasd_wins_confirmed.csv

Writes the CSV (atomically) and prints a Markdown table. Exit 0 on success, 2 on bad input.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.config.errors import InputError  # noqa: E402

def _parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("study", help="study file (YAML) the trials came from")
    p.add_argument("trials", help="the study's trials.csv")
    p.add_argument("--out", required=True, help="CSV to write (one row per design)")
    p.add_argument("--tokens", type=int, default=1024, help="generated tokens per window (default 1024)")
    p.add_argument("--windows", type=int, default=None,
                   help="trace windows per run (default: the config's run.windows, i.e. the whole trace)")
    p.add_argument("--max-designs", type=int, default=12, help="at most this many designs, best first (default 12)")
    p.add_argument("--select", choices=("winners", "front"), default="winners",
                   help="winners (default): the designs better than the reference on every objective; front: "
                        "the study's interval-level Pareto front (pareto_ci in trials.csv), re-evaluated on the "
                        "whole trace before it is reported")
    return p


def main(args) -> int:
    import pandas as pd

    from ahasd_sim.dse.evaluate import plan
    from ahasd_sim.dse.study import load_study
    from ahasd_sim.metrics.stats import RATIOS, fmt_ci, paired_metric_ci, too_few
    from ahasd_sim.output import atomic_write_text
    from ahasd_sim.simulation import run_simulation

    study = load_study(args.study)
    try:
        trials = pd.read_csv(args.trials)
    except (OSError, ValueError) as exc:
        raise InputError(f"{args.trials}: cannot read the trials table ({exc})") from exc
    names = [p.name for p in study.space]
    obj = study.objectives
    missing = [c for c in [*names, "status", *(o.name for o in obj)] if c not in trials.columns]
    if missing:
        raise InputError(f"{args.trials}: columns {missing} missing; expected the trials.csv of {args.study}")
    ok = trials[trials["status"] == "ok"]
    if args.select == "front":
        if "pareto_ci" not in trials.columns:
            raise InputError(f"{args.trials}: no pareto_ci column (a trials.csv of an older optimize); rerun optimize")
        ok = ok[ok["pareto_ci"].astype(bool)]
    else:
        for o in obj:
            better = ok[o.name] > 1 if o.direction == "maximize" else ok[o.name] < 1
            ok = ok[better]
    ok = ok.drop_duplicates(subset=names).sort_values(obj[0].name, ascending=obj[0].direction != "maximize")
    ok = ok.head(args.max_designs)
    rows = []
    for _, tr in ok.iterrows():
        params = {n: tr[n] for n in names}
        pt = plan(study, int(tr["trial"]), params, windows=[None])
        if pt.error:
            raise InputError(f"trial {tr['trial']}: {pt.error}")
        runs = {}
        for (run, _w), cfg in pt.configs.items():
            extra = [] if args.windows is None else [f"run.windows={args.windows}"]
            cfg = cfg.replace([f"run.generated_tokens={args.tokens}", *extra])
            runs[run] = run_simulation(cfg, workers=2).windows.set_index("window")
        row = {"trial": int(tr["trial"]), **params}
        for o in obj:
            if o.metric not in RATIOS:
                raise InputError(f"{args.study}: objective {o.name}: {o.metric} is not a ratio of totals "
                                 f"({', '.join(RATIOS)})")
            a, b = runs[o.run].align(runs[o.over], join="inner", axis=0)
            common = a.index
            m, ci = paired_metric_ci(a, b, o.metric)
            row.update({f"{o.name}_study": tr[o.name], o.name: m,
                        f"{o.name}_ci95_low": ci[0] if ci else float("nan"),
                        f"{o.name}_ci95_high": ci[1] if ci else float("nan"), "windows": len(common)})
        row["better_on_all"] = all(
            (row[f"{o.name}_ci95_low"] > 1) if o.direction == "maximize" else (row[f"{o.name}_ci95_high"] < 1)
            for o in obj)
        rows.append(row)
        print(f"trial {row['trial']}: " + ", ".join(
            f"{o.name} {fmt_ci(row[o.name], [row[f'{o.name}_ci95_low'], row[f'{o.name}_ci95_high']], why=too_few(row['windows']))} "
            f"(study {row[f'{o.name}_study']:.2f})" for o in obj), flush=True)
    df = pd.DataFrame(rows)
    atomic_write_text(Path(args.out), df.to_csv(index=False))
    print(f"\n{len(df)} designs, {int(df['better_on_all'].sum()) if len(df) else 0} better on every objective "
          f"with the whole 95% CI; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_script(_parser(), main))
