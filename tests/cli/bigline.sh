#!/usr/bin/env bash
# A 64 MiB request line (SGLang level 3: nothing truncated) goes through scan whole,
# gzip-compressed too; prompt and output character counts come from Python.
. "$(dirname "$0")/lib.bash"
SHARED=${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}
if [ ! -f "$SHARED/tools/sglang_render.py" ]; then
    echo "skipped: $SHARED/tools/sglang_render.py not found (../shared absent)"; exit 77
fi
python3 - "$SHARED/tools" "$WORK" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import sglang_render as sr
work = sys.argv[2]
unit = "line of a huge prompt with 'quotes', \"double\", \\backslash\\, tab\t, 日本語 and 😀\n"
prompt = (unit * (64 * 1024 * 1024 // len(unit.encode()) + 1))
out_text = "ok"
obj = sr.Record("GenerateReqInput", [("rid", "big-1"), ("text", prompt), ("input_ids", [1, 2, 3]),
                                     ("sampling_params", {"temperature": 0.5, "max_new_tokens": 8})])
out = {"text": out_text, "output_ids": [5], "meta_info": {"id": "big-1", "finish_reason": {"type": "length", "length": 8}}}
line = "[2026-01-01 00:00:00] Finish: obj=" + sr.text_render(obj, sr.BIG) + ", out=" + sr.text_render(out, sr.BIG)
rec = "[2026-01-01 00:00:00] Receive: obj=" + sr.text_render(obj, sr.BIG)
with open(work + "/big.log", "w", encoding="utf-8") as fh:
    fh.write(rec + "\n" + line + "\n")
json.dump({"prompt_chars": len(prompt), "output_chars": len(out_text), "line_bytes": len(line.encode())},
          open(work + "/big.expect", "w"))
PY
check "line is over 64 MiB" python3 -c "import json;assert json.load(open('$WORK/big.expect'))['line_bytes'] > 64*1024*1024"
run "scan 64 MiB line" 0 "$LOGDIFF" scan --json "$WORK/big.log"
check "prompt chars" python3 -c "
import json; e=json.load(open('$WORK/big.expect')); r=json.loads(open('$WORK/out').readline())
assert r['rid']=='big-1' and r['prompt_chars']==e['prompt_chars'] and r['output_chars']==e['output_chars'], (r, e)
assert r['finish_reason']=='length', r"
gzip -c "$WORK/big.log" >"$WORK/big.gz"
run "scan 64 MiB line, gzip" 0 "$LOGDIFF" scan --json "$WORK/big.gz"
check "gzip prompt chars" python3 -c "
import json; e=json.load(open('$WORK/big.expect')); r=json.loads(open('$WORK/out').readline())
assert r['prompt_chars']==e['prompt_chars'], (r, e)"
finish
