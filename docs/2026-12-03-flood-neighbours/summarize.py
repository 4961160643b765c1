#!/usr/bin/env python3
"""Tables of this study from runs/*.json (flood-bench --json): per build, the median over
rounds and the range; writes results.json (every case of every run, and the medians)."""
import glob, json, os, statistics, sys

here = os.path.dirname(os.path.abspath(__file__))
runs = os.path.join(here, "runs")

def load(pattern):
    out = []
    for p in sorted(glob.glob(os.path.join(runs, pattern))):
        try:
            d = json.load(open(p))
        except (OSError, ValueError):
            print(f"skipped {p}: no JSON (see its .txt)", file=sys.stderr)
            continue
        for c in d["cases"]:
            c["file"] = os.path.basename(p)
            out.append(c)
    return out

def fig(c):
    f = c.get("fresh") or {}
    return {
        "syn_per_s": c.get("syns_sent", 0) / c["measured_s"] if c.get("measured_s") else 0,
        "p50_us": c["p50_us"], "p99_us": c["p99_us"], "requests": c["requests"],
        "fresh_ok": f.get("ok"), "fresh_tried": f.get("tried"), "within_100ms": f.get("within_100ms"),
        "fresh_max_ms": f.get("max_ms"),
        "rx_ring_full": (c.get("drops") or {}).get("xdp_rx_ring_full"),
        "cookies": (c.get("drops") or {}).get("syn_cookies_sent"),
        "rss_max_mib": c.get("rss_max_kib", 0) / 1024,
    }

def row(name, cases):
    fs = [fig(c) for c in cases]
    if not fs:
        return None
    med = lambda k: statistics.median([f[k] for f in fs if f[k] is not None]) if any(f[k] is not None for f in fs) else None
    rng = lambda k: (min(f[k] for f in fs if f[k] is not None), max(f[k] for f in fs if f[k] is not None)) if any(f[k] is not None for f in fs) else (None, None)
    r = {"name": name, "rounds": len(fs), "runs": fs}
    for k in fs[0]:
        r[k] = med(k)
        r[k + "_range"] = rng(k)
    return r

