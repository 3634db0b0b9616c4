"""Issue 30, round 6 (python3 cold_memos.py warm|cold): 48-point pim_design_space in one process: every point as usual (warm process memos), or with
every process-wide memo cleared before each point (as a worker that never saw the design)."""
import sys, time, tempfile, argparse, functools
from pathlib import Path
ROOT = Path(__file__).resolve().parents[4]; sys.path.insert(0, str(ROOT)); sys.path.insert(0, str(ROOT / "scripts"))
import bench_sweep
from ahasd_sim.sweep import runner as RR
from ahasd_sim.traces import format as TF, load as TL
from ahasd_sim.modes.costs import common as CC, affine as CA
from ahasd_sim.config import loader as CL
from ahasd_sim.sweep import spec as SS
mode = sys.argv[1]
def clear():
    for d in (CC._OP_COST_CACHE, CC._OPS_CACHE, CL._SECTION_PICKLES, CL._SECTION_YAML):
        d.clear()
    for f in vars(CA).values():
        if hasattr(f, "cache_clear"): f.cache_clear()
orig = RR.run_point
def point(task):
    if mode == "cold": clear()
    return orig(task)
RR.run_point = point
spec = bench_sweep._spec(argparse.Namespace(sweep=str(ROOT / "hw_configs/sweeps/pim_design_space.yaml"), overrides=[], seeds=None))
d = tempfile.mkdtemp(); t0 = time.time(); c0 = time.process_time()
res = RR.run_sweep(spec, Path(d) / "s", workers=1, executor="local", progress=False)
print(mode, f"wall {time.time()-t0:.2f} s CPU {time.process_time()-c0:.2f} s")
