"""Command line: ``python -m ahasd_sim [run] --config FILE [--set KEY=VALUE]... [--out DIR] [--seed N]``.

Subcommands: ``run`` (the default), ``compare``, ``sweep``, ``prune``, ``optimize``, ``sensitivity``, ``area``, ``traces stats``,
``validate``, ``measure gpu|moe``, ``list``, ``config-reference``, ``results-schema``,
``prune``; the tools ``reproduce``, ``hyco-study``, ``moe-study``, ``bench``, ``bench-sweep`` and ``plot KIND``
(:mod:`ahasd_sim.tools`: the shipped scripts). Bad input exits with code 2 and one line on
stderr (``--debug`` shows the traceback); see :mod:`ahasd_sim.cli_common`.

Adding a subcommand: write ``_add_NAME(sub)`` (its parser) and ``cmd_NAME(args)`` (its body,
returning an exit code), and list them in ``SUBCOMMANDS``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from .cli_common import ArgumentParser, add_version, out_path, positive_float, positive_int, run_guarded, warn
from .config.errors import InputError

EPILOG = ("Exit codes: 0 ok, 1 some sweep points or study trials failed, 2 bad input or unusable --out, "
          "130 interrupted, 143 terminated. Docs: README.md, docs/config-reference.md, docs/sweeps.md, docs/dse.md.")


# ---------------------------------------------------------------- shared options
def _config_options(p: argparse.ArgumentParser, config_required: bool = True) -> None:
    p.add_argument("--config", required=config_required, metavar="FILE",
                   help="YAML config file (may `extends:` others); a relative name such as "
                        "hw_configs/ahasd_mobile.yaml also finds the shipped copy")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set npu.freq_ghz=1.2 (repeatable; values are YAML: "
                        "1e9, true, [1, 2])")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="seed of the run's RNG (same as --set run.seed=N; giving both with different values "
                        "is an error)")
    _debug(p)


def _debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")


def _dry(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--dry-run", action="store_true",
                   help=f"resolve and validate the {what} (config, hardware, trace slice, cost model, policy, "
                        "output folder) without simulating; prints what would run, no results")


def _sub(sub, name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help, description=description or help, epilog=EPILOG)
    add_version(p)   # `run --version` answers the version, not "--config is required"
    return p


# ---------------------------------------------------------------- parsers
def _add_run(sub) -> None:
    r = _sub(sub, "run", "run one simulation (the default command)",
             "Run one simulation and write a run folder: summary.json, config.resolved.yaml, events.csv, "
             "energy_breakdown.csv, timeline.json, meta.json.")
    _config_options(r)
    r.add_argument("--out", default=None, type=out_path, metavar="DIR",
                   help="run folder (default: a new folder under results/); an existing run folder is replaced "
                        "as a whole when the run finishes, any other existing folder is refused")
    r.add_argument("--quiet", action="store_true", help="do not print the summary table")
    r.add_argument("--jobs", type=positive_int, default=None, metavar="N",
                   help="processes running trace windows in parallel (default: the CPU count)")
    _dry(r, "run")


def _add_compare(sub) -> None:
    c = _sub(sub, "compare", "run several modes on the same trace; print a normalised table",
             "Run several execution modes on the same config, trace slice and seed; write one run folder "
             "per mode plus compare.csv, and print throughput and energy efficiency relative to a baseline.")
    _config_options(c)
    c.add_argument("--modes", default=None, metavar="M1,M2,...",
                   help="comma-separated mode names, each once (see `list`); autoregressive runs on every "
                        "device of the platform, autoregressive@npu/pim/gpu on one (default: every registered "
                        "mobile-SoC mode the platform supports: autoregressive, gpu_only, operator_sync, "
                        "task_sync, async, ahasd, ...)")
    c.add_argument("--policies", default=None, metavar="P1,P2,...",
                   help="instead of --modes: drafting policies run with the config's mode, e.g. "
                        "eagle_fixed,eagle_dynamic,specfit,ecospec (moe_offload: same cache for all)")
    c.add_argument("--duration-min", type=positive_float, default=None, metavar="MIN",
                   help="run each mode for MIN minutes on the config's phone (section thermal: RC network and "
                        "skin-temperature governor) and rank them by sustained throughput and energy per token; "
                        "repetitions decode consecutive trace windows (run.windows), the thermal state carried "
                        "across them, one repetition starting at each window")
    c.add_argument("--baseline", default=None, metavar="MODE",
                   help="mode (or policy) to normalise against as well; every mode table is also normalised "
                        "to the best decoder of its rows (default 'best'; policies: default the first)")
    c.add_argument("--out", default=None, type=out_path, metavar="DIR",
                   help="output folder (default: a new folder under results/); replaced as a whole")
    _dry(c, "comparison")


def _add_sweep(sub) -> None:
    s = _sub(sub, "sweep", "run a design-space sweep from a sweep YAML (resumable)",
             "Run every point of a sweep file in parallel; finished points are kept and reused, so the same "
             "command resumes an interrupted sweep. See docs/sweeps.md.")
    s.add_argument("--config", required=True, metavar="SWEEP.yaml", help="sweep file (e.g. hw_configs/sweeps/smoke.yaml)")
    s.add_argument("--workers", type=positive_int, default=None, metavar="N",
                   help="parallel worker processes (default: all cores; 1 runs in-process)")
    s.add_argument("--executor", choices=("local", "dask"), default="local",
                   help="local process pool (default) or Dask distributed (pip install 'ahasd_sim[dask]')")
    s.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address, e.g. tcp://host:8786 (only with --executor dask)")
    s.add_argument("--out", default=None, type=out_path, metavar="DIR",
                   help="sweep folder (default: sweeps/<name>); a folder of another sweep is refused")
    s.add_argument("--no-progress", action="store_true", help="no progress display")
    s.add_argument("--whole-points", action="store_true",
                   help="one point per worker task (default: a point's tuning runs and trace "
                        "windows are spread over the workers; the same files)")
    s.add_argument("--recompute", action="store_true",
                   help="compute every point again, finished ones too (default: a finished point whose "
                        "resolved config, trace, seed, model shapes and simulator code are unchanged is reused)")
    s.add_argument("--full-points", action="store_true",
                   help="also write each point's events.csv (default: the files a sweep reads: summary.json, "
                        "windows.csv, energy_breakdown.csv, config.resolved.yaml, meta.json)")
    _dry(s, "sweep: every point")
    _debug(s)


def _add_prune(sub) -> None:
    p = _sub(sub, "prune", "list (or --delete) sweep point folders that no current point references",
             "A sweep keeps one folder per resolved point; an edit of the spec, a config, a trace or the "
             "simulator code a run executes leaves the old folders behind. List those no point of the "
             "sweep references now (dry run), or delete them with --delete.")
    p.add_argument("folders", nargs="+", metavar="SWEEP_DIR", help="sweep output folder(s)")
    p.add_argument("--config", default=None, metavar="SWEEP.yaml",
                   help="the sweep file (default: the one the folder was last run from, per sweep.json)")
    p.add_argument("--delete", action="store_true", help="delete them (default: only list them)")
    _debug(p)


def _add_optimize(sub) -> None:
    from .dse.cli import optimize_arguments
    optimize_arguments(_sub(sub, "optimize", "multi-objective design-space search (optuna) -> Pareto front",
                            "Search a study's design space with optuna (NSGA-II by default) on the sweep executor; "
                            "trials are stored in the study folder and a rerun resumes or extends the study. "
                            "Writes trials.csv, pareto.csv, figures and report.md. See docs/dse.md."))


def _add_sensitivity(sub) -> None:
    from .dse.cli import sensitivity_arguments
    sensitivity_arguments(_sub(sub, "sensitivity", "one-at-a-time tornado and Sobol indices of a study",
                               "Rank a study's knobs by their effect on each objective: one-at-a-time around a "
                               "base point (tornado chart, 95% CIs over trace windows) and Sobol indices "
                               "(SALib). See docs/dse.md."))


def _add_area(sub) -> None:
    a = _sub(sub, "area", "print the area table of AHASD's added hardware",
             "Print the area of EDC, TVC, the queues and the AAUs, and their share of the LPDDR5-PIM die; then "
             "the PIM unit logic per die (MAC lanes, global buffer, result registers) and the DRAM capacity it "
             "displaces, for the configured unit and every unit preset.")
    _config_options(a)


def _add_traces(sub) -> None:
    t = _sub(sub, "traces", "trace utilities (traces stats FILE, traces record --kind chain|tree, "
                            "traces extend-rollouts FILE)")
    tsub = t.add_subparsers(dest="traces_command", metavar="stats|record|extend-rollouts")
    ts = tsub.add_parser("stats", help="acceptance statistics of a trace file (chain or draft-tree trace)",
                         description="Print acceptance-length, entropy and per-category tables of a chain trace; "
                                     "for a draft-tree trace: acceptance by tree size, routing statistics.",
                         epilog=EPILOG)
    ts.add_argument("file", metavar="TRACE.npz", help="trace file (a shipped one by its relative name works too)")
    ts.add_argument("--out", default=None, type=out_path, metavar="DIR",
                    help="also write the tables as CSV (and a plot) here")
    ts.add_argument("--chain", default=None, metavar="CHAIN.npz",
                    help="tree traces: compare with this chain trace of the same model pair and prompts "
                         "(acceptance at equal node budgets, top-1 chain cross-check)")
    _debug(ts)
    tr = tsub.add_parser("record", add_help=False,
                         help="record a trace from a real drafter/target pair (needs the gguf extra); "
                              "`traces record --kind chain|tree --help` lists the recorder's options")
    tr.add_argument("--kind", choices=("chain", "tree"), default=None)
    tsub.add_parser("extend-rollouts", add_help=False,
                    help="extend a chain trace's off-path rollouts to a longer L_max with the drafter alone "
                         "(needs the gguf extra); `traces extend-rollouts --help` lists its options")


def _add_validate(sub) -> None:
    v = _sub(sub, "validate", "compare the GPU model against measured H200 latencies",
             "Simulate every measured GPU step and H2D copy with the GPU/link models and print the errors.")
    v.add_argument("--config", default=None, metavar="FILE",
                   help="platform config (default hw_configs/platform_server_h200_pcie5.yaml)")
    v.add_argument("--measured", default=None, metavar="CSV", help="measured CSV (default validation/h200_measured.csv)")
    v.add_argument("--out", default=None, type=out_path, metavar="DIR", help="write the error table and plot here")
    v.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value (repeatable)")
    v.add_argument("--peers", action="store_true",
                   help="NPU vs SCALE-Sim, LPDDR5 vs Ramulator 2, GPU/H2D fitted on run 1 and checked on run 2, "
                   "from the committed outputs in validation/peers/")
    v.add_argument("--mobile", action="store_true",
                   help="the phone NPU model against measured phones (validation/mobile/measured.csv or "
                   "--measured CSV; SoC presets in hw_configs/soc/)")
    v.add_argument("--moe", action="store_true",
                   help="MoE offload: expert-copy bursts and fused / per-expert-loop MoE layers vs the H200 "
                   "measurements (validation/h200_moe_*.csv), fitted in sample, errors out of sample")
    _debug(v)


def _add_measure(sub) -> None:
    from .measure.cli import add_measure_targets
    m = _sub(sub, "measure", "time real GPU steps for validate (measure gpu|moe; needs PyTorch)",
             "Measure the GPU latencies that `validate` compares the simulator with: `measure gpu` (dense "
             "decode/verify steps, copies, ceilings) or `measure moe` (expert copies, MoE layers). Needs "
             "PyTorch: pip install 'ahasd_sim[measure]'.")
    add_measure_targets(m, EPILOG)


def _add_list(sub) -> None:
    _sub(sub, "list", "list modes, policies, models and the shipped configs, sweeps, traces and data")


def _add_config_reference(sub) -> None:
    cr = _sub(sub, "config-reference", "print every config key with type, default, unit, range and source")
    cr.add_argument("section", nargs="?", default=None, metavar="SECTION",
                    help="only this section (e.g. pim, run, policy) or key prefix (pim.aau)")
    cr.add_argument("--markdown", action="store_true", help="as a Markdown table (docs/config-reference.md)")


def _add_results_schema(sub) -> None:
    rs = _sub(sub, "results-schema", "print every summary.json key / results.csv column with type, unit and meaning")
    g = rs.add_mutually_exclusive_group()
    g.add_argument("--markdown", action="store_true", help="as Markdown (docs/results-schema.md)")
    g.add_argument("--json", action="store_true", help="as JSON Schema (docs/results-schema.json)")


# ---------------------------------------------------------------- bodies
def _load(args):
    from .config.loader import load_config
    cfg = load_config(args.config, args.overrides, args.seed)
    from .checks import config_warnings
    for w in config_warnings(cfg):
        warn(w)
    return cfg


def _ci(s: dict, key: str) -> str:
    from .metrics.stats import too_few
    ci = s.get(f"{key}_ci95")
    n = s.get("windows", 1)
    return (f"  95% CI [{ci[0]:.2f}, {ci[1]:.2f}] (bootstrap over {n} windows)" if ci
            else f"  (no CI: {n} window{'s' if n != 1 else ''}, {too_few(n) or 'no totals'})")


def _fmt_summary(s: dict) -> str:
    from .checks import summary_trace_line
    lines = [
        f"mode {s['mode']}  policy {s['policy']}  draft {s['draft_model']}  target {s['target_model']}",
        summary_trace_line(s),
        f"  generated tokens        {s['generated_tokens']}",
        f"  makespan                {s['makespan_s']:.4f} s",
        f"  throughput              {s['throughput_tok_s']:.2f} tok/s{_ci(s, 'throughput_tok_s')}",
        f"  energy                  {s['energy_j']:.4f} J  ({s['energy_per_token_j'] * 1e3:.3f} mJ/token, "
        f"{s['tokens_per_j']:.2f} tok/J{_ci(s, 'tokens_per_j')})",
        f"  acceptance rate         {s['acceptance_rate']:.3f}  (mean accepted/verify "
        f"{s['mean_accepted_per_verify']:.2f})",
        f"  drafted / wasted        {s['drafted_tokens']} / {s['wasted_draft_tokens']}",
    ]
    util = "  ".join(f"{d} {u:.0%}" for d, u in sorted(s["device_utilization"].items()))
    lines.append(f"  utilisation             {util}")
    return "\n".join(lines)


def _terminal_progress(total: int, desc: str):
    """A progress bar on stderr when it is a terminal (a log or a pipe gets none), else None."""
    if not getattr(sys.stderr, "isatty", lambda: False)():
        return None
    from .sweep.progress import Progress
    return Progress(total, desc=desc, min_interval_s=0.5)


def cmd_run(args) -> int:
    from .outdir import OutputFolder
    from .output import default_out_dir, write_run
    from .simulation import run_simulation
    cfg = _load(args)
    import os
    jobs = args.jobs if getattr(args, "jobs", None) else (os.cpu_count() or 1)
    out = Path(args.out) if args.out else default_out_dir(cfg)
    if args.dry_run:
        from .checks import dry_run
        OutputFolder(out, "run").check()
        print("\n".join(dry_run(cfg)))
        print(f"  output folder {out}: usable")
        return 0
    with OutputFolder(out, "run") as folder:   # checked and locked before simulating
        t0 = time.perf_counter()
        prog = _terminal_progress(cfg.run.windows or 1, "run: trace windows")
        try:
            result = run_simulation(cfg, workers=jobs, progress=prog)
        finally:
            if prog is not None:
                prog.close()
        wall = time.perf_counter() - t0
        write_run(result, cfg, folder.stage, wall)
        folder.commit()
    if not args.quiet:
        print(_fmt_summary(result.summary))
        print(f"  results                 {out}")
    return 0


def cmd_compare(args) -> int:
    from .compare import default_compare_dir, parse_modes, run_compare
    cfg = _load(args)
    if args.duration_min is not None and cfg.run.mode == "moe_offload":
        raise InputError("compare: --duration-min runs a phone's decoders (section thermal); run.mode moe_offload "
                         "is a GPU server")
    if cfg.run.mode == "moe_offload" and args.policies is None and args.modes is None:
        from .compare_moe import format_compare_moe, run_compare_moe
        from .outdir import OutputFolder
        out = Path(args.out) if args.out else default_compare_dir(cfg)
        OutputFolder(out, "compare").check()
        if args.dry_run:   # it ran the whole comparison
            from .checks import dry_run
            from .compare_moe import planned_configs
            plan = planned_configs(cfg)
            for i, (label, pcfg) in enumerate(plan):
                lines = dry_run(pcfg)
                print("\n".join(lines[:-1]) if i == 0 else f"  {label}: OK")
            print(f"  {len(plan)} runs checked\n  output folder {out}: usable\n"
                  "dry run: nothing was simulated; no results are reported")
            return 0
        def progress(done, total, label):   # the tuning grid runs for a minute or more
            print(f"\rmoe compare: {done + 1}/{total} {label[:60]:<60}", end="" if sys.stderr.isatty() else "\n",
                  file=sys.stderr, flush=True)
        table, _tune, out = run_compare_moe(cfg, args.out, progress=progress)
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(format_compare_moe(table))
        print(f"results: {out}")
        return 0
    if args.policies is not None:
        if args.modes is not None:
            raise InputError("compare: give --modes or --policies, not both")
        if args.duration_min is not None:
            raise InputError("compare: --duration-min runs modes (--modes), not --policies")
        from .compare import default_compare_dir, parse_policies, run_compare_policies
        pols, base = parse_policies(args.policies, args.baseline)
        if args.dry_run:
            from .checks import dry_run
            from .outdir import OutputFolder
            out = Path(args.out) if args.out else default_compare_dir(cfg)
            OutputFolder(out, "compare").check()
            for p in pols:
                print("\n".join(dry_run(cfg.replace([f"run.policy={p}"], source="--policies"))[:-1]))
            print(f"  output folder {out}: usable\ndry run: nothing was simulated; no results are reported")
            return 0
        table, out = run_compare_policies(cfg, pols, base, args.out)
        print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
        print(f"results: {out}")
        return 0
    from .compare import expand_modes, format_compare
    if args.duration_min is not None and args.baseline is not None:
        raise InputError("compare: --baseline does not apply with --duration-min (decoders are ranked by sustained "
                         "throughput and energy per token)")
    if args.duration_min is not None and not args.dry_run:
        from .compare import format_compare_sustained, run_compare_sustained
        table, out = run_compare_sustained(cfg, args.modes, args.duration_min * 60.0, args.out)
        print(format_compare_sustained(table))
        print(f"results: {out}")
        return 0
    modes, base = parse_modes(args.modes, args.baseline)
    if args.dry_run:
        from .checks import dry_run
        from .outdir import OutputFolder
        out = Path(args.out) if args.out else default_compare_dir(cfg)
        OutputFolder(out, "compare").check()
        for _label, overrides in expand_modes(cfg, modes):
            print("\n".join(dry_run(cfg.replace(overrides, source="--modes"))[:-1]))
        print(f"  output folder {out}: usable\ndry run: nothing was simulated; no results are reported")
        return 0
    table, out = run_compare(cfg, modes, base, args.out)
    print(format_compare(table, base))
    print(f"results: {out}")
    return 0


def cmd_sweep(args) -> int:
    from .sweep.runner import run_sweep_cli
    return run_sweep_cli(args)


def cmd_prune(args) -> int:
    from .sweep.runner import prune_cli
    return prune_cli(args)


def cmd_optimize(args) -> int:
    from .dse.optimize import run_optimize_cli
    return run_optimize_cli(args)


def cmd_sensitivity(args) -> int:
    from .dse.sensitivity import run_sensitivity_cli
    return run_sensitivity_cli(args)


def cmd_area(args) -> int:
    from .hw.area import area_table
    cfg = _load(args)
    table = area_table(cfg)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    from .hw.area import pim_unit_table
    t = pim_unit_table(cfg)
    print("\nPIM unit logic per die and the DRAM capacity it displaces (hw/pim_unit.py; published figure where "
          "one exists)")
    print(t.drop(columns=["basis"]).to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    for _, r in t.iterrows():
        print(f"  {r['unit']}: {r['basis']}")
    return 0


RECORD_HELP = """usage: python -m ahasd_sim traces record --kind chain|tree [OPTIONS]

