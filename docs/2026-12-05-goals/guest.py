#!/usr/bin/env python3
"""The light-load guest goal on one build: xsk/kernel guest instructions per request from
`vm-tests cost --short --rate 300` runs (guest.sh's NAME-CYCLE.json files), per run (the two
backends of one invocation, alternating in the same guest boot) and pooled, with a bootstrap
interval for the median of the per-run ratios.

Usage: guest.py FILE.json...   (prints a table; --json prints the summary as JSON)"""
import json
import random
import statistics
import sys

files = [f for f in sys.argv[1:] if f.endswith(".json")]
as_json = "--json" in sys.argv
rows = []
for f in files:
    k = {(c["backend"], c["conns"]): c["kinsn"] for c in json.load(open(f))["cases"]}
    rows.append({"file": f.split("/")[-1], **{f"{b}-{n}": k[(b, n)] for b in ("kernel", "xsk") for n in (1, 16)}})


def interval(xs, n=10000, seed=1):
    """95% bootstrap interval of the median (percentile method, fixed seed: reproducible)."""
    rnd = random.Random(seed)
    meds = sorted(statistics.median(rnd.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n) - 1]


summary = {"runs": len(rows)}
for conns in (1, 16):
    r = [x[f"xsk-{conns}"] / x[f"kernel-{conns}"] for x in rows]
    lo, hi = interval(r)
    summary[f"conns_{conns}"] = {
        "xsk_kinsn_median": statistics.median(x[f"xsk-{conns}"] for x in rows),
        "kernel_kinsn_median": statistics.median(x[f"kernel-{conns}"] for x in rows),
        "ratio_per_run_median": statistics.median(r),
        "ratio_per_run_interval95": [lo, hi],
        "ratio_per_run_min_max": [min(r), max(r)],
        "runs_at_or_below_0_8": sum(1 for x in r if x <= 0.8),
    }
if as_json:
    print(json.dumps({"rows": rows, "summary": summary}, indent=1))
    sys.exit()
print("guest thousand instructions per request (vm-tests cost --short --rate 300), per run:")
print(f"  {'run':14} {'kernel-1':>8} {'xsk-1':>6} {'r-1':>6}   {'kernel-16':>9} {'xsk-16':>6} {'r-16':>6}")
for x in rows:
    print(f"  {x['file']:14} {x['kernel-1']:8.2f} {x['xsk-1']:6.2f} {x['xsk-1'] / x['kernel-1']:6.3f}"
          f"   {x['kernel-16']:9.2f} {x['xsk-16']:6.2f} {x['xsk-16'] / x['kernel-16']:6.3f}")
for conns in (1, 16):
    s = summary[f"conns_{conns}"]
    lo, hi = s["ratio_per_run_interval95"]
    print(f"{conns:2} connection(s), {len(rows)} runs: xsk {s['xsk_kinsn_median']:.2f}, kernel {s['kernel_kinsn_median']:.2f} "
          f"(medians); xsk/kernel per run: median {s['ratio_per_run_median']:.3f}, 95% interval of the median "
          f"{lo:.3f}-{hi:.3f}, range {s['ratio_per_run_min_max'][0]:.3f}-{s['ratio_per_run_min_max'][1]:.3f}, "
          f"{s['runs_at_or_below_0_8']} of {len(rows)} at or below 0.8")
