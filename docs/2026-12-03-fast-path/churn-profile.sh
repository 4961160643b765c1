#!/bin/bash
# User-space instructions per connection of the stack's rr-server under churn (connect,
# one request, close; 4 in progress at once, kernel client), counted by callgrind over
# the server's whole life (start-up included, the same for every variant) and divided by
# the connections it accepted.
# Usage: [VG_ARGS=--cache-sim=yes] churn-profile.sh BIN_DIR OUT_FILE SECONDS [extra rr-server args...]   (root, valgrind)
set -euo pipefail
BIN=$1; OUTF=$2; SECS=$3; shift 3
tag=cp$$; S=${tag}s; C=${tag}c; OUT=$(mktemp -d)
vg=
cleanup() { [ -n "$vg" ] && kill -INT $vg 2>/dev/null || true; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.93.1/24 dev ${tag}a; ip -n $C addr add 198.18.93.2/24 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
tgt=198.18.93.10
ip netns exec $S valgrind --tool=callgrind ${VG_ARGS:-} --callgrind-out-file=$OUT/xsk.cg "$BIN/rr-server" --backend xsk \
  --service echo --port 7000 --max-conns 1024 --iface ${tag}a --attach auto --addr $tgt/24 "$@" > $OUT/xsk.log 2>&1 &
vg=$!
for _ in $(seq 120); do sleep 1; grep -q "listening on" $OUT/xsk.log && break; done
grep -q "listening on" $OUT/xsk.log || { echo "rr-server did not start:" >&2; tail -5 $OUT/xsk.log >&2; exit 1; }
ip netns exec $C "$BIN/rr-bench" --backend kernel --connect $tgt:7000 --bind 198.18.93.2 --pattern churn --conns 4 \
  --req-size 64 --duration ${SECS}s --warmup 100ms > $OUT/bench 2>&1
kill -INT $vg; wait $vg || true; vg=
cp $OUT/xsk.cg "$OUTF"
acc=$(grep -oE "xsk stack: accepted [0-9]+" $OUT/xsk.log | awk '{print $4}')
ir=$(callgrind_annotate "$OUTF" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "connections accepted: $acc"
echo "instructions: $ir"
python3 -c "print('per connection:', round($ir / $acc))"
