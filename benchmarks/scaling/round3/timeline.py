"""Issue 30, round 3: where a sweep's time goes, per unit (run on the 16-core host).

python3 timeline.py WORKERS split|whole|serial [SEEDS]

Runs hw_configs/sweeps/pim_design_space.yaml (optionally with seeds 0..SEEDS-1) in this process
and prints: wall time and the parent's CPU time; when the parent handed out its first unit and
when the pool's workers started; per worker its busy wall time and CPU time; per unit kind the
count and the sums of wall and CPU time (CPU < wall: the worker waited, e.g. for a vCPU or I/O);
the span from the first unit's start to the last unit's end and the idle tail after it."""
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import bench_sweep  # noqa: E402
from ahasd_sim.sweep import runner as RR, split as SP  # noqa: E402

W = int(sys.argv[1])
GRAIN = sys.argv[2]
SEEDS = int(sys.argv[3]) if len(sys.argv) > 3 else None
LOG = Path(tempfile.mkdtemp(prefix="unitlog-"))
T0 = time.time()


def _log(name, t0, t1, c):
    with open(LOG / str(os.getpid()), "a") as f:
        f.write(f"{name} {t0} {t1} {c}\n")


orig_timed = SP._timed


def timed(fn, *args):
    t0, c0 = time.time(), time.process_time()
    r = orig_timed(fn, *args)
    _log(fn.__name__, t0, time.time(), time.process_time() - c0)
    return r


SP._timed = timed
orig_point = RR.run_point


def point(task):
    t0, c0 = time.time(), time.process_time()
    r = orig_point(task)
    _log("run_point", t0, time.time(), time.process_time() - c0)
    return r


RR.run_point = point
orig_submit = __import__("concurrent.futures").futures.ProcessPoolExecutor.submit
first_submit = []


def submit(self, *a, **k):
    if not first_submit:
        first_submit.append(time.time())
    return orig_submit(self, *a, **k)


__import__("concurrent.futures").futures.ProcessPoolExecutor.submit = submit
spec = bench_sweep._spec(argparse.Namespace(sweep=str(ROOT / "hw_configs/sweeps/pim_design_space.yaml"),
                                            overrides=[], seeds=SEEDS))
d = tempfile.mkdtemp()
T0 = time.time()
c0 = time.process_time()
res = RR.run_sweep(spec, Path(d) / "s", workers=W, executor="local", progress=False,
                   split_points=(GRAIN != "whole"))
T1 = time.time()
print(f"{GRAIN} {W} workers: {res.n_computed} points, wall {T1 - T0:.3f} s, parent CPU {time.process_time() - c0:.3f} s, "
      f"load {os.getloadavg()[0]:.2f}")
if first_submit:
    print(f"first submit at {first_submit[0] - T0:.3f} s")
rows = []
for p in os.listdir(LOG):
    for line in open(LOG / p):
        n, a, b, c = line.split()
        rows.append((p, n, float(a) - T0, float(b) - T0, float(c)))
if not rows:
    sys.exit(0)
first = min(r[2] for r in rows)
last = max(r[3] for r in rows)
busy, cpu = {}, {}
for p, n, a, b, c in rows:
    busy[p] = busy.get(p, 0) + b - a
    cpu[p] = cpu.get(p, 0) + c
print(f"processes {len(busy)}; first unit start {first:.3f}; last unit end {last:.3f}; tail after {T1 - T0 - last:.3f}")
print("busy wall per process", sorted(round(v, 2) for v in busy.values()))
print("busy CPU per process ", sorted(round(v, 2) for v in cpu.values()))
print(f"mean busy / span(first..last) {statistics.mean(busy.values()) / (last - first):.3f}; "
      f"sum busy wall {sum(busy.values()):.2f} s, sum CPU {sum(cpu.values()):.2f} s")
kinds = {}
for p, n, a, b, c in rows:
    kinds.setdefault(n, []).append((b - a, c))
for n, v in sorted(kinds.items()):
    print(f"  {n:22s} {len(v):4d}  wall sum {sum(x for x, _ in v):7.2f}  CPU sum {sum(y for _, y in v):7.2f}  "
          f"mean wall {statistics.mean(x for x, _ in v):.3f}")
ends = sorted(r[3] for r in rows)
print("last 8 unit ends", [round(x, 2) for x in ends[-8:]])
