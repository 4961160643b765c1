#!/usr/bin/env python3
"""Prints this study's tables from the results.json files beside it (no hand-copied figures).

  python3 docs/2026-12-02-loss-recovery/summarize.py
"""
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name):
    with open(os.path.join(HERE, name, "results.json")) as f:
        return json.load(f)


def med(runs, case, backend, key):
    v = [r[key] for r in runs if r["case"] == case and r["backend"] == backend and r.get(key) is not None]
    return statistics.median(v) if v else float("nan")


def loss_table():
    new, old = load("fnew"), load("fold")
    print("Loss cases: this build (fnew, 3 rounds) and the same build with --xsk-args '--recovery smoltcp' (fold, 2 rounds)")
    print(f"{'case':<14} {'run':<5} {'xsk req/s':>10} {'krn req/s':>10} {'xsk p99 ms':>11} {'krn p99 ms':>11} "
          f"{'xsk p99.9 ms':>13} {'krn p99.9 ms':>13} {'probes':>7} {'spur.':>6} {'RTOs':>5}")
    for case in ("loss1-16", "loss1-same-16", "lossburst-16"):
        for tag, d in (("new", new), ("old", old)):
            r = d["runs"]
            print(f"{case:<14} {tag:<5} {med(r, case, 'xsk', 'rps'):>10.0f} {med(r, case, 'kernel', 'rps'):>10.0f} "
                  f"{med(r, case, 'xsk', 'p99_us') / 1e3:>11.1f} {med(r, case, 'kernel', 'p99_us') / 1e3:>11.1f} "
                  f"{med(r, case, 'xsk', 'p999_us') / 1e3:>13.1f} {med(r, case, 'kernel', 'p999_us') / 1e3:>13.1f} "
                  f"{med(r, case, 'xsk', 'server_tail_probes'):>7.0f} {med(r, case, 'xsk', 'server_spurious_probes'):>6.0f} "
                  f"{med(r, case, 'xsk', 'server_rto_retransmits'):>5.0f}")
    r = new["runs"]
    print("\nNo loss (fnew): server probes / spurious probes / RTOs, median per run")
    for case in ("rr-16", "rr-256"):
        print(f"  {case:<8} {med(r, case, 'xsk', 'server_tail_probes'):.0f} / "
              f"{med(r, case, 'xsk', 'server_spurious_probes'):.0f} / {med(r, case, 'xsk', 'server_rto_retransmits'):.0f}")


def light_table():
    print("\nLight load, alternating new / old (--recovery smoltcp) runs: lnew1, lold1, lnew2, lold2")
    print(f"{'case':<10} {'run':<6} {'xsk us/req':>10} {'krn us/req':>10} {'xsk/krn per round (median)':>28} "
          f"{'probes':>7} {'spur.':>6}")
    for case in ("rr-1", "open-5k", "idle-100"):
        for name in ("lnew1", "lold1", "lnew2", "lold2"):
            d = load(name)
            r = d["runs"]
            pc = next((p["median"] for p in d["paired_cpu"] if p["case"] == case), float("nan"))
            print(f"{case:<10} {name:<6} {med(r, case, 'xsk', 'cpu_us_per_req'):>10.2f} "
                  f"{med(r, case, 'kernel', 'cpu_us_per_req'):>10.2f} {pc:>28.2f} "
                  f"{med(r, case, 'xsk', 'server_tail_probes'):>7.0f} {med(r, case, 'xsk', 'server_spurious_probes'):>6.0f}")


def streak_table():
    d = load("streak")
    r = d["runs"]
    print("\nAfter the streak rule (streak, 2 rounds; the final build)")
    for case in ("loss1-16", "loss1-same-16", "idle-100"):
        print(f"  {case:<14} xsk {med(r, case, 'xsk', 'rps'):>8.0f} req/s p99 {med(r, case, 'xsk', 'p99_us') / 1e3:7.1f} ms"
              f" p99.9 {med(r, case, 'xsk', 'p999_us') / 1e3:7.1f} ms | kernel {med(r, case, 'kernel', 'rps'):>6.0f} req/s"
              f" p99 {med(r, case, 'kernel', 'p99_us') / 1e3:7.1f} ms p99.9 {med(r, case, 'kernel', 'p999_us') / 1e3:7.1f} ms"
              f" | probes {med(r, case, 'xsk', 'server_tail_probes'):.0f} (spurious {med(r, case, 'xsk', 'server_spurious_probes'):.0f})")


def light_table_2():
    print("\nLight load, second set: alternating new / old three times (l2new1, l2old1, ... l2old3),"
          " while other builds ran on the machine")
    print(f"{'case':<10} {'run':<7} {'xsk us/req':>10} {'krn us/req':>10} {'xsk/krn per round: median (range)':>34}"
          f" {'probes':>7}")
    for case in ("open-5k", "idle-100"):
        for i in (1, 2, 3):
            for tag in ("new", "old"):
                name = f"l2{tag}{i}"
                d = load(name)
                r = d["runs"]
                p = next((p for p in d["paired_cpu"] if p["case"] == case), None)
                pc = f"{p['median']:.2f} ({p['min']:.2f}-{p['max']:.2f})" if p else "-"
                print(f"{case:<10} {name:<7} {med(r, case, 'xsk', 'cpu_us_per_req'):>10.2f} "
                      f"{med(r, case, 'kernel', 'cpu_us_per_req'):>10.2f} {pc:>34} "
                      f"{med(r, case, 'xsk', 'server_tail_probes'):>7.0f}")


