#!/usr/bin/env python3
# check_scan.py EXPECT.jsonl < scan --json output: every expected request is reported once with
# the expected facts (expectations come from tools/gen_demo_logs.py's Python objects).
# Options: --file-prefix P  (expected "file" is P + basename), --file-map OLD=NEW (expected
# "file" OLD is NEW), --rows N (exact number of rows).
import json
import sys

args = sys.argv[1:]
prefix = None
rows_wanted = None
file_map = {}
while args and args[0].startswith("--"):
    if args[0] == "--file-prefix":
        prefix = args[1]; args = args[2:]
    elif args[0] == "--file-map":
        old, new = args[1].split("=", 1); file_map[old] = new; args = args[2:]
    elif args[0] == "--rows":
        rows_wanted = int(args[1]); args = args[2:]
expect = [json.loads(l) for l in open(args[0], encoding="utf-8")]
rows = [json.loads(l) for l in sys.stdin if l.strip()]
bad = 0
if rows_wanted is not None and len(rows) != rows_wanted:
    print("expected %d rows, got %d" % (rows_wanted, len(rows))); bad += 1
by_rid = {}
for r in rows:
    by_rid.setdefault(r["rid"], []).append(r)
for e in expect:
    got = by_rid.get(e["rid"], [])
    if len(got) != 1:
        print("rid %s reported %d times" % (e["rid"], len(got))); bad += 1; continue
    g = got[0]
    for k, v in e.items():
        if k == "file":
            want = (prefix + v) if prefix is not None else file_map.get(v, v)
            if not (g["file"] == want or g["file"].endswith("/" + want)):
                print("%s: file %r, expected %r" % (e["rid"], g["file"], want)); bad += 1
        elif k in ("verdict", "error_kinds") and "verdict" not in g:
            continue  # scan rows carry no verdict
        elif k == "error_kinds":
            got_kinds = sorted({f["kind"] for f in g["findings"] if f["severity"] == "error"})
            if got_kinds != v:
                print("%s: error kinds %r, expected %r" % (e["rid"], got_kinds, v)); bad += 1
        elif k not in g and "verdict" in g:
            continue  # diff rows carry fewer facts than scan rows
        elif g.get(k) != v:
            print("%s: %s = %r, expected %r" % (e["rid"], k, g.get(k), v)); bad += 1
sys.exit(1 if bad else 0)
