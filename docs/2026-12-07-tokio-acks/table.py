#!/usr/bin/env python3
"""The tokio-acks study's table: per case and build (A before, B after), the stack's requests/s
and server CPU per request over tokio's own listener's in the same invocation (median, then
every run), its absolute figures (medians), and its syscalls per request (strace runs).

usage: table.py [results.json]
       table.py --from-runs OUT --write results.json   (fold ab.sh's OUT/V-K.err first)
(A name ending in .xz is read and written xz-compressed.)"""
import argparse, glob, json, lzma, os, re, statistics as st

here = os.path.dirname(os.path.abspath(__file__))
ap = argparse.ArgumentParser()
ap.add_argument("results", nargs="?", default=os.path.join(here, "results.json"))
ap.add_argument("--from-runs")
ap.add_argument("--write")
a = ap.parse_args()

if a.from_runs:
    runs = []
    for f in sorted(glob.glob(os.path.join(a.from_runs, "*.err"))):
        v, k = os.path.basename(f)[:-4].split("-")
        for line in open(f):
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
            elif m := re.match(r"(\S+) (\S+) (\{.*\})$", line):
                r = dict(json.loads(m.group(3)), case=m.group(1), server=m.group(2), strace=True)
            else:
                continue
            runs.append(dict(r, variant=v, invocation=int(k)))
    doc = {"runs": runs}
    if a.write:
        opener = lzma.open if a.write.endswith(".xz") else open
        with opener(a.write, "wt") as f:
            json.dump(doc, f, separators=(",", ":"))
else:
    doc = json.load((lzma.open if a.results.endswith(".xz") else open)(a.results, "rt"))
runs = doc["runs"]

by = {(r["variant"], r["invocation"], r["case"], r["server"], bool(r.get("strace"))): r for r in runs}
rows = {}
for (v, k, case, server, strace), r in by.items():
    if server != "xsk":
        continue
    d = rows.setdefault((case, v), {"rate": [], "cpu": [], "sys": [], "rps": [], "us": []})
    if strace:
        d["sys"].append(r["syscalls_per_req"])
        continue
    t = by.get((v, k, case, "tokio", False))
    if t:
        d["rate"].append(r["req_per_s"] / t["req_per_s"])
        d["cpu"].append(r["server_cpu_us_per_req"] / t["server_cpu_us_per_req"])
        d["rps"].append(r["req_per_s"])
        d["us"].append(r["server_cpu_us_per_req"])
f = lambda xs: " ".join(f"{x:.2f}" for x in xs)
print("| case | build | stack/tokio req/s | runs | stack/tokio CPU per request | runs | stack req/s | stack CPU us/req | stack syscalls/req |")
print("|---|---|---|---|---|---|---|---|---|")
for (case, v), d in sorted(rows.items()):
    print(f"| {case} | {v} | {st.median(d['rate']):.2f} | {f(d['rate'])} | {st.median(d['cpu']):.2f} | {f(d['cpu'])} "
          f"| {st.median(d['rps']):,.0f} | {st.median(d['us']):.1f} | {st.median(d['sys']):.2f} |")
