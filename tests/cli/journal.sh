#!/usr/bin/env bash
# The demo story as two systemd services' journald streams (tools/
# gen_journal_fixtures.py: journald's 48 KiB pieces in its export format,
# made a real journal file by systemd-journal-remote and printed by
# journalctl --file in each output format): every format that keeps the
# lines gives the plain log's verdicts and scan counts what journald cut;
# what journalctl left out (MESSAGE as null without --all, "[N blob data]")
# is named with its remedy, never dropped in silence.
. "$(dirname "$0")/lib.bash"
GEN="python3 $LD_SOURCE_DIR/tools/gen_journal_fixtures.py"
KEEP="short short-iso short-precise short-unix json json-seq export"

# summary_matches FILE KIND: scan's counts against the generator's manifest
summary_matches() {
    "$LOGDIFF" scan --json --summary "$1" 2>/dev/null | tail -1 >"$WORK/summary.json"
    python3 - "$WORK/summary.json" "$(dirname "$1")/manifest.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
m = json.load(open(sys.argv[2]))
kind = sys.argv[3]
c = s["capture"]
want = {"members": {kind: 1}, "rejoined_lines": m["split_lines"], "joined_records": m["split_pieces"],
        "unfinished_lines": 0, "bad_records": 0, "cut_lines": 0, "lost_records": 0, "problems": 0}
if kind != "plain":
    want["records"] = m["entries"]
got = {k: c[k] for k in want}
assert got == want, (got, want)
assert s["requests"] == 5 and s["request_lines"] == 16 and s["parse_errors"] == 0, s
PY
}

$GEN --long 100000 "$WORK/j" "$DEMO/server-0.log" "$DEMO/server-1.log.gz"
rc=$?
if [ $rc -eq 77 ]; then
    echo "skipped: systemd-journal-remote or journalctl missing (tools/setup.sh test installs them)"; exit 77
fi
check "the generator made a journal and printed it" test $rc -eq 0
check "journald cut the request lines at 48 KiB" python3 -c "
import json; m = json.load(open('$WORK/j/manifest.json'))
assert m['split_lines'] == 6 and m['split_pieces'] == 18, m"
verdicts "$WORK/j/plain.log" >"$WORK/plain.v"
check "the plain log has the demo's five verdicts" test "$(wc -l <"$WORK/plain.v")" = 5
for f in $KEEP; do
    verdicts "$WORK/j/$f.log" >"$WORK/$f.v"
    check "journalctl -o $f: the plain log's verdicts" cmp -s "$WORK/plain.v" "$WORK/$f.v"
    case $f in json*) kind=journal-json ;; export) kind=journal-export ;; *) kind=journal-text ;; esac
    check "journalctl -o $f: scan counts what journald cut" summary_matches "$WORK/j/$f.log" $kind
done
run "-o short-iso: scan exits 0" 0 "$LOGDIFF" scan "$WORK/j/short-iso.log"
check "the summary names the capture and the joins" grep -q \
    "^capture: journal-text 1 of 1 members; 30 records, 6 lines rejoined from 18 pieces (12 joined where a literal was left open)" "$WORK/out"

# the journal file itself, read with libsystemd where the build has it
if "$LOGDIFF" --version | grep -q "read with libsystemd"; then
    verdicts "$WORK/j/sglang.journal" >"$WORK/file.v"
    check "the .journal file: the plain log's verdicts" cmp -s "$WORK/plain.v" "$WORK/file.v"
    check "the .journal file: scan counts what journald cut" summary_matches "$WORK/j/sglang.journal" journal-file
    mkdir -p "$WORK/var/log/journal/0123"
    cp "$WORK/j/sglang.journal" "$WORK/var/log/journal/0123/system.journal"
    verdicts "$WORK/var/log/journal" >"$WORK/dir.v"
    check "a journal folder: the plain log's verdicts" cmp -s "$WORK/plain.v" "$WORK/dir.v"
    run "regress: a baseline from the journal file" 0 "$LOGDIFF" regress --baseline "$WORK/base.jsonl" \
        --update-baseline "$WORK/j/sglang.journal"
    run "regress: journalctl -o json of it has no regression" 0 "$LOGDIFF" regress --baseline "$WORK/base.jsonl" \
        "$WORK/j/json.log"
    check "and says so" grep -q "5 requests: 3 ok, 2 not ok; 0 regressed, 0 new failing" "$WORK/out"
    # journal files inside archives and compressed: copied out for libsystemd, named as members
    (cd "$WORK/var/log" && tar cf "$WORK/journal.tar" journal && tar czf "$WORK/journal.tgz" journal)
    zstd -q -c "$WORK/j/sglang.journal" >"$WORK/system.journal.zst"
    for a in journal.tar journal.tgz system.journal.zst; do
        verdicts "$WORK/$a" >"$WORK/$a.v"
        check "$a: the plain log's verdicts" cmp -s "$WORK/plain.v" "$WORK/$a.v"
    done
    run "a tar of /var/log/journal: scan exits 0" 0 "$LOGDIFF" scan "$WORK/journal.tar"
    check "its lines are named after the member" grep -q "journal.tar:journal/0123/system.journal:[0-9]" "$WORK/out"
    run "regress reads the tar too" 0 "$LOGDIFF" regress --baseline "$WORK/base.jsonl" "$WORK/journal.tar"
    check "with no regression" grep -q "5 requests: 3 ok, 2 not ok; 0 regressed, 0 new failing" "$WORK/out"
    mkdir -p "$WORK/fake" && echo "not a journal" >"$WORK/fake/x.journal"
    (cd "$WORK/fake" && tar cf "$WORK/fake.tar" x.journal)
    run "a member named .journal that is not one: exit 2" 2 "$LOGDIFF" scan "$WORK/fake.tar"
    check "named, with why" grep -q "fake.tar:x.journal: named as a journal file, but it does not begin as one" "$WORK/err"
    head -c 4096 "$WORK/j/sglang.journal" >"$WORK/cut.journal"
    run "a journal file cut short: exit 2" 2 "$LOGDIFF" scan "$WORK/cut.journal"
    check "named as such" grep -q "cut.journal: cannot read it as a journal file" "$WORK/err"
