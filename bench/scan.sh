#!/bin/sh
# scan.sh - benchmark `logdiff scan --json` against the Python baseline (see bench/README.md).
#
#   bench/scan.sh [SIZE_MB]          # default 100; also measures 2*SIZE_MB and a JSON-mode log
#
# Builds logdiff in Release into build-bench/ (BENCH_BUILD_DIR to change it; incremental), then
# runs bench/scan.py, which generates the logs under that folder's bench/, times both sides in
# the same run and prints `name  baseline  logdiff  unit  ratio` lines, the verdicts, the machine
# and the inputs.
# Extra options after SIZE_MB go to scan.py (e.g. --runs 5 --baseline-runs 3 --keep).
# Exit status: 0 when everything ran (a target miss is still 0), 2 when something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
SIZE_MB=${1:-100}
BUILD=${BENCH_BUILD_DIR:-build-bench}
[ $# -gt 0 ] && shift
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
    echo "scan.sh: $PY not found; the benchmark driver needs Python 3" >&2
    exit 2
fi
# Always a Release build of the current tree: timing a stale or -O0 binary
# would mislead.
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$BUILD" -j2 --target logdiff; } >&2; then
    echo "scan.sh: build failed; measuring the baseline only" >&2
fi
exec "$PY" bench/scan.py --size-mb "$SIZE_MB" --logdiff "$BUILD/logdiff" --workdir "$BUILD/bench" "$@"
