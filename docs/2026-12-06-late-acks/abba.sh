#!/bin/bash
# The A/B runs of this study, each in alternating slots (one rr-demo invocation per slot,
# one round each), appended to results.jsonl by collect.py:
#   rr-10000  CYCLES x "base on smoltcp smoltcp on base", against epoll and io_uring;
#   loss      CYCLES x "base on on base": loss1-16, loss1-same-16, loss1-64k-16, lossburst-16, idle-100;
#   headline  1 x "base on on base": rr-16, rr-256, same-16, busy-same-1, open-5k.
# base = BEFORE_BIN (the build before this study's changes), on = AFTER_BIN (its defaults),
# smoltcp = AFTER_BIN with --xsk-args "--recovery smoltcp" (upstream's recovery, the rate
# the issue asks rr-10000 to reach at least).
# PREFIX (optional) goes before the sets' names in results.jsonl (the second step's runs: wait-).
# Usage (root): abba.sh BEFORE_BIN AFTER_BIN OUT CYCLES BEFORE_REV AFTER_REV [PREFIX]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
[ $# -eq 6 ] || [ $# -eq 7 ] || { sed -n 's/^# Usage (root): //p' "$0" >&2; exit 2; }
before=$1 after=$2 out=$3 cycles=$4 brev=$5 arev=$6 prefix=${7:-}
abba=$repo/scripts/study/abba-rr-demo
"$abba" "$out/rr-10000" "$cycles" "base on smoltcp smoltcp on base" \
  base="$before" on="$after" smoltcp="$after:--xsk-args '--recovery smoltcp'" \
  -- --only rr-10000 --rounds 1 --kernels epoll,uring
python3 "$here/collect.py" "${prefix}rr-10000" "$out/rr-10000" base="$brev" on="$arev" smoltcp="$arev --recovery smoltcp"
"$abba" "$out/loss" "$cycles" "base on on base" base="$before" on="$after" \
  -- --only loss1-16,loss1-same-16,loss1-64k-16,lossburst-16,idle-100 --rounds 1 --kernels epoll
python3 "$here/collect.py" "${prefix}loss" "$out/loss" base="$brev" on="$arev"
"$abba" "$out/headline" 1 "base on on base" base="$before" on="$after" \
  -- --only rr-16,rr-256,same-16,busy-same-1,open-5k --rounds 1 --kernels epoll
python3 "$here/collect.py" "${prefix}headline" "$out/headline" base="$brev" on="$arev"
