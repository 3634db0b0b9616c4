#!/bin/bash
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
nproc; uptime
python3 scripts/bench_sweep.py --workers 1,4,16 --granularity split,whole --executor both --out $OUT/bench_sweep.json 2>&1 | grep -v "^ \|^Traceback\|^tornado\|^distributed\|^The above\|^$\|raise \|return await\|\^" | tee $OUT/bench_sweep.log
uptime; python3 scripts/bench_sweep.py --workers 1,16 --granularity split --seeds 4 --out $OUT/bench_sweep_192.json 2>&1 | tee $OUT/bench_sweep_192.log
uptime; python3 scripts/bench.py --repeats 9 --out $OUT/bench.json 2>&1 | tee $OUT/bench.log
uptime; python3 scripts/bench_study.py --workers 16 --json $OUT/study_repro.json 2>&1 | tee $OUT/study.log
uptime; python3 scripts/bench_study.py --workers 16 --fastest --json $OUT/study_fastest.json 2>&1 | tee -a $OUT/study.log
uptime
