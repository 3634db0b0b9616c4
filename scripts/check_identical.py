#!/usr/bin/env python3
"""Check that a code change leaves simulation outputs byte-identical (for speed work).

Runs a fixed set of cases covering every execution mode, pre-verification KV option, EDC stop
option, drafting policy (incl. BanditSpec), the greedy and T=1 traces, MoE offload, the
mobile-cloud modes, shared-rank contention on/off and every PIM partition policy, and writes
each case's run folder (summary.json, windows.csv, events.csv, energy_breakdown.csv,
timeline.json, config.resolved.yaml; meta.json holds wall time and is not compared).

Usage:
  python scripts/check_identical.py --baseline REV          # REV's code vs the working tree (cmp)
  python scripts/check_identical.py --save DIR              # write this tree's outputs to DIR
  python scripts/check_identical.py --against DIR           # compare this tree's outputs with DIR
  python scripts/check_identical.py --list                  # the cases
  ... [--cases NAME,NAME]   only these cases (default: all)

``--baseline REV`` exports REV (``git archive``: its code, configs and traces) into a temporary
folder, runs the cases there with that code, then runs them with the working tree and compares
every output file byte by byte. Exit 0: all identical; 1: some file differs (each listed).
Each run uses ``--jobs 1``; windows run in forked workers give the same bytes (each window is a
pure function), which ``tests`` check separately.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAIN = "hw_configs/ahasd_mobile.yaml"
T1 = "run.trace=traces/qwc-0.5b-1.5b_t1.npz"
FEW = "run.windows=3"          # three windows: enough to exercise the window combination
COMPARED = ("summary.json", "windows.csv", "events.csv", "energy_breakdown.csv", "timeline.json",
            "config.resolved.yaml")

#: name -> (config, overrides); whole-trace runs for the default job's modes, 3 windows elsewhere
CASES: dict[str, tuple[str, list[str]]] = {
    "ahasd_default": (MAIN, []),
    "ahasd_pv_wait": (MAIN, ["ahasd.preverify_kv=wait"]),
    "ahasd_pv_layer_pipelined": (MAIN, ["ahasd.preverify_kv=layer_pipelined"]),
    "ahasd_pv_recompute": (MAIN, [FEW, "ahasd.preverify_kv=recompute"]),
    "ahasd_edc_idle": (MAIN, ["ahasd.edc_stop=idle_until_feedback"]),
    "ahasd_edc_idle_lp": (MAIN, [FEW, "ahasd.edc_stop=idle_until_feedback", "ahasd.preverify_kv=layer_pipelined"]),
    "ahasd_no_tvc": (MAIN, [FEW, "ahasd.tvc=false"]),
    "ahasd_no_edc": (MAIN, [FEW, "ahasd.edc=false"]),
    "ahasd_fb_latency": (MAIN, [FEW, "ahasd.feedback_latency_ns=5000", "ahasd.feedback_queue_entries=2",
                                "ahasd.unverified_queue_batches=1"]),
    "ahasd_no_contention": (MAIN, [FEW, "pim.shared_rank_contention=false"]),
    "ahasd_min_fit": (MAIN, [FEW, "pim.partition_policy=min_fit"]),
    "ahasd_proportional": (MAIN, [FEW, "pim.partition_policy=proportional", "pim.vectors_per_weight_read=4"]),
    "ahasd_no_prefill": (MAIN, [FEW, "run.prefill=false"]),
    "ahasd_banditspec": (MAIN, [FEW, "run.policy=banditspec"]),
    "ahasd_fixed": (MAIN, [FEW, "run.policy=fixed"]),
    "ahasd_specdecpp": (MAIN, [FEW, "run.policy=specdecpp"]),
    "ahasd_svip": (MAIN, [FEW, "run.policy=svip"]),
    "ahasd_t1_seed0": (MAIN, [FEW, T1]),
    "ahasd_t1_seed3": (MAIN, [FEW, T1, "run.seed=3"]),
    "task_sync_default": (MAIN, ["run.mode=task_sync"]),
    "task_sync_banditspec": (MAIN, [FEW, "run.mode=task_sync", "run.policy=banditspec"]),
    "tree_sync_eagle_dynamic": (MAIN, ["run.mode=tree_sync", "run.policy=eagle_dynamic"]),
    "tree_sync_hw_tree": (MAIN, ["run.mode=tree_sync", "run.policy=hw_tree"]),
    "tree_pim_hw_tree_k4": (MAIN, ["run.mode=tree_pim", "run.policy=hw_tree", "pim.vectors_per_weight_read=4"]),
    "task_sync_head": (MAIN, [FEW, "run.mode=task_sync", "run.drafter=head"]),
    "npu_sync_head": (MAIN, [FEW, "run.mode=npu_sync", "run.drafter=head"]),
    "ahasd_lookup": (MAIN, [FEW, "run.drafter=lookup"]),
    "async_default": (MAIN, ["run.mode=async"]),
    "async_banditspec": (MAIN, [FEW, "run.mode=async", "run.policy=banditspec"]),
    "async_t1": (MAIN, [FEW, "run.mode=async", T1, "run.seed=2"]),
    "async_small_queues": (MAIN, [FEW, "run.mode=async", "ahasd.feedback_queue_entries=2",
                                  "ahasd.unverified_queue_batches=2", "ahasd.max_verify_tokens=3"]),
    "async_min_fit": (MAIN, [FEW, "run.mode=async", "pim.partition_policy=min_fit"]),
    "operator_sync_default": (MAIN, ["run.mode=operator_sync"]),
    "operator_sync_fixed": (MAIN, [FEW, "run.mode=operator_sync", "run.policy=fixed"]),
    "operator_sync_banditspec": (MAIN, [FEW, "run.mode=operator_sync", "run.policy=banditspec"]),
    "operator_sync_specdecpp": (MAIN, [FEW, "run.mode=operator_sync", "run.policy=specdecpp"]),
    "operator_sync_svip": (MAIN, [FEW, "run.mode=operator_sync", "run.policy=svip"]),
    "operator_sync_t1": (MAIN, [FEW, "run.mode=operator_sync", T1, "run.seed=1"]),
    "operator_sync_no_contention": (MAIN, [FEW, "run.mode=operator_sync", "pim.shared_rank_contention=false",
                                           "pim.partition_policy=min_fit"]),
    "autoregressive": (MAIN, ["run.mode=autoregressive"]),
    "gpu_only": ("hw_configs/platform_laptop_rtx4090.yaml", ["run.mode=gpu_only", f"run.trace=traces/qwc-0.5b-1.5b_greedy.npz"]),
    "gpu_only_banditspec_t1": ("hw_configs/platform_laptop_rtx4090.yaml",
                               ["run.mode=gpu_only", FEW, "run.policy=banditspec", T1]),
    "hybrid": ("hw_configs/hyco_mobile_cloud.yaml", []),
    "hybrid_jitter": ("hw_configs/hyco_mobile_cloud.yaml", ["network.jitter_ms=5", "cloud.utilization=0.5"]),
    "device_draft_cloud_verify": ("hw_configs/hyco_mobile_cloud.yaml", ["run.mode=device_draft_cloud_verify"]),
    "cloud_autoregressive": ("hw_configs/hyco_mobile_cloud.yaml", ["run.mode=cloud_autoregressive"]),
    "device_only": ("hw_configs/hyco_mobile_cloud.yaml", ["run.mode=device_only"]),
    "moe_specfit": ("hw_configs/moe_offload.yaml", []),
    "moe_eagle_fixed": ("hw_configs/moe_offload.yaml", ["run.policy=eagle_fixed"]),
    "moe_eagle_dynamic": ("hw_configs/moe_offload.yaml", ["run.policy=eagle_dynamic"]),
    "moe_ecospec": ("hw_configs/moe_offload.yaml", ["run.policy=ecospec"]),
    "moe_rtx4090": ("hw_configs/moe_offload_rtx4090_laptop.yaml", []),
}


def run_cases(out: Path, names: list[str]) -> dict[str, str]:
    """Run each case into ``out/NAME`` with the ahasd_sim importable here; returns errors by case."""
    import ahasd_sim
    from ahasd_sim.__main__ import main
    print(f"code: {Path(ahasd_sim.__file__).parent}", flush=True)
    errors = {}
    for name in names:
        cfg, sets = CASES[name]
        argv = ["run", "--config", cfg, "--out", str(out / name), "--quiet", "--jobs", "1"]
        for s in sets:
            argv += ["--set", s]
        t0 = time.perf_counter()
        rc = main(argv)
        print(f"  {name:30s} rc {rc}  {time.perf_counter() - t0:6.2f} s", flush=True)
        if rc != 0:
            errors[name] = f"exit {rc}"
    return errors


def compare(ref: Path, new: Path, names: list[str]) -> list[str]:
    diffs = []
    for name in names:
        a, b = ref / name, new / name
        for f in COMPARED:
            fa, fb = a / f, b / f
            if fa.exists() != fb.exists():
                diffs.append(f"{name}/{f}: present in only one of the two")
            elif fa.exists() and not filecmp.cmp(fa, fb, shallow=False):
                diffs.append(f"{name}/{f}: differs")
    return diffs


def _save_with(code_root: Path, out: Path, names: list[str]) -> int:
    """Run this script's cases with the code (and configs, traces) under ``code_root``."""
    env = dict(os.environ, PYTHONPATH=str(code_root), PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, str(Path(__file__).resolve()), "--save", str(out), "--code-root", str(code_root),
           "--cases", ",".join(names)]
    return subprocess.call(cmd, cwd=code_root, env=env)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--baseline", metavar="REV", help="git revision whose outputs are the reference")
    g.add_argument("--save", metavar="DIR", help="write this tree's outputs to DIR")
    g.add_argument("--against", metavar="DIR", help="compare this tree's outputs with those saved in DIR")
    g.add_argument("--list", action="store_true", help="list the cases")
    p.add_argument("--cases", default=None, metavar="A,B", help="only these cases")
    p.add_argument("--code-root", default=None, help=argparse.SUPPRESS)   # used by --baseline
    args = p.parse_args(argv)
    names = list(CASES) if not args.cases else args.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"check_identical: unknown case(s) {', '.join(unknown)}; see --list", file=sys.stderr)
        return 2
    if args.list:
        for n, (cfg, sets) in CASES.items():
            print(f"{n:30s} {cfg} {' '.join(sets)}")
        return 0
    if args.baseline:
        # before any work: a revision git does not know is one line, not git's error as a traceback
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.baseline}^{{commit}}"],
                             capture_output=True, text=True)
        if rev.returncode != 0:
            print(f"error: check_identical: --baseline {args.baseline}: not a git revision of {ROOT} (a commit, "
                  "branch or tag, e.g. HEAD~1)", file=sys.stderr)
            return 2
    if args.against and not (Path(args.against) / names[0]).is_dir():
        print(f"error: check_identical: --against {args.against}: holds no saved case '{names[0]}' (write one with "
              "--save DIR)", file=sys.stderr)
        return 2
    root = Path(args.code_root).resolve() if args.code_root else ROOT
    sys.path.insert(0, str(root))
    os.chdir(root)
    if args.save:
        errors = run_cases(Path(args.save).resolve(), names)
        return 1 if errors else 0
    with tempfile.TemporaryDirectory(prefix="check_identical_") as tmp:
        tmp = Path(tmp)
        if args.baseline:
            ref = tmp / "ref"
            code = tmp / "code"
            code.mkdir()
            try:
                archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.baseline], check=True,
                                         capture_output=True).stdout
                subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
            except subprocess.CalledProcessError as exc:
                why = (exc.stderr or b"").decode(errors="replace").strip().splitlines()
                print(f"error: check_identical: --baseline {args.baseline}: cannot export it"
                      f"{(': ' + why[-1]) if why else ''}", file=sys.stderr)
                return 2
            print(f"reference: {args.baseline} ({code})", flush=True)
            if _save_with(code, ref, names) != 0:
                print("check_identical: the reference runs failed", file=sys.stderr)
                return 2
        else:
            ref = Path(args.against).resolve()
        print(f"working tree: {ROOT}", flush=True)
        t0 = time.process_time()
        errors = run_cases(tmp / "new", names)
        print(f"working tree cases: {time.process_time() - t0:.1f} s CPU", flush=True)
        diffs = compare(ref, tmp / "new", names) + [f"{n}: {e}" for n, e in errors.items()]
    if diffs:
        print("NOT identical:\n  " + "\n  ".join(diffs))
        return 1
    print(f"identical: {len(names)} cases x {len(COMPARED)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
