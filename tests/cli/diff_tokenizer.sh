#!/usr/bin/env bash
# logdiff diff --tokenizer: the logged input ids against the logged prompt text, re-encoded with
# the model's tokenizer (GPT-2's GGUF vocabulary from ../shared).  The log and the expected
# findings come from tools/gen_tokcheck_fixtures.py (ids by HF tokenizers).
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/tokcheck"
TOK="${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}/tokenizers/ggml-vocab-gpt-2.gguf"
if [ ! -f "$TOK" ]; then
    echo "skipped: $TOK absent"
    exit 77
fi

run "diff --tokenizer: mismatches found" 1 "$LOGDIFF" diff --json --tokenizer "$TOK" "$D/server.log"
check "one token finding per request, as built" python3 - "$D/expect.json" "$WORK/out" <<'PY'
import json, sys
expect = json.load(open(sys.argv[1]))["requests"]
rows = {r["rid"]: r for r in map(json.loads, open(sys.argv[2]))}
bad = []
for rid, e in expect.items():
    fs = [f for f in rows[rid]["findings"] if f["kind"].startswith("template.token")]
    if [f["kind"] for f in fs] != [e["kind"]]:
        bad.append(f"{rid}: {[f['kind'] for f in fs]}, expected {e['kind']}")
    elif e["first_diff"] is not None and fs[0]["first_diff"] != e["first_diff"]:
        bad.append(f"{rid}: first_diff {fs[0]['first_diff']}, expected {e['first_diff']}")
    want = "template" if e["kind"] == "template.token_mismatch" else "ok"
    if rows[rid]["verdict"] != want:
        bad.append(f"{rid}: verdict {rows[rid]['verdict']}, expected {want}")
if set(rows) != set(expect):
    bad.append(f"rids {sorted(rows)} vs {sorted(expect)}")
print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
run "human report" 1 "$LOGDIFF" diff --tokenizer "$TOK" "$D/server.log"
check "double BOS named" grep -q "double BOS" "$WORK/out"
check "decoded context shown" grep -q "<|endoftext|>" "$WORK/out"
run "a tokenizer that does not load" 2 "$LOGDIFF" diff --tokenizer "$D/server.log" "$D/server.log"
finish
