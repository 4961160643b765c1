#!/usr/bin/env python3
"""The study's tables and results.json from run.sh's OUT folder (its *-A.json, *-B.json)
and, when given, the results.json of `rr-demo --only rr-16,rr-16-v6 --rounds 15 --kernels epoll`.
Usage: table.py OUT [RR_DEMO_RESULTS_JSON]"""
import glob, json, os, re, statistics, sys

out = sys.argv[1]
demo = sys.argv[2] if len(sys.argv) > 2 else None
dest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
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
rounds = []
if demo:
    # rr-16 against rr-16-v6: each round's xsk and kernel TCP (epoll) requests/s.
    by = {}
    for x in json.load(open(demo))["runs"]:
        by.setdefault((x["case"], x["round"]), {})[x["backend"]] = round(x["rps"])
    rounds = [{"case": c, "round": r, **v} for (c, r), v in sorted(by.items())]
    print()
    print("| case | rounds | xsk/kernel requests/s, median | range | xsk req/s, median |")
    print("|---|---|---|---|---|")
    med = {}
    for case in ("rr-16", "rr-16-v6"):
        rs = [x for x in rounds if x["case"] == case]
        q = [x["xsk"] / x["kernel"] for x in rs]
        med[case] = statistics.median(q)
        print(f"| {case} | {len(rs)} | {med[case]:.3f} | {min(q):.2f}-{max(q):.2f} | {statistics.median(x['xsk'] for x in rs):,.0f} |")
    summary["rr-16-v6/rr-16"] = round(med["rr-16-v6"] / med["rr-16"], 4)
    print(f"\nrr-16-v6's ratio over rr-16's: {summary['rr-16-v6/rr-16']:.3f}")
json.dump({"runs": runs, "rr_demo_rounds": rounds, "summary": summary}, open(dest, "w"), separators=(",", ":"))
