#!/bin/bash
# Where the stack server's user-space instructions per request go: the same
# run as scripts/user-instructions (callgrind, open loop, kernel client), xsk
# only, keeping callgrind's output for callgrind_annotate.
#
# Usage: profile.sh BIN_DIR OUT_FILE [RATE] [CONNS] [SECONDS] [extra rr-server args...]
# Needs root and valgrind. Removes its lab on every exit. VG_ARGS adds callgrind
# options, as churn-profile.sh does (2026-12-05-goals: "--dump-instr=yes" for its inline.py).
set -euo pipefail
BIN=$1; OUTF=$2; RATE=${3:-1000}; CONNS=${4:-16}; WIN=${5:-8}; shift 5 || shift $#
tag=fp$$; S=${tag}s; C=${tag}c; OUT=$(mktemp -d)
vg=
cleanup() { [ -n "$vg" ] && kill -INT $vg 2>/dev/null || true; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.92.1/24 dev ${tag}a; ip -n $C addr add 198.18.92.2/24 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
tgt=198.18.92.10
ip netns exec $S valgrind --tool=callgrind ${VG_ARGS:-} --callgrind-out-file=$OUT/xsk.cg "$BIN/rr-server" --backend xsk \
  --service echo --port 7000 --max-conns 1024 --iface ${tag}a --attach auto --addr $tgt/24 "$@" > $OUT/xsk.log 2>&1 &
vg=$!
for _ in $(seq 120); do sleep 1; grep -q "listening on" $OUT/xsk.log && break; done
grep -q "listening on" $OUT/xsk.log || { echo "rr-server did not start:" >&2; tail -5 $OUT/xsk.log >&2; exit 1; }
ip netns exec $C "$BIN/rr-bench" --backend kernel --connect $tgt:7000 --bind 198.18.92.2 --conns $CONNS --depth 1 \
  --req-size 64 --rate $RATE --duration $((WIN + 8))s --warmup 100ms > $OUT/bench 2>&1 &
bench=$!
sleep 4
callgrind_control -z $vg > /dev/null 2>&1; t0=$(date +%s.%N)
sleep $WIN
callgrind_control -d $vg > /dev/null 2>&1; t1=$(date +%s.%N)
wait $bench
kill -INT $vg; wait $vg || true; vg=
f=$(ls $OUT/xsk.cg.* | head -1)
cp "$f" "$OUTF"
grep -m1 "tx_csum" $OUT/xsk.log | sed 's/.*\(tx_csum=[a-z]*\).*/\1/' || true
python3 -c "print('requests in window:', round($RATE * ($t1 - $t0)))"
