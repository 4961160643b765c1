#!/bin/bash
# User-space instructions per request of the stack's rr-server, two builds alternating
# (A B B A per cycle): callgrind, open loop 1,000 req/s over 16 connections from a kernel
# client, the 8 s window of docs/2026-12-02-fast-path/profile.sh; breakdown.py's totals.
# Usage: cg.sh OUT CYCLES BIN_A BIN_B [CONNS]   (root, valgrind; each run removes its lab;
# CONNS 16 unless given: the 2026-12-04 fast-egress study added it)
set -euo pipefail
OUT=$1; N=$2; A=$3; B=$4; CONNS=${5:-16}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
k=0
for i in $(seq 1 "$N"); do
  for v in A B B A; do
    k=$((k + 1))
    bin=$A; [ $v = B ] && bin=$B
    reqs=$("$here/docs/2026-12-02-fast-path/profile.sh" "$bin" "$OUT/$v-$k.cg" 1000 "$CONNS" 8 | awk '/requests in window/ {print $4}')
    python3 "$here/docs/2026-12-02-fast-path/breakdown.py" "$OUT/$v-$k.cg" "$reqs" --json > "$OUT/$v-$k.json"
    echo "$k $v $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['total_per_request'])" "$OUT/$v-$k.json") instructions/request ($reqs requests)"
    gzip -f "$OUT/$v-$k.cg"
  done
done
