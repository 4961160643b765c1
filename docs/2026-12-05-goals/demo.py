#!/usr/bin/env python3
"""#24's two rr-demo goals from `rr-demo --only same-16,busy-same-1` results.json files: per round
(the xsk row and the kernel row of one round run back to back), same-16's requests/s
stack-to-stack over kernel-to-kernel (goal: at least 2.5) and busy-same-1's p50 xsk over
kernel (goal: at most 0.55); then every round of every file pooled.

Usage: demo.py RESULTS_JSON...   (--json: the same as JSON)"""
import json
import statistics
import sys

files = [f for f in sys.argv[1:] if f.endswith(".json")]
rows = []
for i, f in enumerate(files, 1):
    runs = json.load(open(f))["runs"]
    by = {(r["case"], r["backend"], r["round"]): r for r in runs}
    for (case, backend, rnd), r in sorted(by.items()):
        if backend != "xsk" or (case, "kernel", rnd) not in by:
            continue
        k = by[(case, "kernel", rnd)]
        rows.append({"invocation": i, "case": case, "round": rnd + 1,
                     "rps_xsk": r["rps"], "rps_kernel": k["rps"], "rps_ratio": r["rps"] / k["rps"],
                     "p50_xsk_us": r["p50_us"], "p50_kernel_us": k["p50_us"], "p50_ratio": r["p50_us"] / k["p50_us"]})
summary = {}
for case, key, goal, better in (("same-16", "rps_ratio", 2.5, "ge"), ("busy-same-1", "p50_ratio", 0.55, "le")):
    xs = [r[key] for r in rows if r["case"] == case]
    if not xs:
        continue
    met = sum(1 for x in xs if (x >= goal if better == "ge" else x <= goal))
    per_inv = [statistics.median(r[key] for r in rows if r["case"] == case and r["invocation"] == i)
               for i in sorted({r["invocation"] for r in rows if r["case"] == case})]
    summary[case] = {"measure": key, "goal": goal, "rounds": len(xs), "median": statistics.median(xs),
                     "min": min(xs), "max": max(xs), "rounds_meeting_goal": met, "invocation_medians": per_inv}
if "--json" in sys.argv:
    print(json.dumps({"rows": rows, "summary": summary}, indent=1))
    sys.exit()
print(f"{'inv':>3} {'case':12} {'round':>5} {'xsk req/s':>10} {'kernel req/s':>12} {'ratio':>6}   {'xsk p50':>8} {'kernel p50':>10} {'ratio':>6}")
for r in rows:
    print(f"{r['invocation']:3} {r['case']:12} {r['round']:5} {r['rps_xsk']:10.0f} {r['rps_kernel']:12.0f} {r['rps_ratio']:6.2f}"
          f"   {r['p50_xsk_us']:8.1f} {r['p50_kernel_us']:10.1f} {r['p50_ratio']:6.2f}")
for case, s in summary.items():
    what = "requests/s xsk/kernel" if s["measure"] == "rps_ratio" else "p50 xsk/kernel"
    print(f"{case}: {what} over {s['rounds']} rounds: median {s['median']:.2f}, range {s['min']:.2f}-{s['max']:.2f}, "
          f"{s['rounds_meeting_goal']} of {s['rounds']} meet {s['goal']}; per invocation "
          + ", ".join(f"{m:.2f}" for m in s["invocation_medians"]))
