#!/usr/bin/env python3
"""The g2g sets of results.jsonl.xz as tables: per netem spec, echo size and build, the
medians over the build's slots of the stack's and kernel TCP's rate, p99, and segments
each end sent again per 100 requests (server: the stack's recovery counters or kernel
TCP's RetransSegs; client: the client guest's RetransSegs), and the packets netem dropped.
With --pooled, the sets named (or all) are taken as one, each build's runs pooled.
Usage: table.py [--pooled] [SET...]"""
import json, lzma, statistics, sys
from collections import defaultdict
from pathlib import Path

# xz: docs/ is held to 5 MB, and a JSON line a run compresses about tenfold.
rows = [json.loads(l) for l in lzma.open(Path(__file__).with_name("results.jsonl.xz"), "rt")]
args = sys.argv[1:]
pooled = "--pooled" in args
args = [a for a in args if a != "--pooled"]
sets = args or sorted({r["set"] for r in rows})
if pooled:
    # One set; slots numbered apart per set so that each run keeps its own key.
    rows = [dict(r, set="+".join(sets), slot=100 * sets.index(r["set"]) + r["slot"]) for r in rows if r["set"] in sets]
    sets = ["+".join(sets)]
per100 = lambda n, r: 100.0 * n / r["requests"] if n is not None and r["requests"] else float("nan")
med = lambda xs: statistics.median(xs) if xs else float("nan")
for s in sets:
    g = defaultdict(list)
    for r in rows:
        if r["set"] == s and r["outcome"] == "ok":
            g[(r["spec"], r["size"], r["build"], r["slot"], r["server"])].append(r)
    print(f"\n## set {s}\n")
    print("| netem | size | build | runs | xsk req/s | krn req/s | x/k | xsk p99 ms | krn p99 ms "
          "| xsk resent | krn resent | client resent (xsk) | client resent (krn) | dropped (xsk) | dropped (krn) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(k[0], k[1], k[2]) for k in g}, key=lambda k: (k[0] != "jitter", k[1], k[2]))
    for spec, size, build in keys:
        slots = sorted({k[3] for k in g if k[:3] == (spec, size, build)})
        pick = lambda srv, f: [f(g[(spec, size, build, sl, srv)][0]) for sl in slots if (spec, size, build, sl, srv) in g]
        x_rps, k_rps = pick("xsk", lambda r: r["rps"]), pick("kernel", lambda r: r["rps"])
        ratio = [a / b for a, b in zip(x_rps, k_rps) if b]
        print(f"| {spec} | {size} | {build} | {len(slots)} | {med(x_rps):,.0f} | {med(k_rps):,.0f} | {med(ratio):.2f} "
              f"| {med(pick('xsk', lambda r: r['p99_us'] / 1000)):.1f} | {med(pick('kernel', lambda r: r['p99_us'] / 1000)):.1f} "
              f"| {med(pick('xsk', lambda r: per100(r['resent'], r))):.2f} | {med(pick('kernel', lambda r: per100(r['resent'], r))):.2f} "
              f"| {med(pick('xsk', lambda r: per100(r['client_resent'], r))):.2f} "
              f"| {med(pick('kernel', lambda r: per100(r['client_resent'], r))):.2f} "
              f"| {med(pick('xsk', lambda r: r['dropped'])):.0f} | {med(pick('kernel', lambda r: r['dropped'])):.0f} |")
