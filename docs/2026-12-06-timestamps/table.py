#!/usr/bin/env python3
"""The study's tables from results.json; `table.py collect RUN_DIR...` writes results.json
from rr-demo output folders named N-VARIANT (N: the order they ran in)."""
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIELDS = ["rps", "p99_us", "p999_us", "setup_s", "server_requests", "server_tail_probes",
          "server_rto_retransmits", "server_spurious_probes", "server_spurious_retransmits",
          "server_fast_retransmits", "retrans_total"]


def collect(dirs):
    """Runs of rr-demo output folders N-VARIANT (N: the order they ran in)."""
    runs = []
    for d in dirs:
        order, variant = os.path.basename(d.rstrip("/")).split("-", 1)
        r = json.load(open(os.path.join(d, "results.json")))
        for run in r["runs"]:
            row = {"order": int(order), "variant": variant, "case": run["case"], "backend": run["backend"],
                   "xsk_args": r["metadata"]["args"][r["metadata"]["args"].index("--xsk-args") + 1]
                   if "--xsk-args" in r["metadata"]["args"] else "",
                   "date": r["metadata"]["date"]}
            row.update({f: run.get(f) for f in FIELDS})
            runs.append(row)
    return sorted(runs, key=lambda x: (x["order"], x["case"], x["backend"]))


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


NAMES = {
    "final": {"A": "main, defaults", "Q": "issue-49, --timestamps"},
    "mean-pool": {"A": "main, defaults", "B": "757eb9a (mean pool), --timestamps", "S": "main, --recovery smoltcp"},
    "pool": {"B": "757eb9a + toggles, mean pool", "E": "757eb9a + toggles, mean pool without spurious-rtt's bounds",
             "N": "757eb9a + toggles, no pool"},
    "explore-abs": {"A": "main, defaults", "B": "5068bd6 (mean pool, no probe-rto), --timestamps",
                    "S": "main, --recovery smoltcp"},
    "explore-rr10000": {"B": "5068bd6 --timestamps", "R": "5068bd6 --timestamps --rto-min 200ms",
                        "P": "5068bd6 --timestamps --ack-delay 200ms"},
    "explore-loss": {"B": "5068bd6 --timestamps", "R": "5068bd6 --timestamps --rto-min 200ms"},
}


def table(runs, names):
    print("| case | variant | runs | xsk req/s | kernel req/s (same runs) | x/k | xsk p99 | xsk p99.9 | kernel p99 "
          "| setup xsk/kernel s | probes | RTOs | spurious (% of requests) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in sorted({r["case"] for r in runs}):
        for v in sorted({r["variant"] for r in runs if r["case"] == case}):
            x = [r for r in runs if r["case"] == case and r["variant"] == v and r["backend"] == "xsk"]
            k = [r for r in runs if r["case"] == case and r["variant"] == v and r["backend"] != "xsk"]
            spur = [100 * ((r["server_spurious_probes"] or 0) + (r["server_spurious_retransmits"] or 0))
                    / max(r["server_requests"] or 1, 1) for r in x]
            rk = med([r["rps"] for r in k])
            print(f"| {case} | {v}: {names.get(v, v)} | {len(x)} | {med([r['rps'] for r in x]):,.0f} | {rk:,.0f} "
                  f"| {med([r['rps'] for r in x]) / rk:.2f} | {med([r['p99_us'] for r in x]) / 1000:.1f} ms "
                  f"| {med([r['p999_us'] for r in x]) / 1000:.1f} ms | {med([r['p99_us'] for r in k]) / 1000:.1f} ms "
                  f"| {med([r['setup_s'] for r in x]):.2f} / {med([r['setup_s'] for r in k]):.2f} "
                  f"| {med([r['server_tail_probes'] for r in x]):,.0f} | {med([r['server_rto_retransmits'] for r in x]):,.0f} "
                  f"| {med(spur):.2f} % |")
    print("\nMedians over the runs of each variant; kernel = rr-server --backend kernel (epoll) in the same rr-demo run.")


if __name__ == "__main__":
    path = os.path.join(HERE, "results.json")
    if len(sys.argv) > 2 and sys.argv[1] == "collect":
        # table.py collect SET DIR...: adds (or replaces) a set of runs in results.json.
        sets = json.load(open(path))["sets"] if os.path.exists(path) else {}
        sets[sys.argv[2]] = collect(sys.argv[3:])
        json.dump({"sets": sets}, open(path, "w"), indent=0)
    else:
        for name, runs in json.load(open(path))["sets"].items():
            print(f"### {name}\n")
            table(runs, NAMES[name])
            print()
