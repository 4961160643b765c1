#!/bin/bash
# rr-demo, two builds in the order A B B A per cycle (as ../2026-12-03-egress/abba-builds.sh),
# against the epoll kernel backend only, with the Redis cases (REDIS_PY_PYTHON: redis-py's
# interpreter). Keeps each run's results.json and log; demo.py folds them.
# Usage: abba.sh OUT CYCLES CASES BIN_A BIN_B   (root; each rr-demo removes its lab)
set -uo pipefail
OUT=$1; N=$2; CASES=$3; A=$4; B=$5
mkdir -p "$OUT"; k=0
for i in $(seq 1 "$N"); do for v in A B B A; do
  k=$((k + 1)); bin=$A; [ $v = B ] && bin=$B
  echo "== $k $v $(date +%T)"
  REDIS_PY_PYTHON=/work/main/target/redis-py/bin/python "$bin/rr-demo" --only "$CASES" --kernels epoll --rounds 1 --duration 4s --out "$OUT/$v-$k" > "$OUT/$v-$k.log" 2>&1 || echo "rr-demo failed, see $OUT/$v-$k.log"
  rm -rf "$OUT/$v-$k/logs" "$OUT/$v-$k"/*.png "$OUT/$v-$k"/*.svg
done; done
echo finished
