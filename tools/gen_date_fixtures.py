#!/usr/bin/env python3
"""gen_date_fixtures.py - a log whose prompts print the date (strftime_now), for the tests of
`logdiff diff --template` re-rendering on the day the server rendered each request
(replay/analysis/rerender.c, tests/cli/diff_dates.sh).

The oracle is Python jinja2 set up as transformers sets it up (gen_rerender_fixtures.jinja_env)
with strftime_now pinned to the date each request was rendered on, through the real Llama 3.2
template (../shared/templates/meta-llama-Llama-3.2-3B-Instruct.jinja, which prints
"Today Date: DD Mon YYYY"); lines are written with ../shared/tools/sglang_render.py.
  dates-same-day    logged 2026-03-14 10:00:00, rendered on 2026-03-14: faithful, the day logged
  dates-day-before  logged 2026-03-15 00:30:00, rendered on 2026-03-14 (the server's clock keeps
                    another time zone than its logger's): faithful, the day before
  dates-stale       logged 2026-03-14 11:00:00, its prompt dated 2026-03-10 (a prompt cached four
                    days earlier): render_mismatch, dated 2026-03-14, the day logged
Writes testdata/replay/dates/{server.log,expect.json}.
Usage: python3 tools/gen_date_fixtures.py [--shared ../shared]
"""
import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "testdata", "replay", "dates")
BOS = "<|begin_of_text|>"

CASES = [  # rid, logged time, date rendered on, expected kind, words the detail must hold
    ("dates-same-day", "2026-03-14 10:00:00", datetime.date(2026, 3, 14), "template.faithful",
     "strftime_now dated 2026-03-14, the day logged"),
    ("dates-day-before", "2026-03-15 00:30:00", datetime.date(2026, 3, 14), "template.faithful",
     "strftime_now dated 2026-03-14, the day before the logged one"),
    ("dates-stale", "2026-03-14 11:00:00", datetime.date(2026, 3, 10), "template.render_mismatch",
     "strftime_now dated 2026-03-14, the day logged"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    sys.path.insert(0, HERE)
    import gen_rerender_fixtures as rr
    import sglang_render as sr
    env = rr.jinja_env()
    with open(os.path.join(args.shared, "templates", "meta-llama-Llama-3.2-3B-Instruct.jinja"), encoding="utf-8") as fh:
        tpl = env.from_string(fh.read())
    lines, expect = [], {}
    for rid, logged, day, kind, words in CASES:
        messages = [{"role": "user", "content": "What day is it for you, " + rid + "?"}]
        tpl.globals["strftime_now"] = lambda fmt, d=day: d.strftime(fmt)
        prompt = tpl.render(messages=messages, add_generation_prompt=True, bos_token=BOS,
                            eos_token="<|eot_id|>")
        payload = {"model": "llama-3.2-3b", "messages": messages, "max_tokens": 64}
        obj = sr.Record("GenerateReqInput", [("rid", rid), ("text", prompt),
                                             ("sampling_params", {"max_new_tokens": 64})])
        out = {"text": "Today.", "meta_info": {"finish_reason": {"type": "stop", "matched": 128009}}}
        lines.append("[%s] Receive OpenAI: obj=%s" % (logged, sr.text_render(payload, sr.BIG)))
        lines.append("[%s] Receive: obj=%s" % (logged, sr.text_render(obj, sr.BIG)))
        lines.append("[%s] Finish: obj=%s, out=%s" % (logged, sr.text_render(obj, sr.BIG), sr.text_render(out, sr.BIG)))
        expect[rid] = {"kind": kind, "detail_has": words,
                       "prompt_date_line": "Today Date: " + day.strftime("%d %b %Y")}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "server.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump(expect, fh, indent=1, sort_keys=True)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
