#!/usr/bin/env python3
"""tables.txt and results.json of the PGO study from runs/ (user-instructions output and
rr-demo results.json), plain and pgo side by side."""
import glob, json, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))
runs = os.path.join(here, "runs")
res = {"user_instructions": {}, "rr_demo": []}
print("User-space instructions per request (scripts/user-instructions: open loop 1,000 req/s, 16 connections, 8 s, callgrind)\n")
print("| build | xsk server | kernel-TCP server (user space only) |")
print("|---|---|---|")
for v in ["plain", "pgo"]:
    xs, ks = [], []
    for p in sorted(glob.glob(os.path.join(runs, f"ui-{v}-*.txt"))):
        t = open(p).read()
        m, n = re.search(r"^xsk\s+(\d+)", t, re.M), re.search(r"^kernel\s+(\d+)", t, re.M)
        if m and n:
            xs.append(int(m.group(1)))
            ks.append(int(n.group(1)))
    res["user_instructions"][v] = {"xsk": xs, "kernel": ks}
    print(f"| {v} | {', '.join(f'{x:,}' for x in xs)} (median {statistics.median(xs):,.0f}) | {', '.join(f'{k:,}' for k in ks)} |")
print("\nrr-demo, one round of 4 s per invocation, plain and pgo alternating (the kernel rows run the same build's rr-server --backend kernel)\n")
print("| run | case | xsk req/s | kernel req/s | xsk p50 | xsk server CPU us/req | kernel server CPU us/req |")
print("|---|---|---|---|---|---|---|")
for r in (1, 2):
    for v in ["plain", "pgo"]:
        d = json.load(open(os.path.join(runs, f"demo-{v}-{r}", "results.json")))
        for case in ["rr-16", "rr-256", "same-16", "busy-same-1", "open-5k", "loss1-16"]:
            x = next((s for s in d["summary"] if s["case"] == case and s["backend"] == "xsk"), None)
            k = next((s for s in d["summary"] if s["case"] == case and s["backend"] == "kernel"), None)
            if x and k:
                res["rr_demo"].append({"build": v, "round": r, "case": case, "xsk": x, "kernel": k})
                print(f"| {v} {r} | {case} | {x['rps']:,.0f} | {k['rps']:,.0f} | {x['p50_us']:.1f} us | {x['cpu_us_per_req']:.2f} | {k['cpu_us_per_req']:.2f} |")

print("\nThe plain build since b791413 (rise.sh: same instrument, alternating, twice)\n")
print("| commit | xsk server user instructions/request |")
print("|---|---|")
res["rise"] = {}
for c, what in [("b791413", "before issue 22's engine work"), ("9df7431", "SYN cookies, churn/storm cases"), ("4215d19", "buffers that start small and grow"), ("head", "this tree (b3dd60c's code)")]:
    xs = []
    for p in sorted(glob.glob(os.path.join(runs, "rise", f"{c}-*.txt"))):
        m = re.search(r"^xsk\s+(\d+)", open(p).read(), re.M)
        if m:
            xs.append(int(m.group(1)))
    res["rise"][c] = xs
    print(f"| {c} ({what}) | {', '.join(f'{x:,}' for x in xs)} |")
json.dump(res, open(os.path.join(here, "results.json"), "w"), indent=1)
