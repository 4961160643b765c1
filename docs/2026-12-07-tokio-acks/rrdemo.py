#!/usr/bin/env python3
"""rr-demo before (A) and after (B), alternated: per case, the stack's rate and server CPU per
request over kernel TCP's (epoll) in the same invocation, median and every invocation.

usage: rrdemo.py [--json FILE] [--set NAME]        print a set's table (default: every set)
       rrdemo.py --from-runs DIR --set NAME [--json FILE]
           fold DIR/{A,B}-K/results.json (scripts/study/abba-rr-demo's runs) into FILE's
           set NAME (the few figures the table needs), then print it.
FILE defaults to rrdemo.json next to this script."""
import argparse, collections, glob, json, os, statistics as st

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("--json", default=os.path.join(here, "rrdemo.json"))
ap.add_argument("--set")
ap.add_argument("--from-runs")
a = ap.parse_args()
doc = json.load(open(a.json)) if os.path.exists(a.json) else {"sets": {}}
if a.from_runs:
    rows = []
    for f in glob.glob(os.path.join(a.from_runs, "*-*", "results.json")):
        variant, slot = os.path.basename(os.path.dirname(f)).split("-")
        by = collections.defaultdict(dict)
        for r in json.load(open(f))["runs"]:
            by[(r["case"], r["round"])][r["backend"]] = r
        for (case, rnd), b in by.items():
            x, k = b.get("xsk"), b.get("kernel")
            if x and k:
                rows.append({"variant": variant, "slot": int(slot), "case": case, "round": rnd,
                             "xsk_rps": x["rps"], "kernel_rps": k["rps"],
                             "xsk_cpu_us_per_req": x["cpu_us_per_req"], "kernel_cpu_us_per_req": k["cpu_us_per_req"]})
    rows.sort(key=lambda r: (r["slot"], r["case"]))
    doc["sets"][a.set] = rows
    json.dump(doc, open(a.json, "w"), indent=0)
f2 = lambda xs: " ".join(f"{v:.2f}" for v in xs)
for name, rows in doc["sets"].items():
    if a.set and name != a.set:
        continue
    print(f"set {name}:\n")
    print("| case | stack/kernel rate, A | B | stack/kernel CPU per request, A | B |")
    print("|---|---|---|---|---|")
    cases = list(dict.fromkeys(r["case"] for r in rows))
    for case in cases:
        v = {x: [r for r in rows if r["case"] == case and r["variant"] == x] for x in "AB"}
        rate = {x: [r["xsk_rps"] / r["kernel_rps"] for r in v[x]] for x in "AB"}
        cpu = {x: [r["xsk_cpu_us_per_req"] / r["kernel_cpu_us_per_req"] for r in v[x]] for x in "AB"}
        print(f"| {case} | {st.median(rate['A']):.2f} ({f2(rate['A'])}) | {st.median(rate['B']):.2f} ({f2(rate['B'])}) "
              f"| {st.median(cpu['A']):.2f} ({f2(cpu['A'])}) | {st.median(cpu['B']):.2f} ({f2(cpu['B'])}) |")
    print()
