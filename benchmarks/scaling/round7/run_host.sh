#!/bin/bash
# Issue 30, the host runs still to make (one device call, under 600 s): the host's own ceiling
# (round7/host_ceiling.py, about 2-3 min) and the sweep units' CPU at 2-16 workers
# (round6/scaling_units.sh, about 5 min). On the 16-core host, from the repository root, with .whl/
# carried:  REV=<commit> bash benchmarks/scaling/round7/run_host.sh
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nproc; uptime; lscpu; grep MHz /proc/cpuinfo | sort | uniq -c; } > "$OUT/lscpu.log" 2>&1
timeout 220 python3 benchmarks/scaling/round7/host_ceiling.py --repeats 3 2>&1 | tee "$OUT/host_ceiling.log"
timeout 340 bash benchmarks/scaling/round6/scaling_units.sh > /dev/null 2>&1
ls -l "$OUT"
