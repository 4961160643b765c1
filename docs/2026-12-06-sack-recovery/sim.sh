#!/bin/bash
# stack-engine's loss_sim example (two engines in memory on a virtual clock, 16 connections,
# 1% loss each way at the client, 2 s) with the SACK recovery off and on, without and with
# timestamps: 64 KiB answers (loss1-64k-16) and 64-byte echoes (loss1-same-16), seeds 1, 3
# and 5 (the fault injector takes seed | 1: seed 2 would play seed 3's losses), jitter 0 and 4
# steps of 5 us. Deterministic, no root. Appends one JSON line per run to results.jsonl.
# Usage: sim.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
(cd "$repo" && cargo build -q --release -p stack-engine --features testing --example loss_sim)
build=$(git -C "$repo" rev-parse --short HEAD)
for resp in 65536 64; do
  for j in 0 4; do
    for seed in 1 3 5; do
      LOSS_SIM_RECOVERY=no-sack,default,ts-no-sack,timestamps LOSS_SIM_RESPONSE=$resp \
        "$repo/target/release/examples/loss_sim" 16 0.01 2 $seed $j |
        awk -v b="$build" -v r=$resp -v j=$j -v s=$seed '
          $1 ~ /^(no-sack|default|ts-no-sack|timestamps)$/ {
            printf "{\"set\": \"loss_sim\", \"build\": \"%s\", \"response\": %d, \"jitter\": %d, \"seed\": %d, \"variant\": \"%s\", \"rps\": %d, \"p99_us\": %d, \"p999_us\": %d, \"max_us\": %d, \"mean_us\": %d, \"server_rto\": %d}\n", b, r, j, s, $1, $2, $4, $5, $6, $7, $10 }'
    done
  done
done >> "$here/results.jsonl"
