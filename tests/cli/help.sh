#!/usr/bin/env bash
# Every subcommand answers --help/-h with its usage and exit 0; bad usage exits 2.
. "$(dirname "$0")/lib.bash"
run "logdiff --help" 0 "$LOGDIFF" --help
check "main help lists scan and show" grep -q "scan" "$WORK/out"
run "logdiff with no arguments" 2 "$LOGDIFF"
run "unknown command" 2 "$LOGDIFF" frobnicate
check "unknown command names it" grep -q "'frobnicate' is not a logdiff command" "$WORK/err"
for cmd in scan show diff template watch; do
    run "$cmd --help" 0 "$LOGDIFF" "$cmd" --help
    check "$cmd --help shows its usage" grep -q "^usage: logdiff $cmd" "$WORK/out"
    run "$cmd -h" 0 "$LOGDIFF" "$cmd" -h
    run "$cmd --no-such-option" 2 "$LOGDIFF" "$cmd" --no-such-option "$DEMO"
    check "$cmd unknown option message" grep -q "unknown option '--no-such-option'" "$WORK/err"
done
run "scan without logs" 2 "$LOGDIFF" scan
run "show without --rid" 2 "$LOGDIFF" show "$DEMO"
run "--version" 0 "$LOGDIFF" --version
finish
