#!/usr/bin/env python3
"""results.json and tables.txt of this study from its runs/ folder.
Usage: results.py   (run from anywhere; rewrites results.json and tables.txt beside it)"""
import glob
import json
import os
import re
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
runs = os.path.join(here, "runs")


def tool(script, *args):
    return subprocess.run([sys.executable, os.path.join(here, script), *args], capture_output=True, text=True, check=True).stdout


guest_files = sorted(glob.glob(f"{runs}/guest/*.json"), key=lambda f: int(re.search(r"-(\d+)\.json$", f).group(1)))
earlier = sorted(glob.glob(os.path.join(here, "../2026-12-04-signal-sleep/runs/*/hybrid-*.json")))
demo_files = sorted(glob.glob(f"{runs}/demo/*/results.json"))

ui = {}
for f in sorted(glob.glob(f"{runs}/ui/*.txt")):
    conns = int(re.match(r"ui(\d+)-", os.path.basename(f)).group(1))
    t = open(f).read()
    ui.setdefault(conns, []).append({"xsk": int(re.search(r"^xsk\s+(\d+)", t, re.M).group(1)),
                                     "kernel": int(re.search(r"^kernel\s+(\d+)", t, re.M).group(1))})

inline_spread = {}
for d in (1, 2, 3):
    f = f"{runs}/inline-1-depth{d}-all.txt"
    if not os.path.exists(f):
        continue
    lines = open(f).read().split("\n")
    total = float(lines[0].split()[0])
    costs = [float(l.split()[0]) for l in lines[2:] if l.strip() and not l.strip().split()[1] == "the"]
    acc, half, most = 0.0, None, None
    for n, c in enumerate(costs, 1):
        acc += c
        half = half or (n if acc >= total / 2 else None)
        most = most or (n if acc >= total * 0.8 else None)
    inline_spread[f"depth_{d}"] = {"groups": len(costs), "half_in": half, "eighty_percent_in": most}

out = {
    "study": "2026-12-05-goals",
    "build": "the code of b94a7db (HEAD 0e80de2 changed only docs), release",
    "user_instructions_per_request": {
        str(c): {"runs": v, "xsk_median": statistics.median(x["xsk"] for x in v),
                 "kernel_median": statistics.median(x["kernel"] for x in v)} for c, v in sorted(ui.items())},
    "inline_spread_one_connection": inline_spread,
    "guest_rate300_this_study": json.loads(tool("guest.py", *guest_files, "--json"))["summary"],
    "guest_rate300_with_2026_12_04_signal_sleep_hybrid_runs": json.loads(tool("guest.py", *guest_files, *earlier, "--json"))["summary"],
    "rr_demo": json.loads(tool("demo.py", *demo_files, "--json"))["summary"],
}
closed16s = [float(re.search(r"goals 6.1 rr-16\s+xsk/kernel CPU ([0-9.]+)", open(f).read()).group(1))
             for f in sorted(glob.glob(f"{runs}/test-all-vm-smoke*.txt"))]
closed16 = max(closed16s)
light = out["guest_rate300_with_2026_12_04_signal_sleep_hybrid_runs"]["conns_1"]["ratio_per_run_median"]
out["goals"] = {
    "user_instructions_at_most_2800": {"value": out["user_instructions_per_request"]["16"]["xsk_median"],
                                       "met": out["user_instructions_per_request"]["16"]["xsk_median"] <= 2800},
    "same_16_at_least_2_5x": {"value": out["rr_demo"]["same-16"]["median"], "met": out["rr_demo"]["same-16"]["median"] >= 2.5},
    "busy_same_1_p50_at_most_0_55x": {"value": out["rr_demo"]["busy-same-1"]["median"],
                                      "met": out["rr_demo"]["busy-same-1"]["median"] <= 0.55},
    "guest_16_closed_at_most_0_55x": {"value": closed16, "met": closed16 <= 0.55, "runs": closed16s,
                                      "source": "runs/test-all-vm-smoke*.txt, one round each; value: the highest"},
    "guest_light_load_at_most_0_8x": {"value": light, "met": light <= 0.8, "source": "27 runs, per-run median"},
}
json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
with open(os.path.join(here, "tables.txt"), "w") as t:
    t.write("# user-space instructions per request (scripts/user-instructions BIN RATE CONNS 8; medians)\n")
    for c, v in out["user_instructions_per_request"].items():
        t.write(f"{c:>2} connection(s): xsk {v['xsk_median']}, kernel {v['kernel_median']} "
                f"(runs: {', '.join(str(x['xsk']) for x in v['runs'])})\n")
    t.write("\n# inline.py, one connection: how many source-line groups hold half and 80% of the instructions\n")
    for d, s in inline_spread.items():
        t.write(f"{d}: {s['groups']} groups, half in {s['half_in']}, 80% in {s['eighty_percent_in']}\n")
    t.write("\n# guest, vm-tests cost --short --rate 300, this study's 16 runs\n")
    t.write(tool("guest.py", *guest_files))
    t.write("\n# the same, with the 11 runs of the same code in 2026-12-04-signal-sleep (hybrid)\n")
    t.write("\n".join(tool("guest.py", *guest_files, *earlier).strip().split("\n")[-2:]) + "\n")
    t.write("\n# rr-demo --only same-16,busy-same-1 --rounds 3, four invocations\n")
    t.write(tool("demo.py", *demo_files))
    t.write("\n# #24's goals\n")
    for k, v in out["goals"].items():
        t.write(f"{k}: {v['value']:.3f} {'met' if v['met'] else 'NOT met'}\n")
print(open(os.path.join(here, "tables.txt")).read())
