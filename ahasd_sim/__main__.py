"""Command line: ``python -m ahasd_sim --config FILE [--set KEY=VALUE]... [--out DIR] [--seed N]``.

Subcommands: ``compare``, ``sweep``, ``optimize``, ``sensitivity``, ``area``, ``traces stats``, ``validate``,
``list``, ``config-reference``. Bad input exits with code 2 and one line on
stderr (``--debug`` shows the traceback).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from .config.errors import InputError

SUBCOMMANDS = ("run", "compare", "sweep", "area", "traces", "validate", "list", "config-reference", "optimize",
               "sensitivity")


def _common(p: argparse.ArgumentParser, config_required: bool = True) -> None:
    p.add_argument("--config", required=config_required, help="YAML config file (may `extends:` others)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config value, e.g. --set npu.freq_ghz=1.2 (repeatable)")
    p.add_argument("--seed", type=int, default=None, help="seed (overrides run.seed)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ahasd_sim",
                                description="Speculative-decoding simulator for mobile NPU + LPDDR5-PIM (AHASD).")
    sub = p.add_subparsers(dest="command")
    r = sub.add_parser("run", help="run one simulation (the default command)")
    _common(r)
    r.add_argument("--out", default=None, help="output directory (default: a new folder under results/)")
    r.add_argument("--quiet", action="store_true", help="do not print the summary table")

    c = sub.add_parser("compare", help="run several modes on the same trace; print a normalised table")
    _common(c)
    c.add_argument("--modes", required=True, help="comma-separated mode names")
    c.add_argument("--baseline", default=None, help="mode to normalise against (default: the first)")
    c.add_argument("--out", default=None, help="output directory (default: a new folder under results/)")

    s = sub.add_parser("sweep", help="run a design-space sweep from a sweep YAML")
    s.add_argument("--config", required=True)
    s.add_argument("--workers", type=int, default=None)
    s.add_argument("--executor", choices=("local", "dask"), default="local")
    s.add_argument("--scheduler", default=None, help="Dask scheduler address (executor dask)")
    s.add_argument("--out", default=None, help="sweep directory (default: sweeps/<name>)")
    s.add_argument("--no-progress", action="store_true")
    s.add_argument("--debug", action="store_true")

    from .dse.cli import add_parsers as _dse_parsers
    _dse_parsers(sub)

    a = sub.add_parser("area", help="print the area table of AHASD's added hardware")
    _common(a)

    t = sub.add_parser("traces", help="trace utilities")
    tsub = t.add_subparsers(dest="traces_command")
    ts = tsub.add_parser("stats", help="acceptance statistics of a trace file")
    ts.add_argument("file")
    ts.add_argument("--out", default=None, help="write CSV tables and a plot here")
    ts.add_argument("--debug", action="store_true")

    v = sub.add_parser("validate", help="compare the GPU model against measured H200 latencies")
    v.add_argument("--config", default=None, help="platform config (default hw_configs/platform_server_h200_pcie5.yaml)")
    v.add_argument("--measured", default=None, help="measured CSV (default validation/h200_measured.csv)")
    v.add_argument("--out", default=None, help="write the error table and plot here")
    v.add_argument("--set", dest="overrides", action="append", default=[])
    v.add_argument("--debug", action="store_true")

    sub.add_parser("list", help="list modes, policies and models")
    cr = sub.add_parser("config-reference", help="print every config key with type, default, unit and source")
    cr.add_argument("--markdown", action="store_true", help="as a Markdown table (docs/config-reference.md)")
    return p


def _load(args):
    from .config.loader import load_config
    return load_config(args.config, args.overrides, args.seed)


def _fmt_summary(s: dict) -> str:
    lines = [
        f"mode {s['mode']}  policy {s['policy']}  draft {s['draft_model']}  target {s['target_model']}",
        f"  generated tokens        {s['generated_tokens']}",
        f"  makespan                {s['makespan_s']:.4f} s",
        f"  throughput              {s['throughput_tok_s']:.2f} tok/s",
        f"  energy                  {s['energy_j']:.4f} J  ({s['energy_per_token_j'] * 1e3:.3f} mJ/token, "
        f"{s['tokens_per_j']:.2f} tok/J)",
        f"  acceptance rate         {s['acceptance_rate']:.3f}  (mean accepted/verify "
        f"{s['mean_accepted_per_verify']:.2f})",
        f"  drafted / wasted        {s['drafted_tokens']} / {s['wasted_draft_tokens']}",
    ]
    util = "  ".join(f"{d} {u:.0%}" for d, u in sorted(s["device_utilization"].items()))
    lines.append(f"  utilisation             {util}")
    return "\n".join(lines)


def cmd_run(args) -> int:
    from .output import default_out_dir, write_run
    from .simulation import run_simulation
    cfg = _load(args)
    t0 = time.perf_counter()
    result = run_simulation(cfg)
    wall = time.perf_counter() - t0
    out = Path(args.out) if args.out else default_out_dir(cfg)
    write_run(result, cfg, out, wall)
    if not args.quiet:
        print(_fmt_summary(result.summary))
        print(f"  results                 {out}")
    return 0


def cmd_compare(args) -> int:
    from .compare import run_compare
    cfg = _load(args)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    table, out = run_compare(cfg, modes, args.baseline, args.out)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"results: {out}")
    return 0


def cmd_sweep(args) -> int:
    from .sweep.runner import run_sweep_cli
    return run_sweep_cli(args)


def cmd_area(args) -> int:
    from .hw.area import area_table
    cfg = _load(args)
    table = area_table(cfg)
    print(table.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    return 0


def cmd_traces(args) -> int:
    if args.traces_command != "stats":
        raise InputError("traces: expected a subcommand: stats FILE")
    from .workload.trace_stats import run_stats
    return int(run_stats(args.file, args.out) or 0)


def cmd_validate(args) -> int:
    from .validate import run_validate
    return run_validate(args)


def cmd_list(args) -> int:
    from .modes import MODES
    from .policies import POLICIES
    from .workload.models import MODELS
    print("modes:    " + ", ".join(sorted(MODES)))
    print("policies: " + ", ".join(sorted(POLICIES)))
    print("models:   " + ", ".join(sorted(MODELS)))
    return 0


def config_reference_markdown() -> str:
    """The config reference as Markdown, one table per section (docs/config-reference.md)."""
    from .config.loader import describe_sections
    lines = ["# Config reference", "",
             "Generated by `python -m ahasd_sim config-reference --markdown`; do not edit by hand.",
             "Every key, its type, default, unit, valid range, meaning and source.", ""]
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
    from .config.loader import describe_sections
    if args.markdown:
        sys.stdout.write(config_reference_markdown())
        return 0
    for row in describe_sections():
        src = f"  [{row['source']}]" if row["source"] else ""
        unit = f" {row['unit']}" if row["unit"] else ""
        rng = f" ({row['range']})" if row["range"] else ""
        print(f"{row['key']}: {row['default']!r}{unit}{rng} -- {row['doc']}{src}")
    return 0


COMMANDS: dict[str, Callable] = {
    "run": cmd_run, "compare": cmd_compare, "sweep": cmd_sweep, "area": cmd_area, "traces": cmd_traces,
    "validate": cmd_validate, "list": cmd_list, "config-reference": cmd_config_reference,
    "optimize": lambda a: __import__("ahasd_sim.dse.cli", fromlist=["x"]).cmd_optimize(a),
    "sensitivity": lambda a: __import__("ahasd_sim.dse.cli", fromlist=["x"]).cmd_sensitivity(a),
}


def _input_errors() -> tuple[type[BaseException], ...]:
    errs: list[type[BaseException]] = [InputError]
    try:
        from .workload.traces import TraceError
        errs.append(TraceError)
    except ImportError:  # pragma: no cover
        pass
    try:
        from .workload.models import UnknownModelError
        errs.append(UnknownModelError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(errs)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help"):
        argv = ["run", *argv]
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    debug = getattr(args, "debug", False)
    try:
        return COMMANDS[args.command](args)
    except _input_errors() as exc:
        if debug:
            raise
        msg = str(exc).strip().strip('"')
        print(f"error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head`: the results are already written
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
