#!/usr/bin/env python3
# baseline_scan.py - "the Python way" of scanning an SGLang request log, the baseline that
# bench/scan.sh times against `logdiff scan --json`.  Standard library only.
#
#   python3 bench/baseline_scan.py LOG > out.jsonl
#
# This is the script engineers write today: for every line, find the `Receive OpenAI: obj=`,
# `Receive: obj=` or `Finish: obj=` marker, hand the rest of the line to Python's own parser
# (`ast.parse("f(obj=" + tail + ")")`, then `ast.literal_eval` of the keyword values it needs), or
# `json.loads` for JSON-mode lines, and print one JSON line per request line with rid, message
# count, prompt chars, output chars, finish reason and temperature.  It is meant to be a fair,
# reasonably efficient baseline: the marker is searched only near the start of the line, input_ids
# are counted from the AST without building a Python list, and only needed values are evaluated.
# Lines it cannot parse (truncated level-2 lines, non-literal values) are counted and reported.

import ast
import json
import sys

MARKERS = (("Receive OpenAI: obj=", "receive_openai"), ("Receive: obj=", "receive"), ("Finish: obj=", "finish"))
HEAD = 512          # the marker is in the first few hundred characters (timestamp/process prefix)
JSON_EVENTS = {"request.received.openai": "receive_openai", "request.received": "receive",
               "request.finished": "finish"}


def openai_fields(obj):
    """rid, message count, prompt chars and temperature of a raw OpenAI payload dict."""
    msgs = obj.get("messages") or []
    chars = 0
    for m in msgs:
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):                       # multimodal parts
            chars += sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return {"rid": obj.get("rid"), "n_messages": len(msgs), "prompt_chars": chars,
            "temperature": obj.get("temperature")}


def record(kind, lineno, rid=None, n_messages=None, prompt_chars=None, n_input_ids=None,
           output_chars=None, n_output_ids=None, finish_reason=None, temperature=None):
    return {"line": lineno, "event": kind, "rid": rid, "n_messages": n_messages,
            "prompt_chars": prompt_chars, "n_input_ids": n_input_ids, "output_chars": output_chars,
            "n_output_ids": n_output_ids, "finish_reason": finish_reason, "temperature": temperature}


def out_fields(out):
    meta = out.get("meta_info") or {}
    fr = meta.get("finish_reason")
    text = out.get("text")
    ids = out.get("output_ids")
    return {"output_chars": len(text) if isinstance(text, str) else None,
            "n_output_ids": len(ids) if isinstance(ids, list) else None,
            "finish_reason": fr.get("type") if isinstance(fr, dict) else fr}


def scan_text(line, lineno):
    head = line[:HEAD]
    best = None
    for marker, kind in MARKERS:
        pos = head.find(marker)
        if pos >= 0 and (best is None or pos < best[0]):
            best = (pos, marker, kind)
    if best is None:
        return None
    pos, marker, kind = best
    # `obj=<R>[, headers=<D>][, out=<D>]` is exactly a keyword-argument list
    call = ast.parse("f(obj=" + line[pos + len(marker):].rstrip("\n") + ")", mode="eval").body
    kws = {kw.arg: kw.value for kw in call.keywords}
    obj = kws["obj"]
    if kind == "receive_openai":
        return record(kind, lineno, **openai_fields(ast.literal_eval(obj)))
    if not isinstance(obj, ast.Call):
        raise ValueError("obj is not a GenerateReqInput(...)")
    fields = {kw.arg: kw.value for kw in obj.keywords}
    rec = record(kind, lineno)
    if "rid" in fields:
        rec["rid"] = ast.literal_eval(fields["rid"])
    if "text" in fields:
        text = ast.literal_eval(fields["text"])
        rec["prompt_chars"] = len(text) if isinstance(text, str) else None
    ids = fields.get("input_ids")
    if isinstance(ids, ast.List):
        rec["n_input_ids"] = len(ids.elts)
    if "sampling_params" in fields:
        sp = ast.literal_eval(fields["sampling_params"])
        rec["temperature"] = sp.get("temperature") if isinstance(sp, dict) else None
    if "out" in kws:
        rec.update(out_fields(ast.literal_eval(kws["out"])))
    return rec


def scan_json(line, lineno):
    d = json.loads(line)
    kind = JSON_EVENTS.get(d.get("event"))
    if kind is None:
        return None
    obj = d.get("obj") or {}
    if kind == "receive_openai":
        return record(kind, lineno, **openai_fields(obj))
    rec = record(kind, lineno, rid=d.get("rid"))
    text = obj.get("text")
    rec["prompt_chars"] = len(text) if isinstance(text, str) else None
    ids = obj.get("input_ids")
    rec["n_input_ids"] = len(ids) if isinstance(ids, list) else None
    sp = obj.get("sampling_params")
    rec["temperature"] = sp.get("temperature") if isinstance(sp, dict) else None
    if "out" in d:
        rec.update(out_fields(d["out"]))
    return rec


def main(argv):
    if len(argv) != 2:
        print("usage: baseline_scan.py LOG", file=sys.stderr)
        return 2
    n_lines = n_req = n_bad = 0
    out = sys.stdout
    with open(argv[1], encoding="utf-8", errors="surrogateescape") as fh:
        for lineno, line in enumerate(fh, 1):
            n_lines += 1
            try:
                rec = scan_json(line, lineno) if line.startswith("{") else scan_text(line, lineno)
            except (SyntaxError, ValueError, KeyError, TypeError, RecursionError, MemoryError) as exc:
                n_bad += 1
                print("baseline_scan: %s:%d: %s" % (argv[1], lineno, type(exc).__name__), file=sys.stderr)
                continue
            if rec is not None:
                n_req += 1
                out.write(json.dumps(rec, ensure_ascii=False) + "\n")
    print("baseline_scan: lines=%d request_lines=%d unparsed=%d" % (n_lines, n_req, n_bad), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
