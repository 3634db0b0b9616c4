#!/bin/bash
# Issue 30 round 4 on the 2-core development machine (no device machine was lent this round):
# the round's start (f3e0d39, a worktree at $OLD: git worktree add $OLD f3e0d39) and this
# checkout, interleaved: the 200-trial study at 2 workers, cold and warm (study_parent.py), the
# sweep's overhead share per point (1 worker, in-process) and bench.py's AHASD window.
OLD=${OLD:-/tmp/old}
D=benchmarks/scaling/round4
mkdir -p $OLD/$D && cp $D/study_parent.py $D/ask_plan.py $OLD/$D/
nproc; uptime; python --version
for i in 1 2; do
  for tree in $OLD .; do
    (cd $tree && python $D/study_parent.py 2)
  done
  uptime
done
for i in 1 2; do
  for tree in $OLD .; do (cd $tree && python $D/ask_plan.py); done    # ask_plan.log
done
for tree in $OLD .; do
  echo "== $tree"
  (cd $tree && python scripts/bench_sweep.py --workers 1 --no-ceiling 2>&1 | tail -2)
  (cd $tree && python scripts/bench.py --modes ahasd --repeats 9 2>&1 | grep ahasd)
done
uptime
