#!/bin/bash
# Guest CPU per request (`vm-tests cost --short`, closed loop and --rate 300), two builds
# of the apps alternating (A B, then B A, per cycle); the same vm-tests for both.
# Usage: [LOADS="closed rate300"] guest.sh OUT CYCLES BIN_A BIN_B VM_TESTS [FIRST_CYCLE]
# (root; each run removes its guest)
set -euo pipefail
OUT=$1; N=$2; A=$3; B=$4; VMT=$5; FIRST=${6:-1}
mkdir -p "$OUT"
for i in $(seq "$FIRST" $((FIRST + N - 1))); do
  order=(A B); [ $((i % 2)) = 0 ] && order=(B A)
  for load in ${LOADS:-closed rate300}; do
    extra=(); [ $load = rate300 ] && extra=(--rate 300)
    for v in "${order[@]}"; do
      bin=$A; [ $v = B ] && bin=$B
      "$VMT" cost --short --bin-dir "$bin" "${extra[@]}" --json "$OUT/$load-$v-$i.json" > "$OUT/$load-$v-$i.log" 2>&1 || true
      echo "$i $load $v: $(grep -E 'goals' "$OUT/$load-$v-$i.log" | sed 's/  */ /g' | tr '\n' ';')"
    done
  done
done
