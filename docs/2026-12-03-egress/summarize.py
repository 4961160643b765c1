#!/usr/bin/env python3
"""Tables (tables.txt) and figures (results.json) of this study from its runs:
runs/{base,new}-{1,2}.cg (callgrind, profile.sh) and busy/{stages,plain}-{1,2}
(rr-demo --only busy-same-1, with and without --xsk-args --stage-times).
Needs callgrind_annotate. Usage: summarize.py (from this folder)."""
import json, re, subprocess, statistics, sys
from pathlib import Path

here = Path(__file__).resolve().parent
bd = here.parent / "2026-12-02-fast-path" / "breakdown.py"
out, res = [], {"callgrind": {}, "busy": {}}

def requests(txt):
    return int(re.search(r"window: (\d+)", txt.read_text()).group(1))

def calls_and_inclusive(cg, fn):
    """Largest (inclusive Ir, calls) of a '*' row whose name contains fn, callers summed."""
    t = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--tree=caller", "--threshold=100", str(cg)],
                       capture_output=True, text=True).stdout.split("\n")
    best = (0, 0)
    for i, l in enumerate(t):
        if "*  " in l and fn in l:
            v = int(l.split()[0].replace(",", ""))
            c, j = 0, i - 1
            while j >= 0 and "<" in t[j]:
                m = re.search(r"\(([\d,]+)x\)", t[j])
                if m:
                    c += int(m.group(1).replace(",", ""))
                j -= 1
            best = max(best, (v, c))
    return best

out.append("Callgrind, the stack's server at 1,000 req/s over 16 connections (kernel client), 8 s window")
out.append(f"{'run':8} {'instr/req':>9} {'dispatch_ip/frame':>17} {'frames out':>10} {'seq_to_transmit':>15} {'general rx':>10}")
for v in ["base", "new"]:
    for r in [1, 2]:
        cg, txt = here / f"runs/{v}-{r}.cg", here / f"runs/{v}-{r}.txt"
        n = requests(txt)
        total = int(subprocess.run([sys.executable, str(bd), str(cg), str(n)], capture_output=True, text=True).stdout.split()[1])
        di, dn = calls_and_inclusive(cg, "InterfaceInner::dispatch_ip [")
        _, stt = calls_and_inclusive(cg, "Socket::seq_to_transmit [")
        _, gen = calls_and_inclusive(cg, "process_ethernet [")
        row = {"requests": n, "instr_per_request": total, "dispatch_ip_per_frame": round(di / dn), "frames_out": dn,
               "seq_to_transmit_calls": stt, "general_path_frames": gen}
        res["callgrind"][f"{v}-{r}"] = row
        out.append(f"{v}-{r:<6} {total:9,} {row['dispatch_ip_per_frame']:17,} {dn:10,} {stt:15,} {gen:10,}")
for v in ["base", "new"]:
    res["callgrind"][f"{v}-median"] = statistics.median(res["callgrind"][f"{v}-{r}"]["instr_per_request"] for r in [1, 2])
out.append(f"medians: base {res['callgrind']['base-median']:,.0f}, new {res['callgrind']['new-median']:,.0f}")
out.append("")

stages = ["rx", "ingest", "app", "egress", "kick", "wait"]
out.append("busy-same-1 (rr-demo, 2 rounds each run), the stack's stages per cycle in us (--stage-times)")
out.append(f"{'run/round':10} {'side':6} {'cycles':>8} " + " ".join(f"{s:>6}" for s in stages))
for run in ["stages-1", "stages-2"]:
    for f in sorted((here / "busy" / run / "logs").glob("busy-same-1-r*-xsk.*.json")):
        j = json.loads(f.read_text())
        st = j["xsk"]["stats"]["stages"]
        c = st["cycles"]
        busy = sum(st[k] for k in ["rx_ns", "ingest_ns", "app_ns", "egress_ns", "kick_ns"])
        per = [st[f"{s}_ns"] / c / 1000 for s in stages[:5]] + [max(st["span_ns"] - busy, 0) / c / 1000]
        side = "server" if ".server." in f.name else "client"
        key = f"{run}/{f.name.split('-xsk')[0].split('-')[-1]}/{side}"
        rnd = f.name.split("-xsk")[0].split("-")[-1]
        res["busy"][key] = dict(zip(stages, [round(p, 3) for p in per]), cycles=c)
        out.append(f"{run + '/' + rnd:10} {side:6} {c:8,} " + " ".join(f"{p:6.2f}" for p in per))
