#!/usr/bin/env python3
"""The initial-window study's churn table: per echo size and build (A before, B after), the
stack server's connections/s and latency (rr-bench's p50 and p99, from the connect call),
median and every run in slot order.

usage: table.py [results.json]                 every set's table
       table.py --from-runs OUT --set NAME     fold churn.sh's OUT/NAME-K-SIZE.json into results.json's
                                               set NAME first"""
import argparse, glob, json, os, re, statistics as st

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("results", nargs="?", default=os.path.join(here, "results.json"))
ap.add_argument("--from-runs")
ap.add_argument("--set")
a = ap.parse_args()
doc = json.load(open(a.results)) if os.path.exists(a.results) else {"sets": {}}
if a.from_runs:
    runs = []
    for f in glob.glob(os.path.join(a.from_runs, "*-*-*.json")):
        m = re.match(r"([AB])-(\d+)-(\w+)\.json$", os.path.basename(f))
        if not m:
            continue
        d = json.load(open(f))
        r = d.get("summary", d)
        runs.append({"variant": m.group(1), "slot": int(m.group(2)), "size": m.group(3),
                     **{k: r[k] for k in ("rps", "p50_us", "p99_us", "errors", "requests")}})
    runs.sort(key=lambda r: (r["size"], r["slot"]))
    doc["sets"][a.set] = runs
    json.dump(doc, open(a.results, "w"), indent=1)
f0 = lambda xs: " ".join(f"{x:,.0f}" for x in xs)
for name, runs in doc["sets"].items():
  print(f"set {name}:\n")
  print("| echo size | build | connections/s | runs | p50 us | runs | p99 us (median) | errors |")
  print("|---|---|---|---|---|---|---|---|")
  for size in sorted({r["size"] for r in runs}, key=lambda s: int(s.rstrip("k")) * (1024 if s.endswith("k") else 1)):
      for v in "AB":
          rs = [r for r in runs if r["size"] == size and r["variant"] == v]
          if not rs:
              continue
          rps, p50 = [r["rps"] for r in rs], [r["p50_us"] for r in rs]
          print(f"| {size} | {v} | {st.median(rps):,.0f} | {f0(rps)} | {st.median(p50):.0f} | {f0(p50)} "
                f"| {st.median(r['p99_us'] for r in rs):,.0f} | {sum(r['errors'] for r in rs)} |")
  print()
