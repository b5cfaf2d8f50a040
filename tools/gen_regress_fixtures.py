#!/usr/bin/env python3
"""gen_regress_fixtures.py - the "before" of the CI story of `logdiff regress` (issue 8).

The demo (tools/gen_demo_logs.py) holds the "after": a second server whose preprocessing lost a
tool result (demo-tool-result-lost).  This writes the same story on a server build that still kept
it (prompts rendered the same way: SGLang's request model and preprocessing, the real Qwen2.5
chat template through Python jinja2), and what each side must give, from how the story was
planted, never from logdiff's output:

  testdata/regress/server-1-before.log   the second server, tool result kept (plain text)
  testdata/regress/expect.json           per side, per rid: verdict and error kinds; the member
                                         each request is in; the requests that regress, and those that are fixed when
                                         the sides are swapped

The first server's log (testdata/demo/server-0.log) is the same on both sides.  The test
(tests/cli/regress_ci.sh) packs the sides into archives at test time.

Usage: python3 tools/gen_regress_fixtures.py [--shared ../shared]
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_demo_logs  # noqa: E402


def side(expect):
    return {e["rid"]: {"verdict": e["verdict"], "errors": e["error_kinds"],
                       "member": e["file"].replace(".gz", "")} for e in expect}


def regressions(before, after):
    """A request regresses when it was ok and is not, or has an error kind it did not have."""
    out = []
    for rid, now in sorted(after.items()):
        was = before.get(rid)
        if was is None:
            if now["verdict"] != "ok":
                out.append(rid)
        elif (was["verdict"] == "ok" and now["verdict"] != "ok") or \
                set(now["errors"]) - set(was["errors"]):
            out.append(rid)
    return out


def fixed(before, after):
    """A request is fixed when it was not ok and is ok."""
    return [rid for rid, now in sorted(after.items())
            if rid in before and before[rid]["verdict"] != "ok" and now["verdict"] == "ok"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    ap.add_argument("--out", default=os.path.join(HERE, "..", "testdata", "regress"))
    args = ap.parse_args()
    lines0_b, lines1_b, expect_b = gen_demo_logs.build(args.shared, lose_tool_result=False)
    lines0_a, _, expect_a = gen_demo_logs.build(args.shared, lose_tool_result=True)
    assert lines0_a == lines0_b, "the first server's log is the same on both sides"
    before, after = side(expect_b), side(expect_a)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "server-1-before.log"), "w", encoding="utf-8",
              newline="\n") as fh:
        fh.write("\n".join(lines1_b) + "\n")
    facts = {"before": before, "after": after, "regressed": regressions(before, after),
             "fixed_when_reversed": fixed(after, before)}
    with open(os.path.join(args.out, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump(facts, fh, indent=1, sort_keys=True, ensure_ascii=False)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
