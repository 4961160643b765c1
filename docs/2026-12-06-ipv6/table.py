#!/usr/bin/env python3
"""The study's tables from results.json; `collect` builds results.json from rr-demo outputs.

    table.py collect results.json LABEL=DIR ...   # DIR: an rr-demo --out folder
    table.py results.json                          # prints the markdown tables
"""
import json
import statistics
import sys

KEEP = ["rps", "p50_us", "p99_us", "cpu_us_per_req"]


def collect(out, pairs):
    rows = []
    for pair in pairs:
        label, path = pair.split("=", 1)
        d = json.load(open(f"{path}/results.json"))
        for s in d["summary"]:
            rows.append({"run": label, "case": s["case"], "backend": s["backend"], "rounds": s["runs"],
                         **{k: s[k] for k in KEEP}})
    json.dump({"rows": rows}, open(out, "w"), indent=1)


def med(rows, **want):
    v = [r for r in rows if all(r[k] == x for k, x in want.items())]
    return {k: statistics.median(r[k] for r in v) for k in KEEP} if v else None


def tables(path):
    rows = json.load(open(path))["rows"]
    for r in rows:
        r["build"] = r["run"].split("-")[-1]
    builds = [b for b in ("base", "new") if any(r["build"] == b for r in rows if r["case"] != "rr-16-v6" and not r["run"].startswith("v6"))]
    print("IPv4 before (base) and after (new): medians over the runs of each build (each run itself the median of its rounds)\n")
    print("| case | build | xsk req/s | krn req/s | x/k | xsk cpu us/req | krn cpu us/req | xsk p50 us | xsk p99 us |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ab = [r for r in rows if not r["run"].startswith("v6")]
    for case in sorted({r["case"] for r in ab}, key=lambda c: int(c.split("-")[1])):
        for b in builds:
            x, k = med(ab, case=case, build=b, backend="xsk"), med(ab, case=case, build=b, backend="kernel")
            print(f"| {case} | {b} | {x['rps']:.0f} | {k['rps']:.0f} | {x['rps'] / k['rps']:.2f} | {x['cpu_us_per_req']:.2f} | "
                  f"{k['cpu_us_per_req']:.2f} | {x['p50_us']:.1f} | {x['p99_us']:.1f} |")
    v6 = [r for r in rows if r["run"].startswith("v6")]
    if v6:
        print("\nrr-16 and rr-16-v6 in the same run (issue-47 build), medians of the rounds\n")
        print("| case | xsk req/s | krn req/s | x/k req/s | xsk cpu | krn cpu | x/k cpu |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        ratio = {}
        for case in ("rr-16", "rr-16-v6"):
            x, k = med(v6, case=case, backend="xsk"), med(v6, case=case, backend="kernel")
            ratio[case] = x["rps"] / k["rps"]
            print(f"| {case} | {x['rps']:.0f} | {k['rps']:.0f} | {ratio[case]:.3f} | {x['cpu_us_per_req']:.2f} | "
                  f"{k['cpu_us_per_req']:.2f} | {x['cpu_us_per_req'] / k['cpu_us_per_req']:.3f} |")
        print(f"\nrr-16-v6's x/k over rr-16's: {ratio['rr-16-v6'] / ratio['rr-16']:.3f}")
    ui = json.load(open(path)).get("user_instructions_per_request")
    if ui:
        print("\nxsk server's user-space instructions per request (callgrind; 16 connections, 1,000 req/s)\n")
        print("| run | build | family | xsk | kernel | xsk/kernel |")
        print("| --- | --- | --- | ---: | ---: | ---: |")
        for i, r in enumerate(ui["ipv4_abba"], 1):
            print(f"| {i} | {r['build']} | IPv4 | {r['xsk']} | {r['kernel']} | {r['xsk'] / r['kernel']:.2f} |")
        for r in ui["ipv4_extra_pair"]:
            print(f"| extra | {r['build']} | IPv4 | {r['xsk']} | - | - |")
        for r in ui["ipv6_new"]:
            print(f"| - | new | IPv6 | {r['xsk']} | {r['kernel']} | {r['xsk'] / r['kernel']:.2f} |")
        base = [r["xsk"] for r in ui["ipv4_abba"] + ui["ipv4_extra_pair"] if r["build"] == "base"]
        new = [r["xsk"] for r in ui["ipv4_abba"] + ui["ipv4_extra_pair"] if r["build"] == "new"]
        print(f"\nIPv4, new over base: {statistics.mean(new) / statistics.mean(base):.3f} "
              f"({statistics.mean(new) - statistics.mean(base):+.0f} instructions per request)")


if __name__ == "__main__":
    if sys.argv[1] == "collect":
        collect(sys.argv[2], sys.argv[3:])
    else:
        tables(sys.argv[1])
