#!/bin/bash
# Issue 30, round 7: how much of the host's lower bench.py rate is its Python (3.12 there, 3.11.7 on
# the 2-core machine)? `bench.py --modes ahasd,async --repeats 9` at HEAD under each interpreter given,
# interleaved three times, on one machine. From the repository root:
#   bash benchmarks/scaling/round7/py_versions.sh PYTHON [PYTHON ...] > benchmarks/scaling/round7/py_versions.log 2>&1
set -euo pipefail
ROOT=$(pwd); W=$(mktemp -d); echo "revision $(git rev-parse --short HEAD)"; i=0
for p in "$@"; do
  "$p" -m venv "$W/v$i"; "$W/v$i/bin/pip" install -q -e "$ROOT" 2>/dev/null; i=$((i + 1))
done
uptime
for r in 1 2 3; do
  i=0
  for p in "$@"; do
    echo "== $("$W/v$i/bin/python" --version), round $r"
    "$W/v$i/bin/python" scripts/bench.py --modes ahasd,async --repeats 9 | grep -o '^[a-z]* .*per CPU-second *[0-9]* tok/s'
    i=$((i + 1))
  done
done
uptime; rm -rf "$W"
