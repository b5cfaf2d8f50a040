#!/bin/sh
# template.sh - benchmark chat-template rendering (issue 31, item 3):
# logdiff's renderer (ld_tpl_source_load + ld_chat_render) against Python
# jinja2 set up as HF transformers does, with minijinja (Rust, from Python)
# as a second anchor, on a 100-message request with tools, all in the same
# run (see bench/README.md).
#
#   bench/template.sh                     # C: best of 1000 renders, Python: best of 100
#   C_RUNS=3000 PY_RUNS=300 bench/template.sh
#
# Builds bench_tpl_render in Release into build-bench/ (BENCH_BUILD_DIR to
# change it), generates the requests (bench/gen_template_request.py, seed 1;
# Llama 3.1's with one tool call per assistant turn, all its template takes)
# in a temporary directory, then per template (Qwen3, DeepSeek-V3.1,
# Llama-3.1, each with its model's bos/eos tokens) prints
#   render_<name>            <jinja2 s>  <logdiff s>  s/render  <ratio>  identical|DIFFERENT
#   render_<name>_from_json  <jinja2 s>  <logdiff s>  s/render  <ratio>
#   minijinja_<name>         <minijinja s>  <logdiff s>  s/render  <ratio> / <ratio from JSON>  (how its prompt compares)
# where the first line renders a context built once on both sides (jinja2
# gets its dicts once, logdiff its ld_chat_context once) and the second has
# logdiff build the context from the parsed request on every render
# (ld_chat_render, what `logdiff diff --template` pays per request); then one
# verdict per figure against the issue's targets (>= 30x jinja2 with the
# context prepared, >= 20x with it built from the request JSON) and the
# setup.  Each side compiles the template once and times only the renders
# (best of N, the thread's CPU time, in one process, pinned to core 0
# where taskset works: other work on the machine does not count).  The
# templates come from ../shared/templates (LD_SHARED_DIR to change it):
# without them the benchmark is skipped (exit 0, with the reason).
# Exit status: 0 when everything ran (a target miss is still 0), 1 when
# logdiff's prompt differs from jinja2's, 2 when something could not run
# (minijinja not installed included: the jinja2 figures are still printed).
set -u
cd "$(dirname "$0")/.." || exit 2
SHARED=${LD_SHARED_DIR:-../shared}
TPL_DIR=$SHARED/templates
BUILD=${BENCH_BUILD_DIR:-build-bench}
C_RUNS=${C_RUNS:-1000}
PY_RUNS=${PY_RUNS:-100}
PY=${PYTHON:-python3}
TARGET=30      # x jinja2, the context prepared
TARGET_JSON=20 # x jinja2, logdiff building the context from the request JSON

for t in Qwen-Qwen3-0.6B.jinja deepseek-ai-DeepSeek-V3.1.jinja meta-llama-Llama-3.1-8B-Instruct.jinja; do
    if [ ! -f "$TPL_DIR/$t" ]; then
        echo "template.sh: skipped: the template $t is not in $TPL_DIR"
        exit 0
    fi
done
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import jinja2' 2>/dev/null; then
    echo "template.sh: the baseline needs Python 3 with jinja2 (pip install jinja2==3.1.6)" >&2
    exit 2
fi
HAVE_MJ=yes
"$PY" -c 'import minijinja' 2>/dev/null || HAVE_MJ=no
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$BUILD" -j2 --target bench_tpl_render >/dev/null; }; then
    echo "template.sh: build of bench_tpl_render failed" >&2
    exit 2
fi
C_BIN=$BUILD/bench_tpl_render

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ld-bench-template.XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT INT TERM
"$PY" bench/gen_template_request.py --messages 100 --seed 1 "$TMP/request.json" || exit 2
"$PY" bench/gen_template_request.py --messages 100 --seed 1 --max-calls 1 "$TMP/request1.json" || exit 2

PIN=""
if command -v taskset >/dev/null 2>&1 && taskset -c 0 true 2>/dev/null; then PIN="taskset -c 0"; fi

