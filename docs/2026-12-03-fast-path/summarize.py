#!/usr/bin/env python3
"""The fast-path study's results.json and tables, from its runs.

Usage: summarize.py [RUNS_DIR]   (default: runs/ next to this file)
Reads RUNS_DIR/cg/{fast,general,base}-N.cg (+ .txt: requests in the window) and
RUNS_DIR/ab/{base,general,fast}-N/results.json (rr-demo), writes results.json.xz next
to this file and prints the tables (tables.txt is this output)."""
import glob, json, lzma, os, re, statistics, subprocess, sys

here = os.path.dirname(os.path.abspath(__file__))
runs = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "runs")
out = {"instructions": {}, "parts": {}, "ab": {}}

# callgrind: user-space instructions per request, and the engine's parts (inclusive).
PARTS = {
    "ingest (checks, demux, receive)": r"engine::Engine>::ingest \[",
    "egress (smoltcp dispatch, timers)": r"engine::Engine>::egress \[",
    "application (rr server, codec)": r"rr::server::Server<T,C,H>::service \[",
}
for f in sorted(glob.glob(f"{runs}/cg/*.cg")):
    name = os.path.basename(f)[:-3]
    if name.startswith("churn-"):
        continue
    variant = name.rsplit("-", 1)[0]
    txt = open(f[:-3] + ".txt").read()
    reqs = int(re.search(r"requests in window: (\d+)", txt).group(1))
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", f], capture_output=True, text=True).stdout
    total = int(re.search(r"([\d,]+) \([^)]*\)\s+PROGRAM TOTALS", ann).group(1).replace(",", ""))
    out["instructions"].setdefault(variant, []).append({"run": name, "requests": reqs, "instructions": total, "per_request": round(total / reqs)})
    for part, pat in PARTS.items():
        m = [int(l.split()[0].replace(",", "")) for l in ann.splitlines() if re.search(pat, l) and "/stack/src/" in l.split(":")[0]]
        if m:
            out["parts"].setdefault(variant, {}).setdefault(part, []).append(round(max(m) / reqs))

print("User-space instructions per request, stack's rr-server (callgrind, open loop 1,000 req/s, 16 connections, kernel client)")
print(f"{'variant':<10} {'runs':<22} {'median':>7}   " + "   ".join(f"{p}" for p in PARTS))
for v in ("base", "general", "fast"):
    xs = out["instructions"].get(v)
    if not xs:
        continue
    per = [x["per_request"] for x in xs]
    parts = out["parts"].get(v, {})
    cols = "   ".join(f"{statistics.median(parts[p]):>{len(p)}.0f}" if p in parts else " " * len(p) for p in PARTS)
    print(f"{v:<10} {', '.join(map(str, per)):<22} {statistics.median(per):>7.0f}   {cols}")

# churn-profile.sh: instructions per connection (connect, one request, close).
churn = {}
for f in sorted(glob.glob(f"{runs}/cg/churn-*.out")):
    name = os.path.basename(f)[:-4]
    variant = name.split("-")[1]
    txt = open(f).read()
    churn.setdefault(variant, []).append({"run": name, "connections": int(re.search(r"accepted: (\d+)", txt).group(1)),
                                          "instructions": int(re.search(r"instructions: (\d+)", txt).group(1)),
                                          "per_connection": int(re.search(r"per connection: (\d+)", txt).group(1))})
if churn:
    out["churn"] = churn
    print()
    print("User-space instructions per connection under churn (callgrind over the server's life, 4 at a time, kernel client)")
    for v, xs in churn.items():
        print(f"{v:<10} {', '.join(str(x['per_connection']) for x in xs):<22} median {statistics.median(x['per_connection'] for x in xs):.0f}")

