#!/usr/bin/env python3
"""Tables and results.json of the neighbour-cache study from runs/ (see README.md).

runs/cg/instructions.txt: "build peers cycle instructions_per_request" lines (cg-peers.sh).
runs/peers/*.json: rr-bench results, named BUILD-pPEERS-cCYCLE.json (peers.sh).
Build a = before (69dfdee), b = after (the neighbor-cache patch).
"""
import glob, json, os, re, statistics

here = os.path.dirname(os.path.abspath(__file__))
out = {"builds": {"a": "69dfdee (smoltcp's 64-entry linear map, taught by synthetic ARP)",
                  "b": "neighbor-cache patch (1,024 hashed entries, filled directly)"}}

cg = {}
for line in open(os.path.join(here, "runs/cg/instructions.txt")):
    b, p, c, ir = line.split()
    cg.setdefault(int(p), {}).setdefault(b, []).append(int(ir))
out["instructions_per_request"] = {str(p): v for p, v in sorted(cg.items())}
print("User-space instructions per request of rr-server (callgrind, open loop 1,000 req/s,")
print("one connection per peer; each run's figure, cycles alternating A B / B A)")
print(f"{'peers':>6} {'before':>16} {'after':>16} {'after/before':>13}")
for p, v in sorted(cg.items()):
    a, b = v.get("a", []), v.get("b", [])
    r = statistics.median(b) / statistics.median(a) if a and b else float("nan")
    print(f"{p:>6} {', '.join(map(str, a)):>16} {', '.join(map(str, b)):>16} {r:>13.2f}")

runs = {}
for f in sorted(glob.glob(os.path.join(here, "runs/peers/*.json"))):
    m = re.match(r"([ab])-p(\d+)-c(\d+)\.json", os.path.basename(f))
    d = json.load(open(f))
    row = {k: d[k] for k in ("rps", "p50_us", "p99_us", "p999_us", "max_us", "cpu_us_per_req_server", "errors", "lost")}
    runs.setdefault(int(m.group(2)), {}).setdefault(m.group(1), []).append(row)
out["closed_loop"] = {str(p): v for p, v in sorted(runs.items())}
print()
print("Closed loop, one connection per peer, depth 1 (rr-bench, 4 s per run, A B B A A B):")
print("medians over the runs of each build; max is the largest of them")
print(f"{'peers':>6} {'build':>6} {'req/s':>8} {'p50 us':>8} {'p99 us':>8} {'p99.9 us':>9} {'max us':>8} {'server us/req':>14}")
for p, v in sorted(runs.items()):
    for b in ("a", "b"):
        rs = v.get(b, [])
        if not rs:
            continue
        med = lambda k: statistics.median(r[k] for r in rs)
        print(f"{p:>6} {('before' if b == 'a' else 'after'):>6} {med('rps'):>8.0f} {med('p50_us'):>8.0f} {med('p99_us'):>8.0f}"
              f" {med('p999_us'):>9.0f} {max(r['max_us'] for r in rs):>8.0f} {med('cpu_us_per_req_server'):>14.2f}")

churn = {}
for f in sorted(glob.glob(os.path.join(here, "runs/churn-cg/*.out"))):
    m = re.search(r"per connection: (\d+)", open(f).read())
    churn.setdefault(os.path.basename(f)[0], []).append(int(m.group(1)))
out["churn_instructions_per_connection"] = churn
print()
print("churn (connect, one request, close; 4 at a time), user instructions per connection:")
for b in ("a", "b"):
    print(f"  {'before' if b == 'a' else 'after':6} {', '.join(map(str, churn.get(b, [])))}")

import subprocess
tool = os.path.join(here, "..", "..", "scripts", "abba-table")
for folder, title in [("abba", "rr-demo, A = before, B = after (the neighbor-cache commit), A B B A per cycle, 2 cycles"),
                      ("abba-churn", "churn-16 again, 3 cycles")]:
    d = os.path.join(here, "runs", folder)
    if not os.path.isdir(d):
        continue
    js = os.path.join(here, "runs", folder + ".json")
    text = subprocess.run([tool, d, "--json", js], capture_output=True, text=True, check=True).stdout
    out["rr_demo_" + folder] = json.load(open(js))
    os.remove(js)
    print()
    print(title)
    print("(xsk rows; `kernel rps` is kernel TCP's row of the same invocations, which neither build touches)")
    print(text, end="")
json.dump(out, open(os.path.join(here, "results.json"), "w"), indent=1)
