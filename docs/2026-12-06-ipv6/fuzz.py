#!/usr/bin/env python3
"""The stack-fuzz --ipv6 table of README.md from fuzz.json."""
import json
import sys

d = json.load(open(sys.argv[1] if len(sys.argv) > 1 else "fuzz.json"))
print("| args | frames | s | max RSS KiB | accepted | echoes | MSS lowered | icmp_stray | icmp_bad_mtu | ext_header | fragment | sockets at end | ok |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for r in d["runs"]:
    p, dr = r["report"], r["report"]["drops"]
    args = r["args"].replace("--ipv6 ", "")
    print(f"| `{args}` | {p['frames']:,} | {r['seconds']:.1f} | {r['max_rss_kib']:,} | {p['accepted']:,} | {p['honest_echoes']:,} "
          f"| {p['path_mtu_lowered']} | {dr['icmp_stray']:,} | {dr['icmp_bad_mtu']:,} | {dr['ext_header']:,} | {dr['fragment']:,} "
          f"| {p['end_live_sockets']} ({p['end_listening']} listening) | {r['ok']} |")
