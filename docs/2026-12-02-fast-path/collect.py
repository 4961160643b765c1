#!/usr/bin/env python3
"""Builds results.json's A/B sections from the rr-demo runs of ab.sh.
Usage: collect.py NAME RUNS_DIR A_LABEL B_LABEL [results.json]
Adds (or replaces) d['ab'][NAME]; the rr-demo runs themselves are kept
under d['ab'][NAME]['runs']."""
import glob, json, os, statistics, sys

name, runs, a_label, b_label = sys.argv[1:5]
out = sys.argv[5] if len(sys.argv) > 5 else "results.json"
d = json.load(open(out)) if os.path.exists(out) else {}
metrics = [("rps", True), ("p50_us", False), ("p99_us", False), ("cpu_us_per_req", False),
           ("cpu_us_per_req_client", False), ("cpu_us_per_req_machine", False)]
per = {}  # (variant, round) -> list of runs
meta = None
for f in sorted(glob.glob(f"{runs}/*-*/results.json")):
    v, i = os.path.basename(os.path.dirname(f)).split("-")
    r = json.load(open(f))
    meta = meta or r["metadata"]
    per[(v, int(i))] = r["runs"]
rounds = sorted({i for (_, i) in per if ("a", i) in per and ("b", i) in per})
cases = sorted({(x["case"], x["backend"]) for runs_ in per.values() for x in runs_})
rows = []
for case, backend in cases:
    for m, higher_better in metrics:
        pairs = []
        for i in rounds:
            va = [x[m] for x in per[("a", i)] if x["case"] == case and x["backend"] == backend and x.get(m) is not None]
            vb = [x[m] for x in per[("b", i)] if x["case"] == case and x["backend"] == backend and x.get(m) is not None]
            if va and vb:
                pairs.append((va[0], vb[0]))
        if not pairs:
            continue
        better = sum(1 for a, b in pairs if (b > a if higher_better else b < a))
        rows.append({"case": case, "backend": backend, "metric": m,
                     "a": statistics.median(a for a, _ in pairs), "b": statistics.median(b for _, b in pairs),
                     "b_better": better, "n": len(pairs)})
d.setdefault("ab", {})[name] = {
    "a": a_label, "b": b_label, "rounds": len(rounds), "duration_s": meta["duration_s"] if meta else None,
    "rr_demo_metadata": meta, "rows": rows,
    "runs": {f"{v}-{i}": r for (v, i), r in sorted(per.items())},
}
json.dump(d, open(out, "w"), separators=(",", ":"), sort_keys=True)  # compact: docs/ has a size cap
print(f"{name}: {len(rounds)} rounds, {len(rows)} rows -> {out}")