def g2g_table():
    print("\nvm-tests g2g, netem 'delay 1ms reorder 5% 50% loss 1%' in the client guest (egress and ingress),"
          " 10,000 checked requests per server, TCG; new / old alternating")
    print(f"{'run':<5} {'server':<7} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>8} {'p99.9 ms':>9} {'netem drops (eth0, ifb0)':>26}")
    for name in ("new1", "old1", "new2", "old2"):
        with open(os.path.join(HERE, "g2g", name + ".json")) as f:
            g = json.load(f)["g2g"]
        for n in g["netem"]:
            l = n["load"]
            drops = ", ".join(str(q["dropped"]) for q in n["qdiscs"])
            print(f"{name:<5} {n['backend']:<7} {l['rps']:>7.0f} {l['p50_us'] / 1e3:>7.2f} {l['p99_us'] / 1e3:>8.1f} "
                  f"{l['p999_us'] / 1e3:>9.1f} {drops:>26}")


def syscall_table():
    # bpftrace (syscalls.bt) over a whole one-round rr-demo run of the case; the xsk rr-server is
    # the process that made the bpf() calls (it sets up its XDP maps), syscall numbers are x86_64.
    import re
    print("\nSyscalls and wake-ups of the xsk rr-server over a one-round rr-demo run (bpftrace, syscalls.bt)")
    print(f"{'file':<20} {'case':<9} {'recovery':<8} {'poll':>6} {'sendto':>7} {'recvfrom':>9} {'wake-ups':>9}")
    for name, case, rec in (("syscalls-new.txt", "open-5k", "new"), ("syscalls-old.txt", "open-5k", "old"),
                            ("syscalls-inew.txt", "idle-100", "new"), ("syscalls-iold.txt", "idle-100", "old")):
        sys, wake = {}, {}
        with open(os.path.join(HERE, name)) as f:
            for line in f:
                m = re.match(r"@sys\[(\d+), (\d+)\]: (\d+)", line)
                if m:
                    sys[(int(m[1]), int(m[2]))] = int(m[3])
                m = re.match(r"@wake\[(\d+)\]: (\d+)", line)
                if m:
                    wake[int(m[1])] = int(m[2])
        pid = max((p for p, n in sys if n == 321), key=lambda p: sys[(p, 321)])
        g = lambda n: sys.get((pid, n), 0)
        print(f"{name:<20} {case:<9} {rec:<8} {g(7):>6} {g(44):>7} {g(45):>9} {wake.get(pid, 0):>9}")


def idle_ab():
    print("\nrr-bench --lab xsk at 100 req/s over 16 connections, 20 s per run, new / old alternating five times"
          " (idle-ab/run.sh): the server's CPU per request from its threads' schedstat run time")
    v = {"new": [], "old": []}
    for i in range(1, 6):
        for tag in ("new", "old"):
            with open(os.path.join(HERE, "idle-ab", f"ab-{tag}{i}.json")) as f:
                v[tag].append(json.load(f)["cpu_us_per_req_server"])
    for tag in ("new", "old"):
        print(f"  {tag}: " + ", ".join(f"{x:.1f}" for x in v[tag]) + f" us; median {statistics.median(v[tag]):.1f}")


def ui_100():
    print("\ncallgrind, user-space instructions per request at 100 req/s over 16 connections (8 s)")
    for name in ("new1", "old1", "new2", "old2"):
        with open(os.path.join(HERE, f"user-instructions-100-{name}.txt")) as f:
            xsk = next(l.split()[1] for l in f if l.startswith("xsk "))
        print(f"  {name}: xsk {xsk}")


def rr10000():
    print("\nrr-10000 (10,000 connections at once, kernel client, no loss), one round each unless said,"
          " while other sessions built on the machine; --xsk-args as named (rr10000/*/results.json)")
    print(f"{'run':<14} {'xsk req/s':>9} {'krn req/s':>9} {'probes':>7} {'RTOs':>6} {'spurious':>9} {'drops':>6}  note")
    for name, note in (("smoltcp", "--recovery smoltcp (upstream: 1 s floor, no probe)"),
                       ("def", "defaults, commit 8f3bc82"),
                       ("rto200", "--rto-min 200ms"),
                       ("notlp", "--no-tail-probe (RTO floor 50 ms alone)"),
                       ("spurious-rtt", "defaults with the spurious-rtt patch, 2 rounds")):
        d = load(os.path.join("rr10000", name))
        r = d["runs"]
        xs = [q for q in r if q["case"] == "rr-10000" and q["backend"] == "xsk"]
        spur = [(q.get("server_spurious_probes") or 0) + (q.get("server_spurious_retransmits") or 0) for q in xs]
        if not xs:
            print(f"{name:<14} {'failed':>9} {med(r, 'rr-10000', 'kernel', 'rps'):>9.0f}  (the xsk run failed: see rr-demo.log)  {note}")
            continue
        print(f"{name:<14} {med(r, 'rr-10000', 'xsk', 'rps'):>9.0f} {med(r, 'rr-10000', 'kernel', 'rps'):>9.0f} "
              f"{med(r, 'rr-10000', 'xsk', 'server_tail_probes'):>7.0f} {med(r, 'rr-10000', 'xsk', 'server_rto_retransmits'):>6.0f} "
              f"{statistics.median(spur):>9.0f} {med(r, 'rr-10000', 'xsk', 'server_drops'):>6.0f}  {note}")


if __name__ == "__main__":
    loss_table()
    light_table()
    streak_table()
    light_table_2()
    syscall_table()
    idle_ab()
    ui_100()
    g2g_table()
    rr10000()