status=0
verdicts=""
passed=0
figures=0
# verdict FIGURE RATIO TARGET: one line for the summary
verdict() {
    v=$(awk -v r="$2" -v t="$3" 'BEGIN { print (r >= t) ? "PASS" : "MISS" }')
    [ "$v" = PASS ] && passed=$((passed + 1))
    figures=$((figures + 1))
    verdicts="$verdicts$(printf '%-46s %6sx  target>=%sx: %s' "$1" "$2" "$3" "$v")
"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }

# bench NAME FILE REQUEST BOS EOS: the lines of one template ("" = no token: None)
bench() {
    name=$1 file=$TPL_DIR/$2 req=$TMP/$3 bos=$4 eos=$5
    set --
    [ -n "$bos" ] && set -- "$@" --bos "$bos"
    [ -n "$eos" ] && set -- "$@" --eos "$eos"
    c_line=$($PIN "$C_BIN" "$file" "$req" "$C_RUNS" "$@" --out "$TMP/$name.c.txt") || {
        echo "render_$name: logdiff failed" >&2; status=2; return; }
    py_line=$($PIN "$PY" bench/baseline_template.py "$file" "$req" "$PY_RUNS" "$@" --out "$TMP/$name.py.txt") || {
        echo "render_$name: the Python baseline failed" >&2; status=2; return; }
    c_s=$(echo "$c_line" | awk '{print $2}')
    py_s=$(echo "$py_line" | awk '{print $2}')
    chat_s=$(echo "$c_line" | awk '{print $12}')
    bytes=$(echo "$c_line" | awk '{print $6}')
    if cmp -s "$TMP/$name.c.txt" "$TMP/$name.py.txt"; then same=identical; else
        same=DIFFERENT; [ $status = 0 ] && status=1
        cmp "$TMP/$name.c.txt" "$TMP/$name.py.txt" | sed 's/^/  /'
    fi
    r=$(ratio "$py_s" "$c_s")
    r_json=$(ratio "$py_s" "$chat_s")
    printf 'render_%s  %.6f  %.6f  s/render  %sx  %s  (%s prompt bytes; the context built once)\n' \
        "$name" "$py_s" "$c_s" "$r" "$same" "$bytes"
    printf 'render_%s_from_json  %.6f  %.6f  s/render  %sx  (logdiff builds the context from the request JSON on every render)\n' \
        "$name" "$py_s" "$chat_s" "$r_json"
    verdict "$name, context prepared" "$r" "$TARGET"
    verdict "$name, context from the request JSON" "$r_json" "$TARGET_JSON"
    if [ "$HAVE_MJ" = yes ]; then
        mj_line=$($PIN "$PY" bench/baseline_minijinja.py "$file" "$req" "$PY_RUNS" "$@" \
                  --compare "$TMP/$name.py.txt") || {
            echo "minijinja_$name: the minijinja baseline failed" >&2; status=2; return; }
        mj_s=$(echo "$mj_line" | awk '{print $2}')
        mj_same=$(echo "$mj_line" | awk '{print $14}')
        case $mj_same in
            identical) mj_note="its prompt identical to jinja2's";;
            tojson-html-escapes) mj_note="its prompt differs from jinja2's only where its tojson escapes ' < > & as \\u0027 \\u003c \\u003e \\u0026 (minijinja's tojson is HTML-safe, transformers' is json.dumps)";;
            *) mj_note="its prompt DIFFERS from jinja2's ($mj_same)";;
        esac
        printf 'minijinja_%s  %.6f  %.6f  s/render  %sx / %sx from JSON  (%s)\n' \
            "$name" "$mj_s" "$c_s" "$(ratio "$mj_s" "$c_s")" "$(ratio "$mj_s" "$chat_s")" "$mj_note"
    fi
}

echo "name  anchor  logdiff  unit  ratio  outputs"
bench qwen3 Qwen-Qwen3-0.6B.jinja request.json "" "<|im_end|>"
bench deepseek_v3.1 deepseek-ai-DeepSeek-V3.1.jinja request.json "<｜begin▁of▁sentence｜>" "<｜end▁of▁sentence｜>"
bench llama3.1 meta-llama-Llama-3.1-8B-Instruct.jinja request1.json "<|begin_of_text|>" "<|eot_id|>"
echo "ratios vs python jinja2 (targets: issue 31, item 3):"
printf '%s' "$verdicts"
echo "targets met: $passed of $figures"
[ "$HAVE_MJ" = yes ] || { echo "minijinja: not installed (pip install minijinja): the second anchor was not measured" >&2; status=2; }
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
echo "machine: $(nproc 2>/dev/null) cpus, ${cpu:-unknown cpu}, $(uname -sr), loadavg $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
mj_ver=$("$PY" -c 'from importlib import metadata; print(metadata.version("minijinja"))' 2>/dev/null || echo none)
echo "setup: $("$PY" -c 'import sys, jinja2; print("Python %d.%d.%d, jinja2 %s" % (sys.version_info[:3] + (jinja2.__version__,)))'), minijinja $mj_ver, logdiff $(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$BUILD/CMakeCache.txt") build in $BUILD, C best of $C_RUNS, Python best of $PY_RUNS, pinned: ${PIN:-no}, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "input: $(wc -c <"$TMP/request.json") bytes of request JSON (Llama 3.1: $(wc -c <"$TMP/request1.json")), 100 messages, 4 tools (bench/gen_template_request.py --seed 1)"
exit $status
