#!/bin/bash
# The floor study: the stack's server against tcp_floor (xsk-device's example: the least TCP
# on the same copy-mode port) and kernel TCP, in user-space instructions per request (host,
# callgrind) and in guest CPU per request (vm-tests cost, -icount guest).
#
# Usage: docs/2026-12-07-floor/run.sh OUT [BIN_DIR]
#   BIN_DIR: where rr-server, rr-bench, vm-tests and examples/tcp_floor are (default
#   target/release; build with `cargo build --release --workspace --bins` and
#   `cargo build --release -p xsk-device --example tcp_floor`).
# Needs root, valgrind and what vm-tests needs (scripts/vm-smoke installs it). About 15 minutes.
# Writes OUT/ui.txt (one line per host run), OUT/closed.json and OUT/rate300.json (vm-tests'
# reports) and their logs; table.py OUT reads them.
set -euo pipefail
OUT=$1; BIN=$(realpath "${2:-target/release}")
mkdir -p "$OUT"
FLOOR=$BIN/examples/tcp_floor
[ -x "$FLOOR" ] || { echo "run.sh: $FLOOR is missing (cargo build --release -p xsk-device --example tcp_floor)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
: > "$OUT/ui.txt"
# Host: floor and stack alternating (F S S F) per load; callgrind counts vary by about 1%.
for load in "1000 1" "1000 16" "300 16"; do
  for who in floor stack stack floor; do
    if [ $who = floor ]; then s=$FLOOR; else s=; fi
    r=$(SERVER=$s ONLY=xsk scripts/user-instructions "$BIN" $load 6 | awk '/^xsk/ {print $2}')
    echo "$who $load $r" | tee -a "$OUT/ui.txt"
  done
done
# Guest: the three servers take turns, the order rotating every round.
"$BIN/vm-tests" cost --kernels 6.1 --conns 1,16 --runs 6 --servers kernel,xsk,floor --bin-dir "$BIN" \
  --json "$OUT/closed.json" > "$OUT/closed.log" 2>&1
"$BIN/vm-tests" cost --kernels 6.1 --conns 16 --rate 300 --runs 4 --servers kernel,xsk,floor --bin-dir "$BIN" \
  --json "$OUT/rate300.json" > "$OUT/rate300.log" 2>&1
echo "done: docs/2026-12-07-floor/table.py $OUT"
