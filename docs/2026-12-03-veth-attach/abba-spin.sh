#!/bin/bash
# busy-same-1 with the xsk ends' kernel busy polling on (A: rr-demo's --busy-poll 50, with
# SO_PREFER_BUSY_POLL) against spinning in user space only (B: --xsk-args "--busy-poll 0"),
# both natively attached (auto), A B B A per cycle. Kernel TCP's rows are the same in both.
# Keeps the xsk servers' logs. The loop is scripts/study/abba-rr-demo's.
# Usage: abba-spin.sh OUT CYCLES BIN [ROUNDS] [EXTRA rr-demo ARGS...]
set -euo pipefail
[ $# -ge 3 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; BIN=$3; ROUNDS=${4:-2}; shift 4 || shift $#
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" --keep-logs '*xsk.server.log' "$OUT" "$N" "A B B A" \
  "A=$BIN" "B=$BIN:--xsk-args '--busy-poll 0'" \
  -- --only busy-same-1 --rounds "$ROUNDS" --duration 4s "$@"
