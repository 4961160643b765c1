#!/usr/bin/env python3
"""Prints the study's tables from results.json: per case and build, the median and every run
of the script's figure and of callgrind instructions per response."""
import json
import statistics
from pathlib import Path

r = json.loads((Path(__file__).parent / "results.json").read_text())
names = {"o16": "IPv4, 16 conns", "m16": "IPv4, 16 conns", "c1o": "IPv4, 1 conn", "c1m": "IPv4, 1 conn", "v6": "IPv6, 16 conns"}
print("| case (A B B A set) | build | script: median (runs) | Ir/response: median (runs) |")
print("|---|---|---|---|")
for s in ["o16", "m16", "c1o", "c1m", "v6"]:
    runs = [x for x in r["runs"] if x["set"] == s]
    for b in dict.fromkeys(x["build"] for x in runs):
        xs = [x for x in runs if x["build"] == b]
        sc = [x["script_per_request"] for x in xs]
        ir = [x["ir_per_response"] for x in xs]
        print(f"| {names[s]} ({s}) | {xs[0]['commit']} | {statistics.median(sc):.0f} ({', '.join(map(str, sc))}) "
              f"| {statistics.median(ir):.0f} ({', '.join(map(str, ir))}) |")
print()
print("Development steps (IPv4, 16 conns, in run order):")
print()
print("| build | script | Ir/response |")
print("|---|---|---|")
for x in r["development_steps"]:
    print(f"| {x['build']} | {x['script_per_request']} | {x['ir_per_response']} |")
print()
print("Per function (self instructions per response, mean of the 16-connection runs; functions")
print("inlined into another count there):")
print()
print("| function | 5887ef3 | 5344ca6 | final |")
print("|---|---|---|---|")
for x in r["functions_self_per_request"]:
    print(f"| `{x['function'][:90]}` | {x['old']} | {x['main']} | {x['final']} |")
