"""Issue 30, round 7: how much a CPU-bound unit slows down when N copies run at once on this host.

python3 host_ceiling.py [--ns 1,2,4,8,12,16] [--repeats 3]

For each workload and N, N forked processes wait at a barrier, then each does the same fixed work
and reports its CPU time (time.process_time) and wall time. Workloads: `spin`, a pure-Python
integer loop that touches no memory beyond a few objects (what the host's cores alone allow), and
`sim`, fifteen AHASD windows of the default job (the sweep's unit of work). The Ns run in a
rotated order in every repeat so that drifts in the host's load are spread over all of them.
/proc/stat is read around each run for the steal share (time the hypervisor gave the vCPUs to
someone else).

The ceiling a sweep can reach at N workers, if its scheduling were perfect, is
cpu(1) / mean cpu(N) of the same unit: the work is the same, only the host's cores run it slower.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from ahasd_sim.config import load_config  # noqa: E402
from ahasd_sim.simulation import load_run_trace, run_simulation  # noqa: E402

CFG = load_config(str(ROOT / "hw_configs/ahasd_mobile.yaml"),
                  ["run.mode=ahasd", "run.generated_tokens=1024", "run.windows=1", "run.timeline=false"])
TRACE = load_run_trace(CFG)
SPIN_ITERATIONS = 40_000_000
SIM_REPEATS = 15


def _spin():
    x = 0
    for i in range(SPIN_ITERATIONS):
        x += i
    return x


def _sim():
    for _ in range(SIM_REPEATS):
        run_simulation(CFG, TRACE)


WORK = {"spin": _spin, "sim": _sim}


def _child(kind, barrier, queue):
    if kind == "sim":
        run_simulation(CFG, TRACE)  # warm the process-wide memos, as a sweep worker's first unit does
    barrier.wait()
    c0, w0 = time.process_time(), time.perf_counter()
    WORK[kind]()
    queue.put((time.process_time() - c0, time.perf_counter() - w0))


def _stat():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v), (v[7] if len(v) > 7 else 0)


def run_once(kind, n):
    ctx = mp.get_context("fork")
    barrier, queue = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_child, args=(kind, barrier, queue)) for _ in range(n)]
    t0, s0 = _stat()
    for p in procs:
        p.start()
    res = [queue.get() for _ in range(n)]
    for p in procs:
        p.join()
    t1, s1 = _stat()
    steal = (s1 - s0) / max(1, t1 - t0)
    return [r[0] for r in res], [r[1] for r in res], steal


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ns", default="1,2,4,8,12,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--kinds", default="spin,sim")
    a = ap.parse_args()
    ns = [int(x) for x in a.ns.split(",")]
    kinds = a.kinds.split(",")
    cpu = {(k, n): [] for k in kinds for n in ns}
    wall = {(k, n): [] for k in kinds for n in ns}
    print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, python {sys.version.split()[0]}")
    for r in range(a.repeats):
        order = ns[r % len(ns):] + ns[:r % len(ns)]
        for k in kinds:
            for n in order:
                c, w, steal = run_once(k, n)
                cpu[(k, n)] += c
                wall[(k, n)] += w
                print(f"repeat {r} {k:4s} N={n:2d} cpu mean {statistics.mean(c):.3f} min {min(c):.3f} "
                      f"max {max(c):.3f} wall mean {statistics.mean(w):.3f} steal {steal:.3f} "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)
    print("\nkind  N  per-unit CPU (mean over processes and repeats)  x alone  ceiling cpu(1)/cpu(N)")
    for k in kinds:
        base = statistics.mean(cpu[(k, ns[0])])
        for n in ns:
            m = statistics.mean(cpu[(k, n)])
            print(f"{k:4s} {n:2d}  {m:.3f} s  {m / base:.2f}x  {base / m:.2f}")


if __name__ == "__main__":
    main()
