#!/bin/bash
# Guest CPU per request in virtio_net guests (vm-tests cost, -icount, 16 connections),
# two builds alternating (base, new): closed loop, then light load (300 requests/s).
# Usage: vm-cost.sh OUT_DIR ROUNDS BASE_BIN_DIR NEW_BIN_DIR (root; each dir holds
# rr-server, rr-bench and vmt-stats of its build, and vm-tests itself)
set -euo pipefail
out=$1; rounds=$2; base=$3; new=$4
mkdir -p "$out"
for r in $(seq "$rounds"); do
  for load in closed light; do
    extra=(); [ "$load" = light ] && extra=(--rate 300)
    for v in base new; do
      d=$base; [ "$v" = new ] && d=$new
      "$d/vm-tests" cost --bin-dir "$d" --conns 16 --runs 2 "${extra[@]}" \
        --json "$out/$load-$v-$r.json" > "$out/$load-$v-$r.log" 2>&1
      echo "round $r $load $v done"
    done
  done
done
