#!/usr/bin/env bash
# Regenerate every stamped document (scripts/docs.py STAMPED) and the MoE sweep page at HEAD, the
# slow studies side by side. A developer tool: it rewrites files under docs/ in place (each study
# writes its own files atomically and stamps them with the result fingerprint of this code).
#
#   WORKERS=16 NETWORK_TRACES=DIR bash scripts/regenerate_stamped.sh [LOGDIR]
#
# WORKERS: cores to share out (default 2; the studies get a share each, so 16 is the intended
# size: about 10 minutes there). NETWORK_TRACES: the folder of mahimahi cellular traces the
# mobile-cloud study replays (where to get them: docs/references.md, [mahimahi]; without it only
# its constant links run). Afterwards run
# `python scripts/docs.py` (the README and docs result blocks) and `python scripts/docs.py --check`.
set -uo pipefail
cd "$(dirname "$0")/.."
W=${WORKERS:-2}
PY=${PYTHON:-python3}
LOG=${1:-/tmp/ahasd_regenerate_logs}
mkdir -p "$LOG"
: > "$LOG/status"
share() { local n=$(( W * $1 / 16 )); [ "$n" -lt 1 ] && n=1; echo "$n"; }
job() {   # job NAME COMMAND...: run in the background, log, record the exit code and wall time
  local name=$1; shift
  ( t0=$(date +%s); bash -c "$*" > "$LOG/$name.log" 2>&1; rc=$?
    echo "$name rc=$rc $(( $(date +%s) - t0 )) s" >> "$LOG/status" ) &
}
PAPER=$(mktemp -d)/paper
STUDY=$(mktemp -d)/where_ahasd_wins
SWEEPS=$(mktemp -d)
NET=${NETWORK_TRACES:+--traces $NETWORK_TRACES}

job reproduction "$PY scripts/reproduce_paper.py --workers $(share 2) --out $PAPER && \
  $PY scripts/docs.py --reproduction $PAPER --only headline"
job where_ahasd_wins "$PY -m ahasd_sim optimize --config hw_configs/studies/where_ahasd_wins.yaml \
    --workers $(share 6) --out $STUDY --no-progress && \
  $PY -m ahasd_sim sensitivity --config hw_configs/studies/where_ahasd_wins.yaml --workers $(share 6) \
    --out $STUDY --no-progress && \
  $PY scripts/confirm_study_winners.py hw_configs/studies/where_ahasd_wins.yaml $STUDY/trials.csv \
    --out docs/studies/where_ahasd_wins_confirmed.csv && \
  $PY scripts/publish_study.py $STUDY --intro docs/studies/intros/where_ahasd_wins.md && \
  $PY scripts/docs.py --stamp docs/studies/where_ahasd_wins.md \
    --made-by 'docs/studies/intros/where_ahasd_wins.md lists the commands'"
job speculation_map "$PY scripts/speculation_map.py --workers $(share 4) --out $(mktemp -d)/map --no-progress"
job moe_study "($PY scripts/moe_study.py --part 0 & $PY scripts/moe_study.py --part 1; wait) && \
  $PY scripts/moe_study.py --merge"
job hyco_study "$PY scripts/hyco_study.py --workers $(share 1) $NET"
job small_studies "$PY scripts/sustained_study.py && $PY scripts/study_modern_speculation.py && \
  $PY scripts/pim_microarchitecture_study.py"
job moe_sweeps "for s in moe_cache_capacity moe_pcie_bandwidth moe_predictor_recall; do \
    $PY -m ahasd_sim sweep --config hw_configs/sweeps/\$s.yaml --workers $(share 2) --out $SWEEPS/\$s --no-progress \
    || exit 1; done && \
  $PY scripts/plot_moe_sweep.py --cache $SWEEPS/moe_cache_capacity --pcie $SWEEPS/moe_pcie_bandwidth \
    --recall $SWEEPS/moe_predictor_recall --out docs/moe-offload \
    --note \"\$(sed -n 5p docs/moe-offload/moe_policies_sweep.md)\""
wait
cat "$LOG/status"
! grep -qv "rc=0" "$LOG/status"
