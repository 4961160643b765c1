#!/bin/bash
# Alternating callgrind profiles of the stack server (docs/2026-12-02-fast-path/profile.sh:
# open loop, 1,000 requests/s, kernel client, 8 s window), A B per cycle; prints user-space
# instructions per request of each run and keeps the profiles as OUT/A-i.cg, OUT/B-i.cg.
# Usage: [CONNS=16] cg.sh OUT CYCLES BIN_A BIN_B   (root, valgrind)
set -euo pipefail
O=$1; N=$2; A=$3; B=$4; mkdir -p "$O"
P="$(dirname "$0")/../2026-12-02-fast-path/profile.sh"
for i in $(seq "$N"); do for v in A B; do
  bin=$A; [ $v = B ] && bin=$B
  r=$("$P" "$bin" "$O/$v-$i.cg" 1000 "${CONNS:-16}" 8 2>&1 | awk '/requests in window/{print $4}')
  t=$(callgrind_annotate "$O/$v-$i.cg" 2>/dev/null | awk '/PROGRAM TOTALS/{gsub(",","",$1); print $1}')
  echo "$v $i $(python3 -c "print(round($t/$r))") requests=$r"
done; done
