#!/usr/bin/env python3
"""check-cycles.py - call cycles between the library's .c files, read from
the objects' symbols, against an allowed list.

Usage: tools/check-cycles.py BUILD_DIR [--allow FILE] [--list | --explain]

Each object of the layer libraries (BUILD_DIR/CMakeFiles/ld_*.dir/**.o) gives
the global symbols it defines and the ones it needs (nm).  A needed symbol
that another object defines is an edge between the two source files; a
strongly connected component of more than one file is a circle of calls.
Each circle is named by its files, sorted and joined with " <-> ".  The
allowed circles (tools/cycles-allowed.txt: one per line, # comments) are
those that are natural, as an interpreter's evaluator and its filters
calling each other; any other fails the check (exit 1), so a new circle is
either broken or argued for in that file.  --list prints every circle and
exits 0; --explain adds each edge's symbols.
"""
import glob
import os
import subprocess
import sys


def symbols(obj):
    """(defined, undefined) global symbol sets of one object file."""
    out = subprocess.run(["nm", "--format=posix", obj], capture_output=True,
                         text=True, check=True).stdout
    defined, needed = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind == "U":
            needed.add(name)
        elif kind in "TDBRVWC" and kind.isupper():
            defined.add(name)
    return defined, needed


def source_of(obj, build):
    """build/CMakeFiles/ld_replay.dir/replay/x/y.c.o -> replay/x/y.c"""
    rel = os.path.relpath(obj, os.path.join(build, "CMakeFiles"))
    rel = rel.split(os.sep, 1)[1]  # drop the target's folder
    return rel[:-2] if rel.endswith(".o") else rel


def call_graph(build):
    objs = sorted(glob.glob(os.path.join(build, "CMakeFiles", "ld_*.dir", "**", "*.o"),
                            recursive=True))
    # the layer libraries only: not the mock's or the emulator's second builds
    objs = [o for o in objs if os.sep + "ld_cuda_" not in o]
    owner, needs = {}, {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for obj in objs:
        src = source_of(obj, build)
        if not os.path.exists(os.path.join(root, src)):
            continue  # a stale object of a file since moved or removed
        defined, needed = symbols(obj)
        for sym in defined:
            owner.setdefault(sym, src)
        needs[src] = needed
    graph = {src: {} for src in needs}
    for src, needed in needs.items():
        for sym in needed:
            dst = owner.get(sym)
            if dst and dst != src:
                graph[src].setdefault(dst, []).append(sym)
    return graph


def components(graph):
    """Tarjan's strongly connected components, iteratively (no recursion
    limit), the ones of more than one node."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]; counter[0] += 1
                    stack.append(nxt); on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    n = stack.pop(); on_stack.discard(n); comp.append(n)
                    if n == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out)


def read_allowed(path):
    allowed = set()
    if not path or not os.path.exists(path):
        return allowed
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                allowed.add(" <-> ".join(sorted(p.strip() for p in line.split("<->"))))
    return allowed


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    build = argv[1]
    allow = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cycles-allowed.txt")
    if "--allow" in argv:
        allow = argv[argv.index("--allow") + 1]
    graph = call_graph(build)
    if not graph:
        print(f"check-cycles: no objects under {build}/CMakeFiles/ld_*.dir (build first)")
        return 2
    cycles = [" <-> ".join(c) for c in components(graph)]
    if "--list" in argv or "--explain" in argv:
        for comp in components(graph):
            print(" <-> ".join(comp))
            if "--explain" in argv:
                for a in comp:
                    for b in comp:
                        if b in graph[a]:
                            print(f"    {a} -> {b}: {', '.join(sorted(graph[a][b])[:6])}")
        return 0
    allowed = read_allowed(allow)
    new = [c for c in cycles if c not in allowed]
    gone = sorted(allowed - set(cycles))
    for c in new:
        print(f"check-cycles: a circle of calls between files: {c}")
    for c in gone:
        print(f"check-cycles: note: the allowed circle {c} is gone; drop it from {allow}")
    print(f"{len(graph)} files, {len(cycles)} circles, {len(new)} not allowed")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
