#!/bin/bash
# rr-demo with one build, the xsk ends attached natively (auto: drv on veth) against the
# generic skb path, in the order A B B A per cycle, so that neither always holds the first
# or the last slot. Keeps each run's results.json and table (logs and plots dropped).
# Kernel TCP's rows do not depend on the mode: they show the slots' noise.
# The loop is scripts/study/abba-rr-demo's.
# Usage: abba-attach.sh OUT CYCLES CASES BIN [ROUNDS]   (root; each rr-demo removes its lab)
set -euo pipefail
[ $# -eq 4 ] || [ $# -eq 5 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3; BIN=$4; ROUNDS=${5:-1}
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" "$OUT" "$N" "A B B A" \
  "A=$BIN:--attach auto" "B=$BIN:--attach skb" \
  -- --only "$CASES" --rounds "$ROUNDS" --duration 4s
