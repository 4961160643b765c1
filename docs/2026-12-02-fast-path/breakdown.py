#!/usr/bin/env python3
"""Exclusive instructions per request of a callgrind profile, grouped by the
function they ran in after inlining (callgrind_annotate's file:function rows
summed over the files), and by part of the stack.
Usage: breakdown.py PROFILE.cg REQUESTS [--json]"""
import collections, json, re, subprocess, sys

cg, reqs = sys.argv[1], float(sys.argv[2])
out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", cg], capture_output=True, text=True).stdout
rows = collections.Counter()
total = None
for line in out.splitlines():
    m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
    if not m:
        continue
    ir = int(m.group(1).replace(",", ""))
    rest = m.group(2)
    if rest.startswith("PROGRAM TOTALS"):
        total = ir
        continue
    rest = re.sub(r" \[[^\]]*\]$", "", rest)
    fn = rest.split(":", 1)[1] if ":" in rest else rest
    rows[fn] += ir
# The exclusive listing comes after the totals: drop the inclusive chain of main.
for k in list(rows):
    if k in ("__libc_start_main@@GLIBC_2.34", "(below main)", "main", "rr_server::main", "rr_server::run",
             "std::sys::backtrace::__rust_begin_short_backtrace") or k.startswith("0x"):
        del rows[k]

def part(fn):
    f = fn
    if "smoltcp" in f and ("process_ethernet" in f or "socket_ingress" in f or "Repr::parse" in f or "poll_ingress" in f):
        return "smoltcp receive (parse, socket lookup, process)"
    if "smoltcp" in f or "emit_payload" in f or "dispatch_ip" in f:
        return "smoltcp send (dispatch, emit) and timers"
    if "engine::egress" in f or "lifecycle" in f or "Engine>::scan" in f or "BinaryHeap" in f:
        return "engine egress, scan, timers"
    if "demux" in f or "engine::ingest" in f or "csum" in f:
        return "engine receive (checks, checksum, demux)"
    if "memcpy" in f or "memmove" in f or "memset" in f:
        return "memcpy/memset"
    if "rr::server" in f or "codec" in f or "bytes::" in f or "rr_server" in f:
        return "application (rr server, codec)"
    if "xsk_io" in f or "XskTransport" in f or "driver" in f:
        return "driver and port (poll loop, rings, recv/send)"
    if "libc" in f or "syscall" in f or "clock_gettime" in f or "vdso" in f or "__" in f:
        return "libc, vDSO"
    return "other"

parts = collections.Counter()
for fn, ir in rows.items():
    parts[part(fn)] += ir
res = {"total_per_request": round(total / reqs), "parts": {k: round(v / reqs) for k, v in parts.most_common()},
       "top": [(fn, round(ir / reqs)) for fn, ir in rows.most_common(25)]}
if "--json" in sys.argv:
    print(json.dumps(res, indent=1))
else:
    print(f"total {res['total_per_request']} instructions per request")
    for k, v in res["parts"].items():
        print(f"{v:6d}  {k}")
    print()
    for fn, v in res["top"]:
        print(f"{v:6d}  {fn[:150]}")
