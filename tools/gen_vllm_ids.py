#!/usr/bin/env python3
"""gen_vllm_ids.py - the token ids of the vLLM fixture logs, by CPython.

Writes testdata/logs/vllm-ids.oracle.json: for each testdata/logs/vllm-*.log,
per request id, the `prompt_token_ids` and the `output_token_ids` of the
complete response line (not a "(streaming delta)" piece), each list read
with ast.literal_eval from the line's text, so that
tests/parse/test_request_ids.c holds logdiff's ld_request_input_ids /
ld_request_output_ids to Python's reading of the same bytes.

    python3 tools/gen_vllm_ids.py
"""
import ast
import glob
import json
import os
import re

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LOGS = os.path.join(ROOT, "testdata", "logs")
RID = r"(?:Received request|Request|Generated response) (\S+?)(?: details)?(?: \((streaming [a-z]+)\))?:"


def id_list(line, label):
    """The Python list literal after `label: ` in `line`, or None."""
    i = line.find(label + ": [")
    if i < 0:
        return None
    start = i + len(label) + 2
    end = line.index("]", start) + 1
    return ast.literal_eval(line[start:end])


def main():
    out = {}
    for path in sorted(glob.glob(os.path.join(LOGS, "vllm-*.log"))):
        reqs = {}
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                m = re.search(RID, line)
                if not m:
                    continue
                rid, streaming = m.group(1), m.group(2)
                r = reqs.setdefault(rid, {})
                ids = id_list(line, "prompt_token_ids")
                if ids is None:  # vLLM 0.3's wording
                    ids = id_list(line, "prompt token ids")
                if ids is not None:
                    r["input_ids"] = ids
                ids = id_list(line, "output_token_ids")
                if ids is not None and streaming != "streaming delta":
                    r["output_ids"] = ids
        out[os.path.basename(path)] = reqs
    dest = os.path.join(LOGS, "vllm-ids.oracle.json")
    with open(dest, "w") as f:
        json.dump({"generated_by": "tools/gen_vllm_ids.py", "logs": out}, f, indent=1)
        f.write("\n")
    print("wrote", dest)


if __name__ == "__main__":
    main()
