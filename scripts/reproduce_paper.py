#!/usr/bin/env python3
"""Reproduce the AHASD paper's experiments on ahasd_sim (ablation ladder, baselines).

The experiment is data: hw_configs/paper/experiments.yaml names the sweeps, the ablation ladders,
the baselines, the report's labels and the paper's reported numbers (for comparison only). This
script runs the sweep hw_configs/paper/reproduce.yaml (21 configurations x 3 model pairs x 4
drafting algorithms, 1024 tokens each) with the sweep runner, a short timeline sweep (one pair,
one algorithm, timeline.json on) for the Gantt figure and the regimes sweep
hw_configs/paper/regimes.yaml, then writes under --out (default results/paper/) what
ahasd_sim.paper (report, figures) computes from their result files:

  report.md        our normalised ratios next to the paper's reported numbers
  results.csv      one row per point (copy of sweep/results.csv)
  normalised.csv   finished points with <metric>_ratio columns (x GPU-only, same pair/algorithm)
  figures/         ablation and baseline bars, Gantt timelines, draft/acceptance distributions,
                   heat map, ladder lines (PDF + PNG)
  windows.csv, regimes.csv, regimes_windows.csv   per-window samples, the regimes sweep's results
  sweep/, timeline_sweep/, regimes/   the sweep folders (finished points are reused on a re-run)

Usage:
  python scripts/reproduce_paper.py [--out results/paper] [--workers N] [--tokens 1024]
                                    [--trace traces/FILE.npz] [--executor local|dask]
                                    [--experiments FILE] [--spec SWEEP.yaml]

Exit code 0 if every point finished, 1 if some failed (the report lists them), 2 on bad input.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402
from ahasd_sim.config.errors import InputError, OutputError  # noqa: E402
from ahasd_sim.outdir import check_writable_dir, lock_dir  # noqa: E402
from ahasd_sim.output import atomic_write, atomic_write_text, git_revision  # noqa: E402
from ahasd_sim.simulation import resolve_data_path  # noqa: E402
from ahasd_sim.sweep import run_sweep, summarize  # noqa: E402
from ahasd_sim.paper import figures, report  # noqa: E402
from ahasd_sim.paper.experiments import DEFAULT_EXPERIMENTS, load_experiments  # noqa: E402
from ahasd_sim.paper.sweeps import restrict, trace_token_budget, with_overrides  # noqa: E402
from ahasd_sim.metrics.windows import window_table  # noqa: E402


def _parser():
    p = script_parser(__doc__.split("\n")[1])
    p.add_argument("--experiments", default=str(DEFAULT_EXPERIMENTS),
                   help="experiment definition: ladders, baselines, labels, the paper's reported numbers "
                        "(default hw_configs/paper/experiments.yaml)")
    p.add_argument("--spec", default=None,
                   help="reproduction sweep file (default: the experiment file's sweeps.main, "
                        "hw_configs/paper/reproduce.yaml); it must have the variants the experiment file names")
    p.add_argument("--out", default="results/paper", help="output folder (default results/paper)")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: all cores)")
    p.add_argument("--executor", choices=("local", "dask"), default="local")
    p.add_argument("--scheduler", default=None, help="Dask scheduler address (with --executor dask)")
    p.add_argument("--tokens", type=int, default=1024,
                   help="generated tokens per point (paper: 1024); reduced automatically, and said so in the "
                        "report, if the trace cannot also hold out SpecDec++'s fitting prompts")
    p.add_argument("--trace", default=None, help="trace file (default: the spec's run.trace)")
    p.add_argument("--windows", type=int, default=5,
                   help="trace windows per point (samples of the 95%% CIs), spread over the trace; 0 = the whole "
                        "trace (default 5)")
    p.add_argument("--no-regimes", action="store_true",
                   help="skip the AHASD-vs-operator_sync regimes sweep (hw_configs/paper/regimes.yaml)")
    p.add_argument("--timeline-tokens", type=int, default=96, help="tokens of the timeline runs (Gantt figure)")
    p.add_argument("--no-figures", action="store_true", help="skip the timeline sweep and the figures")
    p.add_argument("--no-progress", action="store_true", help="no progress display")
    p.add_argument("--smoke", action="store_true",
                   help="a check that the pipeline runs, not a result: one model pair (LLaMA2) and one "
                        "drafting algorithm (AdaEDL), 32 tokens, one window, no regimes, no figures")
    return p


def _spec_trace(spec) -> str:
    for o in reversed(spec.base_set):
        k, _, v = o.partition("=")
        if k.strip() == "run.trace":
            return v.strip().strip("'\"")
    from ahasd_sim.config import load_config
    return load_config(spec.base_config).run.trace


REPRO_FILES = ("report.md", "results.csv", "normalised.csv", "windows.csv", "regimes.csv", "regimes_windows.csv",
               "sweep", "timeline_sweep", "regimes", "figures")


def _check_args(args) -> None:
    from ahasd_sim.sweep.runner import check_sweep_args
    for flag, v in (("--tokens", args.tokens), ("--timeline-tokens", args.timeline_tokens)):
        if v < 1:
            raise InputError(f"{flag} {v}: expected >= 1")
    if args.windows < 0:
        raise InputError(f"--windows {args.windows}: expected >= 0 (0 = the whole trace)")
    check_sweep_args(args.executor, args.workers, args.scheduler)
    out = Path(args.out)
    check_writable_dir(out)
    if out.is_dir():
        foreign = sorted(p.name for p in out.iterdir() if p.name not in REPRO_FILES and p.name != ".lock")
        if foreign:
            raise OutputError(f"--out {out}: folder exists and is not a reproduction folder (it contains "
                              f"'{foreign[0]}'); choose a new folder")


def body(args, argv=None) -> int:
    if args.smoke:
        args.tokens, args.windows, args.no_regimes, args.no_figures = 32, 1, True, True
    _check_args(args)
    exp = load_experiments(args.experiments, args.spec)   # bad files are reported before --out is touched
    with lock_dir(Path(args.out)):
        return _reproduce(exp, args, argv)


def main(argv=None) -> int:
    return run_script(_parser(), lambda args: body(args, argv), argv)


def _reproduce(exp, args, argv) -> int:
    t_start = time.perf_counter()
    out = Path(args.out)
    spec = exp.main_sweep
    trace = args.trace or _spec_trace(spec)
    trace_path = resolve_data_path(trace, str(spec.base_config))
    if not trace_path.is_file():
        raise InputError(f"trace '{trace}' not found")
    policies = next((ax.labels for ax in spec.shortcut_axes if ax.name == "run.policy"), [])
    if "specdecpp" in policies:
        tokens, reduced = trace_token_budget(trace_path, args.tokens)
    else:
        tokens, reduced = args.tokens, None
    overrides = [f"run.trace={trace}", f"run.generated_tokens={tokens}", "run.timeline=false",
                 f"run.windows={args.windows}"]
    main_spec = with_overrides(spec, overrides)
    if args.smoke:
        main_spec = restrict(main_spec, model_pairs=["llama2-7b/llama2-13b"], policies=["adaedl"])
    tl_spec = restrict(with_overrides(spec, [f"run.trace={trace}", f"run.generated_tokens={args.timeline_tokens}",
                                             "run.timeline=true",
                                             # a timeline comes from window 0 only
                                             "run.windows=1"], name="ahasd_paper_timeline"),
                       model_pairs=["llama2-7b/llama2-13b"], policies=["adaedl"])
    from ahasd_sim.sweep.runner import _check_folder
    _check_folder(main_spec, out / "sweep")          # both sweep folders, before any work
    if not args.no_figures:
        _check_folder(tl_spec, out / "timeline_sweep")
    reg_spec = None
    if not args.no_regimes:
        reg_spec = with_overrides(exp.regimes_sweep, overrides)
        _check_folder(reg_spec, out / "regimes")
    workers = args.workers or os.cpu_count() or 1
    t0 = time.perf_counter()
    res = run_sweep(main_spec, out / "sweep", workers=workers, executor=args.executor,
                    scheduler=args.scheduler, progress=not args.no_progress,
                    full_points=not args.no_figures)   # the distributions figure reads points' events.csv
    t_main = time.perf_counter() - t0
    print(summarize(res))

    tl_res = None
    if not args.no_figures:
        t0 = time.perf_counter()
        tl_res = run_sweep(tl_spec, out / "timeline_sweep", workers=workers, executor=args.executor,
                           scheduler=args.scheduler, progress=False)
        t_tl = time.perf_counter() - t0
    regimes = None
    t_reg = 0.0
    if reg_spec is not None:
        t0 = time.perf_counter()
        reg = run_sweep(reg_spec, out / "regimes", workers=workers, executor=args.executor,
                        scheduler=args.scheduler, progress=False)
        t_reg = time.perf_counter() - t0
        rwt = report.regime_windows(exp, reg.table, out / "regimes" / "points")
        regimes = report.regime_section_from_windows(exp, rwt)
        atomic_write(out / "regimes.csv", lambda fh: reg.table.to_csv(fh, index=False))
        atomic_write(out / "regimes_windows.csv", lambda fh: rwt.to_csv(fh, index=False))
    df = res.table
    atomic_write(out / "results.csv", lambda fh: df.to_csv(fh, index=False))
    wt = window_table(df, out / "sweep" / "points")
    atomic_write(out / "windows.csv", lambda fh: wt.to_csv(fh, index=False))
    norm = report.normalised_table(exp, df)
    atomic_write(out / "normalised.csv", lambda fh: norm.to_csv(fh, index=False))

    figs = {}
    t_fig = 0.0
    if not args.no_figures:
        t0 = time.perf_counter()
        fig_dir = out / "figures"
        if fig_dir.exists():
            shutil.rmtree(fig_dir)
        figs = figures.make_figures(exp, df, out, out / "sweep" / "points", tl_res)
        if not wt.empty:
            figs["AHASD vs async / operator_sync / GPU-only per pre-verification KV option (95% CI)"] = \
                figures.ci_figure(exp, wt, fig_dir / "ci_ratios")
        t_fig = time.perf_counter() - t0

    rate = res.points_per_s
    meta = {
        "command": "python scripts/reproduce_paper.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "sweep": f"`{os.path.relpath(spec.source)}` -> `{out / 'sweep'}` ({res.n_points} points: {res.n_ok} ok, {res.n_failed} failed"
                 + (f", {res.n_pending} pending" if res.n_pending else "") + ")",
        "trace": f"`{trace}`",
        "generated tokens per window": f"{tokens}" + (f" (reduced from {args.tokens}: {reduced})" if reduced else
                                                       " (as in the paper)"),
        "windows per point": f"{args.windows or 'whole trace'} (spread over the trace's prompts; each a sample)",
        "git revision": git_revision() or "unknown",
        "workers": f"{workers} ({args.executor})",
        "main sweep wall time": f"{t_main:.1f} s; computed {res.n_computed} points, reused {res.n_cached}"
                                + (f"; {rate:.2f} points/s" if rate else ""),
    }
    if tl_res is not None:
        meta["timeline sweep"] = (f"{tl_res.n_points} points x {args.timeline_tokens} tokens, LLaMA2-7B/13B + "
                                  f"AdaEDL, {t_tl:.1f} s")
    if regimes is not None:
        meta["regimes sweep"] = (f"`{os.path.relpath(exp.regimes_sweep.source)}` -> `{out / 'regimes'}`, "
                                 f"{t_reg:.1f} s")
    if figs:
        meta["figures"] = f"{len(figs)} figures (PDF + PNG) in `{out / 'figures'}`, {t_fig:.1f} s"
    meta["total wall time (before writing this report)"] = f"{time.perf_counter() - t_start:.1f} s"
    text = report.build_report(exp, df, meta=meta, figures=figs, out_dir=out, windows=wt, regimes=regimes)
    atomic_write_text(out / "report.md", text)
    print(f"report: {out / 'report.md'}  (total {time.perf_counter() - t_start:.1f} s)")
    if reduced:
        print(f"note: {reduced}", file=sys.stderr)
    return 0 if res.n_failed == 0 and res.n_pending == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
