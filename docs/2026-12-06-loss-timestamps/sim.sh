#!/bin/bash
# stack-engine's loss_sim example (loss1-same-16 in memory, virtual clock) at each COMMIT:
# 16 connections, 1% loss each way, 2 s, seeds 1 and 5, jitter 0, 4 and 10 steps of 5 us.
# A commit older than the example gets today's copy of it (it uses only the engine's public
# testing API). Prints one JSON line per recovery setting and run.
# Usage: sim.sh COMMIT...   (builds each in a temporary worktree; deterministic, no root)
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
example="$repo/stack/engine/examples/loss_sim.rs"
for c in "$@"; do
  wt=$(mktemp -d); git -C "$repo" worktree add -q --detach "$wt" "$c"
  trap 'git -C "$repo" worktree remove --force "$wt"' EXIT
  mkdir -p "$wt/stack/engine/examples"; cp "$example" "$wt/stack/engine/examples/"
  grep -q 'name = "loss_sim"' "$wt/stack/engine/Cargo.toml" ||
    printf '\n[[example]]\nname = "loss_sim"\nrequired-features = ["testing"]\n' >> "$wt/stack/engine/Cargo.toml"
  (cd "$wt" && CARGO_TARGET_DIR="$repo/target/loss-sim" cargo build -q --release -p stack-engine --features testing --example loss_sim)
  for j in 0 4 10; do
    for seed in 1 5; do
      "$repo/target/loss-sim/release/examples/loss_sim" 16 0.01 2 $seed $j | awk -v c="$c" -v j=$j -v s=$seed \
        '$1 == "default" || $1 == "timestamps" { printf "{\"set\": \"loss_sim\", \"build\": \"%s\", \"jitter\": %d, \"seed\": %d, \"variant\": \"%s\", \"rps\": %d, \"p99_us\": %d, \"p999_us\": %d, \"max_us\": %d, \"mean_us\": %d}\n", c, j, s, $1, $2, $4, $5, $6, $7 }'
    done
  done
  git -C "$repo" worktree remove --force "$wt"; trap - EXIT
done
