#!/bin/bash
# As vm-cost.sh at light load: open loop, 300 requests/s over 16 connections.
# Usage: vm-cost-light.sh OUT_DIR ROUNDS (root)
set -euo pipefail
out=$1; rounds=$2
mkdir -p "$out"
for r in $(seq "$rounds"); do
  ./target/release/vm-tests cost --conns 16 --rate 300 --runs 2 --json "$out/general-$r.json" --xsk-arg=--no-fast-path > "$out/general-$r.log" 2>&1
  ./target/release/vm-tests cost --conns 16 --rate 300 --runs 2 --json "$out/fast-$r.json" > "$out/fast-$r.log" 2>&1
  echo "round $r done"
done