Record a trace from a real drafter/target pair (needs the gguf extra: pip install 'ahasd_sim[gguf]').
  --kind chain   token-level chain trace (acceptance, entropies, off-path rollouts)
  --kind tree    draft-tree trace (tree acceptance and MoE routing)
`python -m ahasd_sim traces record --kind chain --help` (or tree) lists the recorder's options."""


def _own_parser(body, argv) -> int:
    """Run a subcommand that parses its own options; its usage errors (one line, exit 2) and
    --help (exit 0) become return codes instead of SystemExit."""
    try:
        return int(body(argv) or 0)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, (int, type(None))) else 2


def cmd_traces(args) -> int:
    if args.traces_command == "record":
        rest = getattr(args, "record_argv", [])
        if args.kind is None:
            if "-h" in rest or "--help" in rest:
                print(RECORD_HELP)
                return 0
            raise InputError("traces record: expected --kind chain or --kind tree (see traces record --help)")
        if args.kind == "chain":
            from .traces.record.chain import main as record
        else:
            from .traces.record.tree import main as record
        return _own_parser(record, rest)
    if args.traces_command == "extend-rollouts":
        from .traces.record.extend_rollouts import main as extend
        return _own_parser(extend, getattr(args, "record_argv", []))
    if args.traces_command != "stats":
        raise InputError("traces: expected a subcommand: traces stats FILE | traces record --kind chain|tree ... "
                         "| traces extend-rollouts FILE ...")
    from .paths import resolve_input_file
    from .traces.tree import is_tree_trace
    path = str(resolve_input_file(args.file, "traces stats FILE"))
    if is_tree_trace(path):
        from .traces.tree_stats import run_tree_stats
        chain = str(resolve_input_file(args.chain, "--chain")) if args.chain is not None else None
        return int(run_tree_stats(path, args.out, chain) or 0)
    if args.chain is not None:   # it was ignored without a word
        raise InputError(f"traces stats: --chain compares a draft-tree trace with a chain trace, and {args.file} "
                         "is a chain trace; drop --chain")
    from .traces.stats import run_stats
    return int(run_stats(path, args.out) or 0)


