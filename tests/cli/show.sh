#!/usr/bin/env bash
# logdiff show: one request at a glance, and as JSON with full texts.
. "$(dirname "$0")/lib.bash"
run "show empty-assistant request" 0 "$LOGDIFF" show --rid demo-empty-assistant-2 "$DEMO"
check "message table flags the empty assistant turn" grep -q "2  assistant .*(empty assistant turn)" "$WORK/out"
check "prompt shown" grep -q "^<|im_start|>user" "$WORK/out"
check "finish shown" grep -q "^finish *stop" "$WORK/out"
run "show interrupted request" 0 "$LOGDIFF" show --rid demo-interrupted-1 "$DEMO"
check "abort message shown" grep -q "abort .*disconnected" "$WORK/out"
run "show --json" 0 "$LOGDIFF" show --json --rid demo-healthy-2 "$DEMO"
check "json: full texts and values" python3 -c "
import json
d=json.load(open('$WORK/out'))
assert d['rid']=='demo-healthy-2'
c=d['messages'][0]['content']['text']
assert c=='Summarise: 日志里的请求 — \"quoted\" and \'single\' \\\\ backslash 😀', repr(c)
p=d['prompt']['text']  # Qwen2.5's template adds its default system prompt
assert p.startswith('<|im_start|>system\nYou are Qwen') and '<|im_start|>user\n' + c in p, repr(p)
assert d['finish']['reason']=='stop'
assert d['values']['openai']['messages'][0]['content']==c
assert d['parameters']['temperature']==0.7 and d['parameters']['max_tokens']==256
"
run "show unknown rid" 2 "$LOGDIFF" show --rid nope "$DEMO"
check "unknown rid message" grep -q "no request with rid 'nope'" "$WORK/err"
finish
