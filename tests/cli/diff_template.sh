#!/usr/bin/env bash
# logdiff diff --template: re-renders each logged array (after SGLang's preprocessing, or none
# with --server hf) and compares it with the logged prompt.  The log and the expected findings
# come from tools/gen_rerender_fixtures.py (SGLang's own request model + Python jinja2).
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/rerender"
TPL="$D/chat.jinja"

run "diff --template: some request not ok" 1 \
    "$LOGDIFF" diff --json --bos-token '<s>' --template "$TPL" "$D/server.log"
cp "$WORK/out" "$WORK/sglang.jsonl"
check "findings and verdicts as expected (sglang)" \
    python3 "$LD_SOURCE_DIR/tests/cli/check_rerender.py" "$D/expect.json" "$WORK/sglang.jsonl" kinds

run "diff --template --server hf" 1 \
    "$LOGDIFF" diff --json --server hf --bos-token '<s>' --template "$TPL" "$D/server.log"
check "without SGLang's preprocessing the faithful requests differ" \
    python3 "$LD_SOURCE_DIR/tests/cli/check_rerender.py" "$D/expect.json" "$WORK/out" hf_kinds

run "human report" 1 "$LOGDIFF" diff --bos-token '<s>' --template "$TPL" "$D/server.log"
check "mismatch shows a unified diff" grep -q '^        +++ re-rendered' "$WORK/out"
check "the diff shows the dropped turn" grep -q '^        +<|user|>My name is Bob.<|end|>' "$WORK/out"
check "the mangled line on both sides" \
    bash -c "grep -q '^        -<|assistant|>Hi Bob<|end|>' '$WORK/out' && grep -q '^        +<|assistant|>Hi Bob.<|end|>' '$WORK/out'"

run "--template and --model together" 2 \
    "$LOGDIFF" diff --template "$TPL" --model "$D" "$D/server.log"
check "says why" grep -q "not both" "$WORK/err"
run "unknown --server" 2 "$LOGDIFF" diff --server vllm --template "$TPL" "$D/server.log"
run "template that does not exist" 2 "$LOGDIFF" diff --template "$D/nope.jinja" "$D/server.log"
check "names the file" grep -q "nope.jinja" "$WORK/err"
printf '{%% for x in %%}' > "$WORK/bad.jinja"
run "template that does not compile" 2 "$LOGDIFF" diff --template "$WORK/bad.jinja" "$D/server.log"
check "with its line" grep -q "bad.jinja:1:" "$WORK/err"
# a DeepSeek-V3.2 server (prompts from SGLang's encoder) through the built-in encoder
run "diff --template deepseek-v3.2" 1 "$LOGDIFF" diff --json --template deepseek-v3.2 "$D/server-dsv32.log"
check "deepseek-v3.2: faithful, and the lost tool call found" \
    python3 "$LD_SOURCE_DIR/tests/cli/check_rerender.py" "$D/expect-dsv32.json" "$WORK/out" kinds

# the demo through the real Qwen2.5 template: faithful everywhere except the request whose
# tool result the server lost (tools/gen_demo_logs.py)
QWEN="${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
if [ -f "$QWEN" ]; then
    run "demo --template Qwen2.5" 1 "$LOGDIFF" diff --json --template "$QWEN" "$DEMO"
    check "demo: one render mismatch, the rest faithful" python3 -c "
import json
rows = {r['rid']: r for r in map(json.loads, open('$WORK/out'))}
kinds = {rid: [f['kind'] for f in r['findings'] if f['kind'] in
               ('template.faithful', 'template.render_mismatch', 'template.not_rendered')]
         for rid, r in rows.items()}
assert kinds.pop('demo-tool-result-lost') == ['template.render_mismatch'], kinds
assert all(k == ['template.faithful'] for k in kinds.values()), kinds
f = [f for f in rows['demo-tool-result-lost']['findings'] if f['kind'] == 'template.render_mismatch'][0]
assert '+<tool_response>' in f['unified_diff'], f
"
else
    echo "skipped: demo through Qwen2.5 ($QWEN absent)"
fi
finish
