"""Inclusive instructions per request of an answer's steps, from one callgrind profile."""
import json, re, subprocess, sys

build, cg, summary = sys.argv[1:4]
per_request = int(re.search(r"^xsk\s+(\d+)", open(summary).read(), re.M).group(1))
out = subprocess.run(["callgrind_annotate", "--inclusive=yes", cg], capture_output=True, text=True).stdout
total = int(re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", out).group(1).replace(",", ""))
requests = total / per_request
steps = {
    "flush": r"Transport>::flush \[",
    "engine_egress": r"Engine>::egress \[",
    "dispatch_tcp_fast": r"InterfaceInner::dispatch_tcp_fast \[",
    "fast_emit": r"fast_emit::emit \[",
    "poll": r"Transport>::poll \[",
    "ingest": r"XskTransport::ingest::\{\{closure\}\}",
    "engine_ingest": r"Engine>::ingest \[",
    "service": r"Server<T,C,H>::service \[",
}
row = {"build": build, "user_instructions_per_request": per_request}
for name, pat in steps.items():
    vals = [int(m.group(1).replace(",", "")) for m in re.finditer(r"^\s*([\d,]+) \([\d.]+%\)\s+.*" + pat, out, re.M)]
    row[name] = round(max(vals) / requests) if vals else None
print(json.dumps(row))
