#!/bin/bash
# One callgrind profile of rr-server (xsk) per build, as scripts/user-instructions takes it
# (open loop, 1,000 req/s, CONNS connections (default 1), 8 s window), and the inclusive instructions per
# request of the steps that an answer's egress goes through, as JSON lines.
# Usage: profile.sh BIN_A BIN_B > profile-results.jsonl   (root; valgrind)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); root=$(cd "$here/../.." && pwd)
for v in "$@"; do
  keep=$(mktemp -d)
  # user-instructions removes its output directory; this copy keeps the profiles.
  sed "s|rm -rf \"\$OUT\"|cp -r \"\$OUT\"/. $keep/; rm -rf \"\$OUT\"|" "$root/scripts/user-instructions" > "$keep/ui.sh"
  (cd "$root" && bash "$keep/ui.sh" "$v" 1000 "${CONNS:-1}" 8 > "$keep/summary.txt")
  python3 "$here/profile.py" "$v" "$keep/xsk.cg.1" "$keep/summary.txt"
  rm -rf "$keep"
done
