"""Per-round xsk/kernel ratios of the Redis cases from rr-demo's redis.json files (the two
servers of a round run back to back, so on a noisy machine their ratio is steadier than the
ratio of medians). Usage: python3 summarize.py run1 run2"""
import json
import statistics as st
import sys

for run in sys.argv[1:]:
    rows = json.load(open(f"{run}/redis.json"))["runs"]
    cases = list(dict.fromkeys(r["case"] for r in rows))
    print(run)
    for c in cases:
        cpu, rps = [], []
        for rd in sorted({r["round"] for r in rows if r["case"] == c}):
            def g(s, f):
                return [r[f] for r in rows if r["case"] == c and r["round"] == rd and r["server"] == s]
            x, k = g("xsk", "server_cpu_us_per_req"), g("kernel", "server_cpu_us_per_req")
            if x and k:
                cpu.append(x[0] / k[0])
            xr, kr = g("xsk", "rps"), g("kernel", "rps")
            if xr and kr:
                rps.append(sum(xr) / sum(kr))
        print(f"  {c:15} server cpu x/k per round {' '.join('%.2f' % v for v in cpu)}: median {st.median(cpu):.2f}, "
              f"{sum(v <= 1 for v in cpu)}/{len(cpu)} rounds <= 1; req/s x/k {' '.join('%.2f' % v for v in rps)}: "
              f"median {st.median(rps):.2f}, {sum(v >= 1 for v in rps)}/{len(rps)} rounds >= 1")
