#!/bin/bash
# The xsk server's XDP attach on virtio_net, native (drv, the default) against generic (skb),
# under the cost scenario's default CPU (no ERMS): `vm-tests cost --short [--rate 300]`,
# alternating drv skb per cycle.
# Usage: attach.sh OUT CYCLES BIN_DIR [VM_TESTS]   (root)
set -euo pipefail
OUT=$1; N=$2; BIN=$3; VMT=${4:-$BIN/vm-tests}
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for load in closed rate300; do
    extra=(); [ $load = rate300 ] && extra=(--rate 300)
    for v in drv skb; do
      "$VMT" cost --short --bin-dir "$BIN" "${extra[@]}" --attach $v --json "$OUT/$load-$v-$i.json" > "$OUT/$load-$v-$i.log" 2>&1 || true
      echo "$i $load $v: $(grep -E 'goals' "$OUT/$load-$v-$i.log" | sed 's/  */ /g' | tr '\n' ';')"
    done
  done
done
