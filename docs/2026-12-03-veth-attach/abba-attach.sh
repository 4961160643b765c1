#!/bin/bash
# rr-demo with one build, the xsk ends attached natively (auto: drv on veth) against the
# generic skb path, in the order A B B A per cycle, so that neither always holds the first
# or the last slot. Keeps each run's results.json and table (logs and plots dropped).
# Kernel TCP's rows do not depend on the mode: they show the slots' noise.
# Usage: abba-attach.sh OUT CYCLES CASES BIN [ROUNDS]   (root; each rr-demo removes its lab)
set -euo pipefail
OUT=$1; N=$2; CASES=$3; BIN=$4; ROUNDS=${5:-1}
mkdir -p "$OUT"
k=0
for i in $(seq 1 "$N"); do
  for v in A B B A; do
    k=$((k + 1))
    mode=auto; [ $v = B ] && mode=skb
    echo "== $k $v ($mode)"
    "$BIN/rr-demo" --only "$CASES" --rounds "$ROUNDS" --duration 4s --attach $mode --out "$OUT/$v-$k" > "$OUT/$v-$k.log" 2>&1 \
      || { echo "rr-demo failed, see $OUT/$v-$k.log"; exit 1; }
    rm -rf "$OUT/$v-$k/logs" "$OUT/$v-$k"/*.png "$OUT/$v-$k"/*.svg
  done
done
