#!/usr/bin/env bash
# The runs of this study, from the top directory, after building three trees:
#   before  = cac683d (engine SYN cookies, every frame teaches smoltcp its source)
#   teach   = 254403c (a SYN answered with a cookie teaches nothing)
#   keys    = b3dd60c (and a SYN looks for a live connection in a list of tuples)
# each with `CARGO_TARGET_DIR=/work/tgt-X cargo build --release -p apps --bins` from a
# worktree at that commit; BEFORE, TEACH and KEYS name their release directories.
# One flood-bench (this tree's) drives every server (--server), so the flood is the same.
set -euo pipefail
out=${OUT:-docs/2026-12-03-flood-neighbours/runs}
mkdir -p "$out"
fb=./target/release/flood-bench
common=(--duration 10s --idle-conns 2000 --fresh-every 250ms)
# Full-rate flood, the three builds alternating, three rounds.
for r in 1 2 3; do
  for v in before teach keys; do
    case $v in before) d=$BEFORE;; teach) d=$TEACH;; keys) d=$KEYS;; esac
    $fb "${common[@]}" --case xsk-baseline,xsk-flood --server "$d/rr-server" --json "$out/full-$v-$r.json" > "$out/full-$v-$r.txt" 2>&1 || true
  done
  $fb "${common[@]}" --case kernel-baseline,kernel-flood --server "$KEYS/rr-server" --json "$out/full-kernel-$r.json" > "$out/full-kernel-$r.txt" 2>&1 || true
done
# At the rate kernel TCP's flooder reaches on veth (its receive runs in the flooder's sends),
# both backends, two rounds.
for r in 1 2; do
  $fb "${common[@]}" --flood-pps 80000 --server "$KEYS/rr-server" --json "$out/80k-$r.json" > "$out/80k-$r.txt" 2>&1 || true
done
# Connection storms from one client (no neighbour churn there): the tuple list against the
# walk over the sockets, two rounds each, alternating.
for r in 1 2; do
  for v in teach keys; do
    case $v in teach) d=$TEACH;; keys) d=$KEYS;; esac
    "$d/rr-demo" --only rr-10000,storm-1000,churn-16 --rounds 1 --duration 4s --out "$out/storms-$v-$r" > "$out/storms-$v-$r.log" 2>&1 || true
  done
done