def cmd_validate(args) -> int:
    chosen = [f"--{k}" for k in ("mobile", "moe", "peers") if getattr(args, k, False)]
    if len(chosen) > 1:   # one of them used to run and the others were dropped without a word
        raise InputError(f"validate: {' and '.join(chosen)} are separate validations; give one of them per command")
    if chosen and chosen[0] in ("--moe", "--peers") and getattr(args, "measured", None) is not None:
        # it was ignored without a word: these validations read their own committed measurements
        raise InputError(f"validate {chosen[0]}: --measured applies to validate and validate --mobile; "
                         f"{chosen[0]} reads its committed measurements ("
                         f"{'validation/h200_moe_*.csv' if chosen[0] == '--moe' else 'validation/peers/'})")
    if getattr(args, "mobile", False):
        from .validate_mobile import run_validate_mobile
        return run_validate_mobile(args)
    if getattr(args, "moe", False):
        from .validate_moe import run_validate_moe
        return run_validate_moe(args)
    if getattr(args, "peers", False):
        from .validate_peers import run_validate_peers
        return run_validate_peers(args)
    from .validate import run_validate
    return run_validate(args)


def cmd_measure(args) -> int:
    from .measure.cli import run_measure_cli
    return run_measure_cli(args)


def cmd_list(args) -> int:
    from .modes import MODES
    from .paths import shipped_files
    from .policies import POLICIES
    from .workload.models import MODELS
    print("modes:    " + ", ".join(sorted(MODES)))
    print("policies: " + ", ".join(sorted(POLICIES)))
    print("models:   " + ", ".join(sorted(MODELS)))
    for what, files in shipped_files().items():
        print(f"{what}:")
        for f in files:
            print(f"  {f}")
    return 0


