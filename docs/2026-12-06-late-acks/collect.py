"""Appends the xsk rows of scripts/study/abba-rr-demo output folders to results.jsonl, one
JSON line per run and case, with the best kernel TCP run of the same round beside it:
collect.py SET OUT_DIR [NAME=BUILD ...]."""
import json, pathlib, sys

set_name, out = sys.argv[1], pathlib.Path(sys.argv[2])
builds = dict(a.split("=", 1) for a in sys.argv[3:])
with open(pathlib.Path(__file__).parent / "results.jsonl", "a") as f:
    for run in sorted(p for p in out.iterdir() if p.is_dir()):
        d = json.load(open(run / "results.json"))
        variant, slot = run.name.rsplit("-", 1)
        for case in dict.fromkeys(r["case"] for r in d["runs"]):
            for rnd in sorted({r["round"] for r in d["runs"] if r["case"] == case}):
                runs = [r for r in d["runs"] if r["round"] == rnd and r["case"] == case]
                x = next(r for r in runs if r["backend"] == "xsk")
                k = max((r for r in runs if r["backend"] != "xsk"), key=lambda r: r["rps"])
                f.write(json.dumps({
                    "set": set_name, "variant": variant, "build": builds.get(variant, ""), "slot": int(slot),
                    "case": case, "round": rnd, "kernel": k["backend"],
                    "rps": round(x["rps"]), "kernel_rps": round(k["rps"]),
                    "p50_us": round(x["p50_us"]), "p99_us": round(x["p99_us"]), "p999_us": round(x["p999_us"]),
                    "kernel_p50_us": round(k["p50_us"]),
                    "kernel_p99_us": round(k["p99_us"]), "kernel_p999_us": round(k["p999_us"]),
                    "cpu_own_us": round(x.get("cpu_us_per_req_own_rx") or 0, 2),
                    "kernel_cpu_own_us": round(k.get("cpu_us_per_req_own_rx") or 0, 2),
                    "setup_s": x["setup_s"], "kernel_setup_s": k["setup_s"],
                    "requests": x["server_requests"],
                    "rto_retransmits": x["server_rto_retransmits"],
                    "tail_probes": x["server_tail_probes"],
                    "spurious_probes": x["server_spurious_probes"],
                    "spurious_retransmits": x["server_spurious_retransmits"],
                    "kernel_retrans": k.get("server_retrans"),
                }, separators=(",", ":")) + "\n")
