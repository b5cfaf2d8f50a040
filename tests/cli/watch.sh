#!/usr/bin/env bash
# logdiff watch: the same verdicts as diff on the same lines, whichever way
# they arrive (standard input, a file written while it is followed, rotated
# by rename-and-create or by copytruncate, a restart with --state), each
# request reported once; a request without its Finish judged once it has
# waited; the metrics textfile's counts equal to diff's.  The oracle is
# `logdiff diff` on the whole log (its own verdicts are checked against
# independent expectations in diff.sh).
. "$(dirname "$0")/lib.bash"
LOG=$WORK/all.log
{ cat "$DEMO/server-0.log"; gzip -dc "$DEMO/server-1.log.gz"; } >"$LOG"
N=$(wc -l <"$LOG")
verdicts "$LOG" >"$WORK/expect"
n_expect=$(wc -l <"$WORK/expect")

# the line number after which no request is open (after a Finish line), near the middle
split_at() {
    python3 -c '
import sys
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().split("\n")
fin = [i + 1 for i, l in enumerate(lines) if "Finish: obj=" in l]
print(min(fin, key=lambda n: abs(n - len(lines) // 2)))' "$1"
}
same_as_diff() { # NAME OUT [VERDICTS_ONLY]: each request once, with diff's verdict (and error kinds)
    local fields=1-
    [ $# -ge 3 ] && fields=1,2
    if diff <(rows "$2" | cut -d' ' -f"$fields") <(cut -d' ' -f"$fields" "$WORK/expect") >"$WORK/rows.diff"; then
        ok "$1"
    else
        not_ok "$1" "$(head -20 "$WORK/rows.diff")"
    fi
}

# 1. standard input, then its end: diff's verdicts and exit status
"$LOGDIFF" watch --json - <"$LOG" >"$WORK/stdin.out" 2>"$WORK/stdin.err"
rc=$?
check "stdin: exit 1 as diff (a request is not ok)" [ $rc -eq 1 ]
same_as_diff "stdin: the same verdicts as diff" "$WORK/stdin.out"

# 2. a file that does not exist yet, written, rotated by rename-and-create
mkdir -p "$WORK/live"
LIVE=$WORK/live/server.log
half=$(split_at "$LOG")
start_watch "$WORK/rot.out" "$WORK/rot.err" "$LIVE"
sleep 0.3
head -n "$half" "$LOG" >>"$LIVE"
check "rename: the first half judged while it runs" wait_for 20 has_rows "$WORK/rot.out" 1
mv "$LIVE" "$LIVE.1"
tail -n +"$((half + 1))" "$LOG" >"$LIVE.new" && mv "$LIVE.new" "$LIVE"
check "rename: all judged" wait_for 20 has_rows "$WORK/rot.out" "$n_expect"
stop_watch
check "rename: exit 0 when stopped by a signal" [ "$WATCH_RC" -eq 0 ]
same_as_diff "rename: the same verdicts as diff, each once" "$WORK/rot.out"
# rotated, or gone then opened again when a poll fell between the rename and the create
check "rename: said on stderr" grep -Eq "names a new file|no longer exists" "$WORK/rot.err"

# 3. copytruncate: the first half copied away, the file cut to 0, the rest appended
rm -rf "$WORK/live" && mkdir -p "$WORK/live"
head -n "$half" "$LOG" >"$LIVE"
n_half=$(head -n "$half" "$LOG" >"$WORK/half.log"; verdicts "$WORK/half.log" | wc -l)
start_watch "$WORK/ct.out" "$WORK/ct.err" "$LIVE"
check "copytruncate: the first half judged" wait_for 20 has_rows "$WORK/ct.out" "$n_half"
cp "$LIVE" "$LIVE.1" && : >"$LIVE"
sleep 0.3
tail -n +"$((half + 1))" "$LOG" >>"$LIVE"
check "copytruncate: all judged" wait_for 20 has_rows "$WORK/ct.out" "$n_expect"
stop_watch
same_as_diff "copytruncate: the same verdicts as diff, each once" "$WORK/ct.out"
check "copytruncate: said on stderr" grep -q "truncated" "$WORK/ct.err"

# 4. --state: stopped in the middle of a request (its Receive read, not its
#    Finish), restarted: nothing judged twice, nothing missed
rm -rf "$WORK/live" && mkdir -p "$WORK/live"
STATE=$WORK/watch.state
mid=$(grep -n "Receive: obj=" "$LOG" | awk -F: -v h="$half" '$1 > h { print $1; exit }')
head -n "$mid" "$LOG" >"$LIVE"
n_first=$(head -n "$((mid - 1))" "$LOG" >"$WORK/first.log"; verdicts "$WORK/first.log" | wc -l)
start_watch "$WORK/s1.out" "$WORK/s1.err" --state "$STATE" "$LIVE"
check "state: the requests before the cut judged" wait_for 20 has_rows "$WORK/s1.out" "$n_first"
sleep 0.5
stop_watch
# the open request's lines must be read again: the position saved is its
# first line's (its Receive OpenAI line, just before its Receive)
check "state: saved at the open request's first line" python3 -c "
import json; s = json.load(open('$STATE'))
f = s['files'][0]
lines = open('$LOG', 'rb').readlines()
first = $mid - 1 if b'Receive OpenAI:' in lines[$mid - 2] else $mid
want = sum(len(l) for l in lines[:first - 1])
assert s['logdiff_watch_state'] == 1 and f['path'] == '$LIVE', s
assert f['offset'] == want and f['line'] == first - 1, (f, want, first)"
tail -n +"$((mid + 1))" "$LOG" >>"$LIVE"
start_watch "$WORK/s2.out" "$WORK/s2.err" --state "$STATE" "$LIVE"
check "state: the rest judged after the restart" wait_for 20 has_rows "$WORK/s2.out" "$((n_expect - n_first))"
sleep 0.3
stop_watch
cat "$WORK/s1.out" "$WORK/s2.out" >"$WORK/s.out"
# the verdicts, each request once (the findings that need an earlier turn
# across the restart: tests/cli/watch_restart_conv.sh)
same_as_diff "state: both runs together give diff's verdicts, each request once" "$WORK/s.out" verdicts


# 4a. a request judged in the first run whose lines come after the open one's:
#     read again after the restart, not reported again
python3 - "$LOG" "$WORK/cross" <<'PY'
import re, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
rid_of = lambda l: (re.search(r"rid='([^']+)'", l) or [None, None])[1]
rids = [rid_of(l) for l in lines if "Receive: obj=" in l and "HEALTH_CHECK" not in l]
x, y = rids[0], rids[1]
def parts(rid):
    i = next(i for i, l in enumerate(lines) if "Receive: obj=" in l and rid_of(l) == rid)
    openai = [lines[i - 1]] if "Receive OpenAI:" in lines[i - 1] else []
    fin = [l for l in lines if "Finish: obj=" in l and rid_of(l) == rid]
    return openai + [lines[i]], fin
xs, xf = parts(x)
ys, yf = parts(y)
open(sys.argv[2] + ".1", "w", encoding="utf-8").write("\n".join(xs + ys + yf) + "\n")
open(sys.argv[2] + ".2", "w", encoding="utf-8").write("\n".join(xf) + "\n")
open(sys.argv[2] + ".rids", "w").write(x + "\n" + y + "\n")
PY
rm -rf "$WORK/live" && mkdir -p "$WORK/live" && rm -f "$WORK/cross.state"
cp "$WORK/cross.1" "$LIVE"
start_watch "$WORK/c1.out" "$WORK/c1.err" --state "$WORK/cross.state" "$LIVE"
check "state, crossing: the later request judged first" wait_for 20 has_rows "$WORK/c1.out" 1
sleep 0.3
stop_watch
cat "$WORK/cross.2" >>"$LIVE"
start_watch "$WORK/c2.out" "$WORK/c2.err" --state "$WORK/cross.state" "$LIVE"
check "state, crossing: the open request judged after the restart" wait_for 20 has_rows "$WORK/c2.out" 1
sleep 0.3
stop_watch
check "state, crossing: each request reported once" \
    diff <(cat "$WORK/c1.out" "$WORK/c2.out" | rows /dev/stdin | cut -d' ' -f1 | sort) <(sort "$WORK/cross.rids")
check "state, crossing: the one read again was said" grep -q "1 requests read again after the restart" "$WORK/c2.err"

# 4b. a directory: each of its files resumes where it was, a file new since is read whole
mkdir -p "$WORK/dir"
head -n "$half" "$LOG" >"$WORK/dir/a.log"
start_watch "$WORK/d1.out" "$WORK/d1.err" --state "$WORK/dir.state" "$WORK/dir"
check "state, directory: the first file judged" wait_for 20 has_rows "$WORK/d1.out" "$n_half"
sleep 0.3
stop_watch
tail -n +"$((half + 1))" "$LOG" >"$WORK/dir/b.log"
start_watch "$WORK/d2.out" "$WORK/d2.err" --state "$WORK/dir.state" "$WORK/dir"
check "state, directory: the new file judged after the restart" wait_for 20 has_rows "$WORK/d2.out" "$((n_expect - n_half))"
sleep 0.3
stop_watch
cat "$WORK/d1.out" "$WORK/d2.out" >"$WORK/d.out"
same_as_diff "state, directory: diff's verdicts, each request once" "$WORK/d.out" verdicts

# 5. a corrupt state file is never reused
echo 'not json {' >"$WORK/bad.state"
run "state: corrupt: exit 2" 2 "$LOGDIFF" watch --state "$WORK/bad.state" "$LIVE"
check "state: corrupt: named, kept" bash -c "grep -q 'bad.state' '$WORK/err' && grep -q 'not json' '$WORK/bad.state'"
echo '{"logdiff_watch_state": 99, "files": [], "judged": []}' >"$WORK/v99.state"
run "state: another version: exit 2" 2 "$LOGDIFF" watch --state "$WORK/v99.state" "$LIVE"
check "state: another version: said" grep -q "another format version" "$WORK/err"

# 6. a Receive without its Finish: judged (log.unpaired) once it has waited
rm -rf "$WORK/live" && mkdir -p "$WORK/live"
grep -m1 "Receive: obj=" "$LOG" >"$LIVE"
start_watch "$WORK/un.out" "$WORK/un.err" --unpaired-after 0.5 "$LIVE"
check "unpaired: judged while watch still runs" wait_for 20 has_rows "$WORK/un.out" 1
stop_watch
check "unpaired: log.unpaired" grep -q '"log.unpaired"' "$WORK/un.out"

# 7. the metrics textfile: the counts of diff's verdicts
rm -rf "$WORK/live" && mkdir -p "$WORK/live"
cp "$LOG" "$LIVE"
start_watch "$WORK/m.out" "$WORK/m.err" --metrics-textfile "$WORK/logdiff.prom" "$LIVE"
check "textfile: all judged" wait_for 20 has_rows "$WORK/m.out" "$n_expect"
sleep 1.2
stop_watch
check "textfile: requests by verdict as diff" python3 -c "
import collections, re
want = collections.Counter(l.split()[1] for l in open('$WORK/expect'))
got = {}
for l in open('$WORK/logdiff.prom'):
    m = re.match(r'logdiff_requests_judged_total\{verdict=\"(\w+)\"\} (\S+)', l)
    if m: got[m.group(1)] = float(m.group(2))
assert {k: v for k, v in got.items() if v} == dict(want), (got, want)"

# 8. usage
run "no source: exit 2" 2 "$LOGDIFF" watch
run "bad duration: exit 2" 2 "$LOGDIFF" watch --unpaired-after soon "$LIVE"
finish
