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

# verdicts LOG: "rid verdict error-kinds" a line, sorted, from diff --json
# (the requests only; a capture problem's object has no rid)
verdicts() {
    "$LOGDIFF" diff --json "$1" 2>/dev/null | python3 -c '
import json, sys
for r in map(json.loads, sys.stdin):
    if r.get("rid") is None: continue
    kinds = ",".join(sorted(f["kind"] for f in r["findings"] if f["severity"] == "error"))
    print(r["rid"], r["verdict"], kinds)' | sort
}

finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    exit $?
}
