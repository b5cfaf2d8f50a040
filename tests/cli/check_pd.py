#!/usr/bin/env python3
"""check_pd.py EXPECT.jsonl DIFF.jsonl [--alone] - `logdiff diff --json` of a prefill/decode
deployment's logs against what tools/gen_pd_fixtures.py built: one record per request (the
decode server's, its prefill peer named, joined by rid or by bootstrap room), the planted
difference between the two servers found, warm-up requests never joined.  --alone: only the
decode server's log was read, so every routed request is alone."""
import json
import sys

expect = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
got = {}
for line in open(sys.argv[2], encoding="utf-8"):
    r = json.loads(line)
    if r.get("rid") is None:
        continue
    assert r["rid"] not in got or r["pd"] is None, "two records of %s" % r["rid"]
    got.setdefault(r["rid"], []).append(r)
alone = "--alone" in sys.argv
want_records = 0
for e in expect:
    if e.get("warmup"):
        want_records += 1
        if alone and e["finish"] == "length":
            continue
        rs = [r for r in got.get(e["rid"], []) if r["finish_reason"] == e["finish"]]
        assert len(rs) == 1 and rs[0]["pd"] is None, ("warm-up", e, got.get(e["rid"]))
        continue
    want_records += 1
    rs = got.get(e["rid"])
    assert rs and len(rs) == 1, ("one record", e["rid"], rs)
    r, pd = rs[0], rs[0]["pd"]
    assert r["finish_reason"] == e["finish"], (e["rid"], r["finish_reason"])
    assert r["messages"] == e["messages"], (e["rid"], r["messages"])
    if alone or e.get("alone"):
        assert pd and pd["peer"] is None and pd["joined_by"] is None, (e["rid"], pd)
        kinds = sorted(f["kind"] for f in r["findings"] if f["severity"] == "error")
        assert "template.servers_differ" not in kinds, (e["rid"], kinds)
        continue
    assert pd["role"] == "decode" and not pd["roles_guessed"], (e["rid"], pd)
    assert pd["peer"]["rid"] == e["peer"] and pd["joined_by"] == e["joined_by"], (e["rid"], pd, e)
    assert sorted(pd["differs"]) == sorted(e["differs"]), (e["rid"], pd["differs"], e["differs"])
    kinds = sorted(f["kind"] for f in r["findings"] if f["severity"] == "error")
    assert r["verdict"] == e["verdict"] and kinds == e["error_kinds"], (e["rid"], r["verdict"], kinds, e)
n = sum(len(v) for v in got.values())
if alone:
    want_records -= sum(1 for e in expect if e.get("warmup") and e["finish"] == "length")
assert n == want_records, ("records", n, want_records)
