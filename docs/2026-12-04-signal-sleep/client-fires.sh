#!/bin/bash
# What a timer that fires on every sleep costs with each of the xsk transport's timers: an
# open-loop rr-bench on the stack (xsk) paces its requests with deadlines, so its loop wakes
# on the timer once per request. Kernel rr-server in one namespace, the xsk client in the
# other, one connection; the client's CPU per request from its JSON, --sleep-signal default
# (sig) and timerfd (fd) in the order A B B A per cycle.
# Usage: client-fires.sh BIN_DIR RATE SECONDS CYCLES OUT   (root; removes its lab on exit)
set -euo pipefail
BIN=$1; RATE=$2; SECS=$3; N=$4; OUT=$5
tag=cf$$; S=${tag}s; C=${tag}c; srv=
mkdir -p "$OUT"
cleanup() { [ -n "$srv" ] && kill -INT $srv 2>/dev/null || true; sleep 0.3; ip netns del $S 2>/dev/null || true; ip netns del $C 2>/dev/null || true; }
trap cleanup EXIT INT TERM
ip netns add $S; ip netns add $C
ip link add ${tag}a type veth peer name ${tag}b
ip link set ${tag}a netns $S; ip link set ${tag}b netns $C
ip -n $S addr add 198.18.94.1/24 dev ${tag}a; ip -n $C addr add 198.18.94.2/24 dev ${tag}b
ip -n $S link set ${tag}a up; ip -n $C link set ${tag}b up
ip netns exec $S "$BIN/rr-server" --backend kernel --bind 198.18.94.1 --service echo --port 7000 > "$OUT/server.log" 2>&1 &
srv=$!
for _ in $(seq 40); do sleep 0.25; grep -q "listening on" "$OUT/server.log" && break; done
grep -q "listening on" "$OUT/server.log" || { echo "rr-server did not start:" >&2; tail -3 "$OUT/server.log" >&2; exit 1; }
k=0
for i in $(seq 1 "$N"); do
  for v in A B B A; do
    k=$((k + 1)); name=sig; arg=rtmin+4; [ $v = B ] && { name=fd; arg=timerfd; }
    ip netns exec $C "$BIN/rr-bench" --backend xsk --iface ${tag}b --attach auto --addr 198.18.94.10/24 \
      --connect 198.18.94.1:7000 --conns 1 --depth 1 --req-size 64 --rate "$RATE" --duration "${SECS}s" \
      --warmup 200ms --sleep-signal $arg --json "$OUT/$name-$k.json" > "$OUT/$name-$k.log" 2>&1
    python3 - "$OUT/$name-$k.json" "$name" "$k" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print(f"{sys.argv[3]:>3} {sys.argv[2]:4} client CPU {j['cpu_us_per_req_client']:6.2f} us/request  p50 {j['p50_us']:6.1f} us  p99 {j['p99_us']:7.1f} us  ({j['requests']} requests)")
PY
  done
done
python3 - "$OUT" <<'PY'
import json, statistics, sys
from pathlib import Path
runs = {}
for f in Path(sys.argv[1]).glob("*-*.json"):
    runs.setdefault(f.stem.split("-")[0], []).append(json.loads(f.read_text()))
for v, js in sorted(runs.items()):
    cpu = statistics.median(j["cpu_us_per_req_client"] for j in js)
    p50 = statistics.median(j["p50_us"] for j in js)
    print(f"median {v:4} client CPU {cpu:6.2f} us/request  p50 {p50:6.1f} us  ({len(js)} runs)")
PY
