#!/usr/bin/env python3
"""rr-demo A/B of two builds (abba.sh: A B B A per cycle): folds the invocations' results.json
summaries and their Redis lines into one file, and prints per case the xsk rows' requests/s,
p50 and server CPU per request of each build (medians, and B/A), with kernel TCP's rows of
the same invocations (which neither build touches: how far the machine alone moved them).

Usage: demo.py fold FOLDER OUT.json     (FOLDER: abba.sh's; A-1/results.json, A-1.log, ...)
       demo.py table RESULTS.json       (medians of each build's rows)
       demo.py paired RESULTS.json      (each invocation's xsk row over its kernel row)"""
import json, re, statistics as st, sys
from pathlib import Path

REDIS = re.compile(r"^(redis-\S+)\s+(\S+)\s+(xsk|kernel|redis)\s+(\d+) req/s\s+p50\s+([\d.]+) us\s+p99\s+([\d.]+) us\s+server cpu\s+([\d.]+) us/req")


def fold(folder, out):
    runs = []
    for d in sorted(Path(folder).glob("[AB]-*"), key=lambda p: int(p.name.split("-")[1].split(".")[0])):
        if not d.is_dir() or not (d / "results.json").exists():
            continue
        v, k = d.name.split("-")
        for r in json.loads((d / "results.json").read_text())["summary"]:
            runs.append({"variant": v, "invocation": int(k), **r})
        log = Path(folder) / f"{d.name}.log"
        for line in log.read_text().splitlines() if log.exists() else []:
            m = REDIS.match(line)
            if m:
                runs.append({"variant": v, "invocation": int(k), "case": f"{m[1]} {m[2]}", "backend": m[3],
                             "rps": float(m[4]), "p50_us": float(m[5]), "p99_us": float(m[6]), "cpu_us_per_req": float(m[7])})
    Path(out).write_text(json.dumps({"runs": runs}, indent=1))


def table(path):
    runs = json.loads(Path(path).read_text())["runs"]
    cases = sorted({r["case"] for r in runs})
    print("| case | metric | A (median) | B (median) | B/A | kernel A | kernel B |")
    print("|---|---|---|---|---|---|---|")
    for c in cases:
        for metric in ("rps", "p50_us", "cpu_us_per_req", "cpu_us_per_req_own_rx", "server_syscalls_per_req"):
            get = lambda v, b: [r[metric] for r in runs if r["case"] == c and r["variant"] == v and r.get("backend") == b and r.get(metric) is not None]
            xa, xb, ka, kb = get("A", "xsk"), get("B", "xsk"), get("A", "kernel"), get("B", "kernel")
            if not xa or not xb:
                continue
            ma, mb = st.median(xa), st.median(xb)
            k = lambda xs: f"{st.median(xs):,.1f}" if xs else "-"
            print(f"| {c} | {metric} | {ma:,.1f} | {mb:,.1f} | {mb / ma:.3f} | {k(ka)} | {k(kb)} |")


def paired(path):
    """Per invocation the xsk row over kernel TCP's row of the same invocation (the machine's
    state cancels), then per build the median of those ratios, and B's over A's."""
    runs = json.loads(Path(path).read_text())["runs"]
    cases = sorted({r["case"] for r in runs})
    print("| case | metric | xsk/kernel, A: median (runs) | xsk/kernel, B: median (runs) | B/A |")
    print("|---|---|---|---|---|")
    for c in cases:
        for metric in ("rps", "p50_us", "cpu_us_per_req", "cpu_us_per_req_own_rx"):
            ratios = {}
            for v in ("A", "B"):
                for k in sorted({r["invocation"] for r in runs if r["variant"] == v}):
                    row = {r.get("backend"): r.get(metric) for r in runs if r["case"] == c and r["invocation"] == k}
                    if row.get("xsk") and row.get("kernel"):
                        ratios.setdefault(v, []).append(row["xsk"] / row["kernel"])
            if len(ratios) < 2:
                continue
            a, b = st.median(ratios["A"]), st.median(ratios["B"])
            f = lambda xs: " ".join(f"{x:.2f}" for x in xs)
            print(f"| {c} | {metric} | {a:.3f} ({f(ratios['A'])}) | {b:.3f} ({f(ratios['B'])}) | {b / a:.3f} |")


if __name__ == "__main__":
    {"fold": lambda: fold(sys.argv[2], sys.argv[3]), "table": lambda: table(sys.argv[2]),
     "paired": lambda: paired(sys.argv[2])}[sys.argv[1]]()
