#!/usr/bin/env bash
# logdiff watch journal:UNIT: a real journal that grows while it is
# followed.  systemd's own systemd-journal-remote appends journald export
# entries (tools/gen_journal_live.py: sglang.service's demo lines with
# request lines of ~100 KB that journald cut at 48 KiB, and other.service
# logging the same lines, same rids, between them) to a journal file in a
# directory that `watch --journal-dir` follows.  The oracles are logdiff
# diff on sglang.service's own lines, and on the journal as `journalctl -o
# json` prints that unit (diff's verdicts are checked against independent
# expectations in diff.sh and journal.sh).  Checked: the verdicts as the
# journal grows, each request once, other units left out; a line journald
# split rejoined, or reported cut as diff reports it; restarts with --state
# in the middle of a split line and of a request, the journal grown
# meanwhile: nothing judged twice, nothing missed; --from-end.
. "$(dirname "$0")/lib.bash"
REMOTE=/lib/systemd/systemd-journal-remote

if ! "$LOGDIFF" --version | grep -q "watch journal:UNIT: followed with libsystemd"; then
    run "built without libsystemd: journal:UNIT refused, exit 2" 2 "$LOGDIFF" watch journal:sglang.service
    check "the missing build feature is named" grep -q "built without libsystemd.*journalctl -f -o json -u" "$WORK/err"
    finish
fi
if [ ! -x "$REMOTE" ] || ! command -v journalctl >/dev/null; then
    echo "skipped: systemd-journal-remote or journalctl missing (tools/setup.sh test installs them)"; exit 77
fi

G=$WORK/gen
python3 "$LD_SOURCE_DIR/tools/gen_journal_live.py" "$G" "$DEMO/server-0.log" "$DEMO/server-1.log.gz" ||
    { echo "the generator failed"; exit 1; }
verdicts "$G/plain.log" >"$WORK/expect"
n_expect=$(wc -l <"$WORK/expect")
# finished N: how many requests are whole by the end of part N
finished() { python3 -c "import json,sys; print(len(json.load(open('$G/manifest.json'))['finished_by_part'][$1 - 1]))"; }


# a journal file written by systemd-journal-remote, fed export entries
# through a FIFO kept open (fd 3) so that it appends as parts come
REMOTE_PID=
start_journal() { # DIR
    mkdir -p "$1" && rm -f "$WORK/fifo" && mkfifo "$WORK/fifo"
    "$REMOTE" -o "$1/live.journal" - <"$WORK/fifo" 2>"$WORK/remote.err" &
    REMOTE_PID=$!
    exec 3>"$WORK/fifo"
}
feed() { cat "$G/part$1.export" >&3; }
stop_journal() { exec 3>&-; wait "$REMOTE_PID"; REMOTE_PID=; }
WATCH_PID=
trap '[ -n "$WATCH_PID" ] && kill "$WATCH_PID" 2>/dev/null; [ -n "$REMOTE_PID" ] && kill "$REMOTE_PID" 2>/dev/null; rm -rf "$WORK"' EXIT
same_rows() { # NAME GOT WANT [FIELDS]
    if diff <(cut -d' ' -f"${4:-1-}" "$2") <(cut -d' ' -f"${4:-1-}" "$3") >"$WORK/rows.diff"; then ok "$1"
    else not_ok "$1" "$(head -20 "$WORK/rows.diff")"; fi
}

# 1. followed from before the journal exists to its end, as it grows
J=$WORK/j1
mkdir -p "$J"
start_watch "$WORK/a.out" "$WORK/a.err" --journal-dir "$J" journal:sglang
sleep 0.3
start_journal "$J"
feed 1
check "grows: the requests of part 1 judged while it runs" wait_for 20 has_rows "$WORK/a.out" "$(finished 1)"
feed 2
check "grows: part 2's" wait_for 20 has_rows "$WORK/a.out" "$(finished 2)"
feed 3
check "grows: all judged" wait_for 20 has_rows "$WORK/a.out" "$n_expect"
sleep 0.3
rows "$WORK/a.out" >"$WORK/a.rows"
same_rows "grows: diff's verdicts on sglang.service's lines, each request once, other.service left out" \
    "$WORK/a.rows" "$WORK/expect"
# a split line whose last piece never comes: said and judged at the end, as diff judges journalctl's JSON
feed 4
sleep 0.5
stop_watch
stop_journal
check "exit 0 when stopped by a signal" [ "$WATCH_RC" -eq 0 ]
journalctl -D "$J" -o json --all _SYSTEMD_UNIT=sglang.service >"$WORK/unit.json" 2>/dev/null
verdicts "$WORK/unit.json" >"$WORK/json.v"
check "journalctl -o json of the unit: diff judges the cut line too" grep -q "^live-cut-1 " "$WORK/json.v"
same_rows "the cut line judged at the end as diff judges journalctl -o json of the unit" \
    <(rows "$WORK/a.out") "$WORK/json.v"
