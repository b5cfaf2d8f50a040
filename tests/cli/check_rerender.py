#!/usr/bin/env python3
"""check_rerender.py EXPECT.json OUT.jsonl KEY - every request of EXPECT.json is reported with its
verdict and every kind listed under KEY ("kinds" for SGLang preprocessing, "hf_kinds" for none);
no request is missing or extra.  Expectations come from tools/gen_rerender_fixtures.py."""
import json
import sys

expect = json.load(open(sys.argv[1], encoding="utf-8"))["requests"]
got = {}
for line in open(sys.argv[2], encoding="utf-8"):
    o = json.loads(line)
    got[o["rid"]] = o
bad = []
for rid, e in expect.items():
    o = got.pop(rid, None)
    if o is None:
        bad.append("%s: not reported" % rid)
        continue
    kinds = [f["kind"] for f in o["findings"]]
    for k in e.get(sys.argv[3], e["kinds"]):
        if k not in kinds:
            bad.append("%s: no %s finding (has %s)" % (rid, k, kinds))
    render = [f for f in o["findings"] if f["kind"].startswith("template.") and
              f["kind"] in ("template.faithful", "template.render_mismatch", "template.not_rendered")]
    if len(render) != 1:
        bad.append("%s: %d re-render findings, expected one" % (rid, len(render)))
    if sys.argv[3] == "kinds" and o["verdict"] != e["verdict"]:
        bad.append("%s: verdict %s, expected %s" % (rid, o["verdict"], e["verdict"]))
    for f in render:
        if f["kind"] == "template.render_mismatch" and f["first_diff"] is not None:
            if not f["unified_diff"] or not f["prompt_excerpt"] or not f["array_excerpt"]:
                bad.append("%s: mismatch without its evidence" % rid)
for rid in got:
    bad.append("%s: reported but not expected" % rid)
for b in bad:
    print(b)
sys.exit(1 if bad else 0)
