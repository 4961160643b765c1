"""The study's tables from abba-results.jsonl (abba.sh) and profile-results.jsonl (profile.sh)."""
import json, statistics, pathlib

here = pathlib.Path(__file__).parent
rows = [json.loads(l) for l in open(here / "abba-results.jsonl")]
print("User-space instructions per request (scripts/user-instructions, 1,000 req/s, A B B A twice)")
print(f"{'conns':>5}  {'build':<5} {'runs':<28} {'median':>7}  kernel median")
for conns in sorted({r["conns"] for r in rows}):
    for b in ("A", "B"):
        xs = [r["xsk"] for r in rows if r["conns"] == conns and r["build"] == b]
        ks = [r["kernel"] for r in rows if r["conns"] == conns and r["build"] == b]
        print(f"{conns:>5}  {b:<5} {' '.join(map(str, xs)):<28} {statistics.median(xs):>7.0f}  {statistics.median(ks):.0f}")
print()
print("Inclusive instructions per request of the steps (one profile each, one connection)")
prof = [json.loads(l) for l in open(here / "profile-results.jsonl")]
keys = [k for k in prof[0] if k != "build"]
print(f"{'step':<32}" + "".join(f"{p['build']:>12}" for p in prof))
for k in keys:
    print(f"{k:<32}" + "".join(f"{str(p[k]):>12}" for p in prof))