# vm-cost.sh and vm-cost-light.sh: guest CPU per request (vm-tests cost, -icount, 16
# connections; closed loop, and open loop at 300 requests/s), per guest kernel.
for name, title in (("vm", "closed loop"), ("vm-light", "open loop, 300 requests/s")):
    vm = {}
    for f in sorted(glob.glob(f"{runs}/{name}/*.json")):
        v, i = os.path.basename(f)[:-5].rsplit("-", 1)
        for r in json.load(open(f))["rows"]:
            vm.setdefault((r["kernel"], r["backend"], v), []).append({"round": int(i), "sub": r["round"], "cpu_us": r["cpu_us"], "task_us": r["task_us"]})
    if not vm:
        continue
    out[name] = {"/".join(k): xs for k, xs in vm.items()}
    print()
    print(f"Guest CPU per request, virtio_net guest under -icount, 16 connections, {title} (vm-tests cost; 2 rounds x 2 measurements per variant)")
    print("'task' is the server's own run time (schedstat), 'busy' the guest's busy time; medians, and xsk / kernel TCP of the same invocations")
    for kern in sorted({k for k, _, _ in vm}):
        for v in ("general", "fast"):
            x, k = vm.get((kern, "xsk", v), []), vm.get((kern, "kernel", v), [])
            if not x or not k:
                continue
            tx, tk = statistics.median(a["task_us"] for a in x), statistics.median(a["task_us"] for a in k)
            bx, bk = statistics.median(a["cpu_us"] for a in x), statistics.median(a["cpu_us"] for a in k)
            runs_ = ", ".join("%.1f" % a["task_us"] for a in x)
            print(f"kernel {kern:<4} {v:<8} xsk task {runs_} (median {tx:.1f}), busy median {bx:.1f};"
                  f" kernel TCP task median {tk:.1f}, busy {bk:.1f}; xsk/kernel task {tx / tk:.2f}, busy {bx / bk:.2f}")

# churn-profile.sh with VG_ARGS=--cache-sim=yes: valgrind's cache model per connection.
cache = {}
for f in sorted(glob.glob(f"{runs}/cache/churn-*.cg")):
    v = os.path.basename(f)[:-3].split("-", 1)[1]
    acc = int(re.search(r"accepted: (\d+)", open(f[:-3] + ".out").read()).group(1))
    ann = subprocess.run(["callgrind_annotate", f], capture_output=True, text=True).stdout
    events = re.search(r"Events shown:\s+(.*)", ann).group(1).split()
    totals = [int(x.replace(",", "")) for x in re.findall(r"([\d,]+) \(100.0%\)", ann.split("PROGRAM TOTALS")[0].splitlines()[-1] + " PROGRAM")]
    cache[v] = {"connections": acc, **{e: round(t / acc, 1) for e, t in zip(events, totals)}}
if cache:
    out["cache"] = cache
    print()
    print("valgrind's cache model under churn, per connection (one run each): instructions, I1 misses, D1 read and write misses")
    for v, c in cache.items():
        print(f"{v:<10} Ir {c['Ir']:>9.0f}  I1mr {c['I1mr']:>6.1f}  D1mr {c['D1mr']:>6.1f}  D1mw {c['D1mw']:>6.1f}  ({c['connections']} connections)")

# rr-demo, alternating base / general / fast.
METRICS = [("rps", True), ("p50_us", False), ("p99_us", False), ("cpu_us_per_req", False)]
per = {}
for f in sorted(glob.glob(f"{runs}/ab/*-*/results.json")):
    v, i = os.path.basename(os.path.dirname(f)).rsplit("-", 1)
    per[(v, int(i))] = json.load(open(f))["runs"]
rounds = sorted({i for (_, i) in per})
cases = sorted({(x["case"], x["backend"]) for rs in per.values() for x in rs})
rows = []
for case, backend in cases:
    for m, higher in METRICS:
        vals = {}
        for v in ("base", "general", "fast"):
            vals[v] = [next((x[m] for x in per.get((v, i), []) if x["case"] == case and x["backend"] == backend and x.get(m) is not None), None) for i in rounds]
        def cmp(a, b):
            pairs = [(x, y) for x, y in zip(vals[a], vals[b]) if x is not None and y is not None]
            if not pairs:
                return None
            better = sum(1 for x, y in pairs if (y > x if higher else y < x))
            return {"ratio": statistics.median(y for _, y in pairs) / statistics.median(x for x, _ in pairs), "better": better, "n": len(pairs)}
        rows.append({"case": case, "backend": backend, "metric": m,
                     "median": {v: (statistics.median([x for x in vals[v] if x is not None]) if any(x is not None for x in vals[v]) else None) for v in vals},
                     "fast_vs_general": cmp("general", "fast"), "fast_vs_base": cmp("base", "fast")})
