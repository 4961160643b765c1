#!/usr/bin/env python3
"""rr-demo before/after the embedder-API change (Handler::Conn, Server::shutdown): requests/s
per case and backend, medians of the A (before) and B (after) invocations, and B/A.

Usage: summarize.py   (reads the abba*/ folders next to this file, writes results.json
there and prints the table; tables.txt is this output)"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
out = {}
for run in ["abba", "abba-same16", "abba-rr16", "abba-churn", "abba-churn16"]:
    rows = {}
    for d in glob.glob(os.path.join(here, run, "[AB]-*")):
        v = os.path.basename(d)[0]
        for c in json.load(open(os.path.join(d, "results.json")))["summary"]:
            rows.setdefault((c["case"], c["backend"]), {}).setdefault(v, []).append(c["rps"])
    print(f"== {run}")
    print(f"{'case':8} {'backend':7} {'A req/s':>9} {'B req/s':>9} {'B/A':>5}  invocations")
    for (case, be), ab in sorted(rows.items()):
        a, b = statistics.median(ab["A"]), statistics.median(ab["B"])
        out.setdefault(run, {})[f"{case} {be}"] = {"A": ab["A"], "B": ab["B"], "A_median": a, "B_median": b, "B_over_A": b / a}
        print(f"{case:8} {be:7} {a:9.0f} {b:9.0f} {b / a:5.2f}  {len(ab['A'])}+{len(ab['B'])}")
json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
