#!/usr/bin/env bash
# Hostile inputs and outputs through the CLI (issue 30): report paths that are
# links or devices are written, not replaced; directory walks that meet a
# symlink loop read each file once and say so; a line past the line-size limit
# is an error with its file, line and offset in every command; gzip damage is
# an error as gzip -t finds it.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
make_archives "$WORK"
B="$WORK/baseline.json"
"$LOGDIFF" regress --baseline "$B" --update-baseline "$WORK/before.tar.gz" >/dev/null

# --- output paths: a symbolic link writes its target, a device is written into
mkdir -p "$WORK/artefacts"
: >"$WORK/artefacts/report.xml"
ln -s "$WORK/artefacts/report.xml" "$WORK/report.xml"
run "--junit through a symlink (exit 1: the after logs regress)" 1 \
    "$LOGDIFF" regress --baseline "$B" --junit "$WORK/report.xml" "$WORK/after.zip"
check "the symlink is still a symlink" test -L "$WORK/report.xml"
check "its target holds the report" grep -q "<testsuite" "$WORK/artefacts/report.xml"
run "--html to /dev/null: exit 1, nothing replaced" 1 \
    "$LOGDIFF" regress --baseline "$B" --html /dev/null "$WORK/after.zip"
check "/dev/null is still a device" test -c /dev/null
if [ -w /dev/full ]; then
    run "--junit to /dev/full: exit 2" 2 "$LOGDIFF" regress --baseline "$B" --junit /dev/full "$WORK/after.zip"
    check "the write error is said" grep -q "cannot write /dev/full: No space left on device" "$WORK/err"
    check "/dev/full is still a device" test -c /dev/full
fi
cp "$B" "$WORK/b2.json"; chmod 640 "$WORK/b2.json"
run "--update-baseline over a regular file" 0 "$LOGDIFF" regress --baseline "$WORK/b2.json" --update-baseline "$WORK/before.tar.gz"
check "replaced whole, its mode kept" test "$(stat -c %a "$WORK/b2.json")" = 640
check "no temporary file left" test "$(ls "$WORK" | grep -c 'b2.json.')" = 0
run "a report in a directory that does not exist: exit 2" 2 \
    "$LOGDIFF" regress --baseline "$B" --junit "$WORK/no/such/dir.xml" "$WORK/before.tar.gz"
check "says which" grep -q "cannot write $WORK/no/such/dir.xml" "$WORK/err"

# --- directory walks: symlink loops and second links are walked once, and said
mkdir -p "$WORK/logs/sub"
cp "$DEMO/server-0.log" "$WORK/logs/sub/server-0.log"
"$LOGDIFF" diff "$WORK/logs" >"$WORK/plain.out" 2>&1
ln -s . "$WORK/logs/sub/self"
ln -s .. "$WORK/logs/sub/up"
ln -s sub "$WORK/logs/again"
ln -s server-0.log "$WORK/logs/sub/current.log"
run "a tree with two loops, a second link to a directory and to a file (exit 1: the demo's harness verdict)" 1 \
    timeout 60 "$LOGDIFF" diff "$WORK/logs"
check "every file read once: the same report as without the links" \
    diff <(grep -v "^logdiff: note" "$WORK/out") "$WORK/plain.out"
check "each loop said once" test "$(grep -c 'leads back to' "$WORK/err")" = 3
check "the loop names both paths" grep -q "note: $WORK/logs/sub/self leads back to $WORK/logs/sub (a symbolic link loop" "$WORK/err"
check "the file met twice is read once" grep -q "note: $WORK/logs/sub/current.log is the same file as $WORK/logs/sub/server-0.log: read once" "$WORK/err"
run "regress: the same walk" 0 timeout 60 "$LOGDIFF" regress --baseline "$B" "$WORK/logs"
check "regress: loops said" test "$(grep -c 'regress: note: .* leads back to' "$WORK/err")" = 3

