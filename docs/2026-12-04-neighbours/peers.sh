#!/bin/bash
# Many on-link clients against one rr-server (xsk): a kernel client in its own
# namespace whose connections come from PEERS different source addresses
# (rr-bench --sources), all on the server's /16, so the server's neighbour
# cache holds one entry per address. Two rr-server builds, A B B A per cycle.
#
# Usage: peers.sh OUT CYCLES PEERS_LIST BIN_A BIN_B [SECONDS]
#   PEERS_LIST  comma-separated, e.g. 16,64,65,100,256,1000
#   BIN_A/B     directories with rr-server (rr-bench is taken from BIN_B)
# FIRST=K numbers the cycles from K (to add cycles to an OUT; odd cycles run A first).
# Needs root. Builds its own lab (198.18.93.0/24 and 198.18.100.0/22 inside a
# /16 in two fresh namespaces) and removes it on every exit. Bounded: each run
# is SECONDS (default 5) closed loop, depth 1, plus warm-up and drain.
set -euo pipefail
OUT=$1; CYCLES=$2; PEERS=$3; A=$4; B=$5; SECS=${6:-5}
mkdir -p "$OUT"
tag=nbp$$
source "$(dirname "$0")/lab.sh"
run() { # name bindir peers cycle
  local name=$1 bin=$2 p=$3 c=$4 f="$OUT/$1-p$3-c$4"
  ip netns exec $S "$bin/rr-server" --backend xsk --service echo --port 7000 --max-conns 4096 \
    --iface ${tag}a --attach auto --addr 198.18.93.10/16 > "$f.server.log" 2>&1 &
  child=$!
  for _ in $(seq 100); do sleep 0.1; grep -q "listening on" "$f.server.log" && break; done
  grep -q "listening on" "$f.server.log" || { echo "rr-server did not start:" >&2; tail -5 "$f.server.log" >&2; exit 1; }
  ip netns exec $C "$B/rr-bench" --backend kernel --connect 198.18.93.10:7000 --bind 198.18.100.1 \
    --sources "$p" --conns "$p" --depth 1 --req-size 64 --duration ${SECS}s --warmup 500ms \
    --server-pid $child --quiet --json "$f.json" > "$f.bench.log" 2>&1 || echo "rr-bench failed ($name p=$p c=$c)" >&2
  kill -INT $child; wait $child 2>/dev/null || true; child=
}
for c in $(seq "${FIRST:-1}" $(( ${FIRST:-1} + CYCLES - 1 ))); do
  for p in ${PEERS//,/ }; do
    if [ $((c % 2)) = 1 ]; then run a "$A" $p $c; run b "$B" $p $c; else run b "$B" $p $c; run a "$A" $p $c; fi
    echo "cycle $c peers $p done" >&2
  done
done
