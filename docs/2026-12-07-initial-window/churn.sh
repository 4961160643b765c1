#!/bin/bash
# Connection churn against the stack's server, two builds alternated: a kernel client opens a
# connection, sends one echo request of SIZE bytes, reads the answer and closes, 4 at a time,
# for 3 s after 0.5 s of warm-up (rr-bench --pattern churn), the client's namespace set up as
# rr-demo's churn cases set it. Each run in a fresh lab of two
# namespaces joined by veth (198.18.93.0/24), removed on every exit.
# usage (root): [CLIENT_DEFAULTS=1] churn.sh OUT CYCLES "SIZE..." A=BIN_DIR B=BIN_DIR
#   each cycle runs A B B A for every size; OUT/NAME-K-SIZE.json is rr-bench's --json
set -euo pipefail
OUT=$1; CYCLES=$2; SIZES=$3; A=${4#A=}; B=${5#B=}
mkdir -p "$OUT"
tag=iw$$; S=${tag}s; C=${tag}c; SP=
down() { [ -n "$SP" ] && kill $SP 2>/dev/null; ip netns del $S 2>/dev/null; ip netns del $C 2>/dev/null; SP=; true; }
trap down EXIT INT TERM
run() { # BIN_DIR SIZE JSON
  ip netns add $S; ip netns add $C
  ip link add ${tag}a type veth peer name ${tag}b
  ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
  ip -n $S addr add 198.18.93.1/24 dev ${tag}a; ip -n $C addr add 198.18.93.2/24 dev ${tag}b
  for n in $S:${tag}a $C:${tag}b; do ip -n ${n%%:*} link set ${n#*:} up; ip -n ${n%%:*} link set lo up; done
  # As rr-demo's churn cases: the kernel client closes first; no TIME-WAIT in its namespace
  # (thousands of ports held for 60 s stall its connects by milliseconds), more ports.
  # CLIENT_DEFAULTS=1 leaves the client's namespace as it comes (the study's second set).
  [ -n "${CLIENT_DEFAULTS:-}" ] || ip netns exec $C sysctl -qw net.ipv4.tcp_max_tw_buckets=0 net.ipv4.ip_local_port_range="10000 65000"
  ip netns exec $S "$1/rr-server" --backend xsk --service echo --port 7000 --max-conns 1024 \
    --iface ${tag}a --attach auto --addr 198.18.93.10/24 > "$3.server.log" 2>&1 & SP=$!
  for _ in $(seq 50); do sleep 0.2; grep -q "listening on" "$3.server.log" && break; done
  ip netns exec $C "$1/rr-bench" --backend kernel --connect 198.18.93.10:7000 --service echo --pattern churn \
    --conns 4 --req-size "$2" --duration 3s --warmup 500ms --json "$3" --quiet > /dev/null 2>&1 || true
  kill -INT $SP; wait $SP 2>/dev/null || true
  SP=; down
}
k=0
for _ in $(seq "$CYCLES"); do
  for v in A B B A; do
    k=$((k + 1)); dir=$A; [ "$v" = B ] && dir=$B
    for size in $SIZES; do run "$dir" "$size" "$OUT/$v-$k-$size.json"; echo "$v-$k $size $(date +%T)"; done
  done
done
