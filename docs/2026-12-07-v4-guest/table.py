#!/usr/bin/env python3
"""The study's table and results.json from run.sh's OUT folder (its *-A.json, *-B.json).
Usage: table.py OUT [results.json]"""
import glob, json, os, re, statistics, sys

out = sys.argv[1]
dest = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
runs = []
for f in sorted(glob.glob(os.path.join(out, "*-[AB].json"))):
    m = re.match(r"(r300|closed16)-(?:\d+-)?(\d+)-([AB])\.json$", os.path.basename(f))
    d = json.load(open(f))
    c = {x["backend"]: x for x in d["cases"]}
    runs.append({"case": m.group(1), "slot": int(m.group(2)), "variant": m.group(3),
                 "xsk_us": round(c["xsk"]["cpu_us"], 2), "kernel_us": round(c["kernel"]["cpu_us"], 2),
                 "xsk_kinsn": round(c["xsk"]["kinsn"], 3), "xsk_spread_pct": round(c["xsk"]["cpu_spread_pct"], 2),
                 "ratio": round(c["xsk"]["cpu_us"] / c["kernel"]["cpu_us"], 4)})
runs.sort(key=lambda r: (r["case"], r["slot"]))
summary = {}
print("| case | build | xsk guest CPU us/request (runs) | median | xsk/kernel, median |")
print("|---|---|---|---|---|")
for case in ("r300", "closed16"):
    for v, name in (("A", "before IPv6 (5887ef3)"), ("B", "with IPv6 (5344ca6)")):
        rs = [r for r in runs if r["case"] == case and r["variant"] == v]
        if not rs:
            continue
        us = [r["xsk_us"] for r in rs]
        med, ratio = statistics.median(us), statistics.median(r["ratio"] for r in rs)
        summary[f"{case}-{v}"] = {"xsk_us_median": round(med, 2), "ratio_median": round(ratio, 4), "n": len(rs)}
        print(f"| {case} | {name} | {', '.join(f'{u:.1f}' for u in us)} | {med:.1f} | {ratio:.3f} |")
    a, b = summary.get(f"{case}-A"), summary.get(f"{case}-B")
    if a and b:
        summary[f"{case}-B/A"] = round(b["xsk_us_median"] / a["xsk_us_median"], 4)
        print(f"| {case} | B/A | | {summary[f'{case}-B/A']:.3f} | |")
json.dump({"runs": runs, "summary": summary}, open(dest, "w"), separators=(",", ":"))
