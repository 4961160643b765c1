#!/bin/bash
# User-space instructions per request of rr-server (xsk) serving PEERS on-link
# clients (rr-bench --sources) at a low open-loop rate, so that nearly every
# frame comes from a different peer than the one before: callgrind, as
# scripts/user-instructions counts, for two builds in turn.
#
# Usage: cg-peers.sh OUT CYCLES PEERS_LIST BIN_A BIN_B [RATE] [SECONDS]
# FIRST=K numbers the cycles from K (to add cycles to an OUT; odd cycles run A first).
# Needs root and valgrind. Its own lab, removed on every exit.
set -euo pipefail
OUT=$1; CYCLES=$2; PEERS=$3; A=$4; B=$5; RATE=${6:-1000}; WIN=${7:-6}
mkdir -p "$OUT"
tag=nbc$$
source "$(dirname "$0")/lab.sh"
run() { # name bindir peers cycle
  local name=$1 bin=$2 p=$3 c=$4 f="$OUT/$1-p$3-c$4"
  ip netns exec $S valgrind --tool=callgrind --callgrind-out-file="$f.cg" "$bin/rr-server" --backend xsk \
    --service echo --port 7000 --max-conns 4096 --iface ${tag}a --attach auto --addr 198.18.93.10/16 > "$f.server.log" 2>&1 &
  child=$!
  for _ in $(seq 120); do sleep 1; grep -q "listening on" "$f.server.log" && break; done
  grep -q "listening on" "$f.server.log" || { echo "rr-server did not start:" >&2; tail -n 5 "$f.server.log" >&2; exit 1; }
  ip netns exec $C "$B/rr-bench" --backend kernel --connect 198.18.93.10:7000 --bind 198.18.100.1 --sources "$p" \
    --conns "$p" --depth 1 --req-size 64 --rate $RATE --duration $((WIN + 8))s --warmup 100ms --quiet > "$f.bench.log" 2>&1 &
  local bench=$!
  sleep 5
  callgrind_control -z $child > /dev/null 2>&1; local t0; t0=$(date +%s.%N)
  sleep $WIN
  callgrind_control -d $child > /dev/null 2>&1; local t1; t1=$(date +%s.%N)
  wait $bench || echo "rr-bench failed ($name p=$p c=$c)" >&2
  kill -INT $child; wait $child 2>/dev/null || true; child=
  local d; d=$(ls "$f".cg.* | head -n 1)
  local ir; ir=$(callgrind_annotate "$d" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  python3 -c "print('$name', $p, $c, round($ir / ($RATE * ($t1 - $t0))))" | tee -a "$OUT/instructions.txt"
  mv "$d" "$f.cg"; rm -f "$f".cg.*
}
for c in $(seq "${FIRST:-1}" $(( ${FIRST:-1} + CYCLES - 1 ))); do
  for p in ${PEERS//,/ }; do
    if [ $((c % 2)) = 1 ]; then run a "$A" $p $c; run b "$B" $p $c; else run b "$B" $p $c; run a "$A" $p $c; fi
  done
done
