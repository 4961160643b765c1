#!/usr/bin/env python3
"""Import circles between the source files of each crate source directory given: file A names an item of
file B (`use crate::b::..`, `super::b::..`, `crate::b::x` in code) and B names
one of A, directly or through others. A module naming its own submodule's
items, or a submodule its parent's (`super::Engine`), is how Rust splits one
type's impl over files and is not counted. Test code (tests.rs, *_tests.rs, an
inline test module) is not counted either.

The same at folder level: the crate's top-level modules (a file and the folder of
its submodules count as one), where an edge is any file of one naming any of the
other, so that two parts of a crate do not lean on each other through different
files."""
import os, re, sys

def modpath(root, f):
    rel = os.path.relpath(f, root)[:-3].split(os.sep)
    if rel[-1] in ('mod', 'lib', 'main'):
        rel = rel[:-1]
    return tuple(rel)

def files(root):
    for d, _, fs in os.walk(root):
        # A binary with modules (src/bin/NAME/main.rs) is a crate of its own: given as a root
        # itself, not counted as part of the library's.
        if 'bin' in os.path.relpath(d, root).split(os.sep) or 'tests' == os.path.basename(d):
            continue
        for f in fs:
            # Test files lean on the crate's test kit, and it on what it tests: not counted.
            if f.endswith('.rs') and f != 'tests.rs' and not f.endswith('_tests.rs'):
                yield os.path.join(d, f)

def resolve(mod, path, mods):
    # path: list of segments after use; returns the longest known module prefix
    segs = list(path)
    if not segs:
        return None
    if segs[0] == 'crate':
        base = []
        segs = segs[1:]
    elif segs[0] == 'super':
        base = list(mod)
        while segs and segs[0] == 'super':
            base = base[:-1]
            segs = segs[1:]
    elif segs[0] == 'self':
        base = list(mod)
        segs = segs[1:]
    else:
        return None
    best = None
    cur = list(base)
    for s in segs:
        cur = cur + [s]
        if tuple(cur) in mods:
            best = tuple(cur)
        else:
            break
    return best if best is not None else (tuple(base) if tuple(base) in mods else None)

def main(root):
    mods = {}
    for f in files(root):
        mods[modpath(root, f)] = f
    edges = {m: set() for m in mods}
    for m, f in mods.items():
        text = open(f).read()
        # drop test modules: only the library's files count
        text = re.split(r'#\[cfg\((?:test|all\(test[^\]]*)\)\]\s*mod \w+\s*\{', text)[0]
        # comments and docs name items without importing them
        text = re.sub(r'//[^\n]*', '', text)
        for mt in re.finditer(r'\b((?:crate|super|self)(?:::\w+)+)', text):
            segs = mt.group(1).split('::')
            t = resolve(m, segs, mods)
            if t is None or t == m:
                continue
            # parent <-> child: not counted
            if t[:len(m)] == m or m[:len(t)] == t:
                continue
            edges[m].add(t)
        # `use crate::a::{b, c::d}` groups
        for mt in re.finditer(r'use\s+((?:crate|super|self)(?:::\w+)*)::\{([^;]*)\};', text, re.S):
            base = mt.group(1).split('::')
            for item in re.split(r',', mt.group(2)):
                item = item.strip().split(' as ')[0]
                if not item or item.startswith('{'):
                    continue
                segs = base + [s for s in item.split('::') if s and s != '{']
                segs = [re.sub(r'[^\w]', '', s) for s in segs]
                t = resolve(m, segs, mods)
                if t is None or t == m or t[:len(m)] == m or m[:len(t)] == t:
                    continue
                edges[m].add(t)
    rc = report(root, mods, edges, lambda x: os.path.relpath(mods[x], root), "circle")
    # Folder level: every module stands for its top-level module.
    tops = {m[:1] for m in mods if m}
    top_edges = {t: set() for t in tops}
    for m, ts in edges.items():
        for t in ts:
            if m and t and m[:1] != t[:1]:
                top_edges[m[:1]].add(t[:1])
    top_name = lambda t: t[0] + "/"
    rc |= report(root, {t: None for t in tops}, top_edges, top_name, "folder circle")
    return rc

def report(root, mods, edges, name, what):
    # cycles: strongly connected components of size > 1
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)
    def sc(v):
        index[v] = low[v] = counter[0]; counter[0] += 1
        stack.append(v); on.add(v)
        for w in edges[v]:
            if w not in index:
                sc(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop(); on.discard(w); c.append(w)
                if w == v: break
            if len(c) > 1:
                comps.append(c)
    for v in edges:
        if v not in index:
            sc(v)
    for c in comps:
        names = sorted(name(x) for x in c)
        print(f"{root}: {what}: " + ' <-> '.join(names))
        for x in sorted(c):
            print('   ', name(x), '->', ', '.join(sorted(name(y) for y in edges[x] if y in c)))
    return 1 if comps else 0

if __name__ == '__main__':
    rc = 0
    for r in sys.argv[1:]:
        rc |= main(r)
    sys.exit(rc)
