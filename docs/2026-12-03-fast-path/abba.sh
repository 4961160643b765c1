#!/bin/bash
# rr-demo, fast path against --no-fast-path in the order A B B A per cycle (the same
# binary), so that neither variant always holds the first or the last slot.
# Usage: abba.sh OUT CYCLES CASES   (root; from the repository's top)
set -euo pipefail
OUT=$1; N=$2; CASES=$3
mkdir -p "$OUT"
k=0
for i in $(seq 1 "$N"); do
  for v in fast general general fast; do
    k=$((k + 1))
    x=""; [ $v = general ] && x="--no-fast-path"
    args=(--only "$CASES" --rounds 1 --duration 4s --out "$OUT/$v-$k")
    [ -n "$x" ] && args+=(--xsk-args "$x")
    echo "== $k $v"
    target/release/rr-demo "${args[@]}" > "$OUT/$v-$k.log" 2>&1 || { echo "rr-demo failed, see $OUT/$v-$k.log"; exit 1; }
    rm -rf "$OUT/$v-$k/logs" "$OUT/$v-$k"/*.png "$OUT/$v-$k"/*.svg
  done
done
