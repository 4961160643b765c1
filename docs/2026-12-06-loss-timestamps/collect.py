"""Appends the xsk rows of scripts/study/abba-rr-demo output folders to results.jsonl, one
JSON line per run and round, with the round's best kernel configuration beside them:
collect.py SET OUT_DIR [NAME=BUILD ...]."""
import json, pathlib, sys

set_name, out = sys.argv[1], pathlib.Path(sys.argv[2])
builds = dict(a.split("=", 1) for a in sys.argv[3:])
with open(pathlib.Path(__file__).parent / "results.jsonl", "a") as f:
    for run in sorted(p for p in out.iterdir() if p.is_dir()):
        d = json.load(open(run / "results.json"))
        variant, slot = run.name.rsplit("-", 1)
        for rnd in sorted({r["round"] for r in d["runs"]}):
            runs = [r for r in d["runs"] if r["round"] == rnd]
            x = next(r for r in runs if r["backend"] == "xsk")
            # The best kernel configuration of the round (the highest rate), as rr-demo's krn.
            k = max((r for r in runs if r["backend"] != "xsk"), key=lambda r: r["rps"])
            f.write(json.dumps({
              "round": rnd, "kernel": k["backend"],
              "set": set_name, "variant": variant, "build": builds.get(variant, ""), "slot": int(slot),
              "case": x["case"], "rps": round(x["rps"]), "kernel_rps": round(k["rps"]),
              "p99_us": round(x["p99_us"]), "p999_us": round(x["p999_us"]),
              "kernel_p99_us": round(k["p99_us"]), "kernel_p999_us": round(k["p999_us"]),
              "cpu_own_us": round(x.get("cpu_us_per_req_own_rx") or 0, 1),
              "kernel_cpu_own_us": round(k.get("cpu_us_per_req_own_rx") or 0, 1),
              "setup_s": round(x["setup_s"], 2), "kernel_setup_s": round(k["setup_s"], 2),
              "requests": x["server_requests"], "tail_probes": x["server_tail_probes"],
              "spurious_probes": x["server_spurious_probes"],
              "spurious_retransmits": x["server_spurious_retransmits"],
              "rto_retransmits": x["server_rto_retransmits"],
            }) + "\n")
