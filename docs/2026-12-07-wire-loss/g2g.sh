#!/bin/bash
# vm-tests g2g's netem phase (two TCG guests; netem both ways in the client guest) for the
# builds given as NAME=BIN_DIR (a release build's rr-server, rr-bench, xsk-bench and
# vm-tests), each with the client guest's packet aggregation off (netem drops wire packets,
# g2g's default since this study) or, for NAME=BIN_DIR,agg, on (`--netem-on-aggregates`,
# how g2g ran before), in the slot order given (e.g. "wire agg agg wire"), for each netem
# spec and echo size:
#   jitter:  "delay 1ms 500us" (every packet 0.5-1.5 ms: heavy reordering, no loss)
#   default: vm-tests' "delay 1ms reorder 5% 50% loss 1%"
# 64-byte echoes x 10,000 and 16 KiB echoes x 2,000. Appends one JSON line per server and
# run to results.jsonl.xz (with SET as its set), with each qdisc's packets and drops. SPECS and
# SIZES (environment) narrow it, e.g. SPECS=default SIZES=16384; RESULTS names another results
# file (a later study's). Needs root.
# Usage: g2g.sh OUT_DIR SET "A B B A" A=DIR B=DIR[,agg] [...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1 set=$2 order=$3; shift 3
declare -A dir
for kv in "$@"; do dir[${kv%%=*}]=${kv#*=}; done
mkdir -p "$out"
for spec in ${SPECS:-default jitter}; do
  case $spec in jitter) netem="delay 1ms 500us";; default) netem="delay 1ms reorder 5% 50% loss 1%";; esac
  for size in ${SIZES:-16384 64}; do
    n=$([ "$size" = 64 ] && echo 10000 || echo 2000)
    slot=0
    for b in $order; do
      slot=$((slot + 1))
      f="$out/$spec-$size-$b-$slot"
      bin=${dir[$b]%,agg} extra=()
      [ "$bin" != "${dir[$b]}" ] && extra=(--netem-on-aggregates)
      "$bin/vm-tests" g2g --bin-dir "$bin" --requests "$n" --runs 0 --netem-size "$size" \
        --netem "$netem" "${extra[@]}" --json "$f.json" > "$f.log" 2>&1 \
        || echo "g2g $spec $size $b $slot failed (see $f.log)" >&2
      echo "$(date +%T) $spec $size $b $slot done" >&2
    done
  done
done
python3 - "$out" "$set" "${RESULTS:-$here/results.jsonl.xz}" <<'PY'
import json, lzma, pathlib, sys
out, set_, results = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
old = lzma.open(results, "rt").read() if results.exists() else ""
lines = []
print = lambda line: lines.append(line)
for f in sorted(out.glob("*.json")):
    spec, size, build, slot = f.stem.split("-")
    for n in json.load(open(f))["g2g"]["netem"]:
        mode = "agg" if "GRO/GSO on" in n["placement"] else "wire"
        l = n["load"] or {}
        e = n.get("client_tcpext") or {}
        print(json.dumps({"set": set_, "spec": spec, "size": int(size), "build": build, "mode": mode, "slot": int(slot),
                          "server": n["backend"], "requests": l.get("requests"), "rps": l.get("rps"),
                          "p99_us": l.get("p99_us"), "p999_us": l.get("p999_us"),
                          "resent": n["server_resent"], "client_resent": n.get("client_resent"),
                          "qdiscs": {q["dev"]: [q["sent_pkts"], q["dropped"]] for q in n["qdiscs"]},
                          "outcome": n["outcome"],
                          "client": {k: e.get(k, 0) for k in ("TCPFastRetrans", "TCPSACKReorder", "TCPDSACKRecv",
                                                              "TCPLossProbes", "TCPTimeouts", "TCPLossProbeRecovery",
                                                              "TCPSpuriousRTOs", "TCPDSACKUndo")},
                          "server_recovery": n.get("server_recovery") or {}, "server_tcpext": n.get("server_tcpext") or {}},
                         separators=(",", ":")))
with lzma.open(results, "wt", preset=9) as f:
    f.write(old + "".join(l + "\n" for l in lines))
PY