def table(title, rows):
    print(f"\n{title}\n")
    print("| build / case | rounds | SYN/s | open conn p50 / p99 us | its requests | fresh within 100 ms | fresh max ms | RX ring full | RSS max MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r is None:
            continue
        lo, hi = r["p99_us_range"]
        w = "-" if r["within_100ms"] is None else f"{r['within_100ms']:.0f} of {r['fresh_tried']:.0f} ({r['within_100ms_range'][0]}-{r['within_100ms_range'][1]})"
        mx = "-" if r["fresh_max_ms"] is None else f"{r['fresh_max_ms']:.0f} ({r['fresh_max_ms_range'][0]:.0f}-{r['fresh_max_ms_range'][1]:.0f})"
        ring = "-" if r["rx_ring_full"] is None else f"{r['rx_ring_full']:,.0f}"
        print(f"| {r['name']} | {r['rounds']} | {r['syn_per_s']:,.0f} | {r['p50_us']:.0f} / {r['p99_us']:,.0f} ({lo:,.0f}-{hi:,.0f}) | {r['requests']:,.0f} | {w} | {mx} | {ring} | {r['rss_max_mib']:.0f} |")

result = {}
full = []
for v in ["before", "teach", "keys"]:
    cs = load(f"full-{v}-*.json")
    full.append(row(f"{v}: xsk-baseline", [c for c in cs if c["case"] == "xsk-baseline"]))
    full.append(row(f"{v}: xsk-flood", [c for c in cs if c["case"] == "xsk-flood"]))
ks = load("full-kernel-*.json")
full.append(row("kernel-baseline", [c for c in ks if c["case"] == "kernel-baseline"]))
full.append(row("kernel-flood", [c for c in ks if c["case"] == "kernel-flood"]))
table("Full-rate flood (medians over rounds, range in brackets)", full)
k80 = load("80k-*.json")
rate = [row(n, [c for c in k80 if c["case"] == n]) for n in ["xsk-baseline", "xsk-flood", "kernel-baseline", "kernel-flood"]]
table("Flood at 80,000 SYN/s, build `keys`", rate)
result["full"] = [r for r in full if r]
result["at_80k"] = [r for r in rate if r]
json.dump(result, open(os.path.join(here, "results.json"), "w"), indent=1)

# Connection storms (rr-demo, one round per invocation, teach and keys alternating).
def demo(pattern):
    rows = []
    for p in sorted(glob.glob(os.path.join(runs, pattern, "results.json"))):
        for s in json.load(open(p))["summary"]:
            s["dir"] = os.path.basename(os.path.dirname(p))
            rows.append(s)
    return rows

storms = []
print("\nConnection storms (rr-demo; one row per run; setup = rr-10000's time to open all connections)\n")
print("| run | case | xsk req/s (conn/s) | kernel | x/k | xsk setup s / conn p99 | kernel | xsk server CPU us/req | kernel | xsk retransmissions (probes, spurious probes, RTOs) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for v in ["teach", "keys"]:
    for r in (1, 2):
        rs = demo(f"storms-{v}-{r}")
        for case in ["rr-10000", "storm-1000", "churn-16"]:
            x = next((s for s in rs if s["case"] == case and s["backend"] == "xsk"), None)
            k = next((s for s in rs if s["case"] == case and s["backend"] == "kernel"), None)
            if not x or not k:
                continue
            storms.append({"build": v, "round": r, "case": case, "xsk": x, "kernel": k})
            su = (lambda s: f"{s['setup_s']:.2f} s") if case == "rr-10000" else (lambda s: f"{s['conn_setup_p99_us'] / 1000:.1f} ms")
            print(f"| {v} {r} | {case} | {x['rps']:,.0f} | {k['rps']:,.0f} | {x['rps'] / k['rps']:.2f} | {su(x)} | {su(k)} | {x['cpu_us_per_req']:.1f} | {k['cpu_us_per_req']:.1f} | "
                  f"{x['retrans_total']:,.0f} ({x['server_tail_probes'] or 0:,.0f}, {x['server_spurious_probes'] or 0:,.0f}, {x['server_rto_retransmits'] or 0:,.0f}) |")
result["storms"] = storms

# rr-16, same-16, busy-same-1: b791413 (before the storms work) against b3dd60c... see README.
print("\nrr-16 check: base b791413 against this tree (rr-demo, 2 rounds per invocation, alternating)\n")
print("| run | case | xsk req/s | kernel req/s | x/k | xsk server CPU us/req | kernel |")
print("|---|---|---|---|---|---|---|")
ab = []
for v in ["base-1", "new-1", "base-2", "new-2"]:
    d = json.load(open(os.path.join(runs, "rr16-ab", v + ".json")))
    for case in ["rr-16", "same-16", "busy-same-1"]:
        x = next(s for s in d["summary"] if s["case"] == case and s["backend"] == "xsk")
        k = next(s for s in d["summary"] if s["case"] == case and s["backend"] == "kernel")
        ab.append({"run": v, "case": case, "xsk": x, "kernel": k})
        print(f"| {v} | {case} | {x['rps']:,.0f} | {k['rps']:,.0f} | {x['rps'] / k['rps']:.2f} | {x['cpu_us_per_req']:.2f} | {k['cpu_us_per_req']:.2f} |")
result["rr16_check"] = ab
json.dump(result, open(os.path.join(here, "results.json"), "w"), indent=1)

# rr-10000's retransmissions: recovery settings (one run each) and the reverted spreading
# (rr-demo, keys = b3dd60c and spread = 8a59655 alternating, two rounds).
def demo_row(s):
    return (f"{s['rps']:,.0f} | {s['p99_us'] / 1000:,.1f} / {s['p999_us'] / 1000:,.1f} ms | {s['cpu_us_per_req']:.2f} | "
            f"{s['retrans_total']:,.0f} ({s['server_tail_probes'] or 0:,.0f}, {s['server_spurious_probes'] or 0:,.0f}, {s['server_rto_retransmits'] or 0:,.0f})")

print("\nrr-10000 with other recovery settings for every connection (build keys, one run each)\n")
print("| xsk-args | xsk req/s | p99 / p99.9 | server CPU us/req | retransmissions (probes, spurious probes, RTOs) | kernel req/s |")
print("|---|---|---|---|---|---|")
settings = {"a": "(defaults: --ack-delay 50ms --rto-min 50ms)", "b": "--ack-delay 200ms", "c": "--ack-delay 200ms --rto-min 200ms"}
rec = []
for v, args in settings.items():
    d = json.load(open(os.path.join(runs, "rr10000-recovery", v, "results.json")))
    x = next(s for s in d["summary"] if s["backend"] == "xsk")
    k = next(s for s in d["summary"] if s["backend"] == "kernel")
    rec.append({"xsk_args": args, "xsk": x, "kernel": k})
    print(f"| {args} | {demo_row(x)} | {k['rps']:,.0f} |")
result["rr10000_recovery"] = rec

print("\nSpreading a learned delayer to all of the peer's connections, RTO floor raised (reverted)\n")
print("| run | case | xsk req/s | p99 / p99.9 | server CPU us/req | retransmissions (probes, spurious probes, RTOs) | kernel req/s |")
print("|---|---|---|---|---|---|---|")
spread = []
for r in (1, 2):
    for v in ["keys", "spread"]:
        d = json.load(open(os.path.join(runs, f"spread-{v}-{r}", "results.json")))
        for case in ["rr-10000", "loss1-16", "lossburst-16", "idle-100", "rr-16", "open-5k"]:
            x = next((s for s in d["summary"] if s["case"] == case and s["backend"] == "xsk"), None)
            k = next((s for s in d["summary"] if s["case"] == case and s["backend"] == "kernel"), None)
            if x and k:
                spread.append({"build": v, "round": r, "case": case, "xsk": x, "kernel": k})
                print(f"| {v} {r} | {case} | {demo_row(x)} | {k['rps']:,.0f} |")
result["spread_reverted"] = spread
json.dump(result, open(os.path.join(here, "results.json"), "w"), indent=1)