def config_reference_markdown() -> str:
    """The config reference as Markdown, one table per section (docs/config-reference.md)."""
    from .config.loader import describe_sections
    lines = ["# Config reference", "",
             "Generated by `python -m ahasd_sim config-reference --markdown`; do not edit by hand.",
             "Every key, its type, default, unit, valid range, meaning and source. A source",
             "`references.md#ANCHOR` is an entry of [references.md](references.md); `modeling.md decision N`",
             "is row N of the decisions table in [modeling.md](modeling.md).", "",
             "A config file must set something: an empty or comments-only file is an error (not a run of",
             "every default; write `{}` to mean every default). A number above its range's upper bound is refused with the bound's reason;",
             "keys without a tighter bound get their unit's physical ceiling (`ahasd_sim/config/fields.py`).", ""]
    section = None
    for row in describe_sections():
        sec = row["key"].split(".")[0]
        if sec != section:
            section = sec
            lines += ["", f"## `{sec}`", "", "| key | type | default | unit | range | meaning | source |",
                      "|---|---|---|---|---|---|---|"]
        cells = [f"`{row['key']}`", row["type"], f"`{row['default']!r}`", row["unit"], row["range"],
                 row["doc"], row["source"]]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def cmd_config_reference(args) -> int:
    from .config.errors import did_you_mean
    from .config.loader import describe_sections
    if args.markdown:
        if args.section:
            raise InputError("config-reference: --markdown writes the whole reference; drop SECTION")
        sys.stdout.write(config_reference_markdown())
        return 0
    rows = describe_sections()
    if args.section:
        prefix = args.section.rstrip(".")
        rows = [r for r in rows if r["key"] == prefix or r["key"].startswith(prefix + ".")]
        if not rows:
            sections = sorted({r["key"].split(".")[0] for r in describe_sections()})
            raise InputError(f"config-reference: no section or key '{prefix}'{did_you_mean(prefix, sections)}; "
                             f"sections: {', '.join(sections)}")
    for row in rows:
        src = f"  [{row['source']}]" if row["source"] else ""
        unit = f" {row['unit']}" if row["unit"] else ""
        rng = f" ({row['range']})" if row["range"] else ""
        print(f"{row['key']}: {row['default']!r}{unit}{rng} -- {row['doc']}{src}")
    return 0


