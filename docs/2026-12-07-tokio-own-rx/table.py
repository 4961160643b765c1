#!/usr/bin/env python3
"""The tokio adapter over the stack against tokio's own listener, server CPU per request plain
(the process's run time) and with each side charged its own receive path (apps::netrx through
netrx-watch), per round and median; and where the NET_RX softirq work ran.

usage: table.py [results.json]   (measure.py --own-rx's output)"""
import json, os, statistics as st, sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "results.json")
doc = json.load(open(path))
runs = doc["runs"]
cases = list(dict.fromkeys(r["case"] for r in runs))
by = {(r["round"], r["case"], r["server"]): r for r in runs}
rounds = sorted({r["round"] for r in runs})
print(f"{doc['meta']['command']} ({doc['meta']['date']}, {doc['meta']['kernel']}, {doc['meta']['commit']})\n")
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
