#!/usr/bin/env bash
# A prefill/decode deployment (tools/gen_pd_fixtures.py, from SGLang 0.5.23's
# router and request model): each request is logged by both servers and
# becomes one record, the decode server's, whichever order the logs are read
# in and when both servers' lines interleave in one capture (kubectl --prefix,
# a client's rid logged by both); the planted difference between the two
# servers' prompts is found, warm-up requests stay apart, and DP-attention
# ranks' overlapping requests pair as single-rank ones do.
. "$(dirname "$0")/lib.bash"
PD="$LD_SOURCE_DIR/testdata/pd"
CHECK="python3 $LD_SOURCE_DIR/tests/cli/check_pd.py $PD/expect.jsonl"

pd_case() { # NAME LOG...: diff --json of the logs against the expectations
    local name=$1; shift
    "$LOGDIFF" diff --json "$@" >"$WORK/diff.json" 2>"$WORK/err"
    check "$name: one record per request, joined as built" $CHECK "$WORK/diff.json"
}
pd_case "prefill then decode" "$PD/prefill.log" "$PD/decode.log"
pd_case "decode then prefill" "$PD/decode.log" "$PD/prefill.log"
pd_case "kubectl --prefix, both pods interleaved" "$PD/pods.log"
"$LOGDIFF" diff --json "$PD/decode.log" >"$WORK/alone.json" 2>/dev/null
check "decode log alone: every routed request alone, nothing called different" \
    $CHECK "$WORK/alone.json" --alone

run "scan of both logs exits 0" 0 "$LOGDIFF" scan "$PD/prefill.log" "$PD/decode.log"
check "scan: the summary counts the joins" grep -q \
    "^prefill/decode: 7 requests joined from their two servers' records (1 by rid, 6 by bootstrap room), 1 with records that differ; 1 alone" "$WORK/out"
check "scan: the differing request is flagged" grep -q "^607fa71722a44c6fd8d12f2491df3dbe .* pd,pd-differs " "$WORK/out"
"$LOGDIFF" scan --json --summary "$PD/pods.log" 2>/dev/null | tail -1 >"$WORK/sum.json"
check "scan --json --summary: prefill_decode counts" python3 -c "
import json; s = json.load(open('$WORK/sum.json'))['summary']['prefill_decode']
assert s == {'joined': 7, 'joined_by_rid': 1, 'differ': 1, 'alone': 1}, s"

run "diff: the template verdict exits 1" 1 "$LOGDIFF" diff "$PD/prefill.log" "$PD/decode.log"
check "diff: the finding names the prefill record" grep -q \
    "error template.servers_differ: the prefill server (rid a4726041ac374eed8bca49d9622de24c, $PD/prefill.log:14) and the decode server logged different templated prompts and input ids" "$WORK/out"
check "diff: both prompts quoted where they part" grep -q 'prefill   "..._start|>system\\nYou are Qwen' "$WORK/out"

run "show by the prefill server's rid finds the joined request" 0 \
    "$LOGDIFF" show --rid a4726041ac374eed8bca49d9622de24c "$PD/prefill.log" "$PD/decode.log"
check "show: the request is the decode server's, the prefill's named" grep -q \
    "^  servers: decode server's record; the prefill server's is rid a4726041ac374eed8bca49d9622de24c at $PD/prefill.log:12" "$WORK/out"
check "show: the decode server's answer" grep -q "^request 607fa71722a44c6fd8d12f2491df3dbe" "$WORK/out"

run "diff --rid of the prefill server's rid reports the pair" 1 \
    "$LOGDIFF" diff --rid a4726041ac374eed8bca49d9622de24c "$PD/prefill.log" "$PD/decode.log"
check "diff --rid: one request, the decode server's" test "$(grep -c '^[0-9a-f]\{32\} ' "$WORK/out")" = 1
QWEN="$LD_SOURCE_DIR/../shared/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
if [ -f "$QWEN" ]; then
    # the router posts one body to both servers: either rid gives the same payload
    "$LOGDIFF" template --template "$QWEN" --rid 4d317c68022dd18d3c7ba9e38be9794d "$PD/prefill.log" "$PD/decode.log" >"$WORK/p.txt"
    "$LOGDIFF" template --template "$QWEN" --rid dab4fcb8093f36eb8eca73657965c0fe "$PD/prefill.log" "$PD/decode.log" >"$WORK/d.txt"
    check "template --rid: the prefill server's rid renders the same body" cmp -s "$WORK/p.txt" "$WORK/d.txt"
    check "template --rid: a prompt was rendered" grep -q "ld_pylit_parse" "$WORK/p.txt"
else
    echo "skip template --rid: ../shared/templates is absent"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
