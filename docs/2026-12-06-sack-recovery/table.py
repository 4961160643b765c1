"""The study's tables from results.jsonl (sim.sh's loss_sim runs, abba.sh's rr-demo runs)."""
import json, pathlib, statistics

here = pathlib.Path(__file__).parent
rows = [json.loads(l) for l in open(here / "results.jsonl")]
med = statistics.median

print("loss_sim (in memory, virtual clock, 16 connections, 1% loss each way, 2 s): requests per")
print("virtual second and the server's RTOs, SACK recovery off / on")
print(f"{'answer':>6} {'jitter':>6} {'seed':>4} | {'no-sack':>8} {'default':>8} {'RTOs':>9} | {'ts-no-sack':>10} {'timestamps':>10} {'RTOs':>9}")
sim = [r for r in rows if r["set"] == "loss_sim"]
for r in (r for r in sim if r["variant"] == "no-sack"):
    key = (r["response"], r["jitter"], r["seed"])
    v = {x["variant"]: x for x in sim if (x["response"], x["jitter"], x["seed"]) == key}
    print(f"{r['response']:>6} {r['jitter']:>6} {r['seed']:>4} | {v['no-sack']['rps']:>8} {v['default']['rps']:>8} "
          f"{v['no-sack']['server_rto']:>4}>{v['default']['server_rto']:<4} | {v['ts-no-sack']['rps']:>10} "
          f"{v['timestamps']['rps']:>10} {v['ts-no-sack']['server_rto']:>4}>{v['timestamps']['server_rto']:<4}")
print()

sets = dict.fromkeys(r["set"] for r in rows if r["set"] != "loss_sim")
for s in sets:
    sel = [r for r in rows if r["set"] == s]
    print(f"rr-demo, set {s}: medians over the runs (base = before, off = --no-sack-recovery, on = default)")
    print(f"{'case':<14} {'var':<4} {'runs':>4} {'req/s':>7} {'kernel':>7} {'x/k':>5} {'p99 ms':>7} {'p99.9 ms':>8} "
          f"{'krn p99.9':>9} {'own CPU':>7} {'machine':>7} {'RTO %':>6} {'holes %':>7} {'spur.':>6}")
    for case in dict.fromkeys(r["case"] for r in sel):
        for v in dict.fromkeys(r["variant"] for r in sel):
            rs = [r for r in sel if r["case"] == case and r["variant"] == v]
            if not rs:
                continue
            m = lambda k: med(r[k] for r in rs)
            per = lambda k: 100 * med((r[k] or 0) / r["requests"] for r in rs)
            print(f"{case:<14} {v:<4} {len(rs):>4} {m('rps'):>7.0f} {m('kernel_rps'):>7.0f} {m('rps') / m('kernel_rps'):>5.2f} "
                  f"{m('p99_us') / 1000:>7.1f} {m('p999_us') / 1000:>8.1f} {m('kernel_p999_us') / 1000:>9.1f} "
                  f"{m('cpu_own_us'):>7.1f} {m('cpu_machine_us'):>7.1f} {per('rto_retransmits'):>6.2f} "
                  f"{per('hole_retransmits'):>7.2f} {m('spurious_retransmits'):>6.0f}")
    print()
