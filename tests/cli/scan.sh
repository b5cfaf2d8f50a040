#!/usr/bin/env bash
# logdiff scan on the demo logs, plain, from stdin, compressed and archived: the facts
# match the generator's Python objects (testdata/cli/demo.expect.jsonl).
. "$(dirname "$0")/lib.bash"
EXPECT="$LD_SOURCE_DIR/testdata/cli/demo.expect.jsonl"
CHECK="python3 $LD_SOURCE_DIR/tests/cli/check_scan.py"

run "scan --json demo dir" 0 "$LOGDIFF" scan --json "$DEMO"
check "demo facts" $CHECK --rows 5 "$EXPECT" <"$WORK/out"
check "health check left out" bash -c "! grep -q HEALTH_CHECK '$WORK/out'"
run "scan text demo" 0 "$LOGDIFF" scan "$DEMO"
check "text has header and rows" bash -c "grep -q '^rid ' '$WORK/out' && grep -q '^demo-interrupted-1 .* abort ' '$WORK/out'"
check "text summary counts" grep -q "^5 requests; 18 lines read: 16 request lines, 2 other lines skipped, 0 parse errors; 1 health checks left out" "$WORK/out"
check "no colour when not a terminal" bash -c "! grep -q $'\e' '$WORK/out'"

# standard input
cat "$DEMO/server-0.log" | "$LOGDIFF" scan --json - >"$WORK/stdin.json"
check "stdin" $CHECK --rows 3 --file-map "server-0.log=-" <(grep server-0.log "$EXPECT") <"$WORK/stdin.json"

# compressed single streams, recognised by content (names without extensions)
for z in gzip zstd xz bzip2; do
    command -v $z >/dev/null || { echo "skip $z: not installed"; continue; }
    $z -c "$DEMO/server-0.log" >"$WORK/log-$z"
    "$LOGDIFF" scan --json "$WORK/log-$z" "$DEMO/server-1.log.gz" >"$WORK/z.json"
    check "$z stream" $CHECK --rows 5 --file-map "server-0.log=$WORK/log-$z" "$EXPECT" <"$WORK/z.json"
done

# archives: every member read and named archive:member
mkdir -p "$WORK/a/logs"
cp "$DEMO/server-0.log" "$WORK/a/logs/"; cp "$DEMO/server-1.log.gz" "$WORK/a/logs/"
(cd "$WORK/a" && tar -czf ../logs.tgz logs && tar --zstd -cf ../logs.tar.zst logs && zip -qr ../logs.zip logs)
for a in logs.tgz logs.tar.zst logs.zip; do
    "$LOGDIFF" scan --json "$WORK/$a" >"$WORK/a.json"
    check "archive $a" $CHECK --rows 5 --file-prefix "$WORK/$a:logs/" "$EXPECT" <"$WORK/a.json"
done
finish
