#!/bin/bash
# rr-demo, two builds in the order A B B A per cycle, so that neither always holds the
# first or the last slot. Keeps each run's results.json and table (logs and plots dropped).
# The loop is scripts/study/abba-rr-demo's; scripts/abba-table makes the table.
# Usage: abba-builds.sh OUT CYCLES CASES BIN_A BIN_B   (root; each rr-demo removes its lab)
set -euo pipefail
[ $# -eq 5 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3; A=$4; B=$5
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" "$OUT" "$N" "A B B A" "A=$A" "B=$B" \
  -- --only "$CASES" --rounds 1 --duration 4s
