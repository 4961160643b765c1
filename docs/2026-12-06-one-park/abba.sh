#!/bin/bash
# rr-demo, two builds in the order A B B A per cycle (as ../2026-12-03-egress/abba-builds.sh),
# against the epoll kernel backend only, with the Redis cases (REDIS_PY_PYTHON: redis-py's
# interpreter). Keeps each run's results.json and log, and goes on after a failed run;
# demo.py folds them. The loop is scripts/study/abba-rr-demo's.
# Usage: abba.sh OUT CYCLES CASES BIN_A BIN_B   (root; each rr-demo removes its lab)
set -uo pipefail
[ $# -eq 5 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3; A=$4; B=$5
REDIS_PY_PYTHON=/work/main/target/redis-py/bin/python \
  "$(dirname "$0")/../../scripts/study/abba-rr-demo" --keep-going "$OUT" "$N" "A B B A" "A=$A" "B=$B" \
  -- --only "$CASES" --kernels epoll --rounds 1 --duration 4s
echo finished
