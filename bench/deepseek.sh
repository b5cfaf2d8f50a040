#!/usr/bin/env bash
# deepseek.sh - DeepSeek-V4 on logdiff's CPU engine (issue 7): prefill and
# decode tokens/s of the largest "tiny but not toy" V4 that stays a few
# hundred MB (hidden 1024, 8 layers of sliding / CSA / HCA attention, 64
# experts with 2 hash-routed layers, mHC with 4 streams; 230 M random
# parameters, 0.9 GB fp32), on 2 cores with the reference ops, and the cost
# of each op variant (`--kernels`) relative to the reference, in the same
# run (see bench/README.md).
#
#   bench/deepseek.sh                 # THREADS=2 RUNS=3 PROMPT=64 DECODE=32
#   PYTHON=/tmp/engvenv/bin/python bench/deepseek.sh
#   VARIANTS="indexer=fp8 rope=bf16" bench/deepseek.sh   # only these
#
# The model is written once into build-bench/models/ds4-bench/ by
# tools/gen_tiny_deepseek_v4.py --bench (needs Python with torch and
# transformers 5.23: PYTHON; skipped with the reason when it is missing).
# Prints `name  baseline  logdiff  unit  ratio` lines: the reference's
# prefill and decode tok/s, then per variant its tok/s against the
# reference's (ratio = variant / reference: > 1 faster).  VARIANTS are the
# entries of engine/backend/cpu_kernels.c's ld_cpu_kernel_variants that apply to V4
# (ld_cpu_kernel_variant_applies with mHC, no MLA): the op-table ops, then
# the V4 session's combine, mhc, indexer and rope variants.
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${BENCH_BUILD_DIR:-build-bench}
THREADS=${THREADS:-2}
RUNS=${RUNS:-3}
PROMPT=${PROMPT:-64}
DECODE=${DECODE:-32}
PY=${PYTHON:-python3}
M=$BUILD/models/ds4-bench

die() { echo "deepseek.sh: $*" >&2; exit 2; }

cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null || die "cmake failed"
cmake --build "$BUILD" --target bench_engine -j "$THREADS" >/dev/null || die "build failed"
if [ ! -f "$M/model.safetensors" ]; then
    if ! "$PY" -c 'import torch, transformers' 2>/dev/null; then
        echo "deepseek.sh: skipped: $PY lacks torch/transformers to write the model (set PYTHON)"
        exit 0
    fi
    "$PY" tools/gen_tiny_deepseek_v4.py --bench "$M" >/dev/null || die "cannot write the model"
fi

# best decode and prefill tok/s over RUNS runs of bench_engine with $@
measure() {
    local d=0 p=0 out
    for _ in $(seq "$RUNS"); do
        out=$("$BUILD/bench_engine" --model "$M" --threads "$THREADS" --prompt "$PROMPT" --decode "$DECODE" "$@") ||
            die "bench_engine $* failed"
        d=$("$PY" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$d" \
            "$(printf '%s\n' "$out" | awk '/^decode_tps/{print $2}')")
        p=$("$PY" -c 'import sys; print(max(float(sys.argv[1]), float(sys.argv[2])))' "$p" \
            "$(printf '%s\n' "$out" | awk '/^prefill_tps/{print $2}')")
    done
    echo "$p $d"
}
row() { printf '%-22s %10.2f %10.2f  %-6s %6.2f\n' "$1" "$2" "$3" "$4" "$("$PY" -c "print($3 / $2)")"; }

# one run first, not counted: the model's pages into the cache and the
# cores up to speed, so that the reference (measured first) is not slowed
"$BUILD/bench_engine" --model "$M" --threads "$THREADS" --prompt "$PROMPT" --decode "$DECODE" --backend ref \
    >/dev/null || die "bench_engine failed"
read -r ref_p ref_d < <(measure --backend ref)
row prefill_ref "$ref_p" "$ref_p" tok/s
row decode_ref "$ref_d" "$ref_d" tok/s
VARIANTS=${VARIANTS:-"matmul=fast matmul=bf16 matmul=splitk matmul=fp8act attention=fast rmsnorm=bf16 swiglu=bf16
    combine=fused mhc=bf16 mhc=sinkhorn-bf16 indexer=bf16 indexer=fp8 rope=bf16"}
for v in $VARIANTS; do
    read -r p d < <(measure --backend ref --kernels "$v")
    row "prefill_$v" "$ref_p" "$p" tok/s
    row "decode_$v" "$ref_d" "$d" tok/s
done
read -r p d < <(measure --backend cpu)
row prefill_cpu_backend "$ref_p" "$p" tok/s
row decode_cpu_backend "$ref_d" "$d" tok/s
echo "setup: $THREADS threads, prompt $PROMPT, decode $DECODE, best of $RUNS; $M ($(du -m "$M/model.safetensors" | cut -f1) MB);" \
     "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