#: name -> (parser builder, body); the order is the order of `--help`
def cmd_results_schema(args) -> int:
    from .metrics import schema
    if args.markdown:
        sys.stdout.write(schema.markdown())
    elif args.json:
        sys.stdout.write(schema.json_schema())
    else:
        for k, (t, u, m) in {**schema.SUMMARY_KEYS, **schema.RESULTS_COLUMNS}.items():
            print(f"{k:58s} {t:8s} {u or '-':14s} {m}")
    return 0


SUBCOMMANDS: dict[str, tuple[Callable, Callable]] = {
    "run": (_add_run, cmd_run),
    "compare": (_add_compare, cmd_compare),
    "sweep": (_add_sweep, cmd_sweep),
    "prune": (_add_prune, cmd_prune),
    "optimize": (_add_optimize, cmd_optimize),
    "sensitivity": (_add_sensitivity, cmd_sensitivity),
    "area": (_add_area, cmd_area),
    "traces": (_add_traces, cmd_traces),
    "validate": (_add_validate, cmd_validate),
    "measure": (_add_measure, cmd_measure),
    "list": (_add_list, cmd_list),
    "config-reference": (_add_config_reference, cmd_config_reference),
    "results-schema": (_add_results_schema, cmd_results_schema),
}
COMMANDS: dict[str, Callable] = {name: body for name, (_add, body) in SUBCOMMANDS.items()}


