#!/bin/bash
# rr-demo's loss cases (loss1-16, loss1-same-16, loss1-64k-16; one round each, against kernel
# TCP with epoll) in alternating slots, CYCLES times "base off on on off base":
#   base = BEFORE_BIN (the build before the SACK recovery),
#   off  = AFTER_BIN with --xsk-args --no-sack-recovery (the new build, recovery off),
#   on   = AFTER_BIN (the new build's defaults).
# Then collect.py appends the runs to results.jsonl under SET.
# Usage (root): abba.sh BEFORE_BIN AFTER_BIN OUT CYCLES SET BEFORE_REV AFTER_REV
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -eq 7 ] || { sed -n 's/^# Usage (root): //p' "$0" >&2; exit 2; }
before=$1 after=$2 out=$3 cycles=$4 set=$5 brev=$6 arev=$7
"$repo/scripts/study/abba-rr-demo" "$out" "$cycles" "base off on on off base" \
  base="$before" off="$after:--xsk-args --no-sack-recovery" on="$after" \
  -- --only loss1-16,loss1-same-16,loss1-64k-16 --rounds 1 --kernels epoll
python3 "$here/collect.py" "$set" "$out" base="$brev" off="$arev --no-sack-recovery" on="$arev"
