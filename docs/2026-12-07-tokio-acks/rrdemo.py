#!/usr/bin/env python3
"""rr-demo before (A) and after (B), alternated: per case, the stack's rate and server CPU per
request over kernel TCP's (epoll) in the same invocation, median and every invocation.
Reads rrdemo-runs/{A,B}-K/results.json (`tar -xJf raw.tar.xz` here puts them back; the runs
came from scripts/study/abba-rr-demo, see README.md).  Usage: rrdemo.py [RUNS_DIR]"""
import collections, glob, json, os, statistics as st, sys

here = os.path.dirname(os.path.abspath(__file__))
runs_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "rrdemo-runs")
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(os.path.join(runs_dir, "*-*", "results.json")), key=lambda p: int(p.split("-")[-1].split("/")[0])):
    variant = os.path.basename(os.path.dirname(f)).split("-")[0]
    by = collections.defaultdict(dict)
    for r in json.load(open(f))["runs"]:
        by[(r["case"], r["round"])][r["backend"]] = r
    for (case, _), b in by.items():
        x, k = b.get("xsk"), b.get("kernel")
        if x and k:
            rows[case][variant].append((x["rps"] / k["rps"], x["cpu_us_per_req"] / k["cpu_us_per_req"]))
f2 = lambda xs: " ".join(f"{v:.2f}" for v in xs)
print("| case | stack/kernel rate, A | B | stack/kernel CPU per request, A | B |")
print("|---|---|---|---|---|")
for case, d in rows.items():
    ra, rb = [r for r, _ in d["A"]], [r for r, _ in d["B"]]
    ca, cb = [c for _, c in d["A"]], [c for _, c in d["B"]]
    print(f"| {case} | {st.median(ra):.2f} ({f2(ra)}) | {st.median(rb):.2f} ({f2(rb)}) | {st.median(ca):.2f} ({f2(ca)}) | {st.median(cb):.2f} ({f2(cb)}) |")
