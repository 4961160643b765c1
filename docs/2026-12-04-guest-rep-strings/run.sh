#!/bin/bash
# `vm-tests cost --short`, closed loop and --rate 300, two variants alternating per cycle:
#   erms:   A = --erms (QEMU's max CPU, as before), B = the default (max,-erms,-fsrm)
#   attach: drv = --attach drv (the default), skb = --attach skb
# Usage: run.sh OUT CYCLES BIN_DIR erms|attach [VM_TESTS]   (root; each run removes its guest)
set -euo pipefail
OUT=$1; N=$2; BIN=$3; WHAT=$4; VMT=${5:-$BIN/vm-tests}
case $WHAT in
  erms) variants=(A B) ;;
  attach) variants=(drv skb) ;;
  *) echo "run.sh: the variants are erms or attach" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for load in closed rate300; do
    extra=(); [ $load = rate300 ] && extra=(--rate 300)
    for v in "${variants[@]}"; do
      case $v in A) flag=(--erms) ;; B) flag=() ;; *) flag=(--attach "$v") ;; esac
      "$VMT" cost --short --bin-dir "$BIN" "${extra[@]}" "${flag[@]}" --json "$OUT/$load-$v-$i.json" > "$OUT/$load-$v-$i.log" 2>&1 || true
      echo "$i $load $v: $(grep -E 'goals' "$OUT/$load-$v-$i.log" | sed 's/  */ /g' | tr '\n' ';')"
    done
  done
done
