"""The study's tables, in Markdown, from results.jsonl (abba.sh's rr-demo runs): medians over
each variant's runs per set and case, and for rr-10000 every run in slot order. The README's
tables are this script's output."""
import json, pathlib, statistics

here = pathlib.Path(__file__).parent
rows = [json.loads(l) for l in open(here / "results.jsonl")]
med = statistics.median


def bad(r):
    """Spurious probes and retransmissions and RTOs, % of the server's requests."""
    return 100 * (r["spurious_probes"] + r["spurious_retransmits"] + r["rto_retransmits"]) / r["requests"]


for s in dict.fromkeys(r["set"] for r in rows):
    sel = [r for r in rows if r["set"] == s]
    print(f"Set `{s}`, medians over the runs:\n")
    print("| case | variant | runs | req/s | kernel | x/k | p50 ms | krn p50 | p99 ms | krn p99 | p99.9 ms | krn p99.9 "
          "| own CPU us | krn own CPU | setup s | krn setup | probes % | bad % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in dict.fromkeys(r["case"] for r in sel):
        for v in dict.fromkeys(r["variant"] for r in sel):
            rs = [r for r in sel if r["case"] == case and r["variant"] == v]
            if not rs:
                continue
            m = lambda k: med(r[k] for r in rs)
            print(f"| {case} | {v} | {len(rs)} | {m('rps'):,.0f} | {m('kernel_rps'):,.0f} | {med(r['rps'] / r['kernel_rps'] for r in rs):.2f} "
                  f"| {m('p50_us') / 1000:.2f} | {m('kernel_p50_us') / 1000:.2f} | {m('p99_us') / 1000:.1f} | {m('kernel_p99_us') / 1000:.1f} "
                  f"| {m('p999_us') / 1000:.1f} | {m('kernel_p999_us') / 1000:.1f} | {m('cpu_own_us'):.2f} | {m('kernel_cpu_own_us'):.2f} "
                  f"| {m('setup_s'):.2f} | {m('kernel_setup_s'):.2f} | {med(100 * r['tail_probes'] / r['requests'] for r in rs):.2f} "
                  f"| {med(bad(r) for r in rs):.2f} |")
    print()

for s in dict.fromkeys(r["set"] for r in rows if r["case"] == "rr-10000"):
    r10 = [r for r in rows if r["case"] == "rr-10000" and r["set"] == s]
    print(f"rr-10000 in set `{s}`, every run in slot order:\n")
    print("| slot | variant | req/s | kernel | x/k | p99 ms | krn p99 | setup s | krn setup | probes | spurious | RTOs | bad % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sorted(r10, key=lambda r: r["slot"]):
        print(f"| {r['slot']} | {r['variant']} | {r['rps']:,} | {r['kernel_rps']:,} | {r['rps'] / r['kernel_rps']:.2f} "
              f"| {r['p99_us'] / 1000:.1f} | {r['kernel_p99_us'] / 1000:.1f} | {r['setup_s']:.2f} | {r['kernel_setup_s']:.2f} "
              f"| {r['tail_probes']:,.0f} | {r['spurious_probes'] + r['spurious_retransmits']:,.0f} | {r['rto_retransmits']:,.0f} | {bad(r):.2f} |")
    print()
