"""Issue 30, round 3: where a design-space study's time goes (python3 study_timeline.py WORKERS [TRIALS]).

Runs hw_configs/studies/where_ahasd_wins.yaml from an empty folder and prints, per lock-step
batch: when its evaluation started and ended, when its first and last unit ran, the workers'
busy share of the batch, and the parent's time outside evaluation (telling, writing outputs)."""
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from ahasd_sim.dse import optimize as OPT  # noqa: E402
from ahasd_sim.dse.study import load_study  # noqa: E402
from ahasd_sim.sweep import split as SP  # noqa: E402

W = int(sys.argv[1])
TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else None
LOG = Path(tempfile.mkdtemp(prefix="studylog-"))
orig_timed = SP._timed


def timed(fn, *args):
    t0 = time.time()
    r = orig_timed(fn, *args)
    with open(LOG / str(os.getpid()), "a") as f:
        f.write(f"{fn.__name__} {t0} {time.time()}\n")
    return r


SP._timed = timed
batches = []
orig_eval = OPT.evaluate


def evaluate(*a, **k):
    t0 = time.time()
    r = orig_eval(*a, **k)
    batches.append((t0, time.time(), len(r)))
    return r


OPT.evaluate = evaluate
study = load_study(ROOT / "hw_configs/studies/where_ahasd_wins.yaml")
out = Path(tempfile.mkdtemp()) / "s"
T0 = time.time()
stats = OPT.run_optimize(study, out, trials=TRIALS, workers=W, progress=False)
T1 = time.time()
units = []
for p in os.listdir(LOG):
    for line in open(LOG / p):
        n, a, b = line.split()
        units.append((n, float(a), float(b)))
print(f"{W} workers, {stats['finished']} trials, {stats['computed_runs']} simulations: wall {T1 - T0:.2f} s")
busy_total = 0.0
for i, (a, b, n) in enumerate(batches):
    us = [u for u in units if a <= u[1] <= b]
    if not us:
        print(f"batch {i}: {n} points, {b - a:.2f} s, no units")
        continue
    busy = sum(u[2] - u[1] for u in us)
    busy_total += busy
    first, last = min(u[1] for u in us), max(u[2] for u in us)
    print(f"batch {i}: {n} points, eval {a - T0:6.2f}..{b - T0:6.2f} ({b - a:.2f} s); units {len(us)}, first at "
          f"+{first - a:.3f} s, last ends {b - last:.3f} s before the end; busy {busy:.2f} worker-s = "
          f"{busy / (W * (b - a)):.2f} of the batch")
outside = (T1 - T0) - sum(b - a for a, b, _ in batches)
print(f"outside evaluation (tells, outputs, set-up): {outside:.2f} s; units busy {busy_total:.2f} worker-s "
      f"= {busy_total / (W * (T1 - T0)):.2f} of the study's worker time")
