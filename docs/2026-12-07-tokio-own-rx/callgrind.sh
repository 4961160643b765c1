#!/bin/bash
# User-space instructions per request of axum_server (HTTP/1.1 GET /), on tokio's own listener
# or on the tokio adapter over the stack: callgrind around N requests of h2load --h1 -c CONNS
# from the other end of a veth pair (after 500 to warm up). Needs root and valgrind.
# usage: callgrind.sh EXAMPLES_DIR tokio|xsk N [CONNS] [KEEP.cg]
set -euo pipefail
D=$1; MODE=$2; N=$3; C=${4:-1}; KEEP=${5:-}
A=tcg$$a; B=tcg$$b; OUT=$(mktemp -d)
cleanup() { pkill -f "callgrind-out-file=$OUT/" 2>/dev/null || true; ip netns del $A 2>/dev/null || true; ip netns del $B 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT INT TERM
ip netns add $A; ip netns add $B
ip -n $A link add $A type veth peer $B netns $B
ip -n $A addr add 198.19.252.1/24 dev $A; ip -n $B addr add 198.19.252.2/24 dev $B
for n in $A $B; do ip -n $n link set $n up; ip -n $n link set lo up; done
if [ "$MODE" = xsk ]; then args="xsk $A 198.19.252.100/24 8080"; url=http://198.19.252.100:8080/
else args="tokio 8080"; url=http://198.19.252.1:8080/; fi
ip netns exec $A valgrind --tool=callgrind --callgrind-out-file=$OUT/cg.%p "$D/axum_server" $args > $OUT/log 2>&1 &
for _ in $(seq 60); do sleep 1; grep -q " on " $OUT/log && break; done
grep -q " on " $OUT/log || { echo "axum_server did not start:" >&2; tail -5 $OUT/log >&2; exit 1; }
ip netns exec $B h2load --h1 -c "$C" -n 500 "$url" > /dev/null
vg=$(pgrep -f "callgrind-out-file=$OUT/" | head -1)
callgrind_control -z "$vg" > /dev/null
ip netns exec $B h2load --h1 -c "$C" -n "$N" "$url" | grep -q "$N succeeded, 0 failed" || { echo "h2load failed" >&2; exit 1; }
callgrind_control -d "$vg" > /dev/null
kill -INT "$vg"; wait "$vg" 2>/dev/null || true
f=$(ls -S $OUT/cg.* | head -1)
[ -n "$KEEP" ] && cp "$f" "$KEEP"
ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
python3 -c "print('$MODE', $C, round($ir / $N))"
