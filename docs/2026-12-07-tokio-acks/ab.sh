#!/bin/bash
# The tokio adapter before and after the delayed ACK, alternated: A B B A per cycle.
# DIR_A and DIR_B each hold target/release/examples/{axum_server,grpc_server}, built with
# `cargo build --release -p stack --features axum,tonic --examples` at each commit (a worktree
# for the older one). Each invocation is the tokio-adapter study's measure.py (tokio's own
# listener, the adapter over kernel TCP and over the stack, in turn); its per-run lines go to
# OUT/V-K.err, and table.py folds them into results.json.
# usage (root): [RESULTS=FILE] docs/2026-12-07-tokio-acks/ab.sh OUT CYCLES DIR_A DIR_B
#   RESULTS: where table.py writes the runs (default: this study's results.json)
#   REQUESTS, CASES: measure.py's --requests and --cases (default: 20000; h1-1,grpc-1,h1-16,grpc-16)
set -euo pipefail
OUT=$1; CYCLES=$2; A=$(realpath "$3"); B=$(realpath "$4")
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
k=0
for _ in $(seq "$CYCLES"); do
  for v in A B B A; do
    k=$((k + 1))
    dir=$A; [ "$v" = B ] && dir=$B
    (cd "$dir" && python3 "$here/../2026-12-02-tokio-adapter/measure.py" --rounds 1 --requests "${REQUESTS:-20000}" \
      --strace-requests 3000 --cases "${CASES:-h1-1,grpc-1,h1-16,grpc-16}" > "$OUT/$v-$k.json" 2> "$OUT/$v-$k.err")
    echo "$k $v $(date +%T)"
  done
done
python3 "$here/table.py" --from-runs "$OUT" --write "${RESULTS:-$here/results.json}"
