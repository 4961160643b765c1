#!/usr/bin/env python3
"""This study's table, from results.jsonl.xz: per netem spec and echo size, the build before
(A), the builds with cwnd-segments (N and F, the same behaviour: N with the rule always
on, F with it a socket setting the engine turns on) and G (F + reorder-verdict), each
pooled over every set it ran in, each server's
runs: resends per 100 requests (the server's, mean and median; the client's, mean), packets
per request to the client (the server's answers and ACKs, as ifb0 counted them), requests/s
and the stack's rate over kernel TCP's in the same slot (median), p99.9; then the stack's
server resends less kernel TCP's in the same slot: median and a bootstrap 95% interval.
Usage: summary.py"""
import json
import lzma
import random
import statistics as st
from pathlib import Path

rows = [json.loads(l) for l in lzma.open(Path(__file__).with_name("results.jsonl.xz"), "rt")]
rows = [r for r in rows if r["outcome"] == "ok" and r["requests"]]
GROUPS = [("A (before)", {"A"}), ("N+F (cwnd-segments)", {"N", "F"}), ("G (+ reorder-verdict)", {"G"})]


def per100(r, k):
    return 100.0 * r[k] / r["requests"]


def interval(xs, n=4000):
    rng = random.Random(1)
    m = sorted(st.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return m[int(0.025 * n)], m[int(0.975 * n)]


print("| netem | size | builds | server | runs | resent /100: mean (median) | client resent /100: mean "
      "| pkts/req to client | req/s | x/k rate | p99.9 ms | server x-k resent /100: median (95%) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for spec, size in sorted({(r["spec"], r["size"]) for r in rows}, key=lambda k: (k[0] != "default", -k[1])):
    for name, builds in GROUPS:
        rs = [r for r in rows if (r["spec"], r["size"]) == (spec, size) and r["build"] in builds]
        slots = {}
        for r in rs:
            slots.setdefault((r["set"], r["slot"]), {})[r["server"]] = r
        pairs = [v for v in slots.values() if len(v) == 2]
        diff = [per100(v["xsk"], "resent") - per100(v["kernel"], "resent") for v in pairs]
        ratio = st.median(v["xsk"]["rps"] / v["kernel"]["rps"] for v in pairs) if pairs else float("nan")
        for server in ("xsk", "kernel"):
            s = [r for r in rs if r["server"] == server]
            if not s:
                continue
            res = [per100(r, "resent") for r in s]
            last = ""
            if server == "xsk" and diff:
                lo, hi = interval(diff)
                last = f"{st.median(diff):+.2f} ({lo:+.2f} to {hi:+.2f})"
            print(f"| {spec} | {size} | {name} | {server} | {len(s)} | {st.mean(res):.2f} ({st.median(res):.2f}) "
                  f"| {st.mean(per100(r, 'client_resent') for r in s):.2f} "
                  f"| {st.median(r['qdiscs']['ifb0'][0] / r['requests'] for r in s):.1f} "
                  f"| {st.median(r['rps'] for r in s):,.0f} | {ratio:.3f} | {st.median(r['p999_us'] / 1000 for r in s):.0f} | {last} |")