out.append("")
out.append("busy-same-1, rr-demo's medians per run: xsk and kernel p50 (us), requests/s")
for run in ["stages-1", "plain-1", "stages-2", "plain-2"]:
    rows = {r["backend"]: r for r in json.loads((here / "busy" / run / "results.json").read_text())["summary"]}
    x, k = rows["xsk"], rows["kernel"]
    res["busy"][f"{run}/summary"] = {b: {"p50_us": r["p50_us"], "p99_us": r["p99_us"], "rps": r["rps"]} for b, r in rows.items()}
    out.append(f"{run:10} xsk p50 {x['p50_us']:5.1f}  kernel p50 {k['p50_us']:5.1f}  ratio {x['p50_us'] / k['p50_us']:.2f}   xsk {x['rps']:9,.0f} req/s, kernel {k['rps']:9,.0f}")

def demo(d):
    """rr-demo run folder: (xsk row, kernel row, server stages per cycle or None)."""
    rows = {r["backend"]: r for r in json.loads((d / "results.json").read_text())["summary"]}
    per = None
    for f in (d / "logs").glob("*-xsk.server.json"):
        st = json.loads(f.read_text())["xsk"]["stats"].get("stages")
        if st:
            c = st["cycles"]
            busy = sum(st[k] for k in ["rx_ns", "ingest_ns", "app_ns", "egress_ns", "kick_ns"])
            per = [st[f"{s}_ns"] / c / 1000 for s in stages[:5]] + [max(st["span_ns"] - busy, 0) / c / 1000]
    return rows["xsk"], rows["kernel"], per

def ab_table(title, folder, order):
    out.append(title)
    out.append(f"{'run':10} {'xsk p50':>7} {'krn p50':>7} {'x/k':>5}  server stages per cycle (us): " + " ".join(stages))
    res[folder] = {}
    for name in order:
        d = here / folder / name
        if not d.is_dir():
            continue
        x, k, per = demo(d)
        res[folder][name] = {"xsk_p50_us": x["p50_us"], "kernel_p50_us": k["p50_us"], "xsk_rps": x["rps"],
                             "kernel_rps": k["rps"], "server_stages_us": per and [round(v, 3) for v in per]}
        st = " ".join(f"{v:.2f}" for v in per) if per else "-"
        out.append(f"{name:10} {x['p50_us']:7.1f} {k['p50_us']:7.1f} {x['p50_us'] / k['p50_us']:5.2f}  {st}")
    out.append("")

out.append("")
ab_table("Kick in flush when busy-polling: A = before (17739b9), B = after (76abefa), A B B A x 3",
         "kick", [f"{v}-{i}" for i, v in enumerate("ABBA" * 3, 1)])
ab_table("TX checksum offload on / off (76abefa), on off off on x 3", "csum",
         [f"{v}-{i}" for i, v in enumerate(["on", "off", "off", "on"] * 3, 1)])
ab_table("The same, the other order: off on on off x 3", "csum2",
         [f"{v}-{i}" for i, v in enumerate(["off", "on", "on", "off"] * 3, 1)])

out.append("TX checksum offload on / off, other cases (rr-demo same-16, rr-16, busy-1; on off off on x 3): xsk req/s and p50")
res["csum3"] = {}
for i, v in enumerate(["on", "off", "off", "on"] * 3, 1):
    rows = json.loads((here / "csum3" / f"{v}-{i}" / "results.json").read_text())["summary"]
    line = f"{v}-{i:<4}"
    for r in rows:
        if r["backend"] == "xsk":
            res["csum3"].setdefault(r["case"], {}).setdefault(v, []).append({"rps": r["rps"], "p50_us": r["p50_us"]})
            line += f" {r['case']} {r['rps']:9,.0f} {r['p50_us']:6.1f} us |"
    out.append(line)
for case, d in res["csum3"].items():
    med = {v: statistics.median(x["rps"] for x in d[v]) for v in d}
    p50 = {v: statistics.median(x["p50_us"] for x in d[v]) for v in d}
    out.append(f"  {case}: median req/s on {med['on']:,.0f} off {med['off']:,.0f} (off/on {med['off'] / med['on']:.3f}); "
               f"median p50 on {p50['on']:.1f} off {p50['off']:.1f} us")
out.append("")

out.append("pingpong with and without TX checksum offload (plain csum csum plain x 3): p50 us")
res["pingpong-csum"] = {}
for f in sorted((here / "pingpong-csum").glob("*.json")):
    v, r = f.stem.split("-")[:2]
    res["pingpong-csum"].setdefault(v, []).append(json.loads(f.read_text())["rtt"]["p50_ns"] / 1000)
for v, xs in res["pingpong-csum"].items():
    out.append(f"  {v}: {' '.join(f'{x:.2f}' for x in xs)}  median {statistics.median(xs):.2f}")
out.append("")

