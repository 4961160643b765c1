#!/bin/bash
# The busy-poll floor, alternating in one run: the L2 ping-pong of two bare ports
# (xsk-bench pingpong, native XDP, busy-polled like rr-demo's busy cases) and
# busy-same-1 (stack to stack and kernel to kernel) with the stack's stage times;
# with NOCSUM=1 also with the TX checksum offload off.
# Usage: [NOCSUM=1] busy-floor.sh OUT_DIR ROUNDS [BIN_DIR]   (root; each tool removes its own lab)
set -euo pipefail
OUT=$1; ROUNDS=$2; BIN=${3:-target/release}
mkdir -p "$OUT"
for r in $(seq "$ROUNDS"); do
  "$BIN/xsk-bench" pingpong --attach drv --busy-poll 50 --busy-budget 128 --size 118 --duration 4s --quiet \
    --json "$OUT/pingpong-$r.json" 2>/dev/null | grep "round trip" | sed "s/^ */pingpong-$r: /"
  "$BIN/rr-demo" --only busy-same-1 --rounds 1 --out "$OUT/stack-$r" --xsk-args "--stage-times" > "$OUT/stack-$r.log" 2>&1
  grep -E "^busy-same-1 " "$OUT/stack-$r.log" | sed "s/^/stack-$r: /"
  [ "${NOCSUM:-0}" = 1 ] || continue
  "$BIN/rr-demo" --only busy-same-1 --rounds 1 --out "$OUT/nocsum-$r" --xsk-args "--stage-times --no-csum-offload" > "$OUT/nocsum-$r.log" 2>&1
  grep -E "^busy-same-1 " "$OUT/nocsum-$r.log" | sed "s/^/nocsum-$r: /"
done
