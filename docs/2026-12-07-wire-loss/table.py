#!/usr/bin/env python3
"""results.jsonl.xz as tables: per set, netem spec, echo size, build and placement (wire: the
client guest's GRO and GSO off, netem drops wire packets; agg: aggregation on), the medians
over the runs of each server's rate, segments it sent again per 100 requests (split by
step), the client's, and the share of packets each qdisc dropped (eth0: requests and the
client's ACKs; ifb0: answers and the server's ACKs), with the packets per request.
With --pooled: each build's wire-packet runs over every set it ran in, per netem spec, echo
size and server: medians and ranges of the resends per 100 requests of server and client,
p99.9 and rate.
RESULTS (environment) names another results file (a later study's).
Usage: table.py [SET...] | table.py --pooled"""
import json, lzma, os, statistics, sys
from collections import defaultdict
from pathlib import Path

# xz: docs/ is held to 5 MB, and a JSON line a run compresses about tenfold.
rows = [json.loads(l) for l in lzma.open(os.environ.get("RESULTS") or Path(__file__).with_name("results.jsonl.xz"), "rt")]
if sys.argv[1:] == ["--pooled"]:
    print("| netem | size | build | server | runs | resent /100: median (range) | client resent /100: median (range) | p99.9 ms | req/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["spec"], r["size"], r["build"], r["server"]) for r in rows if r["mode"] == "wire"},
                  key=lambda k: (k[0] != "jitter", -k[1], k[2], k[3] != "xsk"))
    for spec, size, build, server in keys:
        rs = [r for r in rows if (r["spec"], r["size"], r["build"], r["server"]) == (spec, size, build, server)
              and r["mode"] == "wire" and r["outcome"] == "ok" and r["requests"]]
        if not rs:
            continue
        per = lambda k: [100.0 * r[k] / r["requests"] for r in rs]
        mr = lambda xs: f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"
        print(f"| {spec} | {size} | {build} | {server} | {len(rs)} | {mr(per('resent'))} | {mr(per('client_resent'))} "
              f"| {statistics.median([r['p999_us'] / 1000 for r in rs]):.0f} | {statistics.median([r['rps'] for r in rs]):,.0f} |")
    sys.exit(0)
sets = sys.argv[1:] or sorted({r["set"] for r in rows}, key=lambda s: [r["set"] for r in rows].index(s))
med = lambda xs: statistics.median(xs) if xs else float("nan")
per100 = lambda n, r: 100.0 * n / r["requests"]

# The steps that sent again: the stack's counters; kernel TCP's TcpExt (fast retransmits
# include SACK holes; RTOs resend what they resend, counted once each here too).
steps = {
    "xsk": [("fast", ["fast_retransmits"]), ("hole", ["hole_retransmits"]), ("probe", ["tail_probes"]),
            ("rto", ["rto_retransmits"]), ("spur. probe", ["spurious_probes"]),
            ("spur. rexmit", ["spurious_retransmits"])],
    "kernel": [("fast", ["TCPFastRetrans"]), ("hole", []), ("probe", ["TCPLossProbes"]),
               ("rto", ["TCPTimeouts"]), ("spur. probe", []), ("spur. rexmit", ["TCPSpuriousRTOs"])],
}

for s in sets:
    g = defaultdict(list)
    for r in rows:
        if r["set"] == s and r["outcome"] == "ok" and r["requests"]:
            g[(r["spec"], r["size"], r["build"], r["mode"], r["server"])].append(r)
    if not g:
        continue
    print(f"\n## set {s}\n")
    print("| netem | size | build | drops | server | runs | req/s | resent /100 | "
          + " | ".join(n for n, _ in steps["xsk"])
          + " | client resent /100 | eth0 drop % | ifb0 drop % | pkts/req to server | pkts/req to client |")
    print("|" + "---|" * (13 + len(steps["xsk"])))
    for key in sorted(g, key=lambda k: (k[0] != "default", k[1], k[2], k[3], k[4] != "xsk")):
        rs = g[key]
        spec, size, build, mode, server = key
        split = []
        for _, names in steps[server]:
            if not names:
                split.append("-")
                continue
            src = "server_recovery" if server == "xsk" else "server_tcpext"
            if not any(src in r for r in rs):
                split.append("n/a")  # a harness before the split was recorded
                continue
            split.append(f"{med([per100(sum((r.get(src) or {}).get(n, 0) for n in names), r) for r in rs]):.2f}")
        q = lambda dev, i: [r["qdiscs"][dev][i] for r in rs if dev in r["qdiscs"]]
        drop = lambda dev: med([100.0 * r["qdiscs"][dev][1] / r["qdiscs"][dev][0] for r in rs
                                if dev in r["qdiscs"] and r["qdiscs"][dev][0]])
        print(f"| {spec} | {size} | {build} | {mode} | {server} | {len(rs)} | {med([r['rps'] for r in rs]):,.0f} "
              f"| {med([per100(r['resent'], r) for r in rs]):.2f} | " + " | ".join(split)
              + f" | {med([per100(r['client_resent'], r) for r in rs]):.2f} | {drop('eth0'):.2f} | {drop('ifb0'):.2f} "
              f"| {med([r['qdiscs']['eth0'][0] / r['requests'] for r in rs if 'eth0' in r['qdiscs']]):.1f} "
              f"| {med([r['qdiscs']['ifb0'][0] / r['requests'] for r in rs if 'ifb0' in r['qdiscs']]):.1f} |")
