#!/usr/bin/env python3
"""The tokio adapter over the stack against tokio's own listener, server CPU per request plain
(the process's run time) and with each side charged its own receive path (apps::netrx through
netrx-watch), per round and median; and where the NET_RX softirq work ran.

usage: table.py [FILE ...]   (measure.py --own-rx's outputs, their rounds pooled; default:
                             results.json, or every invocation in it when it holds a list)"""
import json, os, statistics as st, sys

here = os.path.dirname(os.path.abspath(__file__))
docs = []
for path in sys.argv[1:] or [os.path.join(here, "results.json")]:
    d = json.load(open(path))
    docs.extend(d if isinstance(d, list) else [d])
runs = [dict(r, round=(i, r["round"])) for i, d in enumerate(docs) for r in d["runs"]]
cases = list(dict.fromkeys(r["case"] for r in runs))
by = {(r["round"], r["case"], r["server"]): r for r in runs}
rounds = sorted({r["round"] for r in runs})
for d in docs:
    print(f"{d['meta']['command']} ({d['meta']['date']}, {d['meta']['kernel']}, {d['meta']['commit']})")
print(f"\n{len(rounds)} rounds in {len(docs)} invocation(s)\n")
print("| case | stack/tokio req/s | stack/tokio CPU per request | the same, own receive path | rounds (CPU, own receive) |")
print("|---|---|---|---|---|")
for c in cases:
    rate = [by[(k, c, "xsk")]["req_per_s"] / by[(k, c, "tokio")]["req_per_s"] for k in rounds]
    cpu = [by[(k, c, "xsk")]["server_cpu_us_per_req"] / by[(k, c, "tokio")]["server_cpu_us_per_req"] for k in rounds]
    own = [by[(k, c, "xsk")]["server_cpu_us_per_req_own_rx"] / by[(k, c, "tokio")]["server_cpu_us_per_req_own_rx"] for k in rounds]
    each = " ".join(f"{a:.2f}/{b:.2f}" for a, b in zip(cpu, own))
    print(f"| {c} | {st.median(rate):.2f} | {st.median(cpu):.2f} | {st.median(own):.2f} | {each} |")
print()
print("Medians, us per request: the server's CPU, with its own receive path, and NET_RX run in the server's")
print("process (its client's receive) and in the client's (the server's receive); server system calls per request (BPF).\n")
print("| case | server | CPU | own receive | NET_RX in server | NET_RX in client | syscalls |")
print("|---|---|---|---|---|---|---|")
for c in cases:
    for s in ("tokio", "kernel", "xsk"):
        rs = [by[(k, c, s)] for k in rounds]
        m = lambda f: st.median(f(r) for r in rs)
        print(f"| {c} | {s} | {m(lambda r: r['server_cpu_us_per_req']):.2f} | {m(lambda r: r['server_cpu_us_per_req_own_rx']):.2f} | "
              f"{m(lambda r: r['netrx_us_per_req']['in_server']):.2f} | {m(lambda r: r['netrx_us_per_req']['in_client']):.2f} | "
              f"{m(lambda r: r['server_syscalls_per_req']):.2f} |")
