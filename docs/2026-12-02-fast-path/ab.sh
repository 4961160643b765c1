#!/bin/bash
# A/B with rr-demo, alternating A B A B ... (one rr-demo round each), so that
# the machine's drift hits both alike. Each rr-demo invocation itself runs
# xsk and kernel back to back per case.
#
# Usage: ab.sh OUT ROUNDS CASES A_BIN_DIR A_XSK_ARGS B_BIN_DIR B_XSK_ARGS
#   e.g. ab.sh runs/offload 5 same-16,busy-same-1,rr-16 target/release "--no-csum-offload" target/release ""
# Writes OUT/{a,b}-N/results.json (rr-demo's own files, logs removed).
set -euo pipefail
OUT=$1; N=$2; CASES=$3; A=$4; AX=$5; B=$6; BX=$7
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for v in a b; do
    if [ $v = a ]; then bin=$A; x=$AX; else bin=$B; x=$BX; fi
    args=(--only "$CASES" --rounds 1 --duration 4s --out "$OUT/$v-$i")
    [ -n "$x" ] && args+=(--xsk-args "$x")
    echo "== round $i variant $v: $bin/rr-demo ${args[*]}"
    "$bin/rr-demo" "${args[@]}" > "$OUT/$v-$i.log" 2>&1 || { echo "rr-demo failed, see $OUT/$v-$i.log"; tail -5 "$OUT/$v-$i.log"; exit 1; }
    rm -rf "$OUT/$v-$i/logs" "$OUT/$v-$i"/*.png "$OUT/$v-$i"/*.svg
  done
done
