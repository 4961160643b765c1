#!/usr/bin/env python3
"""A table of xsk/kernel guest CPU per request from run.sh's or attach.sh's reports
(RUNS_DIR/<load>-<variant>-<cycle>.json; load "full" is the full scenario, both kernels), and their figures as JSON.
Usage: summarize.py RUNS_DIR JSON_OUT"""
import glob, json, os, statistics, sys

runs = sys.argv[1]
res = {}
for f in sorted(glob.glob(os.path.join(runs, "*.json"))):
    load, v, i = os.path.basename(f)[:-5].split("-")
    d = json.load(open(f))
    cpu = d["guest_cpu"]
    for c in d["cases"]:
        k = res.setdefault(load, {}).setdefault(f'{c["kernel"]} {c["conns"]}', {}).setdefault(v, {"guest_cpu": cpu, "runs": []})
        r = next((x for x in k["runs"] if x["run"] == int(i)), None)
        if r is None:
            r = {"run": int(i)}
            k["runs"].append(r)
        r[c["backend"]] = {x: round(c[x], 1) for x in ("cpu_us", "user_us", "sys_us", "softirq_us", "kinsn")}
for load in res.values():
    for conns in load.values():
        for v in conns.values():
            for r in v["runs"]:
                r["xsk_over_kernel"] = round(r["xsk"]["cpu_us"] / r["kernel"]["cpu_us"], 3)
            v["median_ratio"] = round(statistics.median(r["xsk_over_kernel"] for r in v["runs"]), 3)
json.dump(res, open(sys.argv[2], "w"), indent=1)

name = {"A": "A (-cpu max: ERMS)", "B": "B (-cpu max,-erms,-fsrm)", "drv": "--attach drv", "skb": "--attach skb"}
print(f"Guest CPU per request, us (vm-tests cost --short [--rate 300]; 6.1 guest, -icount shift=4), alternating per cycle: {runs}")
print("busy cpu of each invocation; user/sys/softirq split by tick samples (medians of the invocation's rounds)")
print(f"{'load':8} {'kernel conns':>12} {'variant':26} {'kernel cpu':>16} {'xsk cpu':>16} {'xsk user/sys/softirq':>26} {'xsk/kernel':>14} {'median':>7}")
for load in sorted(res):
    for conns in sorted(res[load], key=lambda k: (k.split()[0], int(k.split()[1]))):
        for v in sorted(res[load][conns]):
            x = res[load][conns][v]
            rs = sorted(x["runs"], key=lambda r: r["run"])
            kc = ", ".join(f"{r['kernel']['cpu_us']:.0f}" for r in rs)
            xc = ", ".join(f"{r['xsk']['cpu_us']:.0f}" for r in rs)
            sp = "; ".join(f"{r['xsk']['user_us']:.0f}/{r['xsk']['sys_us']:.0f}/{r['xsk']['softirq_us']:.0f}" for r in rs)
            ra = ", ".join(f"{r['xsk_over_kernel']:.2f}" for r in rs)
            print(f"{load:8} {conns:>12} {name[v]:26} {kc:>16} {xc:>16} {sp:>26} {ra:>14} {x['median_ratio']:>7.2f}")
