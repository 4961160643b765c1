#!/usr/bin/env python3
"""The study's tables from run.sh's OUT: user-space instructions per request (medians per
build and load, B over A per cycle), the guest's CPU per request (vm-tests cost) and
rr-demo's B over A (scripts/abba-table). Writes results.json beside this script.
usage: table.py OUT"""
import json, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts/study"))
from abba import rr_demo_table  # noqa: E402

out = Path(sys.argv[1])
here = Path(__file__).resolve().parent
result = {"user_instructions": {}, "guest_cost": [], "rr_demo": None}

ui = {}
for line in (out / "ui.txt").read_text().splitlines():
    if line.strip():
        cycle, variant, rate, conns, n = line.split()
        ui.setdefault(f"{rate}/{conns}", {}).setdefault(variant, {}).setdefault(cycle, []).append(int(n))
print("user-space instructions per request (ONLY=xsk scripts/user-instructions DIR RATE CONNS 6)")
print(f"{'rate/conns':>10}  {'A median':>8}  {'B median':>8}  {'B/A':>6}  per cycle B/A (each build's two runs averaged)")
for load, v in ui.items():
    a, b = v["A"], v["B"]
    ma = statistics.median(x for r in a.values() for x in r)
    mb = statistics.median(x for r in b.values() for x in r)
    cyc = [statistics.mean(b[c]) / statistics.mean(a[c]) for c in sorted(a, key=int)]
    result["user_instructions"][load] = {"A": a, "B": b, "A_median": ma, "B_median": mb, "B_over_A": mb / ma, "per_cycle": cyc}
    print(f"{load:>10}  {ma:>8.0f}  {mb:>8.0f}  {mb / ma:>6.3f}  " + " ".join(f"{r:.3f}" for r in cyc))

print("\nguest CPU per request, -icount guest, 300 req/s over 16 connections (vm-tests cost, medians of 3 rounds)")
print(f"{'run':>8}  {'kernel us':>9}  {'xsk us':>7}  {'xsk user us':>11}  {'xsk kinsn':>9}  {'xsk/kernel':>10}")
for f in sorted((out / "cost").glob("*.json"), key=lambda p: int(p.stem.split("-")[1])):
    d = json.loads(f.read_text())
    case = {c["backend"]: c for c in d["cases"]}
    k, x = case["kernel"], case["xsk"]
    row = {"run": f.stem, "kernel_cpu_us": k["cpu_us"], "xsk_cpu_us": x["cpu_us"], "xsk_user_us": x["user_us"],
           "xsk_kinsn": x["kinsn"], "ratio": x["cpu_us"] / k["cpu_us"]}
    result["guest_cost"].append(row)
    print(f"{f.stem:>8}  {k['cpu_us']:>9.1f}  {x['cpu_us']:>7.1f}  {x['user_us']:>11.1f}  {x['kinsn']:>9.2f}  {row['ratio']:>10.3f}")

result["rr_demo"] = rr_demo_table(out / "demo")
(here / "results.json").write_text(json.dumps(result, indent=1) + "\n")
