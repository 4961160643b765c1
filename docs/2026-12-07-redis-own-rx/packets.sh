#!/bin/bash
# Frames each way per redis-py pipeline of 100 commands (50 SET + 50 GET, 64-byte values), as
# rr-demo's redis-py-P100 runs it, against `rr-server --service resp` on BACKEND (xsk or
# kernel), with the server's utime and stime: tcpdump on the client's end of the veth pair
# counts what the server sends (a GSO packet counts once: veth does not segment it) and what
# the client sends.
# Usage: packets.sh BIN_DIR BACKEND COMMANDS OUT_JSON   (root, tcpdump (apt-get install tcpdump), the
# redis-py venv scripts/setup makes; removes its lab on every exit)
set -euo pipefail
BIN=$1 BACKEND=$2 N=$3 OUTJ=$4
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/study/lab.sh
. "$HERE/../../scripts/study/lab.sh"
TMP=$(mktemp -d) SP= TD=
cleanup() { for p in $TD $SP; do kill -INT "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; lab_down; rm -rf "$TMP"; }
trap cleanup EXIT INT TERM
lab_up rp$$ 198.18.94
if [ "$BACKEND" = xsk ]; then
  ADDR=$LAB_NET.10
  ip netns exec "$LAB_S" "$BIN/rr-server" --backend xsk --service resp --port 6380 --iface "$LAB_SIF" \
    --attach auto --addr "$ADDR/24" --ready-file "$TMP/ready" > "$TMP/log" 2>&1 &
else
  ADDR=$LAB_NET.1
  ip netns exec "$LAB_S" "$BIN/rr-server" --backend "$BACKEND" --service resp --port 6380 --bind "$ADDR" \
    --ready-file "$TMP/ready" > "$TMP/log" 2>&1 &
fi
SP=$!
for _ in $(seq 100); do [ -e "$TMP/ready" ] && break; sleep 0.1; done
[ -e "$TMP/ready" ] || { echo "rr-server did not start:" >&2; tail -5 "$TMP/log" >&2; exit 1; }
ip netns exec "$LAB_C" tcpdump -i "$LAB_CIF" -nn -q -w "$TMP/cap.pcap" tcp 2> /dev/null &
TD=$!
sleep 1
# The load is rr-demo's own script (apps/src/bin/rr-demo/redis.rs).
LOAD=$(python3 -c 'import re,sys; print(re.search(r"REDIS_PY_LOAD: &str = r#\"(.*?)\"#", open(sys.argv[1]).read(), re.S).group(1))' \
  "$HERE/../../apps/src/bin/rr-demo/redis.rs")
PY=${REDIS_PY_PYTHON:-$HERE/../../target/redis-py/bin/python}
read -r u0 s0 < <(awk '{print $14, $15}' /proc/$SP/stat)
ip netns exec "$LAB_C" "$PY" -c "$LOAD" "$ADDR" 6380 "$N" 100 > "$TMP/load.json"
read -r u1 s1 < <(awk '{print $14, $15}' /proc/$SP/stat)
sleep 0.5
kill -INT $TD; wait $TD || true; TD=
tcpdump -nn -q -r "$TMP/cap.pcap" 2> /dev/null > "$TMP/cap.txt"
python3 - "$BACKEND" "$N" "$ADDR" "$TMP/cap.txt" "$TMP/load.json" $((u1 - u0)) $((s1 - s0)) "$(getconf CLK_TCK)" > "$OUTJ" <<'PY'
import json, sys
backend, n, addr, cap, load, ut, st, hz = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
pipes = n / 100
c = {"server_data": 0, "server_acks": 0, "client_data": 0, "client_acks": 0}
for line in open(cap):
    f = line.split()
    if len(f) < 5 or f[1] != "IP":
        continue
    side = "server" if f[2].rsplit(".", 1)[0] == addr else "client"
    c[side + ("_data" if int(f[-1]) > 0 else "_acks")] += 1
out = {"backend": backend, "commands": n, "load": json.load(open(load)),
       "per_pipeline": {k: v / pipes for k, v in c.items()},
       "server_utime_us_per_req": ut * 1e6 / hz / n, "server_stime_us_per_req": st * 1e6 / hz / n}
print(json.dumps(out))
PY
cat "$OUTJ"
