#!/usr/bin/env bash
# logdiff template: renders the golden cases of ../shared/templates/goldens/ byte for byte
# (inputs from SUMMARY.json, tokens from goldens/README.md's table), refuses like Python where
# the template refuses, and renders a logged request by rid.
. "$(dirname "$0")/lib.bash"
SHARED=${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}
T="$SHARED/templates"
if [ ! -f "$T/goldens/SUMMARY.json" ]; then
    echo "skipped: $T/goldens/SUMMARY.json absent"
    exit 77
fi

# one REQUEST.json per case, plus "1" in CASE.gen when add_generation_prompt is true
python3 - "$T/goldens/SUMMARY.json" "$WORK" <<'EOF' || { echo "cannot read SUMMARY.json"; exit 1; }
import json, sys
d = json.load(open(sys.argv[1]))
for name, c in d["cases"].items():
    req = {"messages": c["messages"]}
    if "tools" in c:
        req["tools"] = c["tools"]
    json.dump(req, open(f"{sys.argv[2]}/{name}.json", "w"), ensure_ascii=False)
    open(f"{sys.argv[2]}/{name}.gen", "w").write("1" if c.get("add_generation_prompt", True) else "0")
    for tpl, res in d["results"].items():
        open(f"{sys.argv[2]}/{tpl}.{name}.result", "w").write(res[name])
EOF

