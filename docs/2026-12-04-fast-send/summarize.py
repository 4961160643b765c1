#!/usr/bin/env python3
"""The study's tables and results.json from its runs: callgrind totals (runs/cg, cg.sh; the
timer wheel prototype's pairs, runs/wheel, docs/2026-12-02-fast-path/profile.sh + breakdown.py),
guest CPU per request under -icount (runs/guest, `vm-tests cost --short [--rate 300]`,
base and new alternating), and rr-demo A B B A (runs/abba, scripts/abba-table).
Usage: summarize.py   (writes results.json and tables.txt next to it)"""
import json, statistics, subprocess, sys
from pathlib import Path

here = Path(__file__).resolve().parent
root = here.parents[1]
out, lines = {}, []

# Callgrind: instructions per request, per run, in run order.
cg = []
for f in sorted((here / "runs/cg").glob("[AB]-*.json"), key=lambda p: int(p.stem.split("-")[1])):
    v, k = f.stem.split("-")
    d = json.loads(f.read_text())
    cg.append({"run": int(k), "build": {"A": "base", "B": "fast-send"}[v], "total": d["total_per_request"], "parts": d["parts"]})
out["callgrind"] = cg
lines.append("User-space instructions per request (callgrind, open loop 1,000 req/s, 16 connections; A B B A)")
for b in ["base", "fast-send"]:
    t = [r["total"] for r in cg if r["build"] == b]
    lines.append(f"  {b:10} runs {t}  median {statistics.median(t):.0f}" if t else f"  {b}: no runs")
if cg:
    parts = sorted({p for r in cg for p in r["parts"]})
    lines.append("  by part (medians):")
    for p in parts:
        m = [statistics.median([r["parts"].get(p, 0) for r in cg if r["build"] == b]) for b in ["base", "fast-send"]]
        lines.append(f"    {m[0]:6.0f} -> {m[1]:6.0f}  {p}")

# The timer wheel prototype (runs/wheel-prototype.patch) against fast-send alone, in pairs.
wheel = []
for f in sorted((here / "runs/wheel").glob("w-*.json")):
    _, build, k = f.stem.split("-")
    d = json.loads(f.read_text())
    wheel.append({"pair": int(k), "build": "wheel" if build == "wheel" else "fast-send", "total": d["total_per_request"],
                  "top": d["top"][:5]})
out["timer_wheel"] = wheel
if wheel:
    lines.append("")
    lines.append("Timer wheel prototype: user instructions per request, pairs (fast-send alone, then with the wheel)")
    for k in sorted({w["pair"] for w in wheel}):
        a = [w["total"] for w in wheel if w["pair"] == k and w["build"] == "fast-send"]
        b = [w["total"] for w in wheel if w["pair"] == k and w["build"] == "wheel"]
        lines.append(f"  pair {k}: {a[0]} -> {b[0]}")

# Guest CPU per request.
guest = []
for f in sorted((here / "runs/guest").glob("*.json")):
    d = json.loads(f.read_text())
    name = f.stem  # cost300-base-1, cost-new-2
    build = "base" if "-base-" in name else "fast-send"
    for r in d["rows"]:
        guest.append({"file": f.name, "build": build, "case": r["case"], "backend": r["backend"], "conns": r["conns"],
                      "cpu_us": r["cpu_us"], "user_us": r["user_us"], "sys_us": r["sys_us"], "softirq_us": r["softirq_us"]})
out["guest"] = guest
lines.append("")
lines.append("Guest CPU per request, us (vm-tests cost --short; 6.1 guest, -icount shift=4): xsk/kernel of each run")
cases = sorted({(g["case"], g["conns"]) for g in guest})
for case, conns in cases:
    for b in ["base", "fast-send"]:
        rat, cpu, usr = [], [], []
        for f in sorted({g["file"] for g in guest if g["build"] == b}):
            x = [g for g in guest if g["file"] == f and g["case"] == case and g["backend"] == "xsk"]
            k = [g for g in guest if g["file"] == f and g["case"] == case and g["backend"] == "kernel"]
            if x and k:
                xc = statistics.median(g["cpu_us"] for g in x)
                kc = statistics.median(g["cpu_us"] for g in k)
                rat.append(round(xc / kc, 2)); cpu.append(round(xc)); usr.append(round(statistics.median(g["user_us"] for g in x)))
        if rat:
            lines.append(f"  {case:14} {b:10} xsk cpu {cpu} (user {usr})  xsk/kernel {rat}")

# rr-demo A B B A: the eight cases, then three more cycles of the two that looked worse.
for name, what in [("abba", "the eight cases, 2 cycles"), ("abba-more", "busy-same-1 and churn-16 again, 3 cycles")]:
    abba = here / "runs" / name
    if not abba.exists():
        continue
    tmp = here / f"{name}.json"
    r = subprocess.run([str(root / "scripts/abba-table"), str(abba), "--json", str(tmp)], capture_output=True, text=True)
    lines.append("")
    lines.append(f"rr-demo, base (A) against fast-send (B), A B B A: {what} (scripts/abba-table runs/{name})")
    lines += ["  " + l for l in r.stdout.splitlines()]
    if tmp.exists():
        out["rr_demo_" + name.replace("-", "_")] = json.loads(tmp.read_text())
        tmp.unlink()

(here / "results.json").write_text(json.dumps(out, indent=1) + "\n")
(here / "tables.txt").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
