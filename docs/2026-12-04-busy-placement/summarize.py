#!/usr/bin/env python3
"""Merge placement.json files into results.json and print per-variant medians.

usage: summarize.py OUT_RESULTS_JSON PASS_NAME=PLACEMENT_JSON [PASS_NAME=PLACEMENT_JSON ...]
The first pass given is the one the medians are printed for (others are kept in the file).
"""
import json, statistics as st, sys

out = sys.argv[1]
passes = []
for arg in sys.argv[2:]:
    name, path = arg.split("=", 1)
    passes.append({"pass": name, "runs": json.load(open(path))})

def med(v):
    v = [x for x in v if x is not None]
    return round(st.median(v), 3) if v else None

summary = {}
for p in passes:
    s = summary[p["pass"]] = {}
    for v in sorted({r["variant"] for r in p["runs"]}):
        rs = [r for r in p["runs"] if r["variant"] == v and "xsk" in r["rows"] and "kernel" in r["rows"]]
        xp = [r["rows"]["xsk"]["p50_us"] for r in rs]
        kp = [r["rows"]["kernel"]["p50_us"] for r in rs]
        xr = [r["rows"]["xsk"]["rps"] for r in rs]
        kr = [r["rows"]["kernel"]["rps"] for r in rs]
        ratio = [x / k for x, k in zip(xp, kp)]
        s[v] = {"n": len(rs), "xsk_p50_median": med(xp), "xsk_p50_min": min(xp), "xsk_p50_max": max(xp),
                "kernel_p50_median": med(kp), "kernel_p50_min": min(kp), "kernel_p50_max": max(kp),
                "xsk_rps_median": round(med(xr)), "kernel_rps_median": round(med(kr)),
                "p50_ratio_x_over_k_median": med(ratio), "p50_ratio_min": round(min(ratio), 3), "p50_ratio_max": round(max(ratio), 3),
                "placements": sorted({r["rows"]["xsk"].get("placement") or "?" for r in rs} | {r["rows"]["kernel"].get("placement") or "?" for r in rs})}
json.dump({"note": "busy-same-1 placement study; see README.md. 'pass' first-pass-heavy-watcher had a /proc watcher "
                   "that took ~23% of one CPU (kept for reference only).", "summary": summary, "passes": passes},
          open(out, "w"), indent=1)

p = passes[0]
print(f"## {p['pass']}: per variant (median [min-max])")
print("| variant | n | xsk p50 us | kernel p50 us | xsk req/s | kernel req/s | x/k p50 |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for v, s in summary[p["pass"]].items():
    print(f"| {v} | {s['n']} | {s['xsk_p50_median']:.2f} [{s['xsk_p50_min']:.2f}-{s['xsk_p50_max']:.2f}] | "
          f"{s['kernel_p50_median']:.2f} [{s['kernel_p50_min']:.2f}-{s['kernel_p50_max']:.2f}] | {s['xsk_rps_median']} | "
          f"{s['kernel_rps_median']} | {s['p50_ratio_x_over_k_median']:.2f} [{s['p50_ratio_min']:.2f}-{s['p50_ratio_max']:.2f}] |")
print()
print(f"## {p['pass']}: every run, in time order")
print("| run | variant | xsk p50 | xsk req/s | xsk placement | kernel p50 | kernel req/s | kernel placement | x/k p50 | steal jiffies xsk/kernel row (cpu0,cpu1) | nonvol. switches srv/cli (xsk) |")
print("| ---: | --- | ---: | ---: | --- | ---: | ---: | --- | ---: | --- | --- |")
for r in p["runs"]:
    x, k = r["rows"].get("xsk", {}), r["rows"].get("kernel", {})
    st_x = x.get("system", {}).get("steal_jiffies"); st_k = k.get("system", {}).get("steal_jiffies")
    sw = f"{x.get('server_switches',{}).get('nonvol')}/{x.get('client_switches',{}).get('nonvol')}"
    print(f"| {r['run']} | {r['variant']} | {x['p50_us']:.2f} | {x['rps']:.0f} | {x.get('placement')} | {k['p50_us']:.2f} | "
          f"{k['rps']:.0f} | {k.get('placement')} | {x['p50_us']/k['p50_us']:.2f} | {st_x} / {st_k} | {sw} |")
