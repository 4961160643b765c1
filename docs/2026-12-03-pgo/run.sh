#!/usr/bin/env bash
# Profile-guided optimisation of the request/response path (issue 24, item 3), from the top
# directory. Builds: plain = target/release (this tree); pgo = the same tree built with a
# profile of rr-demo's small cases. Needs root, valgrind and rustup's llvm-tools
# (`rustup component add llvm-tools`: llvm-profdata must match rustc's LLVM).
set -euo pipefail
out=docs/2026-12-03-pgo/runs
mkdir -p "$out"
PD=$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/llvm-profdata
GEN=${GEN:-/work/tgt-pgo-gen} USE=${USE:-/work/tgt-pgo} DATA=${DATA:-/tmp/pgo}
if [ -z "${SKIP_BUILD:-}" ]; then
  cargo build --release -p apps --bins
  RUSTFLAGS="-Cprofile-generate=$DATA/data" CARGO_TARGET_DIR=$GEN cargo build --release -p apps --bins
  rm -rf "$DATA/data"
  # The profile: one round of 2 s of these cases, both backends, so the stack server and the
  # stack client (same-16, busy-same-1) are both profiled.
  "$GEN/release/rr-demo" --only rr-16,same-16,open-5k,busy-same-1,loss1-16,churn-16,idle-100 --rounds 1 --duration 2s --out "$DATA/demo"
  "$PD" merge -o "$DATA/merged.profdata" "$DATA/data"
  RUSTFLAGS="-Cprofile-use=$DATA/merged.profdata -Cllvm-args=-pgo-warn-missing-function=false" CARGO_TARGET_DIR=$USE cargo build --release -p apps --bins
fi
# User-space instructions per request (callgrind), plain and pgo alternating.
for r in 1 2 3; do
  for v in plain pgo; do
    case $v in plain) d=target/release;; pgo) d=$USE/release;; esac
    scripts/user-instructions "$d" > "$out/ui-$v-$r.txt" 2>&1 || true
  done
done
# rr-demo, plain and pgo alternating, two invocations of one round each.
for r in 1 2; do
  for v in plain pgo; do
    case $v in plain) d=target/release;; pgo) d=$USE/release;; esac
    "$d/rr-demo" --only rr-16,same-16,busy-same-1,open-5k,rr-256,loss1-16 --rounds 1 --duration 4s --out "$out/demo-$v-$r" > "$out/demo-$v-$r.log" 2>&1 || true
  done
done
