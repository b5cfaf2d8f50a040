# lib.sh - helpers for the CLI tests (sourced).  Each test prints
# "N passed, N failed" and exits 1 on any failure.
set -u
: "${LOGDIFF:?LOGDIFF must point at the logdiff binary}"
: "${LD_SOURCE_DIR:?}"
DEMO="$LD_SOURCE_DIR/testdata/demo"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0

ok() { passed=$((passed + 1)); echo "ok   $1"; }
not_ok() { failed=$((failed + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

# run NAME EXPECTED_EXIT CMD... : runs CMD, keeps stdout/stderr in $WORK/out, $WORK/err
run() {
    local name=$1 want=$2; shift 2
    "$@" >"$WORK/out" 2>"$WORK/err"
    local rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$name (exit $rc)"; else
        not_ok "$name" "exit $rc, expected $want" "stderr: $(head -c 600 "$WORK/err")"; fi
}

# check NAME CONDITION-COMMAND...
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else not_ok "$name" "command failed: $*"; fi
}

# rows OUT: "rid verdict error-kinds" a line, sorted, from a file of diff's or watch's --json
# records (the requests only; a capture problem's object has no rid); n_rows OUT: how many
rows() {
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("rid") is None: continue
    kinds = ",".join(sorted(f["kind"] for f in r["findings"] if f["severity"] == "error"))
    print(r["rid"], r["verdict"], kinds)' "$1" | sort
}
n_rows() { rows "$1" | wc -l; }
has_rows() { [ "$(n_rows "$1")" -ge "$2" ]; } # OUT N: at least N rows

# wait_for SECONDS CMD...: until CMD succeeds (polled every 0.1 s); 1 when time ran out
wait_for() {
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -ge $end ] && return 1; sleep 0.1; done
}

# verdicts LOG: the rows of diff --json LOG
verdicts() {
    "$LOGDIFF" diff --json "$1" 2>/dev/null >"$WORK/.verdicts.jsonl"
    rows "$WORK/.verdicts.jsonl"
}

finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}

# start_watch OUT ERR ARGS...: `logdiff watch --json --poll 0.05 ARGS` in the background, its
# pid in WATCH_PID; stop_watch: SIGTERM to it, its exit status in WATCH_RC (the watch tests)
start_watch() {
    local out=$1 err=$2; shift 2
    "$LOGDIFF" watch --json --poll 0.05 "$@" >"$out" 2>"$err" &
    WATCH_PID=$!
}
stop_watch() { kill -TERM "$WATCH_PID" 2>/dev/null; wait "$WATCH_PID"; WATCH_RC=$?; WATCH_PID=; }
