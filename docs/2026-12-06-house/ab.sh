#!/bin/bash
# rr-demo's headline cases before and after the session's house work (#50: the xsk-io
# split, names and comments) and what landed with it (#47's IPv4 cost, #49's recovery
# fixes): one cycle A B B A, one invocation per slot, then the table and its JSON.
# Usage: ab.sh BIN_BEFORE BIN_AFTER   (rr-demo bin dirs; root; about 6 minutes)
# The study's builds: before 5344ca6, after f3ed7c3 (cargo build --release -p apps --bins).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); repo=$(cd "$here/../.." && pwd)
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
"$repo/scripts/study/abba-rr-demo" "$out/ab" 1 "A B B A" "A=$1" "B=$2" -- --rounds 1
"$repo/scripts/abba-table" "$out/ab" --json "$here/results.json"
