"""16-worker sweep timeline + simulator contention test (issue 30 diagnosis)."""
import os, sys, time, tempfile, json, statistics
from pathlib import Path
sys.path.insert(0, 'scripts')
import argparse, bench_sweep
out = Path(os.environ.get('OUT', '/tmp'))
spec = bench_sweep._spec(argparse.Namespace(sweep='hw_configs/sweeps/pim_design_space.yaml', overrides=[], seeds=None))
from ahasd_sim.sweep import split as SP, runner as RR
LOG = '/tmp/unitlog'
os.makedirs(LOG, exist_ok=True)
orig = SP._timed
def timed(fn, *args):
    t0 = time.time(); r = orig(fn, *args); t1 = time.time()
    with open(f'{LOG}/{os.getpid()}', 'a') as f: f.write(f'{fn.__name__} {t0} {t1} {time.process_time()}\n')
    return r
SP._timed = timed
oprep = RR._prepare
def prep(*a, **k):
    t = time.time(); r = oprep(*a, **k); print('prepare', time.time() - t); return r
RR._prepare = prep
W = int(sys.argv[1]) if len(sys.argv) > 1 else 16
d = tempfile.mkdtemp(); T0 = time.time()
RR.run_sweep(spec, Path(d)/'s', workers=W, executor='local', progress=False)
T1 = time.time()
print('wall', T1 - T0)
rows = []
for p in os.listdir(LOG):
    for line in open(f'{LOG}/{p}'):
        n, a, b, c = line.split(); rows.append((p, n, float(a) - T0, float(b) - T0))
first = min(r[2] for r in rows); last = max(r[3] for r in rows)
busy = {}
for p, n, a, b in rows: busy[p] = busy.get(p, 0) + b - a
print('workers', len(busy), 'first unit start', round(first, 3), 'last unit end', round(last, 3), 'tail after', round(T1 - T0 - last, 3))
print('busy per worker', sorted(round(v, 2) for v in busy.values()))
print('mean busy / span(first..last)', statistics.mean(busy.values()) / (last - first))
kinds = {}
for p, n, a, b in rows: kinds.setdefault(n, []).append(b - a)
for n, v in kinds.items(): print(n, len(v), 'sum', round(sum(v), 2), 'mean', round(statistics.mean(v), 3))
ends = sorted(r[3] for r in rows)
print('last 10 unit ends', [round(x, 2) for x in ends[-10:]])
