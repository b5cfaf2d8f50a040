#!/usr/bin/env python3
"""json_anchor.py [--parser json|orjson] [--runs N] FILE - the anchors of the JSON-mode scan: the
CPU seconds Python's json.loads (a C parser) or orjson.loads (Rust, SIMD) take to parse the JSON
object of every line of FILE (what follows the line's "[time] " prefix), nothing else: reading
the file is left out, so the anchor is the parser alone.  Prints the best of N runs in seconds,
or "n/a: why" when the parser is not installed (orjson: pip install orjson)."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--parser", default="json", choices=["json", "orjson"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("file")
    a = ap.parse_args()
    if a.parser == "orjson":
        try:
            import orjson
        except ImportError:
            print("n/a: orjson is not installed (pip install orjson)")
            return 0
        loads = orjson.loads
    else:
        import json
        loads = json.loads
    with open(a.file, "rb") as fh:
        docs = []
        for line in fh:
            at = line.find(b"{")
            if at >= 0:
                docs.append(line[at:])
    if a.parser == "json":
        docs = [d.decode("utf-8", "surrogateescape") for d in docs]
    best = None
    for _ in range(a.runs):
        t0 = time.process_time()
        for d in docs:
            try:
                loads(d)
            except ValueError:
                pass
        t = time.process_time() - t0
        best = t if best is None else min(best, t)
    print("%.4f" % best)
    return 0


if __name__ == "__main__":
    sys.exit(main())
