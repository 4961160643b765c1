#!/bin/bash
# rr-demo, fast path against --no-fast-path in the order A B B A per cycle (the same
# binary), so that neither variant always holds the first or the last slot.
# The loop is scripts/study/abba-rr-demo's.
# Usage: abba.sh OUT CYCLES CASES   (root; from the repository's top)
set -euo pipefail
[ $# -eq 3 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" "$OUT" "$N" "fast general general fast" \
  fast=target/release "general=target/release:--xsk-args --no-fast-path" \
  -- --only "$CASES" --rounds 1 --duration 4s
