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
tag=nbc$$; S=${tag}s; C=${tag}c
vg=
cleanup() { [ -n "$vg" ] && kill -INT $vg 2>/dev/null; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.93.1/16 dev ${tag}a; ip -n $C addr add 198.18.93.2/16 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
for k in $(seq 1 1000); do echo "addr add 198.18.$((100 + k / 256)).$((k % 256))/16 dev ${tag}b noprefixroute"; done | ip -n $C -batch -
run() { # name bindir peers cycle
  local name=$1 bin=$2 p=$3 c=$4 f="$OUT/$1-p$3-c$4"
  ip netns exec $S valgrind --tool=callgrind --callgrind-out-file="$f.cg" "$bin/rr-server" --backend xsk \
    --service echo --port 7000 --max-conns 4096 --iface ${tag}a --attach auto --addr 198.18.93.10/16 > "$f.server.log" 2>&1 &
  vg=$!
  for _ in $(seq 120); do sleep 1; grep -q "listening on" "$f.server.log" && break; done
  grep -q "listening on" "$f.server.log" || { echo "rr-server did not start:" >&2; tail -n 5 "$f.server.log" >&2; exit 1; }
  ip netns exec $C "$B/rr-bench" --backend kernel --connect 198.18.93.10:7000 --bind 198.18.100.1 --sources "$p" \
    --conns "$p" --depth 1 --req-size 64 --rate $RATE --duration $((WIN + 8))s --warmup 100ms --quiet > "$f.bench.log" 2>&1 &
  local bench=$!
  sleep 5
  callgrind_control -z $vg > /dev/null 2>&1; local t0; t0=$(date +%s.%N)
  sleep $WIN
  callgrind_control -d $vg > /dev/null 2>&1; local t1; t1=$(date +%s.%N)
  wait $bench || echo "rr-bench failed ($name p=$p c=$c)" >&2
  kill -INT $vg; wait $vg 2>/dev/null || true; vg=
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