# template  bos  eos  ("-" = none)
while read -r tpl bos eos; do
    args=(--date 2024-07-26) # the goldens' pinned strftime_now date
    [ "$bos" != - ] && args+=(--bos-token "$bos")
    [ "$eos" != - ] && args+=(--eos-token "$eos")
    for case in basic reasoning_history think_in_content tool_call_args_str tool_call_args_obj; do
        gen=()
        [ "$(cat "$WORK/$case.gen")" = 0 ] && gen=(--no-generation-prompt)
        result=$(cat "$WORK/$tpl.$case.result")
        name="$tpl/$case"
        if [ "$name" = openai-gpt-oss-120b/reasoning_history ]; then
            # the shared goldens were rendered by plain jinja2, without transformers' message
            # normalization, which gives gpt-oss the reasoning as `thinking`; this pair is
            # checked as transformers renders it in tests/replay/template/jinja/test_tpl_corpus.c
            echo "skip $name: golden rendered without transformers' reasoning alias"
            continue
        fi
        if [ "${result#ERROR}" != "$result" ]; then
            run "$name refuses: exit 2" 2 "$LOGDIFF" template --template "$T/$tpl.jinja" \
                "${args[@]}" "${gen[@]}" "$WORK/$case.json"
            msg=${result#*: }
            check "$name: message on stderr" grep -qF "$msg" "$WORK/err"
            check "$name: nothing on stdout" test ! -s "$WORK/out"
        else
            run "$name" 0 "$LOGDIFF" template --template "$T/$tpl.jinja" \
                "${args[@]}" "${gen[@]}" "$WORK/$case.json"
            check "$name: byte-identical to the golden" cmp "$WORK/out" "$T/goldens/$tpl/$case.txt"
        fi
    done
done <<'EOF'
Qwen-Qwen2.5-7B-Instruct - <|im_end|>
Qwen-Qwen3-0.6B - <|im_end|>
meta-llama-Llama-3.1-8B-Instruct <|begin_of_text|> <|eot_id|>
deepseek-ai-DeepSeek-V3.1 <｜begin▁of▁sentence｜> <｜end▁of▁sentence｜>
google-gemma-2-2b-it <bos> <eos>
openai-gpt-oss-120b <|startoftext|> <|return|>
EOF

# the context transformers gives a template (testdata/replay/tpl_corpus/context.json, from
# transformers itself: tools/gen_tpl_corpus.py): an unset token is undefined, tools and documents
# are None, kwargs become variables; --bos-token overrides the source
CTX="$LD_SOURCE_DIR/testdata/replay/tpl_corpus/context.json"
python3 - "$CTX" "$WORK" <<'PY'
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
open(sys.argv[2] + "/t.jinja", "w", encoding="utf-8").write(d["template"])
json.dump(d["request"], open(sys.argv[2] + "/k.json", "w", encoding="utf-8"))
for c in d["cases"]:
    open(sys.argv[2] + "/" + c["name"] + ".want", "w", encoding="utf-8").write(c["out"])
PY
run "no tokens" 0 "$LOGDIFF" template --template "$WORK/t.jinja" "$WORK/k.json"
check "no tokens: output as transformers" cmp -s "$WORK/out" "$WORK/no_tokens.want"
run "--bos-token, --no-generation-prompt" 0 "$LOGDIFF" template --template "$WORK/t.jinja" \
    --bos-token '<s>' --no-generation-prompt "$WORK/k.json"
check "options: output as transformers" cmp -s "$WORK/out" "$WORK/bos_no_gen.want"
# from a tokenizer_config.json: tokens from the config, the option wins
python3 -c "
import json,sys
json.dump({'chat_template': open(sys.argv[1]).read(), 'bos_token': {'content': '<B>'}, 'eos_token': 'E'}, open(sys.argv[2], 'w'))
" "$WORK/t.jinja" "$WORK/tokenizer_config.json"
run "tokenizer_config.json" 0 "$LOGDIFF" template --template "$WORK/tokenizer_config.json" "$WORK/k.json"
check "config tokens" cmp -s "$WORK/out" "$WORK/bos_eos.want"
run "model directory, --eos-token" 0 "$LOGDIFF" template --template "$WORK" --eos-token X - <"$WORK/k.json"
check "directory: chat_template.jinja absent, config used" cmp -s "$WORK/out" "$WORK/bos_eos.want"
run "no --template: exit 2" 2 "$LOGDIFF" template "$WORK/k.json"
run "missing template file: exit 2" 2 "$LOGDIFF" template --template "$WORK/nope.jinja" "$WORK/k.json"
check "missing file named" grep -q "nope.jinja" "$WORK/err"
echo '{"bos_token": "<s>"}' >"$WORK/nochat.json"
run "config without chat_template: exit 2" 2 "$LOGDIFF" template --template "$WORK/nochat.json" "$WORK/k.json"
check "says chat_template is missing" grep -q "has no 'chat_template'" "$WORK/err"
echo '{"model": "m"}' >"$WORK/nomsg.json"
run "request without messages: exit 2" 2 "$LOGDIFF" template --template "$WORK/t.jinja" "$WORK/nomsg.json"
echo 'not json' >"$WORK/bad.json"
run "request not JSON: exit 2" 2 "$LOGDIFF" template --template "$WORK/t.jinja" "$WORK/bad.json"

# --rid: a logged request's Receive OpenAI payload
QWEN="$T/Qwen-Qwen2.5-7B-Instruct.jinja"
run "--rid demo-healthy-1" 0 "$LOGDIFF" template --template "$QWEN" --rid demo-healthy-1 "$DEMO/server-0.log"
check "--rid: begins with the system turn" bash -c "head -c 18 '$WORK/out' | grep -qx '<|im_start|>system'"
check "--rid: holds the user message" grep -qF 'What does `ld_pylit_parse` return when the line is cut?' "$WORK/out"
check "--rid: ends with the generation prompt" bash -c "tail -c 22 '$WORK/out' | grep -qF '<|im_start|>assistant'"
run "--rid unknown: exit 2" 2 "$LOGDIFF" template --template "$QWEN" --rid nope "$DEMO/server-0.log"

check "--rid unknown: message" grep -q "no request with rid 'nope'" "$WORK/err"
grep -v "Receive OpenAI" "$DEMO/server-0.log" >"$WORK/no-openai.log"
# a logged payload with quotes, a backslash, CJK and an emoji (tools/gen_demo_logs.py) reaches
# the template as the same text
run "--rid demo-healthy-2 (rotated .gz log)" 0 "$LOGDIFF" template --template "$QWEN" --rid demo-healthy-2 "$DEMO"
check "--rid: the user text intact" grep -qF "Summarise: 日志里的请求 — \"quoted\" and 'single' \\ backslash 😀<|im_end|>" "$WORK/out"
run "--rid without Receive OpenAI: exit 2" 2 "$LOGDIFF" template --template "$QWEN" --rid demo-healthy-1 "$WORK/no-openai.log"
check "--rid without Receive OpenAI: message" grep -q "has no 'Receive OpenAI' line" "$WORK/err"
# strftime_now: today's local date, as transformers' apply_chat_template; --date pins it
LLAMA="$T/meta-llama-Llama-3.2-3B-Instruct.jinja"
echo '{"messages": [{"role": "user", "content": "hi"}]}' >"$WORK/hi.json"
run "strftime_now: today by default" 0 "$LOGDIFF" template --template "$LLAMA" "$WORK/hi.json"
check "strftime_now: today's date, as transformers prints it" grep -q "^Today Date: $(LC_ALL=C date +'%d %b %Y')$" "$WORK/out"
run "--date 2024-02-29" 0 "$LOGDIFF" template --template "$LLAMA" --date 2024-02-29 "$WORK/hi.json"
check "--date: that date" grep -q "^Today Date: 29 Feb 2024$" "$WORK/out"
run "--date 2024-02-30: exit 2" 2 "$LOGDIFF" template --template "$LLAMA" --date 2024-02-30 "$WORK/hi.json"
check "--date: the format said" grep -q "YYYY-MM-DD" "$WORK/err"

finish
