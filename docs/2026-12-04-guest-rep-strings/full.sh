#!/bin/bash
# The full cost scenario (6.1 and new kernels; 1, 16 and 256 connections; 3 rounds) once
# with --erms and once without.
# Usage: full.sh OUT BIN_DIR [VM_TESTS]   (root)
set -euo pipefail
OUT=$1; BIN=$2; VMT=${3:-$BIN/vm-tests}
mkdir -p "$OUT"
for v in A B; do
  flag=(); [ $v = A ] && flag=(--erms)
  "$VMT" cost --bin-dir "$BIN" "${flag[@]}" --json "$OUT/full-$v-1.json" > "$OUT/full-$v-1.log" 2>&1 || true
  echo "$v: $(grep -E 'goals' "$OUT/full-$v-1.log" | sed 's/  */ /g' | tr '\n' ';')"
done
