#!/usr/bin/env bash
# The demo story as production captures write it (tools/gen_capture_fixtures.py:
# Docker json-file, CRI, kubectl --prefix, Vector / Fluent Bit / Loki JSON
# lines), its request lines made ~100 KB so that Docker and CRI cut them at
# 16 KiB: every capture gives the plain log's verdicts, scan counts what the
# generator wrote, and what a capture lost is reported, never dropped.
. "$(dirname "$0")/lib.bash"
GEN="python3 $LD_SOURCE_DIR/tools/gen_capture_fixtures.py"
CAPTURES="docker-json.log cri.log kubectl-prefix.log vector.jsonl fluent-bit.jsonl loki.jsonl"

# summary FILE NAME: scan --json --summary's counts against the generator's manifest
summary_matches() {
    "$LOGDIFF" scan --json --summary "$1" 2>/dev/null | tail -1 >"$WORK/summary.json"
    python3 - "$WORK/summary.json" "$(dirname "$1")/manifest.json" "$2" "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
m = json.load(open(sys.argv[2]))[sys.argv[3]]
kind = sys.argv[4]
c = s["capture"]
want = {"members": {kind: 1}, "records": m["records"] if kind != "plain" else 0,
        "rejoined_lines": m["split_lines"], "joined_records": m["split_pieces"],
        "replaced_bytes": m["replaced_bytes"], "unfinished_lines": 0, "bad_records": 0}
got = {k: c[k] for k in want}
assert got == want, (got, want)
assert s["requests"] == 5 and s["request_lines"] == 16 and s["parse_errors"] == 0, s
PY
}

for size in short long; do
    args=(); [ $size = long ] && args=(--long 100000)
    $GEN "${args[@]}" "$WORK/$size" "$DEMO/server-0.log" "$DEMO/server-1.log.gz" \
        || { not_ok "$size: generate the captures"; continue; }
    verdicts "$WORK/$size/plain.log" >"$WORK/$size.plain"
    check "$size: the plain log has the demo's five verdicts" test "$(wc -l <"$WORK/$size.plain")" = 5
    for c in $CAPTURES; do
        verdicts "$WORK/$size/$c" >"$WORK/$size.$c"
        check "$size $c: the plain log's verdicts" cmp -s "$WORK/$size.plain" "$WORK/$size.$c"
        kind=${c%%.*}
        case $kind in vector | fluent-bit | loki) kind=shipper-json ;; esac
        check "$size $c: scan's summary counts what was written" summary_matches "$WORK/$size/$c" "$c" "$kind"
    done
done
check "long: Docker and CRI cut the request lines" python3 -c "
import json; m = json.load(open('$WORK/long/manifest.json'))
assert m['docker-json.log']['split_lines'] == 6 and m['cri.log']['split_pieces'] > 30, m"
run "long docker-json: scan exits 0" 0 "$LOGDIFF" scan "$WORK/long/docker-json.log"
check "the summary names the capture" grep -q "^capture: docker-json 1 of 1 members; 54 records, 6 lines rejoined" "$WORK/out"

# cuts inside characters: Docker loses the bytes (U+FFFD), CRI keeps them
$GEN --long 100000 --seam-text "$WORK/seam" "$DEMO/server-0.log" "$DEMO/server-1.log.gz"
check "seam: the generator cut characters" python3 -c "
import json; assert json.load(open('$WORK/seam/manifest.json'))['docker-json.log']['replaced_bytes'] > 0"
check "seam docker-json: the bytes lost are counted" summary_matches "$WORK/seam/docker-json.log" docker-json.log docker-json
run "seam docker-json: scan exits 1 (lines damaged)" 1 "$LOGDIFF" scan "$WORK/seam/docker-json.log"
check "seam: each damaged line is named" grep -q "docker-json.log:[0-9]*: byte [0-9]*: the line starting at record [0-9]* was cut inside a character" "$WORK/err"
verdicts "$WORK/seam/plain.log" >"$WORK/seam.plain"
verdicts "$WORK/seam/cri.log" >"$WORK/seam.cri"
check "seam cri: the plain log's verdicts" cmp -s "$WORK/seam.plain" "$WORK/seam.cri"
verdicts "$WORK/seam/docker-json.log" >"$WORK/seam.docker"
check "seam docker-json: damaged requests are the capture's, not the template's" python3 -c "
rows = [l.split(' ') for l in open('$WORK/seam.docker').read().splitlines()]
lost = [r for r in rows if r[1] == 'log']
assert lost and all('log.capture_loss' in r[2] for r in lost), rows
assert not any(r[1] == 'template' and 'log.capture_loss' in r[2] for r in rows), rows"

