#!/usr/bin/env python3
"""Where a callgrind profile's instructions go, by source line through inlining.

callgrind names only the innermost source line of each instruction, so in an optimised Rust
build most of the cost lands on lines of core's option.rs, cmp.rs or slice/index.rs, inlined
from anywhere. With `--dump-instr=yes` the profile keeps each instruction's address; this
script asks `addr2line -i` for the whole inline chain of each address and charges the
instruction's self cost to the first DEPTH frames of the chain, outermost first (the
function's own line, then the line inside the first function inlined there, ...).

Usage:
  inline.py CG BIN REQS [--fn REGEX] [--depth N] [--top K]
      per request, grouped by the first N frames (default 1), functions matching REGEX
      (default: every function of BIN)
  inline.py CG BIN REQS --fn REGEX --asm PREFIX
      the instructions whose chain starts with the whole frames PREFIX (e.g.
      "stack/src/xsk/driver.rs:271"), with their
      disassembly and cost per request

CG: a callgrind file made with --dump-instr=yes (docs/2026-12-02-fast-path/profile.sh with
VALGRIND_ARGS=--dump-instr=yes); BIN: the binary it profiled (the same build: addresses);
REQS: the requests in the profile's window. Counts only BIN's own code (libc's memcpy and the
vDSO are left out: breakdown.py has them).
"""
import argparse
import collections
import re
import subprocess


def parse(path, binname, fnpat):
    """Self cost per instruction address of BIN's functions matching fnpat."""
    names, objs = {}, {}

    def name(table, s):
        m = re.match(r"\((\d+)\)(?: (.*))?", s)
        if not m:
            return s
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), "?")

    def pos(p, last):
        if p == "*":
            return last
        if p[0] in "+-":
            return last + int(p[1:], 0) * (1 if p[0] == "+" else -1)
        return int(p, 0)

    cost = collections.Counter()
    obj = fn = None
    in_call = False
    last_addr = last_line = 0
    with open(path) as f:
        for line in f:
            if line.startswith("positions:"):
                if line.split()[1:] != ["instr", "line"]:
                    raise SystemExit(f"{path}: positions are {line.split()[1:]}, not instr and line: "
                                     "profile with callgrind's --dump-instr=yes (and its default --dump-line=yes)")
            elif line.startswith("ob="):
                obj = name(objs, line[3:].strip())
            elif line.startswith("cob="):
                name(objs, line[4:].strip())
            elif line.startswith("fn="):
                fn = name(names, line[3:].strip())
            elif line.startswith("cfn="):
                name(names, line[4:].strip())
            elif line.startswith("calls="):
                in_call = True
            elif line[:1] in "0123456789+-*" and line.strip():
                parts = line.split()
                last_addr = pos(parts[0], last_addr)
                if len(parts) > 1:
                    last_line = pos(parts[1], last_line)
                if in_call:
                    in_call = False  # the call's inclusive cost: not this function's own
                    continue
                if len(parts) >= 3 and obj and obj.endswith(binname) and fn and re.search(fnpat, fn):
                    cost[last_addr] += int(parts[2])
    return cost


def short(path):
    """A source path without the parts that only say where it was built: the repository's
    folder, the toolchain's, cargo's registry. Two files of one name stay apart
    (smoltcp's tcp.rs, the engine's tcp.rs)."""
    for pat in (r".*/rustc/[0-9a-f]+/library/", r".*/registry/src/[^/]+/", r"^/work/main/", r"^.*/main/(?=(stack|xsk-io|apps|vm-tests)/)"):
        path = re.sub(pat, "", path)
    return path


def chains(binpath, addrs):
    """addr -> inline chain, outermost first: (function, 'path:line') per frame."""
    out = subprocess.run(["addr2line", "-a", "-i", "-f", "-C", "-e", binpath] + [hex(a) for a in addrs],
                         capture_output=True, text=True, check=True).stdout.split("\n")
    result, cur, frames, i = {}, None, [], 0
    while i < len(out):
        line = out[i]
        if line.startswith("0x"):
            if cur is not None:
                result[cur] = frames[::-1]
            cur, frames, i = int(line, 16), [], i + 1
            continue
        if not line:
            i += 1
            continue
        loc = short(out[i + 1].split(" ")[0]) if i + 1 < len(out) else "?"
        frames.append((line, loc))
        i += 2
    if cur is not None:
        result[cur] = frames[::-1]
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cg")
    ap.add_argument("bin")
    ap.add_argument("reqs", type=float)
    ap.add_argument("--fn", default=".")
    ap.add_argument("--depth", type=int, default=1)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--asm")
    a = ap.parse_args()
    cost = parse(a.cg, a.bin.split("/")[-1], a.fn)
    ch = chains(a.bin, sorted(cost))
    total = sum(cost.values()) / a.reqs
    if a.asm:
        def starts(chain):
            text = " <- ".join(l for _, l in chain)
            return text == a.asm or text.startswith(a.asm + " <- ")
        sel = {x for x, c in ch.items() if starts(c)}
        shown = 0.0
        for lo in sorted(sel):
            dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "--start-address", hex(lo),
                                  "--stop-address", hex(lo + 16), a.bin], capture_output=True, text=True).stdout
            ins = [l for l in dis.split("\n") if re.match(r"\s*[0-9a-f]+:", l)]
            c = cost[lo] / a.reqs
            shown += c
            print(f"{c:6.1f} {lo:x} {ins[0].split(':', 1)[1].strip()[:48] if ins else '?':48} "
                  f"{' <- '.join(l for _, l in ch[lo])}")
        print(f"{shown:.1f} of {total:.1f} instructions per request")
        return
    groups = collections.Counter()
    func = {}
    for x, c in cost.items():
        frames = ch.get(x) or [("?", "?")]
        key = " <- ".join(l for _, l in frames[:a.depth])
        groups[key] += c
        func.setdefault(key, frames[0][0])
    print(f"{total:.0f} instructions per request in the functions matching {a.fn!r} (self cost, {a.bin})")
    print(f"by the first {a.depth} frame(s) of each instruction's inline chain, outermost first:")
    for key, c in groups.most_common(a.top):
        print(f"{c / a.reqs:7.1f}  {key}   [{func[key][:70]}]")
    rest = sum(c for k, c in groups.items()) - sum(c for _, c in groups.most_common(a.top))
    print(f"{rest / a.reqs:7.1f}  the other {max(0, len(groups) - a.top)} groups")


if __name__ == "__main__":
    main()
