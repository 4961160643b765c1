#!/usr/bin/env python3
"""Per-round medians and every round pooled, for base and the builds with the signalling
timer, from the guest runs under RUNS/N-what (guest.sh's VARIANT-CYCLE.json).
Usage: pooled.py RUNS > RUNS/pooled.txt"""
import glob, json, os, statistics, sys

S = sys.argv[1]
runs = {}
for f in glob.glob(S + "/[0-9]-*/*-*.json"):
    rnd = os.path.basename(os.path.dirname(f))
    v = os.path.basename(f).rsplit("-", 1)[0]
    for c in json.load(open(f))["cases"]:
        runs.setdefault((rnd, v, c["backend"], c["conns"]), []).append(c["kinsn"])


def med(names, backend, conns, rnd=None):
    xs = [x for k, v in runs.items() if k[1] in names and k[2] == backend and k[3] == conns and rnd in (None, k[0]) for x in v]
    return statistics.median(xs), len(xs)


print("guest thousand instructions per request (vm-tests cost --short --rate 300); r = xsk/kernel of the medians")
for rnd in sorted({k[0] for k in runs}):
    for v in sorted({k[1] for k in runs if k[0] == rnd}):
        (x1, n), (k1, _) = med({v}, "xsk", 1, rnd), med({v}, "kernel", 1, rnd)
        (x16, _), (k16, _) = med({v}, "xsk", 16, rnd), med({v}, "kernel", 16, rnd)
        print(f"  {rnd:14} {v:7} runs {n:2}  xsk-1 {x1:.2f} kernel-1 {k1:.2f} r {x1 / k1:.3f}   xsk-16 {x16:.2f} kernel-16 {k16:.2f} r {x16 / k16:.3f}")
print("every round pooled")
for grp, names in (("base", {"base"}), ("signal builds (sig, sig2, sig5, hybrid)", {"sig", "sig2", "sig5", "hybrid"}),
                   ("sig5", {"sig5"}), ("hybrid (the commit)", {"hybrid"})):
    (x1, n), (k1, _) = med(names, "xsk", 1), med(names, "kernel", 1)
    (x16, _), (k16, _) = med(names, "xsk", 16), med(names, "kernel", 16)
    print(f"  {grp:40} runs {n:2}  xsk-1 {x1:.2f} r {x1 / k1:.3f}   xsk-16 {x16:.2f} r {x16 / k16:.3f}")
