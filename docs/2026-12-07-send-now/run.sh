#!/bin/bash
# The study's runs, two builds alternated (A B B A per cycle):
#   user-space instructions per request of the stack's server (scripts/user-instructions,
#   ONLY=xsk, 1,000 req/s open loop, 6 s window) at 16 connections and at one, then rr-demo's
#   usual eight cases (scripts/study/abba-rr-demo, one round of 3 s per invocation).
# usage (root): run.sh OUT CYCLES A=BIN_DIR B=BIN_DIR
#   OUT/ui.txt: "cycle variant connections instructions" per run; OUT/demo/: abba-rr-demo's
#   folders. table.py OUT writes results.json and prints the tables.
set -euo pipefail
OUT=$1; CYCLES=$2; A=${3#A=}; B=${4#B=}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
for c in $(seq "$CYCLES"); do
  for v in A B B A; do
    dir=$A; [ "$v" = B ] && dir=$B
    for conns in 16 1; do
      n=$(ONLY=xsk "$root/scripts/user-instructions" "$dir" 1000 "$conns" 6 | awk '$1 == "xsk" { print $2 }')
      echo "$c $v $conns $n" | tee -a "$OUT/ui.txt"
    done
  done
done
"$root/scripts/study/abba-rr-demo" "$OUT/demo" "$CYCLES" "A B B A" "A=$A" "B=$B" -- \
  --only rr-1,rr-16,rr-256,same-16,busy-same-1,open-5k,loss1-16,churn-16 --rounds 1 --duration 3s --kernels epoll