# --- a line past the line-size limit: an error with file, line and offset,
# counted in the summary and the exit status of every command (--max-line
# lowers the 1 GiB default so that the test stays small)
python3 -c "
import sys
sys.stdout.write(\"Receive: obj=GenerateReqInput(rid='big', text='\" + 'x' * 3000000 + \"')\\n\")
" >"$WORK/long.log"
cat "$DEMO/server-0.log" >>"$WORK/long.log"
gzip -c "$WORK/long.log" >"$WORK/long.log.gz"
for cmd in scan diff; do
    for f in long.log long.log.gz; do
        run "$cmd $f: a line past --max-line (exit 1)" 1 "$LOGDIFF" $cmd --max-line 1M "$WORK/$f"
        check "$cmd $f: the error names file, line and offset" \
            grep -q "^logdiff: $WORK/$f:1: byte 0: line longer than 1048576 bytes" "$WORK/err"
        check "$cmd $f: counted in the summary" \
            grep -q "^1 line longer than the line-size limit (--max-line 1M): skipped" "$WORK/out"
        check "$cmd $f: the rest is read" grep -q "demo-\|14 lines read" "$WORK/out"
    done
done
run "regress: a line past --max-line (exit 2)" 2 "$LOGDIFF" regress --baseline "$B" --max-line 1M "$WORK/long.log.gz"
check "regress: the error names file, line and offset" grep -q "long.log.gz:1: byte 0: line longer than 1048576 bytes" "$WORK/err"
check "regress: counted in the summary" grep -q "1 lines lost or damaged in their capture (1 longer than the line-size limit)" "$WORK/out"

# --- gzip damage: what `gzip -t` finds damaged is an input error (exit 2)
# naming the file; what it passes is read whole
python3 - "$WORK" "$DEMO/server-0.log" <<'PY'
import gzip, io, os, sys, tarfile
work, src = sys.argv[1], sys.argv[2]
data = open(src, "rb").read()
good = gzip.compress(data)
def put(name, b):
    open(os.path.join(work, name), "wb").write(b)
crc = bytearray(good); crc[-8] ^= 0xFF                  # the trailer's CRC-32
size = bytearray(good); size[-4] ^= 0x01                # the trailer's length
mid = bytearray(good); mid[len(good) // 2] ^= 0x55      # the deflate data
put("gz-crc.log.gz", crc); put("gz-size.log.gz", size); put("gz-mid.log.gz", mid)
put("gz-header.log.gz", good[:10])                      # a bare header
put("gz-cut.log.gz", good[:len(good) // 2])             # cut short
put("gz-garbage.log.gz", good + b"garbage!")           # trailing garbage
put("gz-two.log.gz", good + gzip.compress(b"[2026-12-01 10:00:00] second member\n"))
put("gz-zeros.log.gz", good + bytes(64))                # zero padding: fine
t = io.BytesIO()
with tarfile.open(fileobj=t, mode="w") as tf:
    info = tarfile.TarInfo("logs/server-0.log"); info.size = len(data)
    tf.addfile(info, io.BytesIO(data))
tgz = bytearray(gzip.compress(t.getvalue())); tgz[-8] ^= 0xFF
put("gz-crc.tar.gz", tgz)
t = io.BytesIO()
with tarfile.open(fileobj=t, mode="w") as tf:                # a damaged .gz member of a tar
    info = tarfile.TarInfo("server-0.log.gz"); info.size = len(crc)
    tf.addfile(info, io.BytesIO(bytes(crc)))
put("gz-member.tar", t.getvalue())
PY
for f in gz-crc.log.gz gz-size.log.gz gz-mid.log.gz gz-header.log.gz gz-cut.log.gz gz-garbage.log.gz \
         gz-two.log.gz gz-zeros.log.gz gz-crc.tar.gz; do
    if gzip -t "$WORK/$f" 2>/dev/null; then want=0; else want=2; fi
    run "$f: as gzip -t judges it (exit $want)" $want "$LOGDIFF" scan "$WORK/$f"
    [ "$want" = 2 ] && check "$f: the error names the file and says gzip" grep -q "logdiff: $WORK/$f.*gzip: " "$WORK/err"
done
check "two members: both read" grep -q "13 lines read" <("$LOGDIFF" scan "$WORK/gz-two.log.gz" 2>&1)
run "a damaged .gz member of a tar: exit 2" 2 "$LOGDIFF" scan "$WORK/gz-member.tar"
check "names the member" grep -q "gz-member.tar:server-0.log.gz.*gzip: invalid compressed data in member 1: incorrect data check" "$WORK/err"

# --- bounded conversation state: said in --help, and in the summary when a
# conversation was forgotten to stay within it
run "diff --help names the bounds" 0 "$LOGDIFF" diff --help
check "--conversation-memory in --help" grep -q -- "--conversation-memory SIZE .*default 256M" "$WORK/out"
check "--max-conversations in --help" grep -q -- "--max-conversations N .*default 65536" "$WORK/out"
run "diff with room for one conversation (exit 1)" 1 "$LOGDIFF" diff --max-conversations 1 "$DEMO"
check "the summary says how many were forgotten" grep -q \
    "^3 conversations forgotten to stay within --conversation-memory 256M and --max-conversations 1 (the one used longest ago first)" "$WORK/out"
run "diff with the default room: nothing forgotten (exit 1)" 1 "$LOGDIFF" diff "$DEMO"
check "no such line" sh -c "! grep -q forgotten '$WORK/out'"
run "regress says it too" 0 "$LOGDIFF" regress --baseline "$B" --conversation-memory 1K "$WORK/before.tar.gz"
check "regress: forgotten conversations in the summary" grep -q "conversations forgotten to stay within --conversation-memory 1K" "$WORK/out"
run "a size that is not one: exit 2" 2 "$LOGDIFF" diff --conversation-memory 12X "$DEMO"
check "says so" grep -q -- "--conversation-memory '12X' is not a size" "$WORK/err"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
