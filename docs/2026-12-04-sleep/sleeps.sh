#!/bin/bash
# The xsk rr-server's sleeps on veth under an open-loop load from a kernel client: strace
# counts its poll(2) calls (descriptors, timeout), timerfd_settime, read, sendto and recvfrom.
# Usage: [CONNS=N] sleeps.sh BIN_DIR RATE SECONDS [rr-server args]   (root, strace; removes its lab; 1 connection unless CONNS)
set -euo pipefail
BIN=$1; RATE=$2; WIN=$3; shift 3
tag=st$$; S=${tag}s; C=${tag}c; OUT=$(mktemp -d)
srv=
cleanup() { [ -n "$srv" ] && kill -INT $srv 2>/dev/null || true; sleep 0.5; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.93.1/24 dev ${tag}a; ip -n $C addr add 198.18.93.2/24 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
tgt=198.18.93.10
ip netns exec $S "$BIN/rr-server" --backend xsk --service echo --port 7000 --iface ${tag}a --attach auto --addr $tgt/24 "$@" > $OUT/xsk.log 2>&1 &
srv=$!
for _ in $(seq 60); do sleep 0.5; grep -q "listening on" $OUT/xsk.log && break; done
ip netns exec $C "$BIN/rr-bench" --backend kernel --connect $tgt:7000 --bind 198.18.93.2 --conns ${CONNS:-1} --depth 1 \
  --req-size 64 --rate $RATE --duration $((WIN + 2))s --warmup 100ms > $OUT/bench 2>&1 &
bench=$!
sleep 1
timeout $WIN strace -f -p $srv -e trace=poll,ppoll,epoll_wait,timerfd_settime,timer_settime,read,sendto,recvfrom -o $OUT/st || true
wait $bench
t0=$(date +%s.%N); kill -INT $srv; wait $srv || true; srv=
echo "stop took $(echo "$(date +%s.%N) - $t0" | bc) s"
awk '{print $2}' $OUT/st | sed 's/(.*//' | sort | uniq -c
grep -o " poll(\[.*" $OUT/st | sed 's/\[{fd=\([0-9]*\)[^]]*\]/[fds]/; s/\], \([0-9]*\), \(-*[0-9]*\)).*/ n=\1 t=\2/' | awk '{print $NF, $(NF-1)}' | sort | uniq -c | sort -rn | head || true
# ppoll (the xsk driver's sleep with its timer's signal unblocked, 2026-12-04-signal-sleep): descriptors, timeout
grep -o "ppoll(\[.*" $OUT/st | sed 's/^ppoll(\[[^]]*\], \([0-9]*\), \([^,]*\), .*/ppoll n=\1 t=\2/' | sort | uniq -c | sort -rn | head -3 || true
tail -3 $OUT/bench; grep "stopped" $OUT/xsk.log
