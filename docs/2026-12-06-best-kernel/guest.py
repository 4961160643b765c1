#!/usr/bin/env python3
"""Tables of the guest cost runs (vm-tests cost --json): for each guest kernel and connection
count, every server's guest CPU per request (median of the rounds), its spread, system calls
per request where the server counts them, and the stack's ratio to it; the best kernel
configuration (lowest CPU per request) marked. Usage: guest.py RESULTS.json [...]"""
import json
import sys

KERNEL_SERVERS = ["kernel", "uring", "kernel-napi", "uring-napi"]


def fmt(v, nd=2):
    return "-" if v is None else f"{v:.{nd}f}"


def table(path):
    d = json.load(open(path))
    scen = d.get("scenario", "")
    out = [f"## {path.split('/')[-1]}: {scen}", ""]
    out.append("| guest kernel | conns | server | cpu us/req | spread % | kinsn/req | syscalls/req | xsk/this |")
    out.append("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
    cases = d["cases"]
    keys = sorted({(c["kernel"], c["conns"]) for c in cases})
    for k, n in keys:
        rows = {c["backend"]: c for c in cases if c["kernel"] == k and c["conns"] == n}
        x = rows.get("xsk")
        kern = [s for s in KERNEL_SERVERS if s in rows]
        best = min(kern, key=lambda s: rows[s]["cpu_us"]) if kern else None
        for s in kern + (["xsk"] if x else []):
            c = rows[s]
            ratio = x["cpu_us"] / c["cpu_us"] if x and s != "xsk" else None
            name = s + ("*" if s == best else "")
            out.append(
                f"| {k} | {n} | {name} | {c['cpu_us']:.1f} | {c['cpu_spread_pct']:.1f} | {c['kinsn']:.1f} | "
                f"{fmt(c.get('syscalls'))} | {fmt(ratio)} |"
            )
    out.append("")
    out.append("`*` = the best kernel configuration (lowest guest CPU per request); xsk/this = the stack's guest CPU per request over that server's.")
    for g in d.get("granted", []):
        out.append(f"- granted: {g}" if isinstance(g, str) else f"- granted: {json.dumps(g)}")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    for p in sys.argv[1:]:
        try:
            print(table(p))
        except FileNotFoundError:
            print(f"## {p}: not run\n")
