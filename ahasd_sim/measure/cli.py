"""Options of ``python -m ahasd_sim measure gpu|moe`` (argparse only: building the command
line's parser must not import torch or the measurement code)."""
from __future__ import annotations

import argparse

from ..errors import InputError

TARGETS = {
    "gpu": ("dense decode/verify steps, H2D copies and ceilings -> validation/h200_measured.csv",
            "Time decode/verify steps of the simulator's dense models (real shapes, random weights, "
            "plain PyTorch, CUDA graphs), host-to-device copies, the memory-bandwidth and GEMM ceilings "
            "and linear microbenchmarks on a CUDA GPU; one CSV row per measurement, flushed as it goes. "
            "`python -m ahasd_sim validate` reads the CSV. --smoke runs tiny shapes on a CPU in seconds. "
            "Needs PyTorch (pip install 'ahasd_sim[measure]'). See validation/README.md."),
    "moe": ("MoE expert copies and layer steps -> validation/h200_moe_measured.csv",
            "Time groups of expert-sized host-to-device copies and one MoE layer (fused grouped GEMM vs "
            "a per-expert loop) for Qwen3-30B-A3B and the MoEfied Qwen2.5-Coder-1.5B on a CUDA GPU; one "
            "CSV row per measurement. --smoke runs a tiny layer on the CPU in seconds. Needs PyTorch "
            "(pip install 'ahasd_sim[measure]'). See docs/moe_offload.md."),
}


def _debug(p: argparse.ArgumentParser) -> None:
    p.add_argument("--debug", action="store_true", help="show Python tracebacks instead of one-line errors")
    p.add_argument("--force", action="store_true",
                   help="allow --out to replace a file shipped with ahasd_sim (validation/...); refused otherwise")


def gpu_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``measure gpu`` (those of the former scripts/measure_gpu.py)."""
    from .gpu import DEFAULT_EAGER_MODELS, DEFAULT_KS, DEFAULT_KV_LENS, DEFAULT_OUT, MODELS, SMOKE_MODELS
    p.add_argument("--out", default=DEFAULT_OUT, metavar="CSV", help=f"CSV to write (default {DEFAULT_OUT})")
    p.add_argument("--models", nargs="*", default=None, metavar="MODEL",
                   help=f"models to measure (default: all of {', '.join(MODELS)}; with --smoke "
                        f"{', '.join(SMOKE_MODELS)})")
    p.add_argument("--kv", type=int, nargs="*", default=list(DEFAULT_KV_LENS), metavar="N",
                   help="KV lengths (default %(default)s; --smoke keeps those <= 512)")
    p.add_argument("--k", type=int, nargs="*", default=list(DEFAULT_KS), metavar="K",
                   help="verify widths k (default %(default)s)")
    p.add_argument("--reps", type=int, default=30, help="timed repetitions per point (default %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="warm-up repetitions per point (default %(default)s)")
    p.add_argument("--no-int8", action="store_true", help="skip int8 weight-only runs")
    p.add_argument("--no-bf16", action="store_true", help="skip the bf16 model runs")
    p.add_argument("--kernel-count", action="store_true",
                   help="profile one eager step per k at --kernel-count-kv; kernel count in notes")
    p.add_argument("--kernel-count-kv", type=int, default=1024, metavar="N",
                   help="KV length of the --kernel-count steps (default %(default)s)")
    p.add_argument("--int8-models", nargs="*", default=None, metavar="MODEL",
                   help="models for int8 weight-only (default: same as --models)")
    p.add_argument("--eager-models", nargs="*", default=None, metavar="MODEL",
                   help=f"models (bf16) also measured without CUDA graphs, to show launch overhead "
                        f"(default {' '.join(DEFAULT_EAGER_MODELS)}; with --smoke {list(SMOKE_MODELS)[0]}; "
                        "the option alone: none)")
    p.add_argument("--no-graph", action="store_true", help="never use CUDA graphs")
    p.add_argument("--skip-h2d", action="store_true", help="skip the host-to-device copies")
    p.add_argument("--skip-ceilings", action="store_true", help="skip the D2D copy and GEMM ceilings")
    p.add_argument("--membw-bytes", type=int, default=2 * 2**30, metavar="BYTES",
                   help="D2D copy size for ceiling_membw (default %(default)s)")
    p.add_argument("--gemm-n", type=int, default=8192, metavar="N",
                   help="square GEMM size for ceiling_gemm (default %(default)s)")
    p.add_argument("--max-config-s", type=float, default=3.0, metavar="S",
                   help="cap on timed seconds per point (reps reduced, never below 5; default %(default)s)")
    p.add_argument("--budget-s", type=float, default=480.0, metavar="S",
                   help="overall wall budget; remaining model points are skipped past it (default %(default)s)")
    p.add_argument("--smoke", action="store_true", help="tiny shapes (runs on CPU in seconds)")
    p.add_argument("--smoke-fp32", action="store_true", help="with --smoke on CPU: fp32 (tight self-test)")
    p.add_argument("--device", default=None, help="cpu, cuda or cuda:N (default: cuda if available)")
    _debug(p)


def moe_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``measure moe`` (those of the former scripts/measure_moe_gpu.py)."""
    p.add_argument("--out", required=True, metavar="CSV", help="CSV to write")
    p.add_argument("--smoke", action="store_true", help="tiny CPU run (3 repetitions)")
    p.add_argument("--reps", type=int, default=20, help="timed repetitions per point (default %(default)s)")
    p.add_argument("--passes", action="store_true", help="composed offloaded decode/verify passes of "
                   "Qwen3-30B-A3B shapes (random weights, copies from pinned host memory) instead of the "
                   "copies and layer steps")
    _debug(p)


def add_measure_targets(measure: argparse.ArgumentParser, epilog: str | None = None) -> None:
    """``gpu`` and ``moe`` under the ``measure`` command's parser."""
    targets = measure.add_subparsers(dest="measure_target", metavar="gpu|moe")
    for name, add in (("gpu", gpu_arguments), ("moe", moe_arguments)):
        help_, description = TARGETS[name]
        add(targets.add_parser(name, help=help_, description=description, epilog=epilog))


def run_measure_cli(args) -> int:
    """Body of ``measure``: the chosen target's measurement."""
    if args.measure_target == "gpu":
        from .gpu import run_measure_gpu
        return run_measure_gpu(args)
    if args.measure_target == "moe":
        from .moe_gpu import run_measure_moe
        return run_measure_moe(args)
    raise InputError("measure: expected a target: measure gpu [OPTIONS] | measure moe --out CSV [OPTIONS] "
                     "(see measure --help)")
