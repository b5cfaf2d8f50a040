#!/usr/bin/env bash
# logdiff watch --state across a restart keeps the conversations by its
# warm-up (--state-warmup): a conversation whose turn 1 (demo-interrupted-1,
# the interrupted answer) is judged before the stop and whose turn 2
# (demo-empty-assistant-2) comes after the restart gets diff's verdict and
# findings on the whole file, harness.stale_assistant (related to turn 1)
# included; with --state-warmup 0 that finding is missing (the test can
# fail); no request is printed twice.  The oracle is `logdiff diff` on the
# whole log.
. "$(dirname "$0")/lib.bash"
LOG=$DEMO/server-0.log
"$LOGDIFF" diff --json "$LOG" 2>/dev/null >"$WORK/diff.jsonl"
rows "$WORK/diff.jsonl" >"$WORK/expect"
n_expect=$(wc -l <"$WORK/expect")
# the stop: after turn 2's Receive, before its Finish (its lines read again after the restart)
cut_at=$(grep -n "Receive: obj=GenerateReqInput(rid='demo-empty-assistant-2'" "$LOG" | cut -d: -f1)

has_rid() { grep -q "\"rid\":\"$2\"" "$1"; } # OUT RID
# record RID FILE: the request's verdict and findings, as JSON text
record() {
    python3 -c '
import json, sys
for l in open(sys.argv[2]):
    r = json.loads(l)
    if r.get("rid") == sys.argv[1]:
        print(json.dumps({"verdict": r["verdict"], "findings": r["findings"]}, sort_keys=True))' "$1" "$2"
}

# one stop and restart with watch ARGS; NAME's outputs in $WORK/NAME.{1,2}.out
restart_run() { # NAME ARGS...
    local name=$1; shift
    mkdir -p "$WORK/$name" && local live=$WORK/$name/server.log
    head -n "$cut_at" "$LOG" >"$live"
    start_watch "$WORK/$name.1.out" "$WORK/$name.1.err" --state "$WORK/$name.state" "$@" "$live"
    check "$name: turn 1 judged before the stop" wait_for 20 has_rid "$WORK/$name.1.out" demo-interrupted-1
    sleep 1.2 # a save
    stop_watch
    tail -n +"$((cut_at + 1))" "$LOG" >>"$live"
    start_watch "$WORK/$name.2.out" "$WORK/$name.2.err" --state "$WORK/$name.state" "$@" "$live"
    check "$name: turn 2 judged after the restart" wait_for 20 has_rid "$WORK/$name.2.out" demo-empty-assistant-2
    sleep 0.5
    stop_watch
    cat "$WORK/$name.1.out" "$WORK/$name.2.out" >"$WORK/$name.out"
}

restart_run warm
check "warm: the state records a warm-up offset" python3 -c "
import json; f = json.load(open('$WORK/warm.state'))['files'][0]
assert f['warmup'] < f['offset'], f"
check "warm: each request printed once, with diff's verdict and error findings" \
    diff <(rows "$WORK/warm.out") "$WORK/expect"
check "warm: $n_expect records across the restart, none twice" \
    [ "$(grep -c '"rid"' "$WORK/warm.out")" -eq "$n_expect" ]
check "warm: turn 1 not printed after the restart" bash -c "! grep -q '\"rid\":\"demo-interrupted-1' '$WORK/warm.2.out'"
check "warm: turn 2's verdict and findings equal diff's" \
    diff <(record demo-empty-assistant-2 "$WORK/warm.2.out") <(record demo-empty-assistant-2 "$WORK/diff.jsonl")
check "warm: stale_assistant related to turn 1" python3 -c "
import json
r = [json.loads(l) for l in open('$WORK/warm.2.out') if 'demo-empty-assistant-2' in l][0]
assert any(f['kind'] == 'harness.stale_assistant' and f['related_rid'] == 'demo-interrupted-1' for f in r['findings']), r"
check "warm: the warm-up said" grep -q "read again for their conversations" "$WORK/warm.2.err"

restart_run cold --state-warmup 0
check "cold: no warm-up offset recorded" python3 -c "
import json; f = json.load(open('$WORK/cold.state'))['files'][0]
assert 'warmup' not in f, f"
check "cold: each request printed once" \
    diff <(rows "$WORK/cold.out" | cut -d' ' -f1) <(cut -d' ' -f1 "$WORK/expect")
check "cold: turn 2 without the earlier turn: no stale_assistant" python3 -c "
import json
r = [json.loads(l) for l in open('$WORK/cold.2.out') if 'demo-empty-assistant-2' in l][0]
assert not any(f['kind'] == 'harness.stale_assistant' for f in r['findings']), r"

run "bad --state-warmup: exit 2" 2 "$LOGDIFF" watch --state-warmup lots "$WORK/warm/server.log"
check "bad --state-warmup: said" grep -q "state-warmup 'lots'" "$WORK/err"
finish