# a container that died mid-line: the pieces that came are read, the problem is named
head -n 20 "$WORK/long/docker-json.log" >"$WORK/died.log"
run "unfinished line: scan exits 1" 1 "$LOGDIFF" scan "$WORK/died.log"
check "unfinished line: named with file, line and offset" grep -q "died.log:[0-9]*: byte [0-9]*: the docker-json line starting at record [0-9]* never got its last piece" "$WORK/err"
check "unfinished line: the requests before it are read" grep -q "^demo-healthy-1 " "$WORK/out"
run "unfinished line, --json: exit 1" 1 "$LOGDIFF" scan --json "$WORK/died.log"
check "unfinished line, --json: a log.capture_error object" grep -q '"kind":"log.capture_error"' "$WORK/out"

# a record the disk cut: a parse error with its offset, the rest read
{ head -n 3 "$WORK/long/cri.log"; echo '{"log":"cut'; tail -n +4 "$WORK/long/cri.log"; } >"$WORK/badrec.log"
run "bad record: scan exits 1" 1 "$LOGDIFF" scan "$WORK/badrec.log"
check "bad record: named at line 4" grep -q "badrec.log:4: byte [0-9]*: not a CRI record" "$WORK/err"
check "bad record: every request still read" grep -q "^5 requests" "$WORK/out"

# --capture
run "--capture cri on a Docker log: exit 1" 1 "$LOGDIFF" scan --capture cri "$WORK/short/docker-json.log"
check "--capture cri: every record named" test "$(grep -c 'not a CRI record' "$WORK/err")" = "$(wc -l <"$WORK/short/docker-json.log")"
run "--capture docker-json: same as auto" 0 "$LOGDIFF" scan --capture docker-json "$WORK/long/docker-json.log"
run "--capture plain: the wrappers stay" 0 "$LOGDIFF" scan --capture plain "$WORK/short/docker-json.log"
check "--capture plain: no request found" grep -q "^0 requests" "$WORK/out"
run "--capture unknown: usage error" 2 "$LOGDIFF" scan --capture journald "$DEMO"
check "--capture unknown: the names listed" grep -q "unknown --capture 'journald' (auto, plain, docker-json" "$WORK/err"
run "show through a capture" 0 "$LOGDIFF" show --rid demo-interrupted-1 "$WORK/long/cri.log"

# regress: a baseline from the plain log holds for its captures
mkdir -p "$WORK/rg/plain" "$WORK/rg/docker" "$WORK/rg/cri"
cp "$WORK/long/plain.log" "$WORK/rg/plain/server.log"
cp "$WORK/long/docker-json.log" "$WORK/rg/docker/server.log"
cp "$WORK/long/cri.log" "$WORK/rg/cri/server.log"
run "regress: baseline from the plain log" 0 "$LOGDIFF" regress --baseline "$WORK/rg/b.json" --update-baseline "$WORK/rg/plain"
run "regress: the Docker capture passes" 0 "$LOGDIFF" regress --baseline "$WORK/rg/b.json" "$WORK/rg/docker"
run "regress: the CRI capture passes, one job" 0 "$LOGDIFF" regress -j 1 --baseline "$WORK/rg/b.json" "$WORK/rg/cri"
run "regress: an unfinished line is an error" 2 "$LOGDIFF" regress --baseline "$WORK/rg/b.json" "$WORK/died.log"
check "regress: named" grep -q "never got its last piece" "$WORK/err"
finish