out["ab"] = {"rounds": len(rounds), "rows": rows, "runs": {f"{v}-{i}": r for (v, i), r in sorted(per.items())}}

print()
print(f"rr-demo, {len(rounds)} rounds alternating base (8b43dfc) / general (--no-fast-path) / fast; medians; ratio = fast / other (rps: higher is better; latency, CPU: lower), [k/n] = rounds where fast was better")
print(f"{'case':<12} {'backend':<8} {'metric':<15} {'base':>9} {'general':>9} {'fast':>9}   {'fast/general':>16}   {'fast/base':>14}")
def fmt(x):
    return "-" if x is None else (f"{x:.0f}" if abs(x) >= 100 else f"{x:.2f}")
def fr(c):
    return "-" if c is None else f"{c['ratio']:.2f} [{c['better']}/{c['n']}]"
for r in rows:
    med = r["median"]
    print(f"{r['case']:<12} {r['backend']:<8} {r['metric']:<15} {fmt(med['base']):>9} {fmt(med['general']):>9} {fmt(med['fast']):>9}   {fr(r['fast_vs_general']):>16}   {fr(r['fast_vs_base']):>14}")

json.dump(out, lzma.open(os.path.join(here, "results.json.xz"), "wt"), sort_keys=True, separators=(",", ":"))

# The rechecks: fast first in each round (a), then general (b), for the cases where the
# first run (general always before fast) showed the fast path behind.
for name in ("recheck", "recheck2"):
    per = {}
    for f in sorted(glob.glob(f"{runs}/{name}/*-*/results.json")):
        v, i = os.path.basename(os.path.dirname(f)).rsplit("-", 1)
        per[({"a": "fast", "b": "general"}[v], int(i))] = json.load(open(f))["runs"]
    if not per:
        continue
    rounds = sorted({i for (_, i) in per})
    cases = sorted({(x["case"], x["backend"]) for rs in per.values() for x in rs})
    rows = []
    print()
    print(f"rr-demo {name}, {len(rounds)} rounds alternating fast (first) / general; medians; [k/n] = rounds where fast was better")
    print(f"{'case':<12} {'backend':<8} {'metric':<15} {'general':>9} {'fast':>9}   {'fast/general':>16}")
    for case, backend in cases:
        for m, higher in METRICS:
            g = [next((x[m] for x in per.get(("general", i), []) if x["case"] == case and x["backend"] == backend), None) for i in rounds]
            fa = [next((x[m] for x in per.get(("fast", i), []) if x["case"] == case and x["backend"] == backend), None) for i in rounds]
            pairs = [(x, y) for x, y in zip(g, fa) if x is not None and y is not None]
            if not pairs:
                continue
            better = sum(1 for x, y in pairs if (y > x if higher else y < x))
            mg, mf = statistics.median(x for x, _ in pairs), statistics.median(y for _, y in pairs)
            rows.append({"case": case, "backend": backend, "metric": m, "general": mg, "fast": mf, "ratio": mf / mg, "better": better, "n": len(pairs)})
            print(f"{case:<12} {backend:<8} {m:<15} {fmt(mg):>9} {fmt(mf):>9}   {mf / mg:>8.2f} [{better}/{len(pairs)}]")
    out[name] = {"rounds": len(rounds), "rows": rows, "runs": {f"{v}-{i}": r for (v, i), r in sorted(per.items())}}

# abba.sh: fast / general / general / fast per cycle; per cycle, each variant's mean of its two.
per = {}
for f in sorted(glob.glob(f"{runs}/abba/*-*/results.json")):
    v, k = os.path.basename(os.path.dirname(f)).rsplit("-", 1)
    per[(v, int(k))] = json.load(open(f))["runs"]
