#!/usr/bin/env python3
"""rr-demo with the xsk ends' XDP program attached natively (A: --attach auto, which takes
drv on veth) against the generic skb path (B: --attach skb), same build, alternating
(abba/, busy/); and kernel busy polling on the xsk ends against spinning only (spin/; spin-aa/
is the first attempt, which by a bug in rr-demo ran the same configuration in both slots).
Per case and backend: median requests/s, p50, server CPU per request and the whole
machine's CPU per request (server, client and kernel work together: on veth the fair
figure, since veth runs each receiver's softirq in the sender's send call) of the A and B
invocations, B/A; then the xsk/kernel ratios per build. Kernel TCP's rows do not depend on
the mode: their B/A is the slots' noise.

Usage: summarize.py   (reads abba*/ and busy*/ next to this file, writes results.json there
and prints the tables; tables.txt is this output)"""
import glob, json, os, statistics

here = os.path.dirname(os.path.abspath(__file__))
med = statistics.median
metrics = [("rps", "req/s", "{:9.0f}"), ("p50_us", "p50 us", "{:9.1f}"), ("cpu_us_per_req", "srv cpu", "{:9.2f}"),
           ("cpu_us_per_req_machine", "mach cpu", "{:9.2f}")]
# What A and B are in each folder.
labels = {"abba": "B (--attach skb) against A (auto: drv on veth)",
          "busy": "B (--attach skb) against A (auto: drv on veth)",
          "spin": "B (xsk --busy-poll 0: no kernel busy poll) against A (--busy-poll 50), both drv",
          "stages": "B (--attach skb) against A (auto: drv on veth), with --stage-times",
          "spin-aa": "A against A: both ran --busy-poll 50 (rr-demo put the B runs' --xsk-args before the case's own)"}
out = {}
for run in sorted(os.path.basename(p) for p in glob.glob(os.path.join(here, "*")) if os.path.isdir(p)):
    rows, ratios = {}, {}
    for d in sorted(glob.glob(os.path.join(here, run, "[AB]-*"))):
        if not os.path.isfile(os.path.join(d, "results.json")):
            continue  # not a run, or one still going
        v = os.path.basename(d)[0]
        summary = json.load(open(os.path.join(d, "results.json")))["summary"]
        by = {(c["case"], c["backend"]): c for c in summary}
        for (case, be), c in by.items():
            r = rows.setdefault((case, be), {}).setdefault(v, {m: [] for m, _, _ in metrics})
            for m, _, _ in metrics:
                r[m].append(c.get(m))
        for case in {k[0] for k in by}:
            x, k = by.get((case, "xsk")), by.get((case, "kernel"))
            if x and k:
                q = ratios.setdefault(case, {}).setdefault(v, {m: [] for m, _, _ in metrics})
                for m, _, _ in metrics:
                    if x.get(m) and k.get(m):
                        q[m].append(x[m] / k[m])
    res = out.setdefault(run, {"per_backend": {}, "xsk_over_kernel": {}})
    print(f"== {run}: each backend, {labels.get(run, 'B against A')}, medians of the invocations")
    head = " ".join(f"{'A ' + h:>9} {'B ' + h:>9} {'B/A':>5}" for _, h, _ in metrics)
    print(f"{'case':12} {'backend':7} {head}  n")
    for (case, be), ab in sorted(rows.items()):
        if "A" not in ab or "B" not in ab:
            continue
        cells, entry = [], {"A": ab["A"], "B": ab["B"]}
        for m, _, f in metrics:
            a = [x for x in ab["A"][m] if x is not None]
            b = [x for x in ab["B"][m] if x is not None]
            if a and b:
                ma, mb = med(a), med(b)
                cells.append(f"{f.format(ma)} {f.format(mb)} {mb / ma:5.2f}")
                entry[f"{m}_B_over_A"] = mb / ma
            else:
                cells.append(f"{'-':>9} {'-':>9} {'-':>5}")
        res["per_backend"][f"{case} {be}"] = entry
        print(f"{case:12} {be:7} {' '.join(cells)}  {len(ab['A']['rps'])}+{len(ab['B']['rps'])}")
    print(f"== {run}: xsk/kernel per build (median of each build's invocations)")
    print(f"{'case':12} " + " ".join(f"{'A ' + h:>9} {'B ' + h:>9}" for _, h, _ in metrics))
    for case, ab in sorted(ratios.items()):
        if "A" not in ab or "B" not in ab:
            continue
        r = {v: {m: (med(ab[v][m]) if ab[v][m] else None) for m, _, _ in metrics} for v in "AB"}
        res["xsk_over_kernel"][case] = {"A": ab["A"], "B": ab["B"], "median": r}
        print(f"{case:12} " + " ".join(
            " ".join(f"{r[v][m]:9.2f}" if r[v][m] is not None else f"{'-':>9}" for v in "AB") for m, _, _ in metrics))
    print()
json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