else
    echo "note: built without libsystemd: the .journal file is refused with a remedy"
    run "a .journal file without libsystemd: exit 2" 2 "$LOGDIFF" scan "$WORK/j/sglang.journal"
    check "the remedy is named" grep -q "built without libsystemd.*journalctl --file FILE -o export" "$WORK/err"
fi

# -o cat of one service: no fields, no marks: joined where the literal is open
verdicts "$WORK/j/plain-0.log" >"$WORK/plain0.v"
verdicts "$WORK/j/cat.log" >"$WORK/cat.v"
check "journalctl -o cat -u: that service's plain verdicts" cmp -s "$WORK/plain0.v" "$WORK/cat.v"
run "journalctl -o cat -u: scan exits 0" 0 "$LOGDIFF" scan "$WORK/j/cat.log"
# -o cat of both: their pieces interleave with nothing to tell them apart
run "journalctl -o cat of two services: not read in silence (exit 1)" 1 "$LOGDIFF" scan "$WORK/j/cat-both.log"

# --max-line: a line longer than the cap (rejoined or not) is dropped and said
run "--max-line 64K: the six ~100 KB lines dropped, exit 1" 1 "$LOGDIFF" scan --max-line 64K "$WORK/j/json.log"
check "each named with its first record" test "$(grep -c "is longer than 65536 bytes rejoined: dropped" "$WORK/err")" = 6
run "--max-line 64K on the plain log: exit 1" 1 "$LOGDIFF" scan --max-line 64K "$WORK/j/plain.log"
check "the line reader's cap is the same" test "$(grep -c "65536" "$WORK/err")" = 6
run "--max-line 1G: as without" 0 "$LOGDIFF" scan --max-line 1G "$WORK/j/json.log"
run "--max-line 10x: exit 2" 2 "$LOGDIFF" scan --max-line 10x "$WORK/j/json.log"
check "the cap is shown by --help" sh -c '"$0" scan --help | grep -q -- "--max-line SIZE .*default 1G"' "$LOGDIFF"

# --capture forces a kind: a text member read as JSON is all bad records
run "--capture journal-json on short text: exit 1" 1 "$LOGDIFF" scan --capture journal-json "$WORK/j/short.log"
check "each bad record is named" grep -q "short.log:1: byte 0: a journal-json record that is not a JSON object" "$WORK/err"

# journalctl -o json without --all prints MESSAGE over 4096 bytes as null
run "-o json without --all: exit 1" 1 "$LOGDIFF" scan "$WORK/j/json-noall.log"
check "the loss is named with its remedy" grep -q \
    "json-noall.log:1: byte 0: record 1 lost its text: journalctl printed MESSAGE as null .* run it with -a" "$WORK/err"
check "and counted" python3 -c "
import json, subprocess
s = json.loads(subprocess.run(['$LOGDIFF', 'scan', '--json', '--summary', '$WORK/j/json-noall.log'],
    capture_output=True, text=True).stdout.splitlines()[-1])['summary']['capture']
assert s['lost_records'] == 12 and s['problems'] == 12, s"

# cuts inside characters: journald keeps the bytes; journalctl prints them
# as byte arrays (JSON), binary fields (export), raw (--all) or not at all
$GEN --long 100000 --seam-text "$WORK/s" "$DEMO/server-0.log" "$DEMO/server-1.log.gz"
check "seam: pieces that are not valid UTF-8" python3 -c "
import json; assert json.load(open('$WORK/s/manifest.json'))['binary_entries'] > 0"
check "seam: -o json holds byte arrays" grep -q '"MESSAGE":\[' "$WORK/s/json.log"
verdicts "$WORK/s/plain.log" >"$WORK/splain.v"
for f in short.log json.log export.log sglang.journal; do
    "$LOGDIFF" --version | grep -q "read with libsystemd" || [ $f != sglang.journal ] || continue
    verdicts "$WORK/s/$f" >"$WORK/s$f.v"
    check "seam $f: the plain log's verdicts" cmp -s "$WORK/splain.v" "$WORK/s$f.v"
done
run "seam -o short without --all: exit 1" 1 "$LOGDIFF" scan "$WORK/s/short-noall.log"
check "seam: a line with a blob piece is named as cut, with the remedy" grep -q \
    "short-noall.log:[0-9]*: byte [0-9]*: the line starting at record [0-9]* was cut for good at record [0-9]* (journalctl printed it as \"\[N blob data\]\" .*--all" "$WORK/err"
finish
