#!/bin/bash
# The study's runs, two builds alternated (A B B A per cycle):
#   user-space instructions per request of the stack's server at light load over 16
#   connections (300 req/s), at 1,000 req/s over 16 and over one
#   (scripts/study/abba-user-instructions);
#   the guest's CPU per request in the -icount guest at 300 req/s over 16 connections, kernel
#   TCP and the stack (vm-tests cost, 3 rounds), once per build in the order A B B A;
#   rr-demo's usual eight cases (scripts/study/abba-rr-demo, one round of 3 s per invocation).
# usage (root): run.sh OUT CYCLES A=BIN_DIR B=BIN_DIR
#   table.py OUT writes results.json and prints the tables.
set -euo pipefail
OUT=$1; CYCLES=$2; A=${3#A=}; B=${4#B=}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT/cost"
"$root/scripts/study/abba-user-instructions" "$OUT" "$CYCLES" "A=$A" "B=$B" 300/16 1000/16 1000/1
k=0
for v in A B B A; do
  k=$((k + 1))
  dir=$A; [ "$v" = B ] && dir=$B
  "$root/target/release/vm-tests" cost --kernels 6.1 --conns 16 --rate 300 --servers kernel,xsk \
    --bin-dir "$dir" --json "$OUT/cost/$v-$k.json" > "$OUT/cost/$v-$k.log" 2>&1
done
"$root/scripts/study/abba-rr-demo" "$OUT/demo" "$CYCLES" "A B B A" "A=$A" "B=$B" -- \
  --only rr-1,rr-16,rr-256,same-16,busy-same-1,open-5k,loss1-16,churn-16 --rounds 1 --duration 3s --kernels epoll
