#!/bin/bash
# Issue 30 round 3, device run 1 (diagnosis): unit timelines at 1/4/16 workers, the host ceiling,
# bench.py, the 200-trial study. Run from the repository root on the 16-core host.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
D=benchmarks/scaling/round3
nproc; uptime; python3 --version
{ for g in serial; do python3 $D/timeline.py 1 $g; done
  for w in 16 4; do for g in split whole; do uptime; python3 $D/timeline.py $w $g; done; done; } 2>&1 | tee $OUT/timeline.log
uptime; python3 scripts/bench.py --repeats 9 --modes ahasd,async,operator_sync 2>&1 | tee $OUT/bench.log
uptime; python3 scripts/bench_study.py --workers 16 --json $OUT/study.json 2>&1 | tee $OUT/study.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --executor local --ceiling-repeats 3 --out $OUT/bench_sweep.json 2>&1 | tail -8 | tee $OUT/bench_sweep.log
uptime
