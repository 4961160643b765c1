#!/usr/bin/env python3
"""This study's results.json and tables, from its runs.

Usage: summarize.py   (reads the folders next to this file, writes results.json there and
prints the tables; tables.txt is this output)

- cg/{base,new}-N.cg (+ .txt: requests in the window): callgrind profiles of the stack's
  server (scripts/user-instructions' run), user-space instructions per request, and the
  parts the cuts touched (inclusive, per request);
- vm/{closed,light}-{base,new}-N.json: vm-tests cost, guest CPU per request;
- abba/{A,B}-N/results.json: rr-demo, the two builds alternating (A = base, B = new)."""
import glob, json, os, re, statistics, subprocess

here = os.path.dirname(os.path.abspath(__file__))
out = {"instructions": {}, "parts": {}, "vm": {}, "abba": {}}

# Functions whose inclusive cost per request the cuts change (callgrind_annotate names).
END = r"(?: \[.*\])?$"  # a function's own row ends with its name (and its object file)
PARTS = {
    "Port::refill (fill ring top-up)": r"xsk_io::port::Port::refill" + END,
    "TxHalf::reap (completions)": r"xsk_io::port::TxHalf::reap" + END,
    "Transport::recv (engine recv)": r"XskTransport as stack::transport::Transport>::recv" + END,
    "decode_buffered (server, codec)": r"rr::server::decode_buffered" + END,
    "Socket::seq_to_transmit": r"Socket::seq_to_transmit" + END,
    "Interface::poll_at closure": r"Interface::poll_at::\{\{closure\}\}" + END,
    "Engine::ingest (checks, demux, receive)": r"engine::Engine>::ingest" + END,
    "Engine::egress (smoltcp dispatch, timers)": r"engine::Engine>::egress" + END,
    "Server::service (application)": r"Server<T,C,H>::service" + END,
}


def inclusive(cg):
    ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", cg],
                         capture_output=True, text=True).stdout
    rows = []
    for line in ann.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\*?\s*(.*)", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")), m.group(2)))
    return rows


for f in sorted(glob.glob(f"{here}/cg/*.cg")):
    name = os.path.basename(f)[:-3]
    v, r = name.rsplit("-", 1)
    reqs = int(re.search(r"requests in window: (\d+)", open(f[:-3] + ".txt").read()).group(1))
    rows = inclusive(f)
    total = next(n for n, fn in rows if "PROGRAM TOTALS" in fn)
    out["instructions"].setdefault(v, []).append({"run": int(r), "requests": reqs, "per_request": round(total / reqs)})
    for part, pat in PARTS.items():
        # The largest row matching: the function itself rather than a caller's inlined share.
        n = max((n for n, fn in rows if re.search(pat, fn)), default=0)
        out["parts"].setdefault(v, {}).setdefault(part, []).append(round(n / reqs))

print("User-space instructions per request, the stack's server (callgrind, open loop 1,000 req/s, 16 connections, kernel client)")
for v in ("base", "new"):
    xs = sorted(out["instructions"].get(v, []), key=lambda x: x["run"])
    if xs:
        vals = [x["per_request"] for x in xs]
        print(f"  {v:<5} runs {', '.join(map(str, vals))}   median {statistics.median(vals):.0f}")
print("  parts (inclusive, per request; median of the runs)")
for part in PARTS:
    b = out["parts"].get("base", {}).get(part, [])
    n = out["parts"].get("new", {}).get(part, [])
    if b and n:
        print(f"    {part:<44} {statistics.median(b):>6.0f} -> {statistics.median(n):>6.0f}")

# vm-cost.sh: guest CPU per request (vm-tests cost, -icount, 16 connections).
for f in sorted(glob.glob(f"{here}/vm/*.json")):
    load, v, r = os.path.basename(f)[:-5].split("-")
    for row in json.load(open(f))["rows"]:
        out["vm"].setdefault(f"{load}/{row['kernel']}/{row['backend']}/{v}", []).append(
            {"round": int(r), "sub": row["round"], "cpu_us": row["cpu_us"], "task_us": row["task_us"]})
if out["vm"]:
    print()
    print("Guest CPU per request, virtio_net guest under -icount, 16 connections (vm-tests cost; 2 invocations x 2 measurements per build)")
    print("'task' is the server's own run time (schedstat); xsk / kernel TCP is the median of the per-invocation ratios")
    for load in ("closed", "light"):
        for kern in ("6.1", "new"):
            for v in ("base", "new"):
                x = out["vm"].get(f"{load}/{kern}/xsk/{v}", [])
                k = out["vm"].get(f"{load}/{kern}/kernel/{v}", [])
                if not x or not k:
                    continue
                ratios = []
                for r in sorted({a["round"] for a in x}):
                    tx = statistics.median(a["task_us"] for a in x if a["round"] == r)
                    tk = statistics.median(a["task_us"] for a in k if a["round"] == r)
                    ratios.append(tx / tk)
                print(f"  {load:<6} guest {kern:<4} {v:<5} xsk task {', '.join('%.1f' % a['task_us'] for a in x):<28}"
                      f" kernel TCP task {', '.join('%.1f' % a['task_us'] for a in k):<28}"
                      f" xsk/kernel {', '.join('%.2f' % q for q in ratios)} (median {statistics.median(ratios):.2f})")

