#!/bin/bash
# vm-tests g2g's netem phase (two TCG guests, netem "delay 1ms reorder 5% 50% loss 1%" both ways
# in the client guest) with the stack's SACK recovery on and off, alternating "on off off on":
# 64-byte echoes (10,000 requests) and 16 KiB echoes (--netem-size 16384, 2,000 requests).
# Appends one JSON line per server and run to results.jsonl (set g2g). Needs root and the
# release build (vm-tests, rr-server, rr-bench). Usage: g2g.sh OUT_DIR BUILD
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$1 build=$2
mkdir -p "$out"
for size in 64 16384; do
  n=$([ "$size" = 64 ] && echo 10000 || echo 2000)
  for v in on-1 off-2 off-3 on-4; do
    case $v in off*) x=(--xsk-args "--no-sack-recovery");; *) x=();; esac
    "$repo/target/release/vm-tests" g2g --requests "$n" --runs 0 --netem-size "$size" "${x[@]}" \
      --json "$out/$size-$v.json" > "$out/$size-$v.log" 2>&1 || echo "g2g $size $v failed (see $out/$size-$v.log)" >&2
  done
done
python3 - "$out" "$build" >> "$here/results.jsonl" <<'PY'
import json, pathlib, sys
out, build = pathlib.Path(sys.argv[1]), sys.argv[2]
for f in sorted(out.glob("*.json")):
    size, variant, slot = f.stem.split("-")
    for n in json.load(open(f))["g2g"]["netem"]:
        l = n["load"] or {}
        print(json.dumps({"set": "g2g", "build": build, "size": int(size), "variant": variant, "slot": int(slot),
                          "server": n["backend"], "requests": l.get("requests"), "rps": l.get("rps"),
                          "p99_us": l.get("p99_us"), "p999_us": l.get("p999_us"), "resent": n["server_resent"],
                          "dropped": sum(q["dropped"] for q in n["qdiscs"]), "outcome": n["outcome"]}))
PY
