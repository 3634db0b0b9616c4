#!/bin/bash
# Issue 30 round 3, device run 2 (the measurements docs/performance.md quotes), on the 16-core host,
# from the repository root. .old/ holds ahasd_sim/ and scripts/ of 4f6f6d4 (this round's start:
# git archive 4f6f6d4 ahasd_sim scripts | tar -x -C .old) for the study's before/after on one host.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
D=benchmarks/scaling/round3
F='^ \|^Traceback\|^tornado\|^distributed\|^The above\|^$\|raise \|return await\|\^'
{ nproc; uptime; python3 --version; lscpu | grep -i 'model name\|mhz'; } 2>&1 | tee $OUT/host.log
python3 scripts/bench_sweep.py --workers 1,16 --granularity split,whole --executor local --out $OUT/sweep_local.json 2>&1 | tee $OUT/sweep_local.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor dask --no-ceiling 2>&1 | grep -v "$F" | tee $OUT/sweep_dask.log
uptime; python3 $D/timeline.py 16 split 2>&1 | tee $OUT/timeline16.log
uptime; python3 scripts/bench_study.py --workers 16 --json $OUT/study.json 2>&1 | tee $OUT/study.log
uptime; PYTHONPATH=/tmp/site:$PWD/.old python3 .old/scripts/bench_study.py --config hw_configs/studies/where_ahasd_wins.yaml --workers 16 2>&1 | sed 's/^/before (4f6f6d4): /' | tee -a $OUT/study.log
uptime; python3 scripts/bench.py --repeats 9 2>&1 | tee $OUT/bench.log
uptime
