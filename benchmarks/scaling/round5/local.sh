#!/bin/bash
# Issue 30 round 5 on the 2-core development machine (no device machine was lent this round
# either): the round's start (e7a74c6, a worktree at $OLD: git worktree add $OLD e7a74c6) and
# this checkout, interleaved: the sweep's overhead share per point (bench_sweep --workers 1,
# in-process), the 200-trial study at 2 workers, cold and warm (round4/study_parent.py), and
# bench.py's AHASD window.
OLD=${OLD:-/tmp/old}
R4=benchmarks/scaling/round4
python --version
OLD=$OLD bash $R4/overhead.sh   # nproc, uptime, then bench_sweep --workers 1 twice per tree, interleaved
for i in 1 2; do
  for tree in $OLD .; do
    echo "== $tree"
    (cd $tree && python $R4/study_parent.py 2)
  done
  uptime
done
for tree in $OLD .; do
  echo "== $tree"
  (cd $tree && python scripts/bench.py --modes ahasd --repeats 9 2>&1 | grep ahasd)
done
uptime