if per:
    cycles = sorted({(k - 1) // 4 for (_, k) in per})
    cases = sorted({(x["case"], x["backend"]) for rs in per.values() for x in rs})
    rows = []
    print()
    print(f"rr-demo, {len(cycles)} cycles of fast / general / general / fast (abba.sh); per cycle the mean of each variant's two runs; medians over cycles; [k/n] = cycles where fast was better")
    print(f"{'case':<12} {'backend':<8} {'metric':<15} {'general':>9} {'fast':>9}   {'fast/general':>16}")
    for case, backend in cases:
        for m, higher in METRICS:
            pairs = []
            for c in cycles:
                def mean(v):
                    xs = [next((x[m] for x in per.get((v, k), []) if x["case"] == case and x["backend"] == backend and x.get(m) is not None), None)
                          for k in range(4 * c + 1, 4 * c + 5) if (v, k) in per]
                    xs = [x for x in xs if x is not None]
                    return sum(xs) / len(xs) if xs else None
                g, fa = mean("general"), mean("fast")
                if g is not None and fa is not None:
                    pairs.append((g, fa))
            if not pairs:
                continue
            better = sum(1 for x, y in pairs if (y > x if higher else y < x))
            mg, mf = statistics.median(x for x, _ in pairs), statistics.median(y for _, y in pairs)
            rows.append({"case": case, "backend": backend, "metric": m, "general": mg, "fast": mf, "ratio": mf / mg, "better": better, "n": len(pairs)})
            print(f"{case:<12} {backend:<8} {m:<15} {fmt(mg):>9} {fmt(mf):>9}   {mf / mg:>8.2f} [{better}/{len(pairs)}]")
    out["abba"] = {"cycles": len(cycles), "rows": rows, "runs": {f"{v}-{k}": r for (v, k), r in sorted(per.items())}}

# Within one rr-demo invocation kernel TCP runs next to xsk; its rows cannot see the flag,
# so xsk / kernel per invocation takes out what the slot did to both.
def normalized(per, variants, label):
    print()
    print(f"xsk / kernel within each invocation ({label}): requests/s ratio, and server CPU per request ratio; per round, then median")
    res = []
    for case in sorted({x["case"] for rs in per.values() for x in rs}):
        line = {}
        for v in variants:
            rr, cc = [], []
            for (vv, i), rs in sorted(per.items()):
                if vv != v:
                    continue
                x = next((r for r in rs if r["case"] == case and r["backend"] == "xsk"), None)
                k = next((r for r in rs if r["case"] == case and r["backend"] == "kernel"), None)
                if x and k and x.get("rps") and k.get("rps"):
                    rr.append(x["rps"] / k["rps"])
                    if x.get("cpu_us_per_req") and k.get("cpu_us_per_req"):
                        cc.append(x["cpu_us_per_req"] / k["cpu_us_per_req"])
            line[v] = (rr, cc)
        cells = "   ".join(f"{v}: rps {' '.join(f'{a:.2f}' for a in line[v][0])} (median {statistics.median(line[v][0]):.2f}), cpu {statistics.median(line[v][1]):.2f}" for v in variants if line[v][0] and line[v][1])
        print(f"{case:<12} {cells}")
        res.append({"case": case, **{v: {"rps_ratio": line[v][0], "cpu_ratio": line[v][1]} for v in variants}})
    return res

per_ab = {tuple(k.rsplit("-", 1)[0:1]) + (int(k.rsplit("-", 1)[1]),): v for k, v in out["ab"]["runs"].items()}
out["ab"]["normalized"] = normalized(per_ab, ["base", "general", "fast"], "first run")
for name in ("recheck", "recheck2"):
    if name in out:
        per_rc = {tuple(k.rsplit("-", 1)[0:1]) + (int(k.rsplit("-", 1)[1]),): v for k, v in out[name]["runs"].items()}
        out[name]["normalized"] = normalized(per_rc, ["general", "fast"], name)
json.dump(out, lzma.open(os.path.join(here, "results.json.xz"), "wt"), sort_keys=True, separators=(",", ":"))
