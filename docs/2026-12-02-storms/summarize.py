#!/usr/bin/env python3
"""Prints this study's tables from the JSON files beside it and writes results.json (the
figures the README quotes, per run and as medians). No hand-copied figures.

  python3 docs/2026-12-02-storms/summarize.py
"""
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def flood(sub, title):
    """<sub>/<variant>-r<N>.json: flood-bench runs, alternating variants per round."""
    runs = []
    for p in sorted(glob.glob(os.path.join(HERE, sub, "*.json"))):
        name = os.path.basename(p)[:-5]
        variant, rnd = name.rsplit("-r", 1)
        doc = json.load(open(p))
        for c in doc["cases"]:
            f = c.get("fresh") or {}
            d = c.get("drops") or {}
            runs.append({
                "variant": variant, "round": int(rnd), "case": c["case"],
                "syn_pps": c["syn_pps"], "requests": c["requests"], "request_errors": c["request_errors"],
                "p50_us": c["p50_us"], "p99_us": c["p99_us"], "p999_us": c["p999_us"], "max_us": c["max_us"],
                "rss_before_mib": c["rss_before_kib"] / 1024, "rss_max_mib": c["rss_max_kib"] / 1024,
                "fresh_tried": f.get("tried"), "fresh_established": len(f.get("connect_ms", [])),
                "fresh_within_100ms": f.get("within_100ms"), "fresh_answered": f.get("ok"),
                "fresh_p50_ms": f.get("p50_ms"), "fresh_max_ms": f.get("max_ms"),
                "xdp_fill_ring_empty": d.get("xdp_rx_fill_ring_empty_descs"),
                "xdp_shed": sum(v or 0 for k, v in d.items() if k.startswith("xdp_shed_")) if c["backend"] == "xsk" else None,
                "xdp_shed_by_reason": {k[len("xdp_shed_"):]: v for k, v in d.items() if k.startswith("xdp_shed_")},
                "syn_backlog_drops": d.get("syn_backlog"),
                "idle_held": c["idle_held"], "idle_requested": c["idle_requested"],
            })
    if not runs:
        return runs
    print(f"\n{title}\nflood-bench, per run (variant, round): the established connection, fresh connections, drops")
    hdr = (f"{'variant':<10}{'rd':>3} {'case':<16}{'SYN/s':>8}{'p50 us':>9}{'p99 us':>10}{'p99.9 us':>10}"
           f"{'reqs':>9}{'fresh ok/tried':>15}{'<=100ms':>8}{'max ms':>9}{'RSS MiB':>9}"
           f"{'fill-empty':>11}{'shed':>10}")
    print(hdr)
    for r in sorted(runs, key=lambda r: (r["case"], r["variant"], r["round"])):
        print(f"{r['variant']:<10}{r['round']:>3} {r['case']:<16}{r['syn_pps']:>8.0f}{r['p50_us']:>9.0f}{r['p99_us']:>10.0f}"
              f"{r['p999_us']:>10.0f}{r['requests']:>9}{str(r['fresh_established']) + '/' + str(r['fresh_tried']):>15}"
              f"{r['fresh_within_100ms'] or 0:>8}{r['fresh_max_ms'] or 0:>9.1f}{r['rss_max_mib']:>9.0f}"
              f"{r['xdp_fill_ring_empty'] if r['xdp_fill_ring_empty'] is not None else '-':>11}"
              f"{r['xdp_shed'] if r['xdp_shed'] is not None else '-':>10}")
    print("\nmedians over rounds")
    keys = sorted({(r["variant"], r["case"]) for r in runs})
    for v, c in keys:
        rs = [r for r in runs if r["variant"] == v and r["case"] == c]
        print(f"  {v:<10} {c:<16} p99 {med([r['p99_us'] for r in rs]):>9.0f} us  p99.9 {med([r['p999_us'] for r in rs]):>9.0f} us  "
              f"requests {med([r['requests'] for r in rs]):>9.0f}  fresh <=100ms {med([r['fresh_within_100ms'] for r in rs])}"
              f"/{med([r['fresh_tried'] for r in rs])}  RSS max {med([r['rss_max_mib'] for r in rs]):.0f} MiB  ({len(rs)} rounds)")
    return runs


