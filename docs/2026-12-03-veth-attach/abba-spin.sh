#!/bin/bash
# busy-same-1 with the xsk ends' kernel busy polling on (A: rr-demo's --busy-poll 50, with
# SO_PREFER_BUSY_POLL) against spinning in user space only (B: --xsk-args "--busy-poll 0"),
# both natively attached (auto), A B B A per cycle. Kernel TCP's rows are the same in both.
# Usage: abba-spin.sh OUT CYCLES BIN [ROUNDS] [EXTRA rr-demo ARGS...]
set -euo pipefail
OUT=$1; N=$2; BIN=$3; ROUNDS=${4:-2}; shift 4 || shift $#
mkdir -p "$OUT"
k=0
for i in $(seq 1 "$N"); do
  for v in A B B A; do
    k=$((k + 1))
    extra=(); [ $v = B ] && extra=(--xsk-args "--busy-poll 0")
    echo "== $k $v"
    "$BIN/rr-demo" --only busy-same-1 --rounds "$ROUNDS" --duration 4s "${extra[@]}" "$@" --out "$OUT/$v-$k" > "$OUT/$v-$k.log" 2>&1 \
      || { echo "rr-demo failed, see $OUT/$v-$k.log"; exit 1; }
    find "$OUT/$v-$k/logs" -type f ! -name "*xsk.server.log" -delete; rm -f "$OUT/$v-$k"/*.png "$OUT/$v-$k"/*.svg
  done
done