ab_table("Deferred ACKs on / off (--no-defer-acks), busy-same-1, on off off on x 3", "defer",
         [f"{v}-{i}" for i, v in enumerate(["on", "off", "off", "on"] * 3, 1)])

out.append("pingpong with rings of 256 and 8192 entries (256 8192 8192 256 x 3): p50 us")
res["pingpong-rings"] = {}
for f in sorted((here / "pingpong-rings").glob("*.json")):
    v = f.stem.split("-")[0]
    res["pingpong-rings"].setdefault(v, []).append(json.loads(f.read_text())["rtt"]["p50_ns"] / 1000)
for v, xs in res["pingpong-rings"].items():
    out.append(f"  {v}: {' '.join(f'{x:.2f}' for x in xs)}  median {statistics.median(xs):.2f}")
out.append("")

def abba_table(folder, title):
    abba = here / folder
    if not abba.is_dir():
        return
    out.append(title)
    out.append("(xsk rows; `kernel rps` is kernel TCP's row of the same invocations, which neither build touches: the slots' noise)")
    out.append(f"{'case':12} {'metric':10} {'A runs':>32} {'B runs':>32} {'B/A':>6} {'B better':>9}")
    runs = {}
    for d in sorted((d for d in abba.glob("[AB]-*") if d.is_dir()), key=lambda d: int(d.name.split("-")[1])):
        if not (d / "results.json").exists():
            continue
        v, k = d.name.split("-")
        for r in json.loads((d / "results.json").read_text())["summary"]:
            runs.setdefault(r["case"], []).append((v, (int(k) - 1) // 4, r))
    res[folder] = {}
    for case, rs in runs.items():
        for metric, better in [("rps", max), ("p50_us", min), ("cpu_us_per_req", min), ("kernel rps", max)]:
            be = "kernel" if metric.startswith("kernel") else "xsk"
            key = metric.split()[-1]
            rs_all = rs
            rs = [(v, c, r) for v, c, r in rs_all if r["backend"] == be]
            a = [r[key] for v, _, r in rs if v == "A"]
            b = [r[key] for v, _, r in rs if v == "B"]
            cycles = sorted({c for _, c, _ in rs})
            wins = 0
            for c in cycles:
                ca = [r[key] for v, cc, r in rs if v == "A" and cc == c]
                cb = [r[key] for v, cc, r in rs if v == "B" and cc == c]
                if ca and cb and better(statistics.median(ca), statistics.median(cb)) == statistics.median(cb) \
                        and statistics.median(ca) != statistics.median(cb):
                    wins += 1
            ratio = statistics.median(b) / statistics.median(a) if a and b else float("nan")
            res[folder].setdefault(case, {})[metric] = {"A": a, "B": b, "B_over_A": ratio, "B_better_cycles": wins,
                                                       "cycles": len(cycles)}
            fmt = (lambda x: f"{x:,.0f}") if key == "rps" else (lambda x: f"{x:.1f}")
            out.append(f"{case:12} {metric[:10]:10} {' '.join(fmt(x) for x in a):>32} {' '.join(fmt(x) for x in b):>32} "
                       f"{ratio:6.3f} {wins:>4} of {len(cycles)}")
            rs = rs_all
    out.append("")

abba_table("abba", "rr-demo before (A = 45e15d6, the session's start) and after (B = this study's last code), A B B A per cycle, 2 cycles")
abba_table("abba-rr256", "The same for rr-256 and same-16 again, 3 cycles")

for folder, title in [("floor-before", "The floor before the kick change (17739b9): pingpong, then busy-same-1 with offload on and off"),
                      ("floor", "The floor after it (76abefa): pingpong, then busy-same-1")]:
    out.append(title)
    res[folder] = {}
    for r in range(1, 5):
        pp = here / folder / f"pingpong-{r}.json"
        if not pp.exists():
            continue
        rtt = json.loads(pp.read_text())["rtt"]
        line = f"round {r}: pingpong p50 {rtt['p50_ns'] / 1000:.2f} us"
        res[folder][f"pingpong-{r}"] = rtt
        for v in ["stack", "nocsum"]:
            d = here / folder / f"{v}-{r}"
            if d.is_dir():
                x, k, per = demo(d)
                res[folder][f"{v}-{r}"] = {"xsk_p50_us": x["p50_us"], "kernel_p50_us": k["p50_us"],
                                           "server_stages_us": per and [round(p, 3) for p in per]}
                line += f" | {v} p50 {x['p50_us']:.1f} (kernel {k['p50_us']:.1f}), kick {per[4]:.2f}"
        out.append(line)
    out.append("")
(here / "tables.txt").write_text("\n".join(out) + "\n")
(here / "results.json").write_text(json.dumps(res, indent=1) + "\n")
print("\n".join(out))
