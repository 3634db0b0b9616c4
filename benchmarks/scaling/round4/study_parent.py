"""Issue 30, round 4: a design-space study's wall time and its parent process's CPU time
(python3 study_parent.py WORKERS [TRIALS]).

Runs hw_configs/studies/where_ahasd_wins.yaml from an empty folder with the checkout this file
is in (*cold*), then the same study again into a second empty folder that shares the first one's
``points/`` (*warm*: every simulation is found finished, so what is left is the parent's own
work: asking optuna, planning the trials, reading the results back, telling, writing the outputs,
what a study on many workers waits for). Prints per run the wall time, the parent's CPU seconds
and its CPU per trial, and a digest of trials.csv without the measured times and the run-folder
names (which hash the simulator's code)."""
import hashlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(ROOT))
from ahasd_sim.dse.optimize import run_optimize  # noqa: E402
from ahasd_sim.dse.report import TIME_COLUMNS  # noqa: E402
from ahasd_sim.dse.study import load_study  # noqa: E402
import pandas as pd  # noqa: E402

W = int(sys.argv[1])
TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else None
study = load_study(ROOT / "hw_configs/studies/where_ahasd_wins.yaml")
tmp = Path(tempfile.mkdtemp())
for name, out, points in (("cold", tmp / "cold", None), ("warm", tmp / "warm", tmp / "cold" / "points")):
    t0, c0 = time.perf_counter(), time.process_time()
    stats = run_optimize(study, out, trials=TRIALS, workers=W, progress=False, points_dir=points)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    n = stats["finished"]
    table = pd.read_csv(out / "trials.csv")
    table = table.drop(columns=[c for c in (*TIME_COLUMNS, "runs") if c in table.columns])
    digest = hashlib.sha256(table.to_csv(index=False).encode()).hexdigest()[:12]
    print(f"{ROOT.name} {name}: {W} workers, {n} trials, {stats['computed_runs']} simulations: wall {wall:.2f} s, "
          f"parent CPU {cpu:.2f} s ({cpu / n * 1e3:.1f} ms per trial); trials.csv without times: sha {digest}",
          flush=True)
