#!/usr/bin/env python3
"""The floor study's tables from run.sh's OUT, and results.json beside this script.

Usage: table.py OUT
OUT/ui.txt: "floor|stack RATE CONNS INSTRUCTIONS" per host run (scripts/user-instructions);
OUT/closed.json, OUT/rate300.json: vm-tests cost reports (servers kernel, xsk, floor);
OUT/closed1-more.json, if there: a second closed-loop invocation (the README's check at one connection);
OUT/napi-closed.json, OUT/napi-rate300.json, if there: the same with kernel-napi as well (the README's check
of the kernel's best configuration).
results.json keeps every host run and, per guest case, each server's median and its rounds.
"""
import json
import os
import statistics
import sys

out = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))

host = []
with open(os.path.join(out, "ui.txt")) as f:
    for line in f:
        who, rate, conns, ins = line.split()
        host.append({"server": who, "rate": int(rate), "conns": int(conns), "instructions": int(ins)})

print("User-space instructions per request (callgrind, open loop, kernel client; medians of the runs):")
print(f"{'load':<14} {'floor':>7} {'stack':>7} {'stack/floor':>12}   runs floor / stack")
host_rows = []
for rate, conns in sorted({(h["rate"], h["conns"]) for h in host}, key=lambda x: (-x[0], x[1])):
    f = [h["instructions"] for h in host if h["server"] == "floor" and (h["rate"], h["conns"]) == (rate, conns)]
    s = [h["instructions"] for h in host if h["server"] == "stack" and (h["rate"], h["conns"]) == (rate, conns)]
    mf, ms = statistics.median(f), statistics.median(s)
    host_rows.append({"rate": rate, "conns": conns, "floor": mf, "stack": ms, "ratio": round(ms / mf, 3)})
    print(f"{rate}/s, {conns:>2} conn {mf:>7.0f} {ms:>7.0f} {ms / mf:>12.2f}   {f} / {s}")

guest = []
KEYS = ["cpu_us", "user_us", "sys_us", "softirq_us", "task_us", "sleeps", "pkts_in", "cpu_spread_pct"]
print()
print("Guest CPU per request (vm-tests cost, -icount guest, 6.1; medians over rounds, us):")
print(f"{'case':<18} {'server':<7} {'busy':>6} {'user':>6} {'sys':>6} {'softirq':>7} {'task':>6} {'/kernel':>8} {'task/k':>7} {'spread':>7}")
for name, label in (("closed.json", "closed loop"), ("rate300.json", "300 req/s"), ("closed1-more.json", "closed again"),
                    ("napi-closed.json", "closed, napi"), ("napi-rate300.json", "300/s, napi")):
    if not os.path.exists(os.path.join(out, name)):
        continue  # the optional invocations: the README's checks
    rep = json.load(open(os.path.join(out, name)))
    for conns in sorted({c["conns"] for c in rep["cases"]}):
        cs = {c["backend"]: c for c in rep["cases"] if c["conns"] == conns}
        k = cs["kernel"]
        for server in [x for x in ("kernel", "kernel-napi", "xsk", "floor") if x in cs]:
            c = cs[server]
            rounds = [r["cpu_us"] for r in rep["rows"] if r["backend"] == server and r["conns"] == conns]
            row = {"case": f"{label}, {conns} conn", "server": server, **{x: round(c[x], 2) for x in KEYS},
                   "vs_kernel": round(c["cpu_us"] / k["cpu_us"], 3), "task_vs_kernel": round(c["task_us"] / k["task_us"], 3),
                   "rounds_cpu_us": [round(x, 1) for x in rounds]}
            guest.append(row)
            print(f"{row['case']:<18} {server:<7} {c['cpu_us']:>6.1f} {c['user_us']:>6.1f} {c['sys_us']:>6.1f} {c['softirq_us']:>7.1f} "
                  f"{c['task_us']:>6.1f} {row['vs_kernel']:>8.3f} {row['task_vs_kernel']:>7.3f} {c['cpu_spread_pct']:>6.1f}%")

with open(os.path.join(here, "results.json"), "w") as f:
    json.dump({"host_runs": host, "host": host_rows, "guest": guest}, f, separators=(",", ":"))
    f.write("\n")
print(f"\nwrote {os.path.join(here, 'results.json')}")