# abba: rr-demo, base (A) and new (B) in the order A B B A per cycle (abba-builds.sh of
# docs/2026-12-03-egress). Per case: the xsk row's requests/s, p50 and CPU per request, and
# kernel TCP's requests/s from the same invocations (neither build touches it: the slots' noise).
def abba(folder, title):
    """rr-demo invocations A-k and B-k of FOLDER, in the order A B B A per cycle."""
    runs, inv_rows = {}, {}
    for d in sorted((d for d in glob.glob(f"{here}/{folder}/[AB]-*") if os.path.isdir(d)), key=lambda d: int(d.rsplit("-", 1)[1])):
        if not os.path.exists(f"{d}/results.json"):
            continue
        v, k = os.path.basename(d).split("-")
        for r in json.load(open(f"{d}/results.json"))["summary"]:
            runs.setdefault(r["case"], []).append((v, (int(k) - 1) // 4, r))
            inv_rows.setdefault(r["case"], []).append((v, (int(k) - 1) // 4, r, int(k)))
    if runs:
        print()
        print(title)
        print(f"  {'case':12} {'metric':14} {'A runs':>34} {'B runs':>34} {'B/A':>6} {'B better':>9}")
    for case, rs in runs.items():
        for metric, better in [("rps", max), ("p50_us", min), ("cpu_us_per_req", min), ("kernel rps", max)]:
            be = "kernel" if metric.startswith("kernel") else "xsk"
            key = metric.split()[-1]
            sel = [(v, c, r[key]) for v, c, r in rs if r["backend"] == be and r.get(key) is not None]
            a = [x for v, _, x in sel if v == "A"]
            b = [x for v, _, x in sel if v == "B"]
            if not a or not b:
                continue
            cycles = sorted({c for _, c, _ in sel})
            wins = 0
            for c in cycles:
                ca = [x for v, cc, x in sel if v == "A" and cc == c]
                cb = [x for v, cc, x in sel if v == "B" and cc == c]
                if ca and cb and statistics.median(ca) != statistics.median(cb) \
                        and better(statistics.median(ca), statistics.median(cb)) == statistics.median(cb):
                    wins += 1
            ratio = statistics.median(b) / statistics.median(a)
            out[folder].setdefault(case, {})[metric] = {"A": a, "B": b, "B_over_A": ratio, "B_better_cycles": wins, "cycles": len(cycles)}
            fmt = (lambda x: f"{x:,.0f}") if key == "rps" else (lambda x: f"{x:.1f}")
            print(f"  {case:12} {metric:14} {' '.join(fmt(x) for x in a):>34} {' '.join(fmt(x) for x in b):>34} {ratio:6.3f} {wins:>4} of {len(cycles)}")
        # The stack's rate over kernel TCP's in the same invocation: what the goals are stated in.
        ratios = {}
        for v in ("A", "B"):
            for k in sorted({k for vv, _, r, k in inv_rows[case] if vv == v}):
                x = [r for vv, _, r, kk in inv_rows[case] if vv == v and kk == k and r["backend"] == "xsk"]
                kr = [r for vv, _, r, kk in inv_rows[case] if vv == v and kk == k and r["backend"] == "kernel"]
                if x and kr and x[0].get("rps") and kr[0].get("rps"):
                    ratios.setdefault(v, []).append(x[0]["rps"] / kr[0]["rps"])
        if ratios.get("A") and ratios.get("B"):
            out[folder][case]["xsk/kernel rps"] = ratios
            print(f"  {case:12} {'xsk/kernel rps':14} {' '.join('%.2f' % x for x in ratios['A']):>34} "
                  f"{' '.join('%.2f' % x for x in ratios['B']):>34}   median {statistics.median(ratios['A']):.2f} -> {statistics.median(ratios['B']):.2f}")




out["abba-client"] = {}
abba("abba", "rr-demo, base (A = 1c74182) against new (B = dfc19c4), A B B A per cycle, 2 cycles; B/A of the medians, and the cycles where B was better")
abba("abba-client", "rr-demo, the load generator's client too (A = dfc19c4, B = its client reading once per Readable), A B B A per cycle, 3 cycles")

# busy/: busy-same-1 alone, base (A) and new (C), A C C A x 3 (--stage-times on both).
busy = {}
for d in sorted((d for d in glob.glob(f"{here}/busy/[AC]-*") if os.path.isdir(d)), key=lambda d: int(d.rsplit("-", 1)[1])):
    if not os.path.exists(f"{d}/results.json"):
        continue
    v, k = os.path.basename(d).split("-")
    rows = {r["backend"]: r for r in json.load(open(f"{d}/results.json"))["summary"]}
    busy.setdefault(v, []).append({"run": int(k), "cycle": (int(k) - 1) // 4, "xsk_p50_us": rows["xsk"]["p50_us"],
                                   "kernel_p50_us": rows["kernel"]["p50_us"]})
if busy:
    out["busy"] = busy
    print()
    print("busy-same-1 alone, base (A) against new (C), A C C A x 3: xsk p50 / kernel TCP p50 of the same invocation (us)")
    for v in ("A", "C"):
        xs = busy.get(v, [])
        print(f"  {v}  " + "  ".join(f"{x['xsk_p50_us']:.2f}/{x['kernel_p50_us']:.2f}" for x in xs)
              + f"   median xsk p50 {statistics.median(x['xsk_p50_us'] for x in xs):.2f},"
              f" ratio {statistics.median(x['xsk_p50_us'] / x['kernel_p50_us'] for x in xs):.2f}")
    for c in sorted({x["cycle"] for v in busy for x in busy[v]}):
        a = statistics.median(x["xsk_p50_us"] for x in busy["A"] if x["cycle"] == c)
        n = statistics.median(x["xsk_p50_us"] for x in busy["C"] if x["cycle"] == c)
        print(f"  cycle {c + 1}: A {a:.2f}  C {n:.2f}")

json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
