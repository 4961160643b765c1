#!/bin/bash
# scripts/user-instructions for two builds in the order A B B A, twice, at one and 16
# connections (1,000 req/s open loop, 8 s window): one JSON line per run.
# Usage: abba.sh BIN_A BIN_B > abba-results.jsonl   (root; valgrind; each run removes its lab)
set -uo pipefail
A=$1; B=$2
cd "$(dirname "$0")/../.."
for conns in 1 16; do
  for v in A B B A A B B A; do
    bin=$A; [ $v = B ] && bin=$B
    out=$(scripts/user-instructions "$bin" 1000 $conns 8 2>&1)
    x=$(echo "$out" | awk '$1=="xsk"{print $2}'); k=$(echo "$out" | awk '$1=="kernel"{print $2}')
    echo "{\"conns\": $conns, \"build\": \"$v\", \"xsk\": ${x:-null}, \"kernel\": ${k:-null}}"
  done
done
