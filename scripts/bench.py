#!/usr/bin/env python3
"""Benchmark: simulated generated tokens per wall-clock second, per mode, on the default config.

Usage: python scripts/bench.py [--config hw_configs/ahasd_mobile.yaml] [--tokens N] [--repeats R]
       [--modes ahasd,async,task_sync,npu_sync,operator_sync,autoregressive,gpu_only,tree_sync,tree_pim]
       [--out results/bench.json]

"cold" is the first run in a fresh process (empty operator-cost cache); "warm" is the median
and "best" the fastest of the following repeats (what a sweep worker sees; the best is the least
disturbed by other load on a shared machine, as in timeit). Targets: >= 20,000 tok/s for the
task-level modes, >= 5,000 tok/s for operator_sync, on one core. The tree modes (policy hw_tree)
replay their whole tree trace whatever --tokens says: their rate is per committed token. This is
a benchmark, not a test: it never fails on speed, it reports.
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ahasd_sim.cli_common import run_script, script_parser  # noqa: E402

PLATFORM_FOR = {"gpu_only": "hw_configs/platform_laptop_rtx4090.yaml"}
#: modes that need another policy than the config's (the tree modes select subtrees)
POLICY_FOR = {"tree_sync": "hw_tree", "tree_pim": "hw_tree"}


def parser():
    import argparse
    p = script_parser(__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="hw_configs/ahasd_mobile.yaml", help="main config (default: the default job)")
    p.add_argument("--tokens", type=int, default=1024, help="generated tokens per run (>= 1)")
    p.add_argument("--repeats", type=int, default=5, help="warm repeats per mode (>= 1)")
    p.add_argument("--modes", default="ahasd,async,task_sync,npu_sync,operator_sync,autoregressive,gpu_only,tree_sync,"
                   "tree_pim",
                   help="comma-separated modes, each once")
    p.add_argument("--out", default=None, help="write the results as JSON to this file")
    return p


def body(args) -> int:
    from ahasd_sim.compare import parse_modes
    from ahasd_sim.config import load_config
    from ahasd_sim.config.errors import InputError
    from ahasd_sim.outdir import check_output_file
    from ahasd_sim.output import atomic_write_text, to_json
    from ahasd_sim.paths import shipped
    from ahasd_sim.simulation import load_run_trace, run_simulation
    for flag, v in (("--tokens", args.tokens), ("--repeats", args.repeats)):
        if v < 1:
            raise InputError(f"{flag} {v}: expected >= 1")
    modes, _ = parse_modes(args.modes, None)
    if args.out:
        check_output_file(args.out)
    base = load_config(args.config)
    rows = []
    for mode in modes:
        cfg_path = (shipped(PLATFORM_FOR[mode]) or ROOT / PLATFORM_FOR[mode]) if mode in PLATFORM_FOR else args.config
        cfg = load_config(cfg_path, [f"run.mode={mode}", f"run.generated_tokens={args.tokens}",
                                     f"run.trace={base.run.trace}", "run.timeline=false",
                                     *([f"run.policy={POLICY_FOR[mode]}"] if mode in POLICY_FOR else [])])
        parts = load_run_trace(cfg)
        t0 = time.perf_counter()
        run_simulation(cfg, parts)
        cold = time.perf_counter() - t0
        warm, cpu = [], []
        for _ in range(args.repeats):
            t0, c0 = time.perf_counter(), time.process_time()
            res = run_simulation(cfg, parts)
            warm.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        w = statistics.median(warm)
        b = min(warm)
        n = int(res.summary["generated_tokens"])     # --tokens, or a tree mode's whole trace
        rows.append({"mode": mode, "tokens": n, "cold_s": cold, "warm_median_s": w, "warm_best_s": b,
                     "cold_tok_per_wall_s": n / cold, "warm_median_tok_per_wall_s": n / w,
                     "warm_best_tok_per_wall_s": n / b,
                     "warm_median_tok_per_cpu_s": n / statistics.median(cpu),
                     "simulated_throughput_tok_s": res.summary["throughput_tok_s"]})
        print(f"{mode:15s} cold {n / cold:8.0f} tok/s   warm median {n / w:8.0f} tok/s   "
              f"best {n / b:8.0f} tok/s   per CPU-second {n / statistics.median(cpu):8.0f} tok/s"
              f"   ({n} tokens; CPU time is what a shared machine's load does not inflate)")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    if load is not None:   # other processes inflate wall time, not CPU time: say how busy the machine was
        print(f"load average (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    info = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "load_average": list(load) if load is not None else None,
            "config": str(args.config), "results": rows}
    if args.out:
        atomic_write_text(Path(args.out), to_json(info))
    return 0


def main(argv=None) -> int:
    return run_script(parser(), body, argv)


if __name__ == "__main__":
    sys.exit(main())
