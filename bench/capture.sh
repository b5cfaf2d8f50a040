#!/bin/sh
# capture.sh - `logdiff scan` through Docker json-file, CRI, kubectl --prefix, journalctl and
# shippers' JSON lines against the plain log, same run (bench/capture.py).
#
#   bench/capture.sh [SIZE_MB] [capture.py options]     # default 100
set -u
cd "$(dirname "$0")/.." || exit 2
SIZE_MB=${1:-100}
BUILD=${BENCH_BUILD_DIR:-build-bench}
[ $# -gt 0 ] && shift
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$BUILD" -j2 --target logdiff; } >&2; then
    echo "capture.sh: build failed" >&2
    exit 2
fi
exec "${PYTHON:-python3}" bench/capture.py --size-mb "$SIZE_MB" --logdiff "$BUILD/logdiff" "$@"
