#!/bin/bash
# User-space instructions per request (scripts/user-instructions: callgrind, open loop
# 1,000 req/s, 16 connections, 6 s window), two builds alternating A B B A, in three
# settings: IPv4, IPv6, IPv4 with the server's --timestamps (the kernel client offers
# them by default). Prints one JSON line per run.
# Usage: abba.sh BIN_A BIN_B [CYCLES] [SETTINGS]   (root, valgrind; SETTINGS default "v4 v6 v4ts")
set -euo pipefail
A=$1; B=$2; N=${3:-1}; SETTINGS=${4:-v4 v6 v4ts}
here=$(cd "$(dirname "$0")/../.." && pwd)
for i in $(seq 1 "$N"); do
  for s in $SETTINGS; do
    case $s in
      v4) fam=4; xa= ;;
      v6) fam=6; xa= ;;
      v4ts) fam=4; xa=--timestamps ;;
      *) echo "abba.sh: unknown setting $s" >&2; exit 2 ;;
    esac
    for v in A B B A; do
      bin=$A; [ $v = B ] && bin=$B
      out=$(FAMILY=$fam XSK_ARGS="$xa" "$here/scripts/user-instructions" "$bin" 1000 16 6)
      x=$(awk '$1 == "xsk" {print $2}' <<<"$out"); k=$(awk '$1 == "kernel" {print $2}' <<<"$out")
      echo "{\"cycle\": $i, \"setting\": \"$s\", \"build\": \"$v\", \"xsk\": $x, \"kernel\": $k}"
    done
  done
done
