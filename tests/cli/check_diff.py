#!/usr/bin/env python3
# check_diff.py EXPECT.json < diff --json output: every request of a harness fixture gets exactly
# the finding kinds tools/gen_harness_fixtures.py planted (decided when the fixture was built),
# with the related request, and no template error (its prompts are faithful ChatML renders).
import json
import sys

doc = json.load(open(sys.argv[1], encoding="utf-8"))
rows = [json.loads(l) for l in sys.stdin if l.strip()]
by_rid = {}
for r in rows:
    by_rid.setdefault(r["rid"], []).append(r)
bad = 0
for e in doc["requests"]:
    got = by_rid.get(e["rid"], [])
    if len(got) != 1:
        print("%s: reported %d times" % (e["rid"], len(got))); bad += 1; continue
    g = got[0]
    kinds = sorted({f["kind"] for f in g["findings"]
                    if not (f["kind"].startswith("template.") and f["severity"] == "info")})
    if kinds != e["kinds"]:
        print("%s: kinds %r, expected %r" % (e["rid"], kinds, e["kinds"])); bad += 1
    for kind, rel in e.get("related", {}).items():
        rels = {f["related_rid"] for f in g["findings"] if f["kind"] == kind}
        if rel not in rels:
            print("%s: %s related to %r, expected %r" % (e["rid"], kind, rels, rel)); bad += 1
    want_verdict = "ok"
    for cat in ("harness", "template", "kernels", "sampling", "log"):
        if any(f["kind"].startswith(cat + ".") and f["severity"] == "error" for f in g["findings"]):
            want_verdict = cat; break
    if g["verdict"] != want_verdict:
        print("%s: verdict %r, its findings say %r" % (e["rid"], g["verdict"], want_verdict)); bad += 1
errors = [r for r in rows if r["rid"] is None]
if len(errors) != len(doc.get("errors", [])):
    print("%d parse-error rows, expected %d" % (len(errors), len(doc.get("errors", [])))); bad += 1
for r in errors:
    if [f["kind"] for f in r["findings"]] != ["log.parse_error"] or r["verdict"] != "log":
        print("bad parse-error row: %r" % r); bad += 1
sys.exit(1 if bad else 0)
