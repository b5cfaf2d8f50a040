#!/usr/bin/env python3
"""check_sglang_logger.py EXPECT.json NAME DIFF.jsonl [--tokenizer] - `logdiff diff --json` of one
log written by SGLang's own request logger (tools/gen_sglang_logger_fixtures.py) against what each
request was built to get: its verdict and its error finding kinds (--tokenizer: the run had
`--tokenizer`, and a request's "tokenizer" expectation replaces its own).  Requests with no rid
(a rejected request's lone `Receive OpenAI`) are matched by count."""
import json
import sys

want = json.load(open(sys.argv[1], encoding="utf-8"))[sys.argv[2]]
got = [json.loads(l) for l in open(sys.argv[3], encoding="utf-8") if l.strip()]
got = [r for r in got if "verdict" in r]
bad = []
by_rid = {r["rid"]: r for r in got if r.get("rid")}
lone = [r for r in got if not r.get("rid")]
with_tok = "--tokenizer" in sys.argv[4:]
for rid, e in sorted(want.items()):
    if e.get("openai_only"):
        continue
    if with_tok:
        e = e.get("tokenizer", e)
    r = by_rid.pop(rid, None)
    if r is None:
        bad.append("%s: no record" % rid)
        continue
    kinds = sorted(f["kind"] for f in r["findings"] if f["severity"] == "error")
    if r["verdict"] != e["verdict"] or kinds != e["errors"]:
        bad.append("%s: got %s %s, built for %s %s" % (rid, r["verdict"], kinds, e["verdict"], e["errors"]))
lone_want = [e for e in want.values() if e.get("openai_only")]
if len(lone) != len(lone_want):
    bad.append("%d records without a rid, built %d" % (len(lone), len(lone_want)))
for r, e in zip(lone, lone_want):
    kinds = sorted(f["kind"] for f in r["findings"] if f["severity"] == "error")
    if r["verdict"] != e["verdict"] or kinds != e["errors"]:
        bad.append("rejected request: got %s %s, built for %s %s" % (r["verdict"], kinds, e["verdict"], e["errors"]))
for rid in by_rid:
    bad.append("%s: a record not built" % rid)
for b in bad:
    print(sys.argv[2] + ": " + b)
sys.exit(1 if bad else 0)
