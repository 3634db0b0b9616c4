#!/bin/bash
# Issue 30 round 4, the device run this round could not make (no device machine was lent): on the
# 16-core host, from the repository root, with .old/ holding ahasd_sim/ and scripts/ of f3e0d39
# (the round's start: rm -rf .old && mkdir .old && git archive f3e0d39 ahasd_sim scripts | tar -x -C .old)
# and .whl/ the wheels of the test extra (carried). The study before/after interleaved on one host,
# its per-batch timeline, the sweep's scaling and overhead per point (local, host ceiling, Dask), bench.py.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
F='^ \|^Traceback\|^tornado\|^distributed\|^The above\|^$\|raise \|return await\|\^'
S=hw_configs/studies/where_ahasd_wins.yaml
{ nproc; uptime; python3 --version; lscpu | grep -i 'model name\|mhz'; } 2>&1 | tee $OUT/host.log
for i in 1 2; do
  uptime; python3 scripts/bench_study.py --config $S --workers 16 2>&1 | sed 's/^/this round: /' | tee -a $OUT/study.log
  uptime; PYTHONPATH=/tmp/site:$PWD/.old python3 .old/scripts/bench_study.py --config $S --workers 16 2>&1 | sed 's/^/before (f3e0d39): /' | tee -a $OUT/study.log
done
uptime; python3 benchmarks/scaling/round3/study_timeline.py 16 2>&1 | tee $OUT/study_timeline16.log
uptime; python3 benchmarks/scaling/round4/study_parent.py 16 2>&1 | tee $OUT/study_parent16.log   # cold, then warm: the parent's own work
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor local --out $OUT/sweep_local.json 2>&1 | tee $OUT/sweep_local.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor dask --no-ceiling 2>&1 | grep -v "$F" | tee $OUT/sweep_dask.log
uptime; python3 scripts/bench.py --repeats 9 --modes ahasd,async 2>&1 | tee $OUT/bench.log
uptime
