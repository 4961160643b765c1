#!/bin/bash
# The study's rr-demo runs (scripts/study/abba-rr-demo: one rr-demo invocation per slot,
# alternating), each set appended to results.jsonl by collect.py:
#   probe-rto     loss1-same-16 with --timestamps, A = BEFORE, B = PROBE_RTO (2 cycles A B B A)
#   before-eifel  loss1-same-16 at PROBE_RTO, P = default recovery, T = --timestamps
#   after         the same at AFTER
#   rr-10000      rr-10000 at BEFORE (Ad, At) and AFTER (Bd, Bt), default and --timestamps
# Usage: abba.sh BEFORE_BIN PROBE_RTO_BIN AFTER_BIN   (rr-demo's bin dirs; root; about 15 min)
# The builds of the study: BEFORE 5344ca6, PROBE_RTO a5fdab4, AFTER c6cb2f3
# (cargo build --release -p apps --bins at each).
set -euo pipefail
A=$1; P=$2; B=$3
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
ab="$repo/scripts/study/abba-rr-demo"
ts="--xsk-args --timestamps"
"$ab" "$out/probe-rto" 2 "A B B A" "A=$A:$ts" "B=$P:$ts" -- --only loss1-same-16 --rounds 1 --kernels epoll
python3 "$here/collect.py" probe-rto "$out/probe-rto" A=5344ca6 B=a5fdab4
"$ab" "$out/before-eifel" 2 "P T T P" "P=$P" "T=$P:$ts" -- --only loss1-same-16 --rounds 1 --kernels epoll
python3 "$here/collect.py" before-eifel "$out/before-eifel" P=a5fdab4 T=a5fdab4
"$ab" "$out/after" 2 "P T T P" "P=$B" "T=$B:$ts" -- --only loss1-same-16 --rounds 1 --kernels epoll
python3 "$here/collect.py" after "$out/after" P=c6cb2f3 T=c6cb2f3
"$ab" "$out/rr-10000" 1 "Ad Bd At Bt Bt At Bd Ad" "Ad=$A" "Bd=$B" "At=$A:$ts" "Bt=$B:$ts" -- --only rr-10000 --rounds 1 --kernels epoll
python3 "$here/collect.py" rr-10000 "$out/rr-10000" Ad=5344ca6 At=5344ca6 Bd=c6cb2f3 Bt=c6cb2f3
