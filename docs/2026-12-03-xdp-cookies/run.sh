#!/usr/bin/env bash
# The runs of this study, from the top directory, after `cargo build --release`.
# Every case has an XDP program on the client's veth (--peer-xdp: a veth sends native XDP_TX
# into its peer only then; virtio_net needs nothing of the kind), so the three variants have
# the same peer: the stack answering SYN cookies itself (off), the XDP program answering them
# (on), and kernel TCP. Full-rate flood (one raw socket as fast as it sends), three rounds,
# the variants alternating; then the storms and churn cases of rr-demo with both settings.
set -euo pipefail
out=${OUT:-docs/2026-12-03-xdp-cookies/runs}
mkdir -p "$out"
fb=./target/release/flood-bench
common=(--duration 10s --idle-conns 2000 --fresh-every 250ms --peer-xdp)
for r in 1 2 3; do
  for v in off on; do
    $fb "${common[@]}" --case xsk-baseline,xsk-flood --xsk-arg=--xdp-cookies=$v --json "$out/full-$v-$r.json" > "$out/full-$v-$r.txt" 2>&1 || true
  done
  $fb "${common[@]}" --case kernel-baseline,kernel-flood --json "$out/full-kernel-$r.json" > "$out/full-kernel-$r.txt" 2>&1 || true
done
# At the rate kernel TCP's flooder reached above (~150,000 SYN/s: on veth its receive runs
# in the flooder's sends and slows it), all three, two rounds.
for r in 1 2; do
  for v in off on; do
    $fb "${common[@]}" --flood-pps 150000 --case xsk-baseline,xsk-flood --xsk-arg=--xdp-cookies=$v --json "$out/150k-$v-$r.json" > "$out/150k-$v-$r.txt" 2>&1 || true
  done
  $fb "${common[@]}" --flood-pps 150000 --case kernel-baseline,kernel-flood --json "$out/150k-kernel-$r.json" > "$out/150k-kernel-$r.txt" 2>&1 || true
done
# rr-demo before (832a7b2, built in a worktree with its own CARGO_TARGET_DIR, $BASE) and after
# this change, alternating, one round each: the cases a change to the SYN path could touch.
# (ab/*/results.json; summarize.py prints them.)
for r in 1 2; do
  for v in base new; do
    if [ $v = base ]; then d=$BASE; else d=./target/release; fi
    "$d/rr-demo" --only rr-16,storm-1000,churn-16,rr-10000 --rounds 1 --duration 4s --out "docs/2026-12-03-xdp-cookies/ab/$v-$r" || true
  done
done
