#!/usr/bin/env python3
"""This study's tables from runs/*.json (flood-bench --json): one line per run and case, then
the median of each variant's flood case; writes results.json with every line.
`summarize.py runs-first` does the same for the first set (results-first.json)."""
import glob, json, os, re, statistics, sys

here = os.path.dirname(os.path.abspath(__file__))
runs = sys.argv[1] if len(sys.argv) > 1 else "runs"
lines = []
for path in sorted(glob.glob(os.path.join(here, runs, "*.json"))):
    rate, variant, rnd = re.match(r"(full|150k)-(off|on|kernel)-(\d+)\.json", os.path.basename(path)).groups()
    for c in json.load(open(path))["cases"]:
        drops, fresh, srv = c.get("drops") or {}, c.get("fresh") or {}, c.get("server_stack") or {}
        lines.append({
            "rate": rate, "variant": variant, "round": int(rnd), "case": c["case"],
            "syn_per_s": round(c["syns_sent"] / c["measured_s"]) if c.get("measured_s") else 0,
            "p50_us": c["p50_us"], "p99_us": c["p99_us"], "p999_us": c["p999_us"], "requests": c["requests"],
            "fresh_within_100ms": fresh.get("within_100ms"), "fresh_tried": fresh.get("tried"),
            "fresh_max_ms": fresh.get("max_ms"),
            "xdp_syn_cookies": drops.get("xdp_syn_cookies"), "engine_syn_cookies": drops.get("syn_cookies_sent"),
            "kernel_syn_cookies": drops.get("SyncookiesSent"), "rx_ring_full": drops.get("xdp_rx_ring_full"),
            "server_cpu_s": srv.get("cpu_s"),
        })

name = {"off": "stack answers (xdp-cookies off)", "on": "XDP answers (xdp-cookies on)", "kernel": "kernel TCP"}
dash = lambda v, f="{:,.0f}": "-" if v is None else f.format(v)
print("| flood | variant | round | case | SYN/s | open conn p50 / p99 / p99.9 us | its requests | fresh within 100 ms | fresh max ms | SYN-ACKs: XDP / stack or kernel | RX ring full | server CPU s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for l in lines:
    cookies = f"{dash(l['xdp_syn_cookies'])} / {dash(l['engine_syn_cookies'] if l['variant'] != 'kernel' else l['kernel_syn_cookies'])}"
    fresh = "-" if l["fresh_tried"] is None else f"{l['fresh_within_100ms']} of {l['fresh_tried']}"
    print(f"| {l['rate']} | {name[l['variant']]} | {l['round']} | {l['case']} | {l['syn_per_s']:,} | {l['p50_us']:.0f} / {l['p99_us']:,.0f} / {l['p999_us']:,.0f} | {l['requests']:,} | {fresh} | {dash(l['fresh_max_ms'], '{:,.1f}')} | {cookies} | {dash(l['rx_ring_full'])} | {dash(l['server_cpu_s'], '{:.1f}')} |")

medians = []
print("\nMedians of the flood case over rounds (baseline p99 for the goal: at most twice it)\n")
print("| flood | variant | rounds | SYN/s | p99 us under flood | p99 us unloaded (baseline) | ratio | its requests | fresh within 100 ms (worst round) |")
print("|---|---|---|---|---|---|---|---|---|")
for rate in ["full", "150k"]:
    for v in ["off", "on", "kernel"]:
        fl = [l for l in lines if l["rate"] == rate and l["variant"] == v and l["case"].endswith("flood")]
        bl = [l for l in lines if l["rate"] == rate and l["variant"] == v and l["case"].endswith("baseline")]
        if not fl:
            continue
        m = lambda k, ls: statistics.median(l[k] for l in ls)
        r = {"rate": rate, "variant": v, "rounds": len(fl), "syn_per_s": m("syn_per_s", fl), "p99_us": m("p99_us", fl),
             "baseline_p99_us": m("p99_us", bl), "requests": m("requests", fl),
             "fresh_within_100ms": m("fresh_within_100ms", fl), "fresh_worst": min(l["fresh_within_100ms"] for l in fl),
             "fresh_tried": m("fresh_tried", fl)}
        r["ratio"] = r["p99_us"] / r["baseline_p99_us"]
        medians.append(r)
        print(f"| {rate} | {name[v]} | {r['rounds']} | {r['syn_per_s']:,.0f} | {r['p99_us']:,.0f} | {r['baseline_p99_us']:,.0f} | {r['ratio']:.1f}x | {r['requests']:,.0f} | {r['fresh_within_100ms']:.0f} of {r['fresh_tried']:.0f} ({r['fresh_worst']}) |")
out = "results.json" if runs == "runs" else f"results-{runs.removeprefix('runs-')}.json"
json.dump({"lines": lines, "medians": medians}, open(os.path.join(here, out), "w"), indent=1)

# rr-demo before/after (ab/), only for the default set of runs.
if runs == "runs":
    print("\nrr-demo before (832a7b2) and after this change, alternating (one round per invocation)\n")
    print("| run | case | xsk req/s | kernel req/s | xsk p99 us | xsk server CPU us/req | xsk setup s |")
    print("|---|---|---|---|---|---|---|")
    for v in ["base-1", "new-1", "base-2", "new-2"]:
        p = os.path.join(here, "ab", v, "results.json")
        if not os.path.exists(p):
            continue
        by = {}
        for s in json.load(open(p))["summary"]:
            by.setdefault(s["case"], {})[s["backend"]] = s
        for case in sorted(by):
            x, k = by[case].get("xsk", {}), by[case].get("kernel", {})
            print(f"| {v} | {case} | {x.get('rps', 0):,.0f} | {k.get('rps', 0):,.0f} | {x.get('p99_us', 0):,.0f} | {x.get('cpu_us_per_req', 0):.1f} | {x.get('setup_s', 0):.2f} |")
