#!/bin/sh
# shard.sh - benchmark `logdiff regress --shard/--merge` against issue 33's targets
# (bench/shard.py says what each figure is and what its anchor is).
#
#   bench/shard.sh [SHARES]      # default 4
#
# Builds logdiff in Release into build-bench/ (BENCH_BUILD_DIR to change it); generated
# inputs and partials go to build-bench/shard/ and are deleted afterwards.
# Exit status: 0 when everything ran (a target miss is still 0), 2 when something could not.
set -u
cd "$(dirname "$0")/.." || exit 2
SHARES=${1:-4}
BUILD=${BENCH_BUILD_DIR:-build-bench}
PY=${PYTHON:-python3}
command -v strace >/dev/null || { echo "shard.sh: strace is needed (apt-get install strace)" >&2; exit 2; }
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$BUILD" -j2 --target logdiff >/dev/null; }; then
    echo "shard.sh: build failed" >&2
    exit 2
fi
D=$BUILD/shard
rm -rf "$D" && mkdir -p "$D"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
"$PY" bench/shard.py "$BUILD/logdiff" tools/gen_bench_log.py "$D" "$SHARES" || exit 2
rm -rf "$D"
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "machine: $(nproc) cpus, ${cpu:-unknown cpu}, $(uname -sr), loadavg at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo "setup: logdiff $(git rev-parse --short HEAD 2>/dev/null) Release in $BUILD, $(date -u '+%Y-%m-%d %H:%M UTC')"
