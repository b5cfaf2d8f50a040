#!/usr/bin/env bash
# logdiff diff on the demo: the planted harness fault is found with its evidence, the healthy
# requests are ok (expectations: testdata/cli/demo.expect.jsonl, from tools/gen_demo_logs.py).
. "$(dirname "$0")/lib.bash"
EXPECT="$LD_SOURCE_DIR/testdata/cli/demo.expect.jsonl"
CHECK="python3 $LD_SOURCE_DIR/tests/cli/check_scan.py"

run "diff --json demo: exit 1 (a request is not ok)" 1 "$LOGDIFF" diff --json "$DEMO"
check "verdicts and error kinds" $CHECK --rows 5 "$EXPECT" <"$WORK/out"
check "stale evidence names the aborted request" python3 -c "
import json
rows={r['rid']:r for r in map(json.loads, open('$WORK/out'))}
f=[f for f in rows['demo-empty-assistant-2']['findings'] if f['kind']=='harness.stale_assistant'][0]
assert f['message']==2 and f['related_rid']=='demo-interrupted-1', f
assert f['actual_len']==0 and f['expected_len']>100 and f['first_diff']==0, f
assert rows['demo-healthy-1']['aligned'] and rows['demo-healthy-1']['findings']==[] or \
       all(x['severity']=='info' for x in rows['demo-healthy-1']['findings'])
"
run "diff text" 1 "$LOGDIFF" diff "$DEMO"
check "text: verdict line" grep -q "^demo-empty-assistant-2 *harness .*server-0.log:10 *harness.empty_assistant" "$WORK/out"
check "text: evidence side by side" bash -c "grep -q '^ *sent back \"\"' '$WORK/out' && grep -q '^ *produced  \"Here is the plan' '$WORK/out'"
check "text: summary" grep -q "^5 requests: 3 ok 1 harness 1 template" "$WORK/out"
# one quoting rule for excerpts (README): a JSON string's
check "text: excerpts quoted as JSON strings" grep -qF '        array     "{\"city\": \"Bergen\", \"rain_mm\": 14, \"sky\": \"overca"' "$WORK/out"
check "text: a newline shown as \\n" grep -qF '        produced  "Here is the plan.\n\n1. **pylit_str.c**' "$WORK/out"
run "diff --rid healthy: exit 0" 0 "$LOGDIFF" diff --rid demo-healthy-2 "$DEMO"
check "--rid reports one request" bash -c "[ \$(grep -c '^demo-' '$WORK/out') -eq 1 ]"
run "diff --rid unknown: exit 2" 2 "$LOGDIFF" diff --rid nope "$DEMO"
# judged alone, the empty turn is still a harness fault (no earlier request needed)
run "diff --no-conversations" 1 "$LOGDIFF" diff --json --no-conversations "$DEMO"
check "alone: empty assistant only" python3 -c "
import json
r=[r for r in map(json.loads, open('$WORK/out')) if r['rid']=='demo-empty-assistant-2'][0]
kinds=sorted({f['kind'] for f in r['findings'] if f['severity']=='error'})
assert r['verdict']=='harness' and kinds==['harness.empty_assistant'], r
"
# from standard input, gzip'd
cat "$DEMO/server-0.log" | gzip -c | "$LOGDIFF" diff --json - >"$WORK/stdin.json"
check "stdin gzip: same verdicts" $CHECK --rows 3 --file-map "server-0.log=-" <(grep server-0.log "$EXPECT") <"$WORK/stdin.json"
finish
