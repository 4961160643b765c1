#!/usr/bin/env bash
# Where the plain build's user instructions per request rose since b791413: the same
# instrument on b791413 (before issue 22's engine work), 9df7431 (SYN cookies, connection-rate
# cases), 4215d19 (buffers that start at 4 KiB and grow) and this tree, alternating, twice.
# Each older commit built from a worktree with its own target directory:
#   git worktree add /work/bis-C C && (cd /work/bis-C && CARGO_TARGET_DIR=/work/tgt-bis-C \
#     cargo build --release -p apps --bin rr-server --bin rr-bench) and its two binaries in /work/bin-C
set -euo pipefail
out=docs/2026-12-03-pgo/runs/rise
mkdir -p "$out"
for r in 1 2; do
  for c in b791413 9df7431 4215d19 head; do
    d=/work/bin-$c; [ $c = head ] && d=target/release
    scripts/user-instructions "$d" > "$out/$c-$r.txt" 2>&1 || true
  done
done
