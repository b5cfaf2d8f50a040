#!/usr/bin/env python3
"""gen_tokcheck_fixtures.py - a log for `logdiff diff --tokenizer`: GPT-2 "servers" whose Finish
lines carry a prompt text and its input ids, the ids computed with HF tokenizers (PyPI
`tokenizers`, pinned below) from ../shared/tokenizers/gpt2-tokenizer.json (less the merges whose
product is not in its vocabulary, which HF refuses; see tools/gen_tok_cases.py).  Requests:
  tc-faithful            ids = the prompt tokenized with special tokens parsed
  tc-double-bos          the prompt starts with "<|endoftext|>" and the ids add one more
  tc-special-as-text     the server tokenized "<|endoftext|>" written in the prompt as text
  tc-other-text          the ids are those of another text (one word changed)
  tc-no-ids              a Finish line with text and no input_ids
The lines are written with ../shared/tools/sglang_render.py; the expected finding per rid goes to
testdata/replay/tokcheck/expect.json.
Usage: python3 tools/gen_tokcheck_fixtures.py [--shared ../shared]
"""
import argparse
import json
import os
import sys

import tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "testdata", "replay", "tokcheck")
PINNED = "0.23.3"


def load_gpt2(shared):
    with open(os.path.join(shared, "tokenizers", "gpt2-tokenizer.json"), encoding="utf-8") as fh:
        tj = json.load(fh)
    vocab = tj["model"]["vocab"]
    merges = tj["model"]["merges"]
    keep = []
    for m in merges:
        a, b = m.split(" ") if isinstance(m, str) else m
        if a + b in vocab:
            keep.append(m)
    tj["model"]["merges"] = keep
    return tokenizers.Tokenizer.from_str(json.dumps(tj))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(HERE, "..", "..", "shared"))
    args = ap.parse_args()
    if tokenizers.__version__ != PINNED:
        sys.exit(f"tokenizers {PINNED} expected, found {tokenizers.__version__}")
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as sr  # noqa: E402
    tok = load_gpt2(args.shared)
    eot = "<|endoftext|>"

    def ids(text, parse_special=True):
        tok.encode_special_tokens = not parse_special  # HF: special tokens in the text taken as text
        return tok.encode(text, add_special_tokens=False).ids

    prompt = "User: What does the log say about request 42?\nAssistant: It says the cache was cold.\nUser:"
    cases = [
        ("tc-faithful", prompt, ids(prompt), "template.tokens_faithful"),
        ("tc-double-bos", eot + prompt, ids(eot)[:1] + ids(eot + prompt), "template.token_mismatch"),
        ("tc-special-as-text", prompt + eot, ids(prompt + eot, parse_special=False), "template.token_mismatch"),
        ("tc-other-text", prompt, ids(prompt.replace("cold", "warm")), "template.token_mismatch"),
        ("tc-no-ids", prompt, None, "template.tokens_not_checked"),
    ]
    lines, expect = [], {}
    for i, (rid, text, tids, kind) in enumerate(cases):
        sp = {"temperature": 0.0, "max_new_tokens": 8}
        ids_field = [("input_ids", tids)] if tids is not None else []
        rec = sr.Record("GenerateReqInput", [("rid", rid), ("text", None)] + ids_field + [("sampling_params", sp)])
        fin = sr.Record("GenerateReqInput", [("rid", rid), ("text", text)] + ids_field + [("sampling_params", sp)])
        out = {"text": " ok", "output_ids": [12, 34], "meta_info": {
            "id": rid, "finish_reason": {"type": "stop", "matched": 50256},
            "prompt_tokens": len(tids or []), "completion_tokens": 2}}
        stamp = "[2026-11-22 08:00:%02d] " % i
        lines.append(stamp + "Receive: obj=" + sr.text_render(rec, sr.BIG))
        lines.append(stamp + "Finish: obj=" + sr.text_render(fin, sr.BIG) + ", out=" + sr.text_render(out, sr.BIG))
        expect[rid] = {"kind": kind, "first_diff": None}
        if tids is not None and kind == "template.token_mismatch":
            enc = ids(text)
            k = 0
            while k < len(tids) and k < len(enc) and tids[k] == enc[k]:
                k += 1
            expect[rid]["first_diff"] = k
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "server.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(OUT, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump({"tokenizers": tokenizers.__version__, "requests": expect}, fh, indent=1)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
