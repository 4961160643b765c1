#!/usr/bin/env python3
"""rr-demo before (A) and after (B) the renovation of issue #25: per case and backend the
median requests/s and server CPU per request of the A and B invocations, B/A, and the
xsk/kernel ratios rr-demo reports (median over the invocations of each build).

Usage: summarize.py   (reads the abba*/ folders next to this file, writes results.json
there and prints the tables; tables.txt is this output)"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
out = {}
for run in sorted(os.path.basename(p) for p in glob.glob(os.path.join(here, "abba*")) if os.path.isdir(p)):
    rows, ratios = {}, {}
    for d in sorted(glob.glob(os.path.join(here, run, "[AB]-*"))):
        if not os.path.isdir(d):
            continue
        v = os.path.basename(d)[0]
        summary = json.load(open(os.path.join(d, "results.json")))["summary"]
        by = {}
        for c in summary:
            r = rows.setdefault((c["case"], c["backend"]), {}).setdefault(v, {"rps": [], "cpu": []})
            r["rps"].append(c["rps"])
            r["cpu"].append(c["cpu_us_per_req"])
            by[(c["case"], c["backend"])] = c
        for case in {k[0] for k in by}:
            x, k = by.get((case, "xsk")), by.get((case, "kernel"))
            if x and k and k["rps"] and k["cpu_us_per_req"]:
                q = ratios.setdefault(case, {}).setdefault(v, {"rps": [], "cpu": []})
                q["rps"].append(x["rps"] / k["rps"])
                q["cpu"].append(x["cpu_us_per_req"] / k["cpu_us_per_req"])
    med = statistics.median
    print(f"== {run}: each backend, B against A")
    print(f"{'case':13} {'backend':7} {'A req/s':>9} {'B req/s':>9} {'B/A':>5} {'A us/req':>8} {'B us/req':>8} {'B/A':>5}  invocations")
    res = out.setdefault(run, {"per_backend": {}, "xsk_over_kernel": {}})
    for (case, be), ab in sorted(rows.items()):
        if "A" not in ab or "B" not in ab:
            continue
        a, b = med(ab["A"]["rps"]), med(ab["B"]["rps"])
        ca, cb = med(ab["A"]["cpu"]), med(ab["B"]["cpu"])
        res["per_backend"][f"{case} {be}"] = {"A": ab["A"], "B": ab["B"], "rps_B_over_A": b / a, "cpu_B_over_A": cb / ca}
        print(f"{case:13} {be:7} {a:9.0f} {b:9.0f} {b / a:5.2f} {ca:8.1f} {cb:8.1f} {cb / ca:5.2f}  {len(ab['A']['rps'])}+{len(ab['B']['rps'])}")
    print(f"== {run}: xsk/kernel (rr-demo's ratios), median of each build's invocations")
    print(f"{'case':13} {'A req/s':>8} {'B req/s':>8} {'A cpu':>6} {'B cpu':>6}")
    for case, ab in sorted(ratios.items()):
        if "A" not in ab or "B" not in ab:
            continue
        r = {v: {m: med(ab[v][m]) for m in ("rps", "cpu")} for v in "AB"}
        res["xsk_over_kernel"][case] = {"A": ab["A"], "B": ab["B"], "median": r}
        print(f"{case:13} {r['A']['rps']:8.2f} {r['B']['rps']:8.2f} {r['A']['cpu']:6.2f} {r['B']['cpu']:6.2f}")
json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
