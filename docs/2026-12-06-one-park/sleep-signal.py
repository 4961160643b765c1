#!/usr/bin/env python3
"""Signal sleep vs timerfd sleep (issue #45 item 2): guest instructions per request from
`vm-tests cost --short --rate 300` runs made by guest.sh (VARIANT-CYCLE.json, variants
`signal` = --sleep-signal=rtmin+4 and `timerfd` = --sleep-signal=timerfd on the xsk rr-server).

Per run and connection count: kernel and xsk server kinsn/req (thousand guest instructions per
request, the median of the invocation's 2 rounds, as vm-tests reports it) and xsk/kernel.
Per variant: medians with a 95% bootstrap interval of the median. Paired within a cycle:
signal minus timerfd of the xsk server's kinsn/req (and of xsk/kernel, and of the kernel
server's, which both variants run identically: a noise reference), median and interval.
Bootstrap as in docs/2026-12-05-goals/guest.py: percentile method, 10,000 resamples, seed 1.

Usage: sleep-signal.py [RUNS_DIR] [OUT.json]   (defaults /tmp/sigab/runs, /tmp/sigab/summary.json)"""
import glob
import json
import os
import random
import re
import statistics
import sys

runs_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/sigab/runs"
out = sys.argv[2] if len(sys.argv) > 2 else "/tmp/sigab/summary.json"
VARIANTS = ("signal", "timerfd")
CONNS = (1, 16)


def interval(xs, n=10000, seed=1):
    """95% bootstrap interval of the median (percentile method, fixed seed: reproducible)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return [meds[int(0.025 * n)], meds[int(0.975 * n) - 1]]


def stat(xs):
    return {"n": len(xs), "median": statistics.median(xs), "interval95": interval(xs),
            "min": min(xs), "max": max(xs)}


runs = []
for f in sorted(glob.glob(os.path.join(runs_dir, "*.json"))):
    m = re.fullmatch(r"(\w+)-(\d+)\.json", os.path.basename(f))
    if not m or m.group(1) not in VARIANTS:
        continue
    d = json.load(open(f))
    if d.get("result") != "pass":
        print(f"skipping {f}: result {d.get('result')}", file=sys.stderr)
        continue
    k = {(c["backend"], c["conns"]): c["kinsn"] for c in d["cases"]}
    for conns in CONNS:
        runs.append({
            "file": os.path.basename(f), "cycle": int(m.group(2)), "variant": m.group(1),
            "xsk_args": d.get("xsk_args"), "wall_s": d.get("total_s"), "conns": conns,
            "kernel_kinsn": k[("kernel", conns)], "xsk_kinsn": k[("xsk", conns)],
            "ratio": k[("xsk", conns)] / k[("kernel", conns)],
        })

summary = {}
for conns in CONNS:
    s = {}
    for v in VARIANTS:
        rs = [r for r in runs if r["variant"] == v and r["conns"] == conns]
        s[v] = {"runs": len(rs),
                "xsk_kinsn": stat([r["xsk_kinsn"] for r in rs]),
                "kernel_kinsn": stat([r["kernel_kinsn"] for r in rs]),
                "ratio": stat([r["ratio"] for r in rs])}
    by = {(r["cycle"], r["variant"]): r for r in runs if r["conns"] == conns}
    cycles = sorted(c for c in {c for c, _ in by} if all((c, v) in by for v in VARIANTS))
    paired = {}
    for key in ("xsk_kinsn", "ratio", "kernel_kinsn"):
        d = [by[(c, "signal")][key] - by[(c, "timerfd")][key] for c in cycles]
        st = stat(d)
        st["signal_lower_in"] = sum(1 for x in d if x < 0)
        st["per_cycle"] = dict(zip(cycles, d))
        st["resolved"] = st["interval95"][0] > 0 or st["interval95"][1] < 0
        paired[key] = st
    s["paired_signal_minus_timerfd"] = {"cycles": len(cycles), **paired}
    summary[f"conns_{conns}"] = s

json.dump({"units": "kinsn = thousand guest instructions per request (-icount); ratio = xsk/kernel",
           "bootstrap": "median, percentile 95% interval, 10,000 resamples, random.Random(1)",
           "runs": runs, "summary": summary}, open(out, "w"), indent=1)

for conns in CONNS:
    s = summary[f"conns_{conns}"]
    print(f"{conns} connection(s):")
    for v in VARIANTS:
        x, kr, r = s[v]["xsk_kinsn"], s[v]["kernel_kinsn"], s[v]["ratio"]
        print(f"  {v:8} {s[v]['runs']:2} runs: xsk {x['median']:.3f} [{x['interval95'][0]:.3f}, {x['interval95'][1]:.3f}]"
              f"  kernel {kr['median']:.3f} [{kr['interval95'][0]:.3f}, {kr['interval95'][1]:.3f}]"
              f"  xsk/kernel {r['median']:.4f} [{r['interval95'][0]:.4f}, {r['interval95'][1]:.4f}]")
    p = s["paired_signal_minus_timerfd"]
    for key, scale, unit in (("xsk_kinsn", 1000, "insn/req"), ("ratio", 1, ""), ("kernel_kinsn", 1000, "insn/req")):
        st = p[key]
        fmt = "{:+.0f}" if scale == 1000 else "{:+.4f}"
        print(f"  signal-timerfd {key:12} ({p['cycles']} cycles): median {fmt.format(st['median'] * scale)} {unit}"
              f" [{fmt.format(st['interval95'][0] * scale)}, {fmt.format(st['interval95'][1] * scale)}],"
              f" signal lower in {st['signal_lower_in']}/{p['cycles']}, resolved: {st['resolved']}")
