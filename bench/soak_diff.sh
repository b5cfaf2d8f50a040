#!/bin/sh
# soak_diff.sh - `logdiff diff` over a growing log: its peak memory must not grow with the log.
#
#   bench/soak_diff.sh [SIZE_MB]      # default 1000 (1 GB); a log of SIZE_MB, and its first
#                                     # quarter and half, each read by diff three ways
#
# The log is tools/gen_bench_log.py's (agentic sessions, level 3; seeded), under build-bench/soak/.
# Each run prints its peak resident set (GNU time's "Maximum resident set size") for:
#   default   the default conversation state (--conversation-memory 256M, 65536 conversations)
#   small     --conversation-memory 2M: the state's bound reached early, so the plateau shows
#   none      --no-conversations: the floor (pairing and judging only)
# and, for each way, the ratio of its peak on the whole log to its peak on the quarter: a bounded
# state gives a ratio near 1 once the bound is reached (small, none); default grows until 256M.
# Exit status: 0 when everything ran, 2 when something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
SIZE_MB=${1:-1000}
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "soak_diff.sh: GNU time (/usr/bin/time, Debian package time) is needed" >&2; exit 2; }
if ! { cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build build-bench -j2 --target logdiff; } >&2; then
    echo "soak_diff.sh: build failed" >&2; exit 2
fi
D=build-bench/soak
mkdir -p "$D"
LOG=$D/soak-$SIZE_MB.log
[ -s "$LOG" ] || python3 tools/gen_bench_log.py --size-mb "$SIZE_MB" --seed 7 "$LOG" || exit 2
BYTES=$(stat -c %s "$LOG")
head -c $((BYTES / 4)) "$LOG" >"$D/quarter.log"
head -c $((BYTES / 2)) "$LOG" >"$D/half.log"
peak() { # FILE ARGS...: peak RSS in KiB of logdiff diff ARGS FILE
    f=$1; shift
    "$TIME" -f %M -o "$D/rss" build-bench/logdiff diff --json "$@" "$f" >/dev/null 2>"$D/err"
    rc=$?
    [ "$rc" -le 1 ] || { echo "soak_diff.sh: logdiff diff $* $f: exit $rc" >&2; cat "$D/err" >&2; exit 2; }
    tail -n 1 "$D/rss" # GNU time puts "Command exited with non-zero status 1" first
}
printf '%-8s %12s %12s %12s %8s\n' way "quarter KiB" "half KiB" "whole KiB" ratio
for way in default small none; do
    case $way in
        default) args="" ;;
        small) args="--conversation-memory 2M" ;;
        none) args="--no-conversations" ;;
    esac
    # shellcheck disable=SC2086
    q=$(peak "$D/quarter.log" $args); h=$(peak "$D/half.log" $args); w=$(peak "$LOG" $args)
    printf '%-8s %12s %12s %12s %8s\n' "$way" "$q" "$h" "$w" "$(awk "BEGIN{printf \"%.2f\", $w/$q}")"
done
echo "log: $LOG, $BYTES bytes; machine: $(nproc) cores, $(uname -m)"
