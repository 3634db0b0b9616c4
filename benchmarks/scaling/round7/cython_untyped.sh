#!/bin/bash
# Issue 30, round 7: would compiling the hot modules as they are (Cython 3.3.1 on the unchanged,
# untyped Python source; no cdef types) make the AHASD window faster? A clone of HEAD in a scratch
# folder, its ten hottest modules (the cProfile self-time leaders) and SimPy's core/events compiled
# in place, `bench.py --modes ahasd,async --repeats 9` interleaved three times with the same
# checkout uncompiled, and the default job's outputs compared (they must be identical).
# Needs a C compiler and the package registry (pip install cython). From the repository root:
#   bash benchmarks/scaling/round7/cython_untyped.sh > benchmarks/scaling/round7/cython_untyped.log 2>&1
set -euo pipefail
ROOT=$(pwd); W=$(mktemp -d)
git clone -q "$ROOT" "$W/src"; cd "$W/src"; echo "revision $(git rev-parse --short HEAD)"
for v in plain compiled; do
  python3 -m venv "$W/$v"; "$W/$v/bin/pip" install -q 'setuptools>=77' wheel cython==3.3.1 2>/dev/null
  cp -r "$W/src" "$W/$v-src"; "$W/$v/bin/pip" install -q -e "$W/$v-src" 2>/dev/null
done
HOT="ahasd_sim/modes/soc/async_.py ahasd_sim/modes/soc/ahasd.py ahasd_sim/metrics/collector.py
     ahasd_sim/modes/soc/controls/edc.py ahasd_sim/modes/soc/controls/tvc.py ahasd_sim/policies/adaedl.py
     ahasd_sim/policies/base.py ahasd_sim/hw/sharing.py ahasd_sim/modes/fastq.py ahasd_sim/modes/base.py"
SP=$("$W/compiled/bin/python" -c 'import simpy, os; print(os.path.dirname(simpy.__file__))')
(cd "$W/compiled-src" && "$W/compiled/bin/cythonize" -i -3 -q $HOT "$SP/core.py" "$SP/events.py" 2>&1 | grep -i error || true)
(cd "$W/compiled-src" && "$W/compiled/bin/python" -c "import ahasd_sim.modes.soc.async_ as m, simpy.core as c; print('compiled:', m.__file__.endswith('.so'), c.__file__.endswith('.so'))")
python3 --version; uptime
for r in 1 2 3; do
  for v in plain compiled; do
    echo "== $v, round $r"
    (cd "$W/$v-src" && "$W/$v/bin/python" scripts/bench.py --modes ahasd,async --repeats 9 | grep -o '^[a-z]* .*per CPU-second *[0-9]* tok/s')
  done
done
for v in plain compiled; do
  (cd "$W/$v-src" && "$W/$v/bin/python" -m ahasd_sim --config hw_configs/ahasd_mobile.yaml --set run.timeline=false --out "$W/out-$v" > /dev/null)
done
cmp "$W/out-plain/windows.csv" "$W/out-compiled/windows.csv" && cmp "$W/out-plain/summary.json" "$W/out-compiled/summary.json" \
  && echo "default job: summary.json and windows.csv identical"
uptime; rm -rf "$W"
