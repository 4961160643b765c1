#!/bin/bash
# Guest CPU per IPv4 request before and after IPv6 support (#47): `vm-tests cost` on each
# build in alternating order, at --rate 300 over 16 connections (two cycles A B B A) and in
# the closed loop over 16 connections (A B B A, then B A A B twice).
# Usage: run.sh OUT A_BIN_DIR B_BIN_DIR [VM_TESTS]   (root; ~35 min)
#   A_BIN_DIR, B_BIN_DIR: release folders holding rr-server, rr-bench and vmt-stats;
#   VM_TESTS: the vm-tests binary for both (default B_BIN_DIR/vm-tests), so the guest is the same.
set -u
[ $# -ge 3 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
OUT=$1; A=$2; B=$3; VM=${4:-$3/vm-tests}
mkdir -p "$OUT"
run() { # variant tag vm-tests-args...
  local v=$1 tag=$2 d=$A; shift 2
  [ "$v" = B ] && d=$B
  "$VM" cost --kernels 6.1 --servers kernel,xsk --bin-dir "$d" --json "$OUT/$tag-$v.json" "$@" > "$OUT/$tag-$v.log" 2>&1
  echo "$tag $v done (rc $?)"
}
n=0
for c in 1 2; do for v in A B B A; do n=$((n + 1)); run $v r300-$c-$n --conns 16 --rate 300; done; done
n=0
for order in "A B B A" "B A A B" "B A A B"; do for v in $order; do n=$((n + 1)); run $v closed16-$n --conns 16; done; done
