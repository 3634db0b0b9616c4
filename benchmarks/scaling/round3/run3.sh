#!/bin/bash
# Issue 30 round 3, device run 3 (final code): the study's per-batch timeline at 16 workers, the
# 16-worker sweep timeline, and the sweep benchmark (local with the host ceiling, and Dask).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
D=benchmarks/scaling/round3
F='^ \|^Traceback\|^tornado\|^distributed\|^The above\|^$\|raise \|return await\|\^'
{ nproc; uptime; python3 --version; } 2>&1 | tee $OUT/host.log
python3 $D/study_timeline.py 16 2>&1 | tee $OUT/study_timeline16.log
uptime; python3 $D/timeline.py 16 split 2>&1 | tee $OUT/timeline16.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor local --out $OUT/sweep_local.json 2>&1 | tee $OUT/sweep_local.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor dask --no-ceiling 2>&1 | grep -v "$F" | tee $OUT/sweep_dask.log
uptime
