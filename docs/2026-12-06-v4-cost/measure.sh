#!/bin/bash
# The study's copy of scripts/user-instructions: the xsk server only, and KEEP=FILE keeps its
# callgrind file (for callgrind_annotate). Otherwise the same lab, load and arithmetic.
#
# User-space instructions per request of rr-server, xsk against kernel TCP,
# counted by callgrind: deterministic where CPU time on this shared machine
# is not (no hardware PMU here, and run-to-run noise of 20-40% at light load).
#
# It counts only what the server executes in user space: for kernel TCP that
# leaves out the TCP work done in the kernel (recvfrom/sendto), for xsk it is
# smoltcp, the engine and the port. So it is the instrument for the part of
# the cost where the stack can lose, not a full CPU comparison (that is
# rr-demo's and vm-tests cost's job).
#
# Usage: [XSK_ARGS="..."] [FAMILY=6] scripts/user-instructions [BIN_DIR] [RATE] [CONNS] [SECONDS]
#   XSK_ARGS extra rr-server options for the xsk run (e.g. "--recovery smoltcp")
#   FAMILY   6: the client connects over IPv6 (2001:2::/48; both servers dual-stack)
#   BIN_DIR  where rr-server and rr-bench are (default target/release)
#   RATE     open-loop requests per second (default 1000: valgrind runs the
#            server ~50x slower; keep it well below saturation)
# Needs root (a private lab of two namespaces joined by veth, 198.18.0.0/15)
# and valgrind (apt-get install valgrind). Removes the lab on every exit.
set -euo pipefail
BIN=${1:-target/release}; RATE=${2:-1000}; CONNS=${3:-16}; WIN=${4:-8}
command -v valgrind >/dev/null || { echo "user-instructions: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "user-instructions: needs root (network namespaces)" >&2; exit 2; }
tag=ui$$; S=${tag}s; C=${tag}c; OUT=$(mktemp -d)
cleanup() { [ -f $OUT/vg.pid ] && kill $(cat $OUT/vg.pid) 2>/dev/null || true; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.91.1/24 dev ${tag}a; ip -n $C addr add 198.18.91.2/24 dev ${tag}b
[ "${FAMILY:-4}" = 6 ] && { ip -n $S -6 addr add 2001:2:0:91::1/64 dev ${tag}a nodad; ip -n $C -6 addr add 2001:2:0:91::2/64 dev ${tag}b nodad; }
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
measure() { # backend -> prints instructions per request
  local be=$1 tgt args
  if [ "${FAMILY:-4}" = 6 ]; then
    if [ "$be" = xsk ]; then tgt="[2001:2:0:91::10]"; args="--iface ${tag}a --attach auto --addr 198.18.91.10/24,2001:2:0:91::10/64 ${XSK_ARGS:-}"; else tgt="[2001:2:0:91::1]"; args="--bind 0.0.0.0"; fi
    bind=
  elif [ "$be" = xsk ]; then tgt=198.18.91.10; args="--iface ${tag}a --attach auto --addr $tgt/24 ${XSK_ARGS:-}"; bind="--bind 198.18.91.2"
  else tgt=198.18.91.1; args="--bind $tgt"; bind="--bind 198.18.91.2"; fi
  ip netns exec $S valgrind --tool=callgrind --callgrind-out-file=$OUT/$be.cg "$BIN/rr-server" --backend $be \
    --service echo --port 7000 --max-conns 1024 $args > $OUT/$be.log 2>&1 &
  local vg=$!; echo $vg > $OUT/vg.pid
  for _ in $(seq 120); do sleep 1; grep -q "listening on" $OUT/$be.log && break; done
  grep -q "listening on" $OUT/$be.log || { echo "rr-server ($be) did not start:" >&2; tail -5 $OUT/$be.log >&2; exit 1; }
  ip netns exec $C "$BIN/rr-bench" --backend kernel --connect $tgt:7000 $bind --conns $CONNS --depth 1 \
    --req-size 64 --rate $RATE --duration $((WIN + 8))s --warmup 100ms > $OUT/$be.bench 2>&1 &
  local bench=$!
  sleep 4   # connections set up and warm
  callgrind_control -z $vg > /dev/null 2>&1; local t0=$(date +%s.%N)
  sleep $WIN
  callgrind_control -d $vg > /dev/null 2>&1; local t1=$(date +%s.%N)
  wait $bench || { echo "rr-bench ($be) failed:" >&2; tail -5 $OUT/$be.bench >&2; exit 1; }
  kill -INT $vg; wait $vg || true; rm -f $OUT/vg.pid
  local f; f=$(ls $OUT/$be.cg.* | head -1); [ -n "${KEEP:-}" ] && cp "$f" "$KEEP"
  local ir; ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  python3 -c "print(round($ir / ($RATE * ($t1 - $t0))))"
}
x=$(measure xsk)
echo "xsk $x"
