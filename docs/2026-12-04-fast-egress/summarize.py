#!/usr/bin/env python3
"""Tables and results.json of one version's runs in the fast-egress study: callgrind
(RUNS/cg*: A-k.json / B-k.json from breakdown.py --json), guest cost (RUNS/guest:
LOAD-V-i.json from vm-tests cost --json), rr-demo (RUNS/abba, through scripts/abba-table).
Usage: summarize.py RUNS > RUNS/tables.txt   (writes RUNS/results.json)"""
import json, statistics, subprocess, sys
from pathlib import Path

d = Path(sys.argv[1])
res = {}

# cg: 16 connections; cgCONNS-WHAT: another count (the folder names the A side).
res["user_instructions_per_request"] = {}
for folder in sorted(p for p in d.glob("cg*") if p.is_dir()):
    cg = {"A": [], "B": []}
    for f in sorted(folder.glob("[AB]-*.json"), key=lambda p: int(p.stem.split("-")[1])):
        cg[f.stem[0]].append(round(json.loads(f.read_text())["total_per_request"]))
    res["user_instructions_per_request"][folder.name] = {v: {"runs": r, "median": statistics.median(r)} for v, r in cg.items()}
    print(f"user-space instructions per request, {folder.name} (callgrind, open loop 1,000 req/s; A B B A)")
    for v in "AB":
        print(f"  {v}: {cg[v]}  median {statistics.median(cg[v]):.0f}")

rows = []
for f in sorted((d / "guest").glob("*.json")) if (d / "guest").exists() else []:
    load, v, i = f.stem.split("-")
    j = json.loads(f.read_text())
    by = {(r["backend"], r["conns"]): r for r in j["cases"]}
    for conns in (1, 16):
        x, k = by.get(("xsk", conns)), by.get(("kernel", conns))
        if x and k:
            rows.append({"load": load, "build": v, "cycle": int(i), "conns": conns, "xsk_cpu_us": round(x["cpu_us"], 1),
                         "xsk_user_us": round(x["user_us"], 1), "kernel_cpu_us": round(k["cpu_us"], 1),
                         "ratio": round(x["cpu_us"] / k["cpu_us"], 3)})
res["guest"] = rows
if rows:
    print("\nguest CPU per request (vm-tests cost --short, 6.1 guest; one figure per invocation, cycles in order)")
    print("  load     conns build  xsk us/req (user)        kernel us/req     xsk/kernel")
    for load in ("closed", "rate300"):
        for conns in (1, 16):
            for v in "AB":
                sel = sorted((r for r in rows if r["load"] == load and r["conns"] == conns and r["build"] == v), key=lambda r: r["cycle"])
                print(f"  {load:8} {conns:5} {v:5}  " + ", ".join(f"{r['xsk_cpu_us']} ({r['xsk_user_us']})" for r in sel).ljust(24)
                      + "  " + ", ".join(str(r["kernel_cpu_us"]) for r in sel).ljust(16) + "  " + ", ".join(f"{r['ratio']:.2f}" for r in sel))

abba = d / "abba"
if abba.exists():
    out = subprocess.run([str(Path(__file__).resolve().parents[2] / "scripts/abba-table"), str(abba), "--json", "/dev/stdout"],
                         capture_output=True, text=True)
    print("\nrr-demo, A B B A (scripts/abba-table)")
    txt = subprocess.run([str(Path(__file__).resolve().parents[2] / "scripts/abba-table"), str(abba)], capture_output=True, text=True).stdout
    print(txt)
    try:
        res["rr_demo"] = json.loads(out.stdout[out.stdout.index("{"):] if "{" in out.stdout else "null")
    except (ValueError, json.JSONDecodeError):
        res["rr_demo"] = None
    # The two rr-demo goals, per invocation: same-16 requests/s over kernel-to-kernel's,
    # busy-same-1 p50 over kernel's (both rows of one invocation).
    goals = []
    for run in sorted((p for p in abba.glob("[AB]-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1])):
        rows = {(r["case"], r["backend"]): r for r in json.loads((run / "results.json").read_text())["summary"]}
        g = {"run": run.name}
        if ("same-16", "xsk") in rows and ("same-16", "kernel") in rows:
            g["same16_rps_ratio"] = round(rows["same-16", "xsk"]["rps"] / rows["same-16", "kernel"]["rps"], 3)
        if ("busy-same-1", "xsk") in rows and ("busy-same-1", "kernel") in rows:
            g["busy1_p50_ratio"] = round(rows["busy-same-1", "xsk"]["p50_us"] / rows["busy-same-1", "kernel"]["p50_us"], 3)
        goals.append(g)
    res["rr_demo_goals"] = goals
    print("issue #24's rr-demo goals per invocation (same-16 xsk/kernel requests/s, goal >= 2.5;"
          " busy-same-1 xsk/kernel p50, goal <= 0.55)")
    for v in "AB":
        sel = [g for g in goals if g["run"].startswith(v)]
        print(f"  {v}: same-16 " + ", ".join(str(g.get('same16_rps_ratio')) for g in sel)
              + f"  (median {statistics.median([g['same16_rps_ratio'] for g in sel]):.2f});"
              + " busy-same-1 " + ", ".join(str(g.get('busy1_p50_ratio')) for g in sel)
              + f"  (median {statistics.median([g['busy1_p50_ratio'] for g in sel]):.2f})")
(d / "results.json").write_text(json.dumps(res, indent=1) + "\n")
