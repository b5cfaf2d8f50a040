#!/bin/sh
# template.sh - benchmark chat-template rendering: logdiff's renderer
# (ld_tpl_source_load + ld_chat_render) against Python jinja2 set up as HF
# transformers does, on the same 100-message request with tools, in the same
# run (see bench/README.md).
#
#   bench/template.sh                     # C: best of 300 renders, Python: best of 30
#   C_RUNS=1000 PY_RUNS=100 bench/template.sh
#
# Builds bench_tpl_render in Release into build-bench/ (BENCH_BUILD_DIR to
# change it), generates the request (bench/gen_template_request.py, seed 1)
# in a temporary directory, then per template prints
#   render_<name>  <python s/render>  <logdiff s/render>  s/render  <ratio>  identical|DIFFERENT
# where both sides render a context built once (jinja2 gets its dicts once,
# logdiff its ld_chat_context once), then the same with logdiff building the
# context from the parsed request on every render (ld_chat_render, what
# `logdiff diff --template` pays per request)
# then the verdict against the issue's target (>= 10x) and the setup.  Both
# sides compile the template once and time only the renders (best of N in one
# process, pinned to core 0 where taskset works).  The templates come from
# ../shared/templates (LD_SHARED_DIR to change it): without them the benchmark
# is skipped (exit 0, with the reason).
# Exit status: 0 when everything ran (a target miss is still 0), 1 when the
# two outputs differ, 2 when something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
SHARED=${LD_SHARED_DIR:-../shared}
TPL_DIR=$SHARED/templates
BUILD=${BENCH_BUILD_DIR:-build-bench}
C_RUNS=${C_RUNS:-300}
PY_RUNS=${PY_RUNS:-30}
PY=${PYTHON:-python3}
TARGET=10

if [ ! -f "$TPL_DIR/Qwen-Qwen3-0.6B.jinja" ] || [ ! -f "$TPL_DIR/deepseek-ai-DeepSeek-V3.1.jinja" ]; then
    echo "template.sh: skipped: the templates are not in $TPL_DIR (Qwen-Qwen3-0.6B.jinja, deepseek-ai-DeepSeek-V3.1.jinja)"
    exit 0
fi
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import jinja2' 2>/dev/null; then
    echo "template.sh: the baseline needs Python 3 with jinja2 (pip install jinja2==3.1.6)" >&2
    exit 2
fi
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
       cmake --build "$BUILD" -j2 --target bench_tpl_render >/dev/null; }; then
    echo "template.sh: build of bench_tpl_render failed" >&2
    exit 2
fi
C_BIN=$BUILD/bench_tpl_render

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ld-bench-template.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
REQ=$TMP/request.json
"$PY" bench/gen_template_request.py --messages 100 --seed 1 "$REQ" || exit 2

PIN=""
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then PIN="taskset -c 0"; fi

status=0
lowest=""
lowest_name=""
results=""
# bench NAME FILE BOS EOS: one line per template ("" = no token: None)
bench() {
    name=$1 file=$TPL_DIR/$2 bos=$3 eos=$4
    set --
    [ -n "$bos" ] && set -- "$@" --bos "$bos"
    [ -n "$eos" ] && set -- "$@" --eos "$eos"
    c_line=$($PIN "$C_BIN" "$file" "$REQ" "$C_RUNS" "$@" --out "$TMP/$name.c.txt") || {
        echo "render_$name: logdiff failed" >&2; status=2; return; }
    py_line=$($PIN "$PY" bench/baseline_template.py "$file" "$REQ" "$PY_RUNS" "$@" --out "$TMP/$name.py.txt") || {
        echo "render_$name: the Python baseline failed" >&2; status=2; return; }
    c_s=$(echo "$c_line" | awk '{print $2}')
    py_s=$(echo "$py_line" | awk '{print $2}')
    ctx_s=$(echo "$c_line" | awk '{print $10}')
    chat_s=$(echo "$c_line" | awk '{print $12}')
    bytes=$(echo "$c_line" | awk '{print $6}')
    if cmp -s "$TMP/$name.c.txt" "$TMP/$name.py.txt"; then same=identical; else
        same=DIFFERENT; [ $status = 0 ] && status=1
        cmp "$TMP/$name.c.txt" "$TMP/$name.py.txt" | sed 's/^/  /'
    fi
    ratio=$(awk -v a="$py_s" -v b="$c_s" 'BEGIN { printf "%.1f", a / b }')
    chat_ratio=$(awk -v a="$py_s" -v b="$chat_s" 'BEGIN { printf "%.1f", a / b }')
    printf 'render_%s  %.6f  %.6f  s/render  %sx  %s  (%s prompt bytes; with the context built from the request JSON each time: %.6f s, %sx)\n' \
        "$name" "$py_s" "$c_s" "$ratio" "$same" "$bytes" "$chat_s" "$chat_ratio"
    if [ -z "$lowest" ] || awk -v a="$ratio" -v b="$lowest" 'BEGIN { exit !(a < b) }'; then
        lowest=$ratio
        lowest_name=$name
    fi
}

echo "name  python  logdiff  unit  ratio  outputs"
bench qwen3 Qwen-Qwen3-0.6B.jinja "" "<|im_end|>"
bench deepseek_v3.1 deepseek-ai-DeepSeek-V3.1.jinja "<｜begin▁of▁sentence｜>" "<｜end▁of▁sentence｜>"
if [ -n "$lowest" ]; then
    verdict=$(awk -v r="$lowest" -v t="$TARGET" 'BEGIN { print (r >= t) ? "PASS" : "MISS" }')
    echo "ratio vs python jinja2: ${lowest}x (lowest: $lowest_name)  target>=${TARGET}x: $verdict"
fi
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "machine: $(nproc 2>/dev/null) cpus, ${cpu:-unknown cpu}, $(uname -sr), loadavg $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "setup: $("$PY" -c 'import sys, jinja2; print("Python %d.%d.%d, jinja2 %s" % (sys.version_info[:3] + (jinja2.__version__,)))'), logdiff $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt") build in $BUILD, C best of $C_RUNS, Python best of $PY_RUNS, pinned: ${PIN:-no}, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "input: $(wc -c <"$REQ") bytes of request JSON, 100 messages, 4 tools (bench/gen_template_request.py --seed 1)"
exit $status
