#!/bin/bash
# A/B with rr-demo, alternating A B A B ... (one rr-demo round each), so that
# the machine's drift hits both alike. Each rr-demo invocation itself runs
# xsk and kernel back to back per case. The loop is scripts/study/abba-rr-demo's.
#
# Usage: ab.sh OUT ROUNDS CASES A_BIN_DIR A_XSK_ARGS B_BIN_DIR B_XSK_ARGS
#   e.g. ab.sh runs/offload 5 same-16,busy-same-1,rr-16 target/release "--no-csum-offload" target/release ""
# Writes OUT/{a,b}-N/results.json (rr-demo's own files, logs removed).
set -euo pipefail
[ $# -eq 7 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3; A=$4; AX=$5; B=$6; BX=$7
a="a=$A"; [ -n "$AX" ] && a+=":--xsk-args $(printf %q "$AX")"
b="b=$B"; [ -n "$BX" ] && b+=":--xsk-args $(printf %q "$BX")"
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" "$OUT" "$N" "a b" "$a" "$b" \
  -- --only "$CASES" --rounds 1 --duration 4s
