#!/bin/bash
# User-space instructions per request of the stack's rr-server with the fast path
# (header prediction) and without it (--no-fast-path), the same binary, alternating;
# callgrind, open loop 1,000 req/s over 16 connections from a kernel client (the run of
# scripts/user-instructions, through ../2026-12-02-fast-path/profile.sh, which keeps the
# profile). Also the base commit's binary, if BASE is given.
# Usage: callgrind.sh OUT_DIR ROUNDS [BASE_BIN_DIR]   (root, valgrind)
set -euo pipefail
out=$1; rounds=$2; base=${3:-}
here=$(cd "$(dirname "$0")" && pwd)
prof=$here/../2026-12-02-fast-path/profile.sh
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for v in fast general ${base:+base}; do
    case $v in
      fast) "$prof" target/release "$out/$v-$r.cg" 1000 16 8 > "$out/$v-$r.txt" ;;
      general) "$prof" target/release "$out/$v-$r.cg" 1000 16 8 --no-fast-path > "$out/$v-$r.txt" ;;
      base) "$prof" "$base" "$out/$v-$r.cg" 1000 16 8 > "$out/$v-$r.txt" ;;
    esac
    echo "$v-$r: $(tail -1 "$out/$v-$r.txt")"
  done
done
