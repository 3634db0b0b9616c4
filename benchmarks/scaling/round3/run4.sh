#!/bin/bash
# Issue 30 round 3, device run 4: a 4x larger sweep (pim_design_space with seeds 0..3, 192 points)
# on 16 workers and in one process, unit timelines (final code).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
D=benchmarks/scaling/round3
{ nproc; uptime; python3 $D/timeline.py 16 split 4; uptime; python3 $D/timeline.py 16 split; uptime; python3 $D/timeline.py 1 serial 4; uptime; } 2>&1 | tee $OUT/timeline192.log
