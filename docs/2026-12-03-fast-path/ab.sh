#!/bin/bash
# rr-demo, the fast path against the general path (same binary, --no-fast-path) and
# against the commit before it (BASE_BIN_DIR), alternating base / general / fast, one
# rr-demo round per invocation (xsk and kernel back to back per case).
# The loop is scripts/study/abba-rr-demo's.
# Usage: ab.sh OUT ROUNDS CASES BASE_BIN_DIR   (root; run from the repository's top)
set -euo pipefail
[ $# -eq 4 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; N=$2; CASES=$3; BASE=$4
exec "$(dirname "$0")/../../scripts/study/abba-rr-demo" "$OUT" "$N" "base general fast" \
  "base=$BASE" "general=target/release:--xsk-args --no-fast-path" fast=target/release \
  -- --only "$CASES" --rounds 1 --duration 4s
