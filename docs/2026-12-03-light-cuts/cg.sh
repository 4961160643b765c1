#!/bin/bash
# User-space instructions per request of the stack's server (callgrind; the run of
# scripts/user-instructions: open loop, 1,000 requests/s over 16 connections, kernel
# client), two builds alternating. Usage: cg.sh OUT_DIR ROUNDS BASE_BIN_DIR NEW_BIN_DIR (root)
set -euo pipefail
out=$1; rounds=$2; base=$3; new=$4
prof=$(dirname "$0")/../2026-12-02-fast-path/profile.sh
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for v in base new; do
    d=$base; [ "$v" = new ] && d=$new
    "$prof" "$d" "$out/$v-$r.cg" 1000 16 8 > "$out/$v-$r.txt"
  done
done
