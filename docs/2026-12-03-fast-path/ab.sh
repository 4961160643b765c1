#!/bin/bash
# rr-demo, the fast path against the general path (same binary, --no-fast-path) and
# against the commit before it (BASE_BIN_DIR), alternating base / general / fast, one
# rr-demo round per invocation (xsk and kernel back to back per case).
# Usage: ab.sh OUT ROUNDS CASES BASE_BIN_DIR   (root; run from the repository's top)
set -euo pipefail
OUT=$1; N=$2; CASES=$3; BASE=$4
mkdir -p "$OUT"
for i in $(seq 1 "$N"); do
  for v in base general fast; do
    case $v in
      base) bin=$BASE; x="" ;;
      general) bin=target/release; x="--no-fast-path" ;;
      fast) bin=target/release; x="" ;;
    esac
    args=(--only "$CASES" --rounds 1 --duration 4s --out "$OUT/$v-$i")
    [ -n "$x" ] && args+=(--xsk-args "$x")
    echo "== round $i variant $v: $bin/rr-demo ${args[*]}"
    "$bin/rr-demo" "${args[@]}" > "$OUT/$v-$i.log" 2>&1 || { echo "rr-demo failed, see $OUT/$v-$i.log"; tail -5 "$OUT/$v-$i.log"; exit 1; }
    rm -rf "$OUT/$v-$i/logs" "$OUT/$v-$i"/*.png "$OUT/$v-$i"/*.svg
  done
done
