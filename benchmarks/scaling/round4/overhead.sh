#!/bin/bash
# Issue 30 round 4 on the 2-core development machine: the sweep's overhead share per point
# (bench_sweep.py --workers 1: 48-point pim_design_space in one process), the round's start
# (f3e0d39, a worktree at $OLD: git worktree add $OLD f3e0d39) and this checkout, interleaved twice.
OLD=${OLD:-/tmp/old}
nproc; uptime
echo "columns: executor units workers points wall-s points/s efficiency ceiling sched.eff overhead/point"
for i in 1 2; do
  for tree in $OLD .; do
    echo "== $tree"
    (cd $tree && python scripts/bench_sweep.py --workers 1 --no-ceiling 2>&1 | tail -1)
  done
done
uptime
