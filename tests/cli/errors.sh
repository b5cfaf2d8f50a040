#!/usr/bin/env bash
# Bad input: clear errors naming file, line and byte offset; the rest is still reported;
# exit status as diff(1).
. "$(dirname "$0")/lib.bash"
run "missing file" 2 "$LOGDIFF" scan "$WORK/no-such.log"
check "missing file named" grep -q "no-such.log" "$WORK/err"
check "no origin without LOGDIFF_DEBUG" bash -c "! grep -q '\\[parse/' '$WORK/err'"
# LOGDIFF_DEBUG=1: the file and line of the library that raised the error (LD_FAIL's record)
LOGDIFF_DEBUG=1 "$LOGDIFF" scan "$WORK/no-such.log" >/dev/null 2>"$WORK/err-debug"
check "LOGDIFF_DEBUG: the error's origin" grep -qE "no-such.log: .*\[parse/input/[a-z_]+\.c:[0-9]+\]$" "$WORK/err-debug"

# a log with a request line cut inside its rid (nothing of it can be told
# apart: a parse error) between good requests
good="$DEMO/server-0.log"
{ head -n 5 "$good"; head -n 7 "$good" | tail -n 1 | head -c 64; echo; tail -n +6 "$good"; } >"$WORK/cut.log"
run "cut line: exit 1" 1 "$LOGDIFF" scan --json "$WORK/cut.log"
check "cut line: error object" python3 -c "
import json,sys
rows=[json.loads(l) for l in open('$WORK/out')]
errs=[r for r in rows if r['rid'] is None]
assert len(errs)==1, errs
e=errs[0]['error']
assert e['kind']=='log.parse_error' and e['file'].endswith('cut.log') and e['line']==6, e
off=sum(len(l) for l in open('$WORK/cut.log','rb').readlines()[:5])
assert off <= e['offset'] <= off+300, (off, e)
assert e['reason'], e
rids={r['rid'] for r in rows if r['rid']}
assert {'demo-healthy-1','demo-interrupted-1','demo-empty-assistant-2'} <= rids, rids
"
run "cut line: text mode names line and byte" 1 "$LOGDIFF" scan "$WORK/cut.log"
check "cut line: text row" grep -q "parse error at byte .*cut.log:6$" "$WORK/out"

# cut for good after its first fields (300 bytes): read up to the cut,
# the request flagged, log.capture_cut naming what the cut took
{ head -n 6 "$good"; head -n 7 "$good" | tail -n 1 | head -c 300; echo; tail -n +8 "$good"; } >"$WORK/cut300.log"
run "cut after its rid: scan exits 1" 1 "$LOGDIFF" scan "$WORK/cut300.log"
check "cut after its rid: no parse error, the request flagged cut" grep -q "^demo-interrupted-1 .* cut  *.*cut300.log:6$" "$WORK/out"
check "cut after its rid: the summary counts it" grep -q "^1 request lines were cut for good" "$WORK/out"
run "cut after its rid: diff exits 1" 1 "$LOGDIFF" diff "$WORK/cut300.log"
check "cut after its rid: log.capture_cut names the field" grep -q "log.capture_cut: the receive line (.*cut300.log:7) was cut for good after 300 bytes.* from \`input_ids\` on is missing" "$WORK/out"

# binary junk and an empty file are read without crashing; every line accounted for
# (seeded: the same junk every run; a line of it that began with `{` used to
# be followed as an open literal, swallowing the lines after it)
python3 -c 'import random, sys; r = random.Random(28); sys.stdout.buffer.write(bytes(r.getrandbits(8) for _ in range(100000)))' >"$WORK/junk.bin"
: >"$WORK/empty.log"
run "junk and empty" 0 "$LOGDIFF" scan "$WORK/junk.bin" "$WORK/empty.log" "$DEMO/server-1.log.gz"
check "junk: demo-healthy-2 still found" grep -q "^demo-healthy-2 " "$WORK/out"

# a truncated gzip: error naming the file, other inputs still read
head -c 300 "$DEMO/server-1.log.gz" >"$WORK/cut.gz"
run "truncated gzip: exit 2" 2 "$LOGDIFF" scan "$WORK/cut.gz" "$good"
check "truncated gzip: named" grep -q "cut.gz" "$WORK/err"
check "truncated gzip: others read" grep -q "^demo-interrupted-1 " "$WORK/out"
finish
