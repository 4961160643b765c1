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


if __name__ == "__main__":
    loss_table()
    light_table()
    streak_table()