check "its cut is said as diff says it" grep -q "journal:sglang:[0-9]*: .*never got its last piece" "$WORK/a.err"
check "the journal named on stderr" grep -q "following unit 'sglang.service' in the journal files of $J" "$WORK/a.err"

# 2. --state: stopped after part 1 (a split line's first piece read, its
#    others not), the journal grown while stopped (part 2, ending after a
#    request's Receive, its Finish not yet), restarted, stopped again,
#    restarted and grown while it runs (part 3)
J=$WORK/j2
STATE=$WORK/journal.state
start_journal "$J"
start_watch "$WORK/s1.out" "$WORK/s1.err" --state "$STATE" --journal-dir "$J" journal:sglang.service
feed 1
check "state: part 1 judged" wait_for 20 has_rows "$WORK/s1.out" "$(finished 1)"
sleep 2.5 # saved more than once while the split line waits
stop_watch
check "state: at the split line's first piece, a cursor of this journal" python3 -c "
import json, subprocess
s = json.load(open('$STATE'))
j = s['journals'][0]
assert s['logdiff_watch_state'] == 1 and j['source'] == 'journal:sglang.service' and not j['after'], s
out = subprocess.run(['journalctl', '-D', '$J', '--cursor', j['cursor'], '-n', '1', '-o', 'json', '--all'],
                     capture_output=True, text=True).stdout.splitlines()
e = json.loads(out[0])
assert e['_SYSTEMD_UNIT'] == 'sglang.service' and e.get('_LINE_BREAK') == 'line-max', e"
feed 2
start_watch "$WORK/s2.out" "$WORK/s2.err" --state "$STATE" --journal-dir "$J" journal:sglang.service
check "state: the split line rejoined after the restart" wait_for 20 has_rows "$WORK/s2.out" \
    "$(($(finished 2) - $(finished 1)))"
sleep 2.5 # saved more than once while the request waits
stop_watch
check "state: the open request's first entry saved" python3 -c "
import json, subprocess
j = json.load(open('$STATE'))['journals'][0]
out = subprocess.run(['journalctl', '-D', '$J', '--cursor', j['cursor'], '-n', '1', '-o', 'json', '--all'],
                     capture_output=True, text=True).stdout.splitlines()
e = json.loads(out[0])
assert not j['after'] and 'Receive OpenAI' in e['MESSAGE'], (j, e.get('MESSAGE', '')[:80])"
start_watch "$WORK/s3.out" "$WORK/s3.err" --state "$STATE" --journal-dir "$J" journal:sglang.service
sleep 0.5
feed 3
check "state: the rest judged after the second restart" wait_for 20 has_rows "$WORK/s3.out" \
    "$((n_expect - $(finished 2)))"
sleep 0.5
stop_watch
cat "$WORK/s1.out" "$WORK/s2.out" "$WORK/s3.out" >"$WORK/s.out"
rows "$WORK/s.out" >"$WORK/s.rows"
# conversations are not kept across a restart (README): verdicts compared, not every finding
same_rows "state: the three runs give diff's verdicts, each request once" "$WORK/s.rows" "$WORK/expect" 1,2
check "state: after-the-last mark once nothing waits" python3 -c "
import json; j = json.load(open('$STATE'))['journals'][0]; assert j['after'], j"
# 3. --from-end: what is in the journal already is not judged
start_watch "$WORK/e.out" "$WORK/e.err" --from-end --journal-dir "$J" journal:sglang.service
sleep 0.8
check "from-end: nothing judged from what was there" [ "$(n_rows "$WORK/e.out")" -eq 0 ]
feed 4
sleep 0.5
stop_watch
stop_journal
check "from-end: what came after judged (the cut line, at the end)" \
    diff <(rows "$WORK/e.out" | cut -d' ' -f1) <(echo live-cut-1)

# 4. usage and failures
run "a journal directory that does not exist: exit 2" 2 "$LOGDIFF" watch --journal-dir "$WORK/none" journal:x
check "named, with why" grep -q "journal:x: cannot open the journal in $WORK/none" "$WORK/err"
run "an empty unit: exit 2" 2 "$LOGDIFF" watch --journal-dir "$J" journal:
run "a unit given twice: exit 2" 2 "$LOGDIFF" watch --journal-dir "$J" journal:x journal:x
echo '{"logdiff_watch_state": 1, "files": [], "judged": [], "journals": [{"source": "journal:x", "cursor": "nonsense", "entry": 1, "after": true}]}' >"$WORK/bad.state"
run "a state whose cursor journald does not take: exit 2" 2 "$LOGDIFF" watch --state "$WORK/bad.state" \
    --journal-dir "$J" journal:x
check "said, not reused" grep -q "bad.state: journal:x: 'nonsense' is not a journal cursor: not reused" "$WORK/err"
finish
