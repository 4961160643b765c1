#!/bin/bash
# Guest instructions per request of several builds of the apps (`vm-tests cost --short
# --rate 300`), one invocation each per cycle, the order rotated (and reversed on even cycles).
# Rounds 1-6 ran an earlier form of the rotation, under which two builds kept one order.
# Usage: guest.sh OUT CYCLES BIN_DIR...   (root; the file names are the folder names;
# VM_TESTS: the vm-tests binary, target/release/vm-tests unless set). A BIN_DIR given as
# NAME=DIR+ARG runs DIR's build with ARG added to the xsk rr-server's arguments, as NAME.
# (2026-12-04-signal-sleep added that form; VM_ARGS: more options for vm-tests cost, added by
# 2026-12-06-one-park, e.g. "--work-dir DIR".)
set -uo pipefail
OUT=$1; N=$2; shift 2; dirs=("$@"); mkdir -p $OUT
k=${#dirs[@]}
for i in $(seq ${FIRST:-1} $((${FIRST:-1} + N - 1))); do
  # Cycles come in pairs: rotated by the pair, the second of a pair reversed (two builds:
  # B A, then A B).
  r=$((i - 1 + i % 2))
  order=(); for j in $(seq 0 $((k - 1))); do order+=($(( (j + r) % k ))); done
  if [ $((i % 2)) = 0 ]; then rev=(); for ((j = k - 1; j >= 0; j--)); do rev+=(${order[$j]}); done; order=("${rev[@]}"); fi
  for idx in "${order[@]}"; do
    d=${dirs[$idx]}; v=$(basename $d); extra=()
    case $d in *=*+*) v=${d%%=*}; d=${d#*=}; extra=("--xsk-arg=${d#*+}"); d=${d%%+*} ;; esac
    "${VM_TESTS:-target/release/vm-tests}" cost ${VM_ARGS:-} --short --bin-dir $d --rate 300 --json $OUT/$v-$i.json "${extra[@]}" > $OUT/$v-$i.log 2>&1
    echo "$i $v $(grep -A5 'kernel backend conns kinsn' $OUT/$v-$i.log | awk 'NR>1{printf "%s-%s %s  ", $2,$3,$4}')"
  done
done
