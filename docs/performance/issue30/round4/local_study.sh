#!/bin/bash
# Issue 30 round 4 on the 2-core development machine: the 200-trial study at 2 workers, the
# round's start (a worktree of f3e0d39 at $OLD) and this checkout interleaved, twice each.
OLD=${OLD:-/tmp/old}
D=docs/performance/issue30/round4
uptime
for i in 1 2; do
  python $OLD/$D/study_parent.py 2
  python $D/study_parent.py 2
  uptime
done
