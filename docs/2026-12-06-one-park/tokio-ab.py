#!/usr/bin/env python3
"""The tokio adapter A/B table from tokio-ab-results.json: per case and variant, the xsk
server's requests/s and CPU per request over tokio's own listener's in the same invocation
(medians over the invocations, each run listed), and the xsk server's syscalls per request
(strace -c runs).  Usage: tokio-ab.py [tokio-ab-results.json]"""
import json, statistics as st, sys
from pathlib import Path

runs = json.loads(Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).with_name("tokio-ab-results.json")).read_text())["runs"]
by = {}
for r in runs:
    by.setdefault((r["variant"], r["invocation"], r["case"], r["server"], bool(r.get("strace"))), r)
rows = {}
for (v, k, case, server, strace), r in by.items():
    if server != "xsk":
        continue
    d = rows.setdefault((case, v), {"rate": [], "cpu": [], "sys": []})
    if strace:
        d["sys"].append(r["syscalls_per_req"])
        continue
    t = by.get((v, k, case, "tokio", False))
    if t:
        d["rate"].append(r["req_per_s"] / t["req_per_s"])
        d["cpu"].append(r["server_cpu_us_per_req"] / t["server_cpu_us_per_req"])
print("| case | variant | xsk/tokio req/s | runs | xsk/tokio CPU per request | runs | xsk syscalls per request |")
print("|---|---|---|---|---|---|---|")
for (case, v), d in sorted(rows.items()):
    f = lambda xs: " ".join(f"{x:.2f}" for x in xs)
    print(f"| {case} | {v} | {st.median(d['rate']):.2f} | {f(d['rate'])} | {st.median(d['cpu']):.2f} | {f(d['cpu'])} | {st.median(d['sys']):.2f} |")
