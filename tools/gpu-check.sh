#!/usr/bin/env bash
# gpu-check.sh - the CUDA backend's checks, for a session that has a GPU:
#   1. builds with CUDA for the present GPU's architecture (nvidia-smi's
#      compute capability; LOGDIFF_CUDA_ARCHS overrides), warnings as
#      errors -- or takes binaries prepared elsewhere (below);
#   2. runs the GPU tests: test_cuda_ops (ctest kernels.cuda.cuda_ops,
#      label gpu), test_backend_ops and test_backend_ds_ops (every op on cpu, cuda-ref and
#      cuda-custom against the reference backend) and
#      test_cuda_{moe,mla,route,hc,sample,ds4} (ctest kernels.cuda.*,
#      label gpu: the DeepSeek ops and the sampler, both kernels, against
#      the C reference)
#      and test_cuda_determinism (ctest engine.backend.cuda_determinism,
#      label gpu: 100 replays of a request, prefill / chunks / token by
#      token bitwise, both kernel sets near transformers, on qwen3 and
#      qwen3-fp8);
#   3. runs the kernel benchmark (bench/cuda_ops.c: each kernel's time and
#      bandwidth against a device-to-device cudaMemcpy of the same run), its
#      engine section and its DeepSeek section as two steps; the engine
#      step ends with the GEMM section: matmul=tc and custom in TFLOP/s
#      against cuBLAS's bf16 GEMM of the same run (%cublas), cuBLAS
#      dlopen'd from the machine's libraries (not carried in gpu-bin: too
#      big), "cublas: unavailable (...)" where it has none; then
#      bench_ds4_stack: the decode step of a DeepSeek-V4-Flash-shaped stack
#      of two layers (FP8 / FP4 weights built in memory) against the copy
#      roofline (target ratio <= 1.5), with its launches one by one and
#      captured in CUDA graphs (--kernels graphs=on);
#   4. (when it built) builds everything else, runs test_tp's NCCL
#      case, logdiff replay on the CUDA backend end to end
#      (tests/cli/replay_cuda.sh: --check ref, --compare-kernels) and the
#      engine's and kernels' other CPU tests (ctest -L cpu -R '^(engine|kernels)\.');
# and prints a short table (step, result, seconds), the tests' summary
# lines and the benchmark.  A build error outside the GPU targets is
# reported and fails the run, but the GPU tests and the benchmark still run.
# Unattended, no network; every step has a timeout and all of them
# together stay under GPU_CHECK_BUDGET seconds (default 470: give the
# device tool a timeout_s of 500 or more).  Logs go to BUILD_DIR/gpu-check/
# and, when OUT is set, to $OUT/gpu-check/ (a log per step and the
# summary; the GPU machine returns what is written under $OUT).
#
# The GPU machine's image may lack the project's C dependencies (cJSON,
# PCRE2, libarchive... through pkg-config); then the configure step fails.
# For that case prepare the binaries on a machine that has them (and nvcc,
# no GPU needed) and carry them:
#
#   tools/gpu-check.sh --prepare            # here: build-gpu/gpu-bin/, ~10 MB
#   # device run, carry ["build-gpu/gpu-bin"]:
#   GPU_CHECK_BIN=build-gpu/gpu-bin tools/gpu-check.sh
#
# gpu-bin/ holds the executables of `targets`, the shared libraries they need
# beyond the C/C++ runtime (libcjson), and the source directory they were
# built in (the tests read testdata/ there by absolute path; when that
# directory does not exist on the GPU machine it is made a link to this
# checkout).  Without GPU_CHECK_BIN, a configure failure falls back to
# BUILD_DIR/gpu-bin when it is there.
#
# Usage: tools/gpu-check.sh [BUILD_DIR]           (default: build-gpu)
#        tools/gpu-check.sh --prepare [BUILD_DIR]   (LOGDIFF_CUDA_ARCHS
#                                                    default 90 there)
# Exit: 0 all passed, 1 a test failed, 2 the build or the setup failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
prepare=0
if [ "${1:-}" = --prepare ]; then prepare=1; shift; fi
build=${1:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
logs=$build/gpu-check
mkdir -p "$logs"
jobs=$(nproc 2>/dev/null || echo 4)
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
targets="test_cuda_ops test_backend_ops test_backend_ds_ops test_cuda_moe test_cuda_mla test_cuda_route test_cuda_hc test_cuda_sample test_cuda_ds4 test_cuda_determinism bench_cuda_ops bench_ds4_stack"

if [ $prepare = 1 ]; then
    archs=${LOGDIFF_CUDA_ARCHS:-90}
    cmake -S "$root" -B "$build" -DLOGDIFF_CUDA=ON -DLOGDIFF_WERROR=ON "-DLOGDIFF_CUDA_ARCHS=$archs" \
        "-DCMAKE_CUDA_COMPILER=$nvcc" > "$logs/prepare.log" 2>&1 &&
        cmake --build "$build" -j "$jobs" --target $targets >> "$logs/prepare.log" 2>&1 || {
        tail -30 "$logs/prepare.log"; echo "gpu-check --prepare: build failed"; exit 2; }
    bin=$build/gpu-bin
    rm -rf "$bin" && mkdir -p "$bin/lib"
    for t in $targets; do cp "$build/$t" "$bin/"; done
    # shared libraries beyond the C and C++ runtimes
    for t in $targets; do ldd "$build/$t"; done | awk '$3 ~ /^\// {print $3}' | sort -u |
        grep -vE '/(libc|libm|libstdc\+\+|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' |
        while read -r lib; do cp -L "$lib" "$bin/lib/"; done
    echo "$root" > "$bin/source_dir"
    echo "$archs" > "$bin/archs"
    echo "prepared $bin (archs $archs):"
    ls -la "$bin" "$bin/lib"
    du -sh "$bin"
    exit 0
fi

summary=$logs/summary.txt
: > "$summary"
status=0
note() { printf '%s\n' "$*" | tee -a "$summary"; }
row() { printf '%-24s %-8s %6ss\n' "$1" "$2" "$3" | tee -a "$summary"; }

# step NAME LIMIT_S CMD...: runs CMD with a timeout, its output to
# $logs/NAME.log, and records the result; limits are capped by what is
# left of the budget
budget=${GPU_CHECK_BUDGET:-470}
step() {
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS rc left=$((budget - SECONDS))
    if [ $left -lt 15 ]; then
        row "$name" no-time 0
        return 124
    fi
    [ "$limit" -gt $left ] && limit=$left
    timeout "$limit" "$@" > "$logs/$name.log" 2>&1
    rc=$?
    local what=ok
    if [ $rc = 124 ]; then what=TIMEOUT
    elif [ $rc = 77 ]; then what=skipped
    elif [ $rc = 2 ] && grep -q 'no CUDA device' "$logs/$name.log"; then what=no-gpu
    elif [ $rc != 0 ]; then what="FAIL($rc)"
    fi
    row "$name" "$what" $((SECONDS - t0))
    return $rc
}

copy_out() {
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT/gpu-check" && cp -f "$logs"/*.log "$logs"/*.txt "$OUT/gpu-check/" 2>/dev/null
    fi
}

note "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 |
        sed 's/^/gpu: /' | tee -a "$summary"
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
else
    note "gpu: nvidia-smi not found (the GPU tests will skip)"
    cap=
fi

# where the binaries come from
bin=${GPU_CHECK_BIN:-}
built=0
if [ -z "$bin" ]; then
    archs=${LOGDIFF_CUDA_ARCHS:-${cap:-80;90;90a;100;120}}
    note "nvcc: $("$nvcc" --version 2>/dev/null | tail -1) ; archs: $archs ; jobs: $jobs"
    if step configure 90 cmake -S "$root" -B "$build" -DLOGDIFF_CUDA=ON -DLOGDIFF_WERROR=ON \
        "-DLOGDIFF_CUDA_ARCHS=$archs" "-DCMAKE_CUDA_COMPILER=$nvcc"; then
        # the GPU targets first, so that a broken file elsewhere does not stop them
        step build-gpu 240 cmake --build "$build" -j "$jobs" --target $targets || {
            grep -E 'error' "$logs/build-gpu.log" | head -20 | tee -a "$summary"; copy_out; exit 2; }
        bin=$build
        built=1
    elif [ -x "$build/gpu-bin/test_cuda_ops" ]; then
        grep -E 'Could NOT|not found|Error' "$logs/configure.log" | head -5 | tee -a "$summary"
        note "configure failed: using the prepared binaries in $build/gpu-bin"
        bin=$build/gpu-bin
    else
        tail -20 "$logs/configure.log"
        note "configure failed and no prepared binaries (tools/gpu-check.sh --prepare, then carry build-gpu/gpu-bin)"
        copy_out
        exit 2
    fi
fi
case $bin in /*) ;; *) bin=$root/$bin ;; esac
if [ -f "$bin/source_dir" ]; then
    note "binaries: $bin (prepared, archs $(cat "$bin/archs" 2>/dev/null))"
    [ -d "$bin/lib" ] && export LD_LIBRARY_PATH="$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    src=$(cat "$bin/source_dir")
    if [ "$src" != "$root" ] && [ ! -e "$src" ]; then
        mkdir -p "$(dirname "$src")" && ln -s "$root" "$src" && note "linked $src -> $root (the tests' testdata path)"
    fi
fi
note ""

# test-cuda-ops: ~10-30 s of it is the C reference of the matmul=tc cases
# (ld_var_matmul_bf16 at T up to 129, N up to 4100, K up to 1544)
step test-cuda-ops 180 "$bin/test_cuda_ops"
rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || status=1
step test-backend-ops 120 "$bin/test_backend_ops" || status=1
step test-backend-ds-ops 120 "$bin/test_backend_ds_ops" || status=1
# the DeepSeek kernels' checks, one op group a binary (the first to skip,
# 77, stops the loop: no device)
step test-cuda-deepseek 90 bash -c 'for t in moe mla route hc sample ds4; do "$0/test_cuda_$t" || exit $?; done' "$bin"
rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || status=1
step test-cuda-determinism 60 "$bin/test_cuda_determinism"
rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || status=1
# bench-cuda-ops: the GEMM section adds ~10 s (6 shapes x T 64/512/2048 x
# cuBLAS, tc, custom; ~20 ms a measurement run, the custom kernel's T=2048
# calls the longest) and cuBLAS's load
step bench-cuda-ops 110 "$bin/bench_cuda_ops" --only engine
rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || status=1
step bench-deepseek 75 "$bin/bench_cuda_ops" --only deepseek
rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || status=1
# the decode step of a V4-Flash-shaped stack of 2 layers (CSA, HCA; 7 GB of
# FP8/FP4 weights built in memory, ~10 s) against the copy roofline
# (bench/ds4_stack.c; target ratio <= 1.5)
step bench-ds4-stack 90 "$bin/bench_ds4_stack" --backend cuda --layers 2 --prompt 256 --decode 16
rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || status=1
# the same stack and steps with the launches captured in CUDA graphs of 64
# operations (kernels/cuda/cuda_graph.cu): decode_ms against bench-ds4-stack's
step bench-ds4-graphs 60 "$bin/bench_ds4_stack" --backend cuda --layers 2 --prompt 256 --decode 16 --kernels graphs=on
rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || status=1
# the same stack decoding 8 requests a step in one batch (siblings sharing
# the weights, ld_ds4_session_eval_batch): batch_step_ms, batch_gain
step bench-ds4-batch 60 "$bin/bench_ds4_stack" --backend cuda --layers 2 --prompt 64 --decode 8 --batch 8
rc=$?
[ $rc = 0 ] || [ $rc = 2 ] || status=1
if [ $built = 1 ]; then
    step build-all 150 cmake --build "$build" -j "$jobs" -- -k || {
        status=1; grep -E 'error:' "$logs/build-all.log" | head -10 | tee -a "$summary"; }
    # tensor parallelism over NCCL (test_tp's cuda cases: TP=1 over
    # NCCL bitwise the plain CUDA forward; TP=2 where there are two GPUs;
    # TP=2 with both ranks on one GPU, bitwise over NCCL where there are
    # two); only when built here, since libnccl (~200 MB) does not travel
    # in gpu-bin
    step test-tp-nccl 60 "$build/test_tp" cuda
    rc=$?
    [ $rc = 0 ] || [ $rc = 77 ] || status=1
    grep -E '^(ok|skip|FAIL) |cuda tp|passed,' "$logs/test-tp-nccl.log" 2>/dev/null | tee -a "$summary"
    # logdiff replay end to end on the CUDA backend against the reference
    # (tests/cli/replay_cuda.sh: --check ref on dense, FP8, DeepSeek V3.2 /
    # V3 FP8 / V4 FP4 tiny models; --compare-kernels); only when built here
    # (logdiff's libraries do not travel in gpu-bin)
    step replay-cuda 90 env LOGDIFF="$build/logdiff" LD_SOURCE_DIR="$root" bash "$root/tests/cli/replay_cuda.sh"
    rc=$?
    [ $rc = 0 ] || [ $rc = 77 ] || status=1
    grep -E '^(ok|FAIL|skipped)|worst plane|final-norm|passed,' "$logs/replay-cuda.log" 2>/dev/null | tee -a "$summary"
    # the CLI split over two GPUs (tests/cli/replay_cuda_tp.sh; on a
    # one-GPU machine both ranks on it; CI runs it on the emulator's two
    # devices and NCCL)
    step replay-cuda-tp 90 env LOGDIFF="$build/logdiff" LD_SOURCE_DIR="$root" bash "$root/tests/cli/replay_cuda_tp.sh"
    rc=$?
    [ $rc = 0 ] || [ $rc = 77 ] || status=1
    grep -E '^(FAIL|skipped)|worst plane|passed,' "$logs/replay-cuda-tp.log" 2>/dev/null | tee -a "$summary"
    # each rank a process (--tp-rank, tests/cli/replay_tp_procs.sh): two
    # processes sharing GPU 0 over shm, rank 0 alone ending at NCCL's bounded
    # join, and where there are two GPUs the pairs over NCCL's bootstrap
    step replay-tp-procs 60 env LOGDIFF="$build/logdiff" LD_SOURCE_DIR="$root" bash "$root/tests/cli/replay_tp_procs.sh"
    rc=$?
    [ $rc = 0 ] || [ $rc = 77 ] || status=1
    grep -E '^(FAIL|skipped)|passed,' "$logs/replay-tp-procs.log" 2>/dev/null | tee -a "$summary"
    # last: the engine's CPU tests (CI runs them too; here they show the GPU
    # machine's build is sound) get what is left of the budget
    step test-engine-cpu 150 ctest --test-dir "$build" -L cpu -R '^(engine|kernels)\.' -E '^engine\.backend\.backend_(ds_)?ops$' \
        -j "$jobs" --output-on-failure --timeout 140 || status=1
fi

note ""
# the tests' own lines: skips (with their reason), failures, summaries
for t in test-cuda-ops test-backend-ops; do
    note "== $t"
    grep -E '^(ok|skip|FAIL) |skipped:|check failed|logits nmse|bitwise|buf_alloc:|passed,|FAIL( \(|$)' \
        "$logs/$t.log" | head -60 | tee -a "$summary"
done
# every comparison line of the DeepSeek test (op, kernel, shape, nmse or indices)
note "== test-cuda-deepseek"
[ -f "$logs/test-cuda-deepseek.log" ] && grep -E '^(ok|skip|FAIL) |skipped:|check failed|passed,| (ref|custom) |differ' \
    "$logs/test-cuda-deepseek.log" | head -150 | tee -a "$summary"
# the determinism test's lines: replays, chunks, the transformers errors, CUDA graphs against launches one by one
note "== test-cuda-determinism"
[ -f "$logs/test-cuda-determinism.log" ] && grep -E '^(ok|skip|FAIL) |skipped:|check failed|replays of|calls of|logits nerr|differs|batched with|graphs=|passed,' \
    "$logs/test-cuda-determinism.log" | head -120 | tee -a "$summary"
[ -f "$logs/test-engine-cpu.log" ] && grep -hE 'tests passed|\*\*\*' "$logs/test-engine-cpu.log" | head -20 |
    tee -a "$summary"
note ""
note "== bench"
tee -a "$summary" < "$logs/bench-cuda-ops.log"
note ""
note "== bench deepseek"
[ -f "$logs/bench-deepseek.log" ] && tee -a "$summary" < "$logs/bench-deepseek.log"
note ""
note "== bench ds4 stack"
[ -f "$logs/bench-ds4-stack.log" ] && tee -a "$summary" < "$logs/bench-ds4-stack.log"
note ""
note "== bench ds4 stack, CUDA graphs (graphs=on)"
[ -f "$logs/bench-ds4-graphs.log" ] && grep -E '^(decode_ms|ratio|graph)' "$logs/bench-ds4-graphs.log" | tee -a "$summary"
note ""
note "== bench ds4 stack, 8 requests batched"
[ -f "$logs/bench-ds4-batch.log" ] && grep -E '^(decode_ms|batch)' "$logs/bench-ds4-batch.log" | tee -a "$summary"
note ""
note "result: $([ $status = 0 ] && echo PASS || echo FAIL); logs in $logs${OUT:+ and $OUT/gpu-check}"
copy_out
exit $status