def rr10000():
    """rr10000/<variant>-<N>/results.json: rr-demo --only rr-10000 --rounds 2, alternating."""
    runs = []
    for p in sorted(glob.glob(os.path.join(HERE, "rr10000", "*", "results.json"))):
        inv = os.path.basename(os.path.dirname(p))
        variant = inv.rsplit("-", 1)[0]
        doc = json.load(open(p))
        for r in doc["runs"]:
            t = r.get("server_trouble") or {}
            empty = next((v for k, v in t.items() if k.endswith("rx_fill_ring_empty_descs")), 0)
            shed = sum(v for k, v in t.items() if "shed_syn" in k)
            full = next((v for k, v in t.items() if k.endswith("xdp_rx_ring_full")), 0)
            runs.append({"variant": variant, "invocation": inv, "round": r.get("round"), "backend": r["backend"],
                         "setup_s": r.get("setup_s"), "rps": r.get("rps"), "p99_us": r.get("p99_us"),
                         "rx_fill_ring_empty_descs": empty if r["backend"] == "xsk" else None,
                         "shed": shed if r["backend"] == "xsk" else None,
                         "rx_ring_full": full if r["backend"] == "xsk" else None,
                         "server_drops": r.get("server_drops")})
    if not runs:
        return runs
    print("\nrr-10000 (rr-demo --only rr-10000 --rounds 2), per round")
    print(f"{'invocation':<12}{'round':>6} {'backend':<8}{'setup s':>9}{'req/s':>10}{'p99 us':>10}{'fill-empty':>11}{'drops':>8}")
    def f2(x):
        return "failed" if x is None or x != x else f"{x:.2f}"
    for r in runs:
        print(f"{r['invocation']:<12}{str(r['round']):>6} {r['backend']:<8}{f2(r['setup_s']):>9}{r['rps'] or 0:>10.0f}"
              f"{r['p99_us'] or 0:>10.0f}{r['rx_fill_ring_empty_descs'] if r['rx_fill_ring_empty_descs'] is not None else '-':>11}"
              f"{r['server_drops'] if r['server_drops'] is not None else '-':>8}")
    for v in sorted({r["variant"] for r in runs}):
        x = [r for r in runs if r["variant"] == v and r["backend"] == "xsk"]
        k = [r for r in runs if r["variant"] == v and r["backend"] == "kernel"]
        ok = [r["setup_s"] for r in x if r["setup_s"] is not None and r["setup_s"] == r["setup_s"]]
        print(f"  {v:<8} xsk rounds set up {len(ok)}/{len(x)}, setup median {f2(med(ok))} s, max {f2(max(ok) if ok else None)} s "
              f"(kernel median {f2(med([r['setup_s'] for r in k]))} s); fill-ring-empty per round "
              f"{[r['rx_fill_ring_empty_descs'] for r in x]}; SYNs shed per round {[r['shed'] for r in x]}; "
              f"RX ring full per round {[r['rx_ring_full'] for r in x]}")
    return runs


def rr10000_servers():
    """Every xsk round of rr10000/*/, failed ones too (rr-demo keeps no row for a failed run): the
    server's own counters from logs/rr-10000-r<N>-xsk.server.json, and the client's error."""
    rows = []
    for p in sorted(glob.glob(os.path.join(HERE, "rr10000", "*", "logs", "rr-10000-r*-xsk.server.json"))):
        inv = p.split(os.sep)[-3]
        rnd = int(os.path.basename(p)[len("rr-10000-r"):].split("-")[0])
        st = json.load(open(p)).get("xsk", {}).get("stats", {})
        port = st.get("port", {})
        xdp = port.get("xdp", {})
        shed = sum((port.get("shed") or {}).values())
        bench = p.replace(".server.json", ".bench.log")
        err = ""
        if os.path.exists(bench):
            err = next((l.strip() for l in open(bench) if "rr-bench: error" in l), "")
        bj = p.replace(".server.json", ".bench.json")
        b = json.load(open(bj)) if os.path.exists(bj) else {}
        rows.append({"invocation": inv, "variant": inv.rsplit("-", 1)[0], "round": rnd,
                     "setup_s": b.get("setup_s"), "request_errors": b.get("errors"),
                     "rx_fill_ring_empty_descs": xdp.get("rx_fill_ring_empty_descs", 0),
                     "rx_ring_full": xdp.get("rx_ring_full", 0), "syn_shed": shed, "client_error": err})
    if rows:
        print("\nrr-10000, every xsk round from the server's counters (failed rounds included)")
        for r in rows:
            setup = "-" if r["setup_s"] is None else f"{r['setup_s']:.2f} s"
            print(f"  {r['invocation']:<11} round {r['round']}  setup {setup:>8}  request errors {str(r['request_errors']):>4}  "
                  f"fill-ring-empty {r['rx_fill_ring_empty_descs']:>6}  "
                  f"RX-ring-full {r['rx_ring_full']:>7}  SYNs shed {r['syn_shed']:>6}  {r['client_error'][:110]}")
    return rows


def main():
    out = {"flood": flood("flood", "Set 1: fresh connections probed one after another (a slow one delays the next)"),
           "flood2": flood("flood2", "Set 2: fresh connections each on their own thread, every 250 ms"), "rr10000": rr10000(), "rr10000_xsk_servers": rr10000_servers()}
    with open(os.path.join(HERE, "results.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
