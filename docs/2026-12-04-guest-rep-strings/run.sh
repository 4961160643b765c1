#!/bin/bash
# Guest cost with and without ERMS in the guest CPU, alternating (A = --erms, QEMU's max as
# before; B = the new default, max,-erms,-fsrm): `vm-tests cost --short`, closed loop and
# --rate 300, CYCLES times each.
# Usage: run.sh OUT CYCLES BIN_DIR [VM_TESTS]   (root; each run removes its guest and lab)
set -euo pipefail
OUT=$1; N=$2; BIN=$3; VMT=${4:-$BIN/vm-tests}
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for load in closed rate300; do
    extra=(); [ $load = rate300 ] && extra=(--rate 300)
    for v in A B; do
      flag=(); [ $v = A ] && flag=(--erms)
      "$VMT" cost --short --bin-dir "$BIN" "${extra[@]}" "${flag[@]}" --json "$OUT/$load-$v-$i.json" > "$OUT/$load-$v-$i.log" 2>&1 || true
      echo "$i $load $v: $(grep -E 'goals' "$OUT/$load-$v-$i.log" | sed 's/  */ /g' | tr '\n' ';')"
    done
  done
done
