#!/bin/sh
# watch.sh - benchmark `logdiff watch` against issue 32's targets, with `logdiff diff` on the same
# lines in the same run (bench/watch.py says what each figure is).
#
#   bench/watch.sh [SIZE_MB]        # default 100: a generated log of SIZE_MB (seed 1)
#   SOAK_MB=1000 bench/watch.sh     # also the soak: SIZE_MB rotated again and again up to SOAK_MB
#
# Builds logdiff in Release into build-bench/ (BENCH_BUILD_DIR to change it); the log is
# tools/gen_bench_log.py's (agentic sessions, level 3), kept in build-bench/watch/.
# Exit status: 0 when everything ran (a target miss is still 0), 2 when something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
SIZE_MB=${1:-100}
BUILD=${BENCH_BUILD_DIR:-build-bench}
PY=${PYTHON:-python3}
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$BUILD" -j2 --target logdiff >/dev/null; }; then
    echo "watch.sh: build failed" >&2
    exit 2
fi
D=$BUILD/watch
mkdir -p "$D"
LOG=$D/bench-$SIZE_MB.log
[ -s "$LOG" ] || "$PY" tools/gen_bench_log.py --size-mb "$SIZE_MB" --seed 1 "$LOG" || exit 2
load0=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" bench/watch.py "$BUILD/logdiff" "$LOG" || exit 2
if [ -n "${SOAK_MB:-}" ]; then
    "$PY" bench/watch.py --soak "$BUILD/logdiff" "$LOG" "$SOAK_MB" || exit 2
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "machine: $(nproc) cpus, ${cpu:-unknown cpu}, $(uname -sr), loadavg at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "setup: logdiff $(git rev-parse --short HEAD 2>/dev/null) Release in $BUILD, log $LOG ($(wc -c <"$LOG") bytes), $(date -u '+%Y-%m-%d %H:%M UTC')"
