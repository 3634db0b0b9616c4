#!/bin/bash
# Issue 30, round 6, the host run this round could not make (the device's starts failed): does a
# sweep unit's CPU grow with the number of processes running at once (the host's shared caches,
# memory bandwidth or SMT siblings) rather than with how the sweep splits its work? The 96-point
# pim_design_space (--seeds 2) unit timeline at 2, 4, 8 and 16 workers, between two in-process runs;
# compare "sum CPU" of the units with the serial runs' CPU. On the 16-core host, from the
# repository root, with .whl/ carried (REV=<commit> bash benchmarks/scaling/round6/scaling_units.sh).
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 AHASD_SIM_GIT_REVISION=${REV:-unknown}
D=benchmarks/scaling/round3
{ nproc; uptime; lscpu | grep -i 'thread\|core\|socket\|cache\|numa'
  for a in "1 serial 2" "2 split 2" "4 split 2" "8 split 2" "16 split 2" "1 serial 2"; do
    echo "== $a"; timeout 150 python3 $D/timeline.py $a | grep -v 'busy wall per\|last 8'; uptime
  done; } 2>&1 | tee $OUT/scaling_units.log
