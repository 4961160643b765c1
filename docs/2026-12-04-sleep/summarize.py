#!/usr/bin/env python3
"""Tables and results.json of the sleep study: guest instructions per request from
`vm-tests cost --short --rate 300` runs named VARIANT-CYCLE.json (guest.sh writes them), one
folder per round of runs (N-what; N-what-closed: closed loop, without --rate, left out of the
pooled figures); callgrind runs in cg*. Usage: summarize.py RUNS [A,B] > RUNS/tables.txt
(writes RUNS/results.json; A,B: the two builds pooled over the rounds, base,final unless
given, as the 2026-12-04-signal-sleep study added)"""
import json, statistics, sys
from pathlib import Path

d = Path(sys.argv[1])
pool = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("base", "final")
res = {}
# Guest rounds are the folders named N-what; cg* hold callgrind runs (breakdown.py's JSON).
rounds = sorted(p for p in d.iterdir() if p.is_dir() and p.name[0].isdigit())
for folder in rounds:
    runs = {}
    for f in sorted(folder.glob("*-*.json")):
        v, i = f.stem.rsplit("-", 1)
        j = json.loads(f.read_text())
        for c in j["cases"]:
            runs.setdefault(v, {}).setdefault((c["backend"], c["conns"]), []).append((int(i), round(c["kinsn"], 2)))
    if not runs:
        continue
    out = {}
    load = "closed loop" if folder.name.endswith("-closed") else "--rate 300"
    print(f"{folder.name}: guest thousand instructions per request (vm-tests cost --short {load}, 6.1 guest);")
    print("  each figure one invocation, cycles in order; median last")
    print(f"  {'build':8} {'server':7} {'conns':>5}  runs{'':22} median")
    for v in runs:
        for key in sorted(runs[v]):
            xs = [x for _, x in sorted(runs[v][key])]
            med = statistics.median(xs)
            out.setdefault(v, {})[f"{key[0]}-{key[1]}"] = {"runs": xs, "median": med}
            print(f"  {v:8} {key[0]:7} {key[1]:5}  {', '.join(f'{x:.1f}' for x in xs):26} {med:.2f}")
    print("  xsk/kernel (medians)")
    for v in runs:
        for conns in (1, 16):
            x, k = out[v].get(f"xsk-{conns}"), out[v].get(f"kernel-{conns}")
            if x and k:
                r = x["median"] / k["median"]
                out[v][f"ratio-{conns}"] = round(r, 3)
                print(f"  {v:8} {conns:5} conns  {r:.3f}")
    res[folder.name] = out
    print()
# The two builds every round ran, all rounds together.
pooled = {}
for folder in (r for r in rounds if not r.name.endswith("-closed")):
    for f in sorted(folder.glob("*-*.json")):
        v, _ = f.stem.rsplit("-", 1)
        if v not in pool:
            continue
        for c in json.loads(f.read_text())["cases"]:
            pooled.setdefault(v, {}).setdefault(f"{c['backend']}-{c['conns']}", []).append(round(c["kinsn"], 2))
if pooled:
    print(f"{pool[0]} and {pool[1]}, every --rate 300 round's runs together: medians (runs)")
    for v in pooled:
        for key in sorted(pooled[v]):
            print(f"  {v:6} {key:10} {statistics.median(pooled[v][key]):6.2f}  ({len(pooled[v][key])})")
        for conns in (1, 16):
            x, k = statistics.median(pooled[v][f"xsk-{conns}"]), statistics.median(pooled[v][f"kernel-{conns}"])
            print(f"  {v:6} xsk/kernel {conns:2} conns {x / k:.3f}")
    res["pooled"] = {v: {key: {"runs": xs, "median": statistics.median(xs)} for key, xs in kv.items()} for v, kv in pooled.items()}
cg = {}
for folder in sorted(p for p in d.glob("cg*") if p.is_dir()):
    per = {}
    for f in sorted(folder.glob("[AB]-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        per.setdefault(f.stem[0], []).append(round(json.loads(f.read_text())["total_per_request"]))
    cg[folder.name] = per
    print(f"\nuser-space instructions per request, {folder.name} (callgrind, 1,000 req/s; A {pool[0]}, B {pool[1]}; A B B A)")
    for v, xs in per.items():
        print(f"  {v}: {xs}  median {statistics.median(xs):.0f}")
res["callgrind"] = cg
(d / "results.json").write_text(json.dumps(res, indent=1) + "\n")