def _parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m ahasd_sim",
                       description="Speculative-decoding simulator for mobile NPU + LPDDR5-PIM (AHASD). "
                                   "Without a subcommand, `run` is assumed: python -m ahasd_sim --config FILE.",
                       epilog=EPILOG)
    add_version(p)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=ArgumentParser)
    for add, _body in SUBCOMMANDS.values():
        add(sub)
    from .tools import PLOTS, TOOLS
    for name, (_script, text) in TOOLS.items():     # listed here; main() hands them their arguments
        sub.add_parser(name, help=text, add_help=False)
    sub.add_parser("plot", help="figures: plot " + "|".join(PLOTS) + " (plot KIND --help)", add_help=False)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from .tools import TOOLS, run_tool
    if argv and (argv[0] in TOOLS or argv[0] == "plot"):     # they parse their own options
        return run_guarded(lambda: run_tool(argv[0], argv[1:]))
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:
        # a word that is no command (`frobnicate`, `version`): name it, not run's missing --config
        from .config.errors import did_you_mean
        hint = " (did you mean --version?)" if argv[0] == "version" else did_you_mean(argv[0], SUBCOMMANDS)
        print(f"error: python -m ahasd_sim: unknown command '{argv[0]}'{hint}; commands: "
              f"{', '.join([*SUBCOMMANDS, *TOOLS, 'plot'])} (see python -m ahasd_sim --help)", file=sys.stderr)
        return 2
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        argv = ["run", *argv]
    parser = _parser()
    try:
        if argv[:2] in (["traces", "record"], ["traces", "extend-rollouts"]):  # they parse their own options
            args, rest = parser.parse_known_args(argv)
            args.record_argv = rest
        else:
            args = parser.parse_args(argv)
    except SystemExit as exc:   # --help, --version (0) or a usage error (2, one line)
        return int(exc.code or 0)
    if args.command is None:
        parser.print_help()
        return 2
    return run_guarded(lambda: COMMANDS[args.command](args), debug=getattr(args, "debug", False))


if __name__ == "__main__":
    sys.exit(main())
