#!/usr/bin/env python3
"""The study's tables from run.sh's OUT: user-space instructions per request (medians per
build and connections, and B over A per cycle) and rr-demo's B over A (scripts/abba-table).
Writes results.json beside this script. usage: table.py OUT"""
import json, statistics, sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts/study"))
from abba import rr_demo_table  # noqa: E402

out = Path(sys.argv[1])
here = Path(__file__).resolve().parent
runs = [l.split() for l in (out / "ui.txt").read_text().splitlines() if l.strip()]
ui = {}
for cycle, variant, conns, n in runs:
    ui.setdefault(conns, {}).setdefault(variant, {}).setdefault(cycle, []).append(int(n))
result = {"user_instructions": {}, "rr_demo": None}
print("user-space instructions per request (ONLY=xsk scripts/user-instructions DIR 1000 CONNS 6)")
print(f"{'conns':>5}  {'A median':>8}  {'B median':>8}  {'B/A':>6}  per cycle B/A (each build's two runs averaged)")
for conns in sorted(ui, key=int, reverse=True):
    a, b = ui[conns]["A"], ui[conns]["B"]
    ma = statistics.median(x for v in a.values() for x in v)
    mb = statistics.median(x for v in b.values() for x in v)
    cyc = [statistics.mean(b[c]) / statistics.mean(a[c]) for c in sorted(a, key=int)]
    result["user_instructions"][conns] = {"A": a, "B": b, "A_median": ma, "B_median": mb,
                                          "B_over_A": mb / ma, "per_cycle": cyc}
    print(f"{conns:>5}  {ma:>8.0f}  {mb:>8.0f}  {mb / ma:>6.3f}  " + " ".join(f"{r:.3f}" for r in cyc))
result["rr_demo"] = rr_demo_table(out / "demo")
(here / "results.json").write_text(json.dumps(result, indent=1) + "\n")
