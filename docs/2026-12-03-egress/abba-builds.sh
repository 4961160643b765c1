#!/bin/bash
# rr-demo, two builds in the order A B B A per cycle, so that neither always holds the
# first or the last slot. Keeps each run's results.json and table (logs and plots dropped).
# Usage: abba-builds.sh OUT CYCLES CASES BIN_A BIN_B   (root; each rr-demo removes its lab)
set -euo pipefail
OUT=$1; N=$2; CASES=$3; A=$4; B=$5
mkdir -p "$OUT"
k=0
for i in $(seq 1 "$N"); do
  for v in A B B A; do
    k=$((k + 1))
    bin=$A; [ $v = B ] && bin=$B
    echo "== $k $v"
    "$bin/rr-demo" --only "$CASES" --rounds 1 --duration 4s --out "$OUT/$v-$k" > "$OUT/$v-$k.log" 2>&1 \
      || { echo "rr-demo failed, see $OUT/$v-$k.log"; exit 1; }
    rm -rf "$OUT/$v-$k/logs" "$OUT/$v-$k"/*.png "$OUT/$v-$k"/*.svg
  done
done
