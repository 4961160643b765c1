#!/usr/bin/env python3
"""tables.txt and results.json of the study from the reports of run.sh (runs/cost, runs/attach)
and full.sh (runs/full): <load>-<variant>-<cycle>.json each.
Usage: summarize.py   (writes both beside itself)"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
NAME = {"A": "A (-cpu max: ERMS)", "B": "B (-cpu max,-erms,-fsrm)", "drv": "--attach drv", "skb": "--attach skb"}


def collect(runs):
    """{load: {"<kernel> <conns>": {variant: {guest_cpu, runs: [...], median_ratio}}}}"""
    res = {}
    for f in sorted(glob.glob(os.path.join(runs, "*.json"))):
        load, v, i = os.path.basename(f)[:-5].split("-")
        d = json.load(open(f))
        for c in d["cases"]:
            k = res.setdefault(load, {}).setdefault(f'{c["kernel"]} {c["conns"]}', {})
            k = k.setdefault(v, {"guest_cpu": d["guest_cpu"], "runs": []})
            r = next((x for x in k["runs"] if x["run"] == int(i)), None)
            if r is None:
                r = {"run": int(i)}
                k["runs"].append(r)
            r[c["backend"]] = {x: round(c[x], 1) for x in ("cpu_us", "user_us", "sys_us", "softirq_us", "kinsn")}
    for load in res.values():
        for case in load.values():
            for v in case.values():
                v["runs"].sort(key=lambda r: r["run"])
                for r in v["runs"]:
                    r["xsk_over_kernel"] = round(r["xsk"]["cpu_us"] / r["kernel"]["cpu_us"], 3)
                v["median_ratio"] = round(statistics.median(r["xsk_over_kernel"] for r in v["runs"]), 3)
    return res


def table(title, res):
    out = [title,
           "busy cpu of each invocation (medians of its rounds); user/sys/softirq split by tick samples",
           f"{'load':8} {'kernel conns':>12} {'variant':26} {'kernel cpu':>12} {'xsk cpu':>12} {'xsk user/sys/softirq':>26} {'xsk/kernel':>12} {'median':>7}"]
    for load in sorted(res):
        for case in sorted(res[load], key=lambda k: (k.split()[0], int(k.split()[1]))):
            for v in sorted(res[load][case]):
                x = res[load][case][v]
                rs = x["runs"]
                kc = ", ".join(f"{r['kernel']['cpu_us']:.0f}" for r in rs)
                xc = ", ".join(f"{r['xsk']['cpu_us']:.0f}" for r in rs)
                sp = "; ".join(f"{r['xsk']['user_us']:.0f}/{r['xsk']['sys_us']:.0f}/{r['xsk']['softirq_us']:.0f}" for r in rs)
                ra = ", ".join(f"{r['xsk_over_kernel']:.2f}" for r in rs)
                out.append(f"{load:8} {case:>12} {NAME[v]:26} {kc:>12} {xc:>12} {sp:>26} {ra:>12} {x['median_ratio']:>7.2f}")
    return "\n".join(out)


parts = [
    ("cost", "ERMS (A) against none (B): vm-tests cost --short [--rate 300], A B per cycle (run.sh runs/cost 2 BIN_DIR erms)"),
    ("attach", "native against generic attach, no ERMS: vm-tests cost --short [--rate 300] --attach drv|skb (run.sh runs/attach 2 BIN_DIR attach)"),
    ("full", "ERMS (A) against none (B): the full vm-tests cost, both guest kernels, 3 rounds (full.sh runs/full)"),
]
results, tables = {}, []
for name, title in parts:
    results[name] = collect(os.path.join(here, "runs", name))
    tables.append(table("Guest CPU per request, us, 6.1 guest unless named, -icount shift=4. " + title, results[name]))
with open(os.path.join(here, "results.json"), "w") as f:
    json.dump(results, f, indent=1)
with open(os.path.join(here, "tables.txt"), "w") as f:
    f.write("\n\n".join(tables) + "\n")
