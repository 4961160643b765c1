#!/bin/bash
# The study's runs: rr-demo's two Redis cases of #45 with each side charged its own receive,
# then the frames per pipeline (packets.sh) in the order xsk kernel kernel xsk.
# Usage: run.sh OUT [ROUNDS] [COMMANDS]   (root; from a release build in target/release)
set -euo pipefail
OUT=$1 ROUNDS=${2:-5} N=${3:-1000000}
HERE=$(cd "$(dirname "$0")" && pwd) BIN=$(cd "$(dirname "$0")/../../target/release" && pwd)
mkdir -p "$OUT"
"$BIN/rr-demo" --only redis-c1,redis-py-P100 --rounds "$ROUNDS" --kernels epoll --out "$OUT/rr-demo" | tee "$OUT/rr-demo.txt"
i=0
for b in xsk kernel kernel xsk; do
  i=$((i + 1))
  "$HERE/packets.sh" "$BIN" $b "$N" "$OUT/packets-$i-$b.json"
done
python3 "$HERE/table.py" "$OUT" > "$HERE/results.json"
python3 "$HERE/table.py" --print "$HERE/results.json"
