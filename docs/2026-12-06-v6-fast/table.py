"""The study's tables from results.jsonl (abba.sh runs, one JSON line each)."""
import json, pathlib, statistics

here = pathlib.Path(__file__).parent
rows = [json.loads(l) for l in open(here / "results.jsonl")]
names = {
    "ipv6-send": "A = main before (2324af4), B = its fast send over IPv6 alone (first step of e4cbe5a)",
    "fast-paths": "A = main before (2324af4), B = fast paths over IPv6 and with timestamps (e4cbe5a)",
    "before-ipv6": "A = main before IPv6 (5887ef3), B = e4cbe5a",
    "inline": "A = 3a6963b (e4cbe5a with the IPv6 and tools work merged), B = fast_emit's helpers #[inline]",
}
for s, title in names.items():
    sel = [r for r in rows if r["set"] == s]
    if not sel:
        continue
    print(f"User-space instructions per request, xsk server ({title})")
    print(f"{'setting':<8} {'A runs':<24} {'B runs':<24} {'A med':>6} {'B med':>6} {'B-A':>6}  kernel med")
    for setting in dict.fromkeys(r["setting"] for r in sel):
        a = [r["xsk"] for r in sel if r["setting"] == setting and r["build"] == "A"]
        b = [r["xsk"] for r in sel if r["setting"] == setting and r["build"] == "B"]
        k = [r["kernel"] for r in sel if r["setting"] == setting]
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{setting:<8} {' '.join(map(str, a)):<24} {' '.join(map(str, b)):<24} {ma:>6.0f} {mb:>6.0f} {mb - ma:>+6.0f}  {statistics.median(k):.0f}")
    print()

rr = [json.loads(l) for l in open(here / "rr-demo-results.jsonl")]
titles = {
    "plain": "rr-demo, default recovery (A = 2324af4, B = 3a6963b: e4cbe5a with the IPv6 and tools work merged)",
    "timestamps": "rr-demo, both builds with --xsk-args --timestamps",
}
for s, title in titles.items():
    print(title + "; runs in order A B B A, 2 rounds of 3 s each")
    print(f"{'case':<14} {'measure':<16} {'A runs':<20} {'B runs':<20} {'B/A (medians)':>13}")
    for case in dict.fromkeys(r["case"] for r in rr if r["set"] == s):
        for m in ("rps", "p99_us", "cpu_us_per_req", "x/k rps"):
            def vals(b):
                out = []
                for run in sorted({r["run"] for r in rr if r["set"] == s and r["build"] == b}):
                    x = next(r for r in rr if r["set"] == s and r["run"] == run and r["case"] == case and r["backend"] == "xsk")
                    k = next(r for r in rr if r["set"] == s and r["run"] == run and r["case"] == case and r["backend"] == "kernel")
                    out.append(x["rps"] / k["rps"] if m == "x/k rps" else x[m])
                return out
            a, b = vals("A"), vals("B")
            digits = {"cpu_us_per_req": 1, "x/k rps": 2}.get(m, 0)
            fmt = lambda v: " ".join(f"{x:,.{digits}f}" for x in v)
            print(f"{case:<14} {m:<16} {fmt(a):<20} {fmt(b):<20} {statistics.median(b) / statistics.median(a):>13.2f}")
    print()

r5 = json.load(open(here / "rr16-v6-rounds.json"))
print(f"rr-16 and rr-16-v6, one run of {r5['build']} ({r5['command']}): xsk/kernel rate per round")
for case in ("rr-16", "rr-16-v6"):
    ratios = []
    for rnd in sorted({r["round"] for r in r5["runs"]}):
        x, k = (next(r["rps"] for r in r5["runs"] if r["case"] == case and r["round"] == rnd and r["backend"] == b) for b in ("xsk", "kernel"))
        ratios.append(x / k)
    krn = statistics.median(r["rps"] for r in r5["runs"] if r["case"] == case and r["backend"] == "kernel")
    print(f"{case:<9} {' '.join(f'{v:.2f}' for v in ratios)}  median {statistics.median(ratios):.2f}  (kernel TCP's median {krn:,.0f} req/s)")
