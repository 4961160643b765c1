#!/usr/bin/env python3
"""Per cycle of A B B A, each server's own figures in B over A (the mean of a cycle's two B
runs over the mean of its two A runs), and their median over the cycles. tokio's own listener
and the adapter over kernel TCP run the same code in A and B: their columns show what the
machine's drift alone does to a ratio.

usage: paired.py RESULTS.json[.xz] ...   (the runs table.py --write folded)"""
import json, lzma, statistics as st, sys

for path in sys.argv[1:]:
    opener = lzma.open if path.endswith(".xz") else open
    runs = [r for r in json.load(opener(path, "rt"))["runs"] if not r.get("strace")]
    cycles = max(r["invocation"] for r in runs) // 4
    print(f"{path}: {cycles} cycles")
    print("| case | figure | xsk (B/A) | tokio's listener (B/A) | adapter on kernel TCP (B/A) |")
    print("|---|---|---|---|---|")
    for case in sorted({r["case"] for r in runs}):
        for fig, name in (("server_cpu_us_per_req", "CPU per request"), ("req_per_s", "req/s")):
            cols = []
            for srv in ("xsk", "tokio", "kernel"):
                v = {(r["variant"], r["invocation"]): r[fig] for r in runs if r["case"] == case and r["server"] == srv}
                per = []
                for c in range(cycles):
                    a = (v[("A", 4 * c + 1)] + v[("A", 4 * c + 4)]) / 2
                    b = (v[("B", 4 * c + 2)] + v[("B", 4 * c + 3)]) / 2
                    per.append(b / a)
                cols.append(f"{st.median(per):.3f} ({' '.join(f'{x:.2f}' for x in per)})")
            print(f"| {case} | {name} | " + " | ".join(cols) + " |")
    print()
