#!/usr/bin/env python3
"""The study's figures: `table.py OUT > results.json` gathers rr-demo's Redis runs and the
frame counts from a run.sh output folder; `table.py --print results.json` prints the tables."""
import glob, json, os, statistics, sys


def gather(out):
    redis = json.load(open(os.path.join(out, "rr-demo", "redis.json")))
    packets = [json.load(open(f)) for f in sorted(glob.glob(os.path.join(out, "packets-*.json")))]
    return {"redis_runs": redis["runs"], "packets": packets}


def show(res):
    runs = res["redis_runs"]
    print("| case | server | req/s | cpu us/req | own us/req | syscalls/req |")
    print("|---|---|---|---|---|---|")
    keys = sorted({(r["case"], r["test"]) for r in runs})
    for case, test in keys:
        for server in ("xsk", "kernel", "redis"):
            rs = [r for r in runs if r["case"] == case and r["test"] == test and r["server"] == server]
            if not rs:
                continue
            med = lambda k: statistics.median(r[k] for r in rs if r[k] is not None)
            print(f"| {case} {test} | {server} | {med('rps'):.0f} | {med('server_cpu_us_per_req'):.2f} | "
                  f"{med('server_cpu_us_per_req_own_rx'):.2f} | {med('server_syscalls_per_req'):.3f} |")
    print()
    print("Per round, xsk / kernel (the same round):")
    for case, test in keys:
        for k, name in (("server_cpu_us_per_req", "cpu"), ("server_cpu_us_per_req_own_rx", "own")):
            by = lambda s: {r["round"]: r[k] for r in runs if r["case"] == case and r["test"] == test and r["server"] == s}
            x, kn = by("xsk"), by("kernel")
            ratios = [x[i] / kn[i] for i in sorted(x) if i in kn and x[i] and kn[i]]
            print(f"  {case} {test} {name}: median {statistics.median(ratios):.2f} ("
                  + " ".join(f"{v:.2f}" for v in ratios) + ")")
    print()
    print("| run | backend | server data | server ACKs | client data | client ACKs (per pipeline) | utime | stime (us/req) |")
    print("|---|---|---|---|---|---|---|---|")
    for i, p in enumerate(res["packets"], 1):
        pp = p["per_pipeline"]
        print(f"| {i} | {p['backend']} | {pp['server_data']:.2f} | {pp['server_acks']:.2f} | {pp['client_data']:.2f} | "
              f"{pp['client_acks']:.2f} | {p['server_utime_us_per_req']:.2f} | {p['server_stime_us_per_req']:.2f} |")


if __name__ == "__main__":
    if sys.argv[1] == "--print":
        show(json.load(open(sys.argv[2])))
    else:
        json.dump(gather(sys.argv[1]), sys.stdout, indent=1)
        print()
