"""The study's tables from results.jsonl (abba.sh's rr-demo runs, sim.sh's loss_sim runs)."""
import json, pathlib, statistics

here = pathlib.Path(__file__).parent
rows = [json.loads(l) for l in open(here / "results.jsonl")]

print("loss_sim (loss1-same-16 in memory): requests per virtual second, default / timestamps")
print(f"{'build':<9} {'jitter':>6} {'seed':>4} {'default':>9} {'timestamps':>10} {'ts max us':>10}")
for r in (r for r in rows if r["set"] == "loss_sim" and r["variant"] == "default"):
    t = next(x for x in rows if x["set"] == "loss_sim" and x["variant"] == "timestamps"
             and (x["build"], x["jitter"], x["seed"]) == (r["build"], r["jitter"], r["seed"]))
    print(f"{r['build']:<9} {r['jitter']:>6} {r['seed']:>4} {r['rps']:>9} {t['rps']:>10} {t['max_us']:>10}")
print()

for s, title in [("probe-rto", "loss1-same-16 with --timestamps, A = 5344ca6, B = a5fdab4 (probe-rto)"),
                 ("before-eifel", "loss1-same-16 at a5fdab4, P = default recovery, T = --timestamps"),
                 ("after", "loss1-same-16 at c6cb2f3, P = default recovery, T = --timestamps")]:
    sel = [r for r in rows if r["set"] == s]
    print(title)
    for v in dict.fromkeys(r["variant"] for r in sel):
        runs = [r for r in sel if r["variant"] == v]
        print(f"  {v}: req/s {' '.join(str(r['rps']) for r in runs)} (median {statistics.median(r['rps'] for r in runs):.0f}); "
              f"p99.9 us {' '.join(str(r['p999_us']) for r in runs)}")
    print()

print("rr-10000, one run each (A = 5344ca6, B = c6cb2f3; d = default recovery, t = --timestamps)")
print(f"{'run':<6} {'req/s':>7} {'kernel':>7} {'p99 ms':>7} {'probes':>7} {'spurious':>8} {'RTOs':>6} {'bad %':>6}")
for r in (r for r in rows if r["set"] == "rr-10000"):
    bad = r["spurious_probes"] + r["spurious_retransmits"] + r["rto_retransmits"]
    print(f"{r['variant']}-{r['slot']:<3} {r['rps']:>7} {r['kernel_rps']:>7} {r['p99_us'] / 1000:>7.0f} {r['tail_probes']:>7.0f} "
          f"{r['spurious_probes'] + r['spurious_retransmits']:>8.0f} {r['rto_retransmits']:>6.0f} {100 * bad / r['requests']:>6.2f}")

print()
print("loss1-16 (kernel client, default recovery), one run each: P = a5fdab4, C = c6cb2f3 (live sharing), F = f3ed7c3 (reverted)")
for r in (r for r in rows if r["set"] == "loss1-16"):
    print(f"  {r['variant']}-{r['slot']}: {r['rps']} req/s, p99 {r['p99_us'] / 1000:.1f} ms")

print()
print("loss1-64k-16 (64 KiB answers, 1% loss each way at a kernel client), three invocations of 74d6f9d")
for r in (r for r in rows if r["set"] == "loss1-64k-16"):
    print(f"  run {r['slot']}: req/s {r['rps']} (kernel {r['kernel_rps']}); p99 {r['p99_us'] / 1000:.0f} ms ({r['kernel_p99_us'] / 1000:.0f}), "
          f"p99.9 {r['p999_us'] / 1000:.0f} ms ({r['kernel_p999_us'] / 1000:.0f}); CPU own {r['cpu_own_us']} us/req ({r['kernel_cpu_own_us']}); "
          f"probes {r['tail_probes']:.0f}, RTOs {r['rto_retransmits']:.0f} of {r['requests']} answers")

print()
print("loss1-64k-16, one invocation of 68d4de7, 3 rounds against epoll and io_uring (kernel = the round's best)")
for r in (r for r in rows if r["set"] == "loss1-64k-16-rounds"):
    print(f"  round {r['round']}: req/s {r['rps']} ({r['kernel']} {r['kernel_rps']}); p99.9 {r['p999_us'] / 1000:.0f} ms "
          f"({r['kernel_p999_us'] / 1000:.0f}); CPU own {r['cpu_own_us']} us/req ({r['kernel_cpu_own_us']})")
