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

sets = dict.fromkeys(r["set"] for r in rows if r["set"] not in ("loss_sim", "g2g"))
for s in sets:
    sel = [r for r in rows if r["set"] == s]
    print(f"rr-demo, set {s}: medians over the runs (the variants: see the README)")
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

g2g = [r for r in rows if r["set"] == "g2g"]
if g2g:
    print("vm-tests g2g, netem delay 1ms reorder 5% 50% loss 1% both ways in the client guest (TCG):")
    print("segments each server sent again per 100 requests (the stack counts events: an RTO that resends")
    print("a whole flight is one), and the packets netem dropped in that server's run")
    print(f"{'size':>5} {'slot':>4} {'var':<4} | {'xsk req/s':>9} {'p99 ms':>7} {'resent':>7} {'drops':>5} | {'krn req/s':>9} {'p99 ms':>7} {'resent':>7} {'drops':>5}")
    for x in sorted((r for r in g2g if r["server"] == "xsk"), key=lambda r: (r["size"], r["slot"])):
        k = next(r for r in g2g if r["server"] == "kernel" and (r["size"], r["slot"]) == (x["size"], x["slot"]))
        per = lambda r: 100 * r["resent"] / r["requests"]
        print(f"{x['size']:>5} {x['slot']:>4} {x['variant']:<4} | {x['rps']:>9.0f} {x['p99_us'] / 1000:>7.1f} {per(x):>7.2f} {x['dropped']:>5} | "
              f"{k['rps']:>9.0f} {k['p99_us'] / 1000:>7.1f} {per(k):>7.2f} {k['dropped']:>5}")
