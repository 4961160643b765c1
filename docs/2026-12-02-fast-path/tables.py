#!/usr/bin/env python3
"""Tables of the study from results.json (which collect.py builds from the
rr-demo runs under runs/). Usage: tables.py [results.json] > tables.txt"""
import json, statistics, sys

d = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "results.json"))
for name, ab in d["ab"].items():
    print(f"## {name}: A = {ab['a']}, B = {ab['b']}")
    print(f"{ab['rounds']} rounds alternating A B, one rr-demo round of {ab['duration_s']}s per case each; medians; cpu in us per request")
    print()
    print("| case | backend | metric | A | B | B/A | rounds B better |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for row in ab["rows"]:
        ratio = row["b"] / row["a"] if row["a"] else float("nan")
        print(f"| {row['case']} | {row['backend']} | {row['metric']} | {row['a']:.2f} | {row['b']:.2f} | {ratio:.3f} | {row['b_better']} of {row['n']} |")
    print()
if "instructions" in d:
    print("## user-space instructions per request of the xsk server (callgrind, profile.sh)")
    print()
    print("| build | each run | median |")
    print("| --- | --- | ---: |")
    for r in d["instructions"]:
        print(f"| {r['build']} | {', '.join(str(x) for x in r['per_request_each'])} | {r['median']:.0f} |")
    print()
if "tx_path" in d:
    t = d["tx_path"]
    print(f"## the TX checksum's own instructions per request ({t['note']})")
    print()
    order = [k for k in ("base", "newoff", "new") if k in t["builds"]]
    print("| function | " + " | ".join(order) + " |")
    print("| --- | " + " | ".join("---:" for _ in order) + " |")
    for i, f in enumerate(t["functions"]):
        print(f"| `{f}` | " + " | ".join(f"{t['builds'][k][i]:.0f}" for k in order) + " |")
    print("| sum | " + " | ".join(f"{sum(t['builds'][k]):.0f}" for k in order) + " |")
    print()
if "profiles" in d and "base" in d["profiles"]:
    runs = d["profiles"]["base"]
    names = set().union(*(r["functions_per_request"] for r in runs))
    med = {n: statistics.median(r["functions_per_request"].get(n, 0) for r in runs) for n in names}
    # callgrind_annotate also lists the chain from the entry point to the
    # server loop with its inclusive cost: not a place where work is done.
    total = statistics.median(r["per_request"] for r in runs)
    med = {n: v for n, v in med.items() if v < 0.5 * total}
    print("## where the base server's instructions go: the 25 costliest functions (after inlining), median of 3 runs")
    print()
    print("| instructions/request | function |")
    print("| ---: | --- |")
    for n, v in sorted(med.items(), key=lambda kv: -kv[1])[:25]:
        print(f"| {v:.0f} | `{n[:110]}` |")
