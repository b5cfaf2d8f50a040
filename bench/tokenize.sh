#!/usr/bin/env bash
# tokenize.sh - encoding throughput of `logdiff tokenize` against HF `tokenizers` (Python,
# one thread, batch of one) on the same generated text, in the same run (see bench/README.md).
#
#   bench/tokenize.sh [SIZE_MB] [RUNS] [KIND]     # default 10 MB, best of 5, mixed
#
# Builds logdiff in Release into build-bench-tok/ (incremental); generates SIZE_MB of text with
# tools/gen_tok_cases.py's generator (seeded): KIND mixed = its test corpus (prose, code, CJK,
# emoji, whitespace and digit runs, other scripts), prose = English words with contractions and
# punctuation plus code snippets only (closer to chat logs); tokenizer: ../shared/tokenizers/
# gpt2-tokenizer.json less its one broken merge (written to build-bench-tok/, never committed).
# logdiff's encode time = best wall time of `logdiff tokenize` on the text minus its best wall
# time on empty input (loading the tokenizer.json); HF's = best time of tok.encode(text) after
# loading.  Both pinned to CPU 0 where taskset works.  The ids of both sides are compared.
# Prints MB/s of each and the ratio.  Exit status: 0 ran (ids identical), 1 ids differ,
# 2 something could not run.
set -u
cd "$(dirname "$0")/.." || exit 2
SIZE_MB=${1:-10}
RUNS=${2:-5}
KIND=${3:-mixed}
PY=${PYTHON:-python3}
B=build-bench-tok
SHARED=${LD_SHARED_DIR:-../shared}
if ! { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DLOGDIFF_CUDA=OFF >/dev/null &&
       cmake --build "$B" -j2 --target logdiff >"$B/build.log" 2>&1; }; then
    echo "tokenize.sh: Release build failed (see $B/build.log)" >&2
    exit 2
fi
"$PY" -c "import tokenizers" 2>/dev/null || { echo "tokenize.sh: pip install tokenizers==0.23.3" >&2; exit 2; }
[ -f "$SHARED/tokenizers/gpt2-tokenizer.json" ] || { echo "tokenize.sh: $SHARED/tokenizers/gpt2-tokenizer.json absent" >&2; exit 2; }
"$PY" - "$SHARED/tokenizers/gpt2-tokenizer.json" "$B" "$SIZE_MB" "$KIND" <<'PY' || exit 2
import json, random, sys
sys.path.insert(0, "tools")
import gen_tok_cases as g
d = json.load(open(sys.argv[1], encoding="utf-8"))
v = d["model"]["vocab"]
d["model"]["merges"] = [m for m in d["model"]["merges"] if "".join(m.split(" ")) in v]
json.dump(d, open(f"{sys.argv[2]}/gpt2.json", "w"), ensure_ascii=False)
rng, size = random.Random(77), int(float(sys.argv[3]) * 1e6)
if sys.argv[4] == "prose":
    g.segment = lambda r: r.choice(g.CODE) if r.random() < 0.2 else g.segment_words(r)
text = "".join(g.corpus(rng, size, 9))
open(f"{sys.argv[2]}/text.txt", "w", encoding="utf-8", newline="").write(text)
PY
PIN=""
taskset -c 0 true 2>/dev/null && PIN="taskset -c 0"
bytes=$(stat -c %s "$B/text.txt")
best() { # best wall seconds of RUNS runs of: CMD < INPUT > OUTPUT
    local input=$1 output=$2; shift 2
    local b=""
    for ((r = 0; r < RUNS; r++)); do
        local t0 t1
        t0=$(date +%s.%N)
        $PIN "$@" <"$input" >"$output" || return 1
        t1=$(date +%s.%N)
        b=$(echo "$t0 $t1 ${b:-1e9}" | awk '{d = $2 - $1; print (d < $3) ? d : $3}')
    done
    echo "$b"
}
load_s=$(best /dev/null "$B/empty.ids" "$B/logdiff" tokenize --tokenizer "$B/gpt2.json") || exit 2
full_s=$(best "$B/text.txt" "$B/logdiff.ids" "$B/logdiff" tokenize --tokenizer "$B/gpt2.json") || exit 2
hf=$(RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false $PIN "$PY" bench/baseline_tokenize.py \
     "$B/gpt2.json" "$B/text.txt" "$RUNS" "$B/hf.ids") || exit 2
hf_s=$(echo "$hf" | awk '{print $2}')
same=identical
cmp -s "$B/logdiff.ids" "$B/hf.ids" || same=DIFFERENT
awk -v kind="$KIND" -v b="$bytes" -v l="$load_s" -v f="$full_s" -v h="$hf_s" -v same="$same" -v runs="$RUNS" 'BEGIN {
    e = f - l; mb = b / 1e6
    printf "input: %.2f MB of generated %s text, gpt2-tokenizer.json, best of %d\n", mb, kind, runs
    printf "logdiff tokenize: %.3f s total, %.3f s loading, %.3f s encoding = %.1f MB/s\n", f, l, e, mb / e
    printf "HF tokenizers (1 thread, batch of one): %.3f s encoding = %.1f MB/s\n", h, mb / h
    printf "ratio (logdiff / HF): %.2fx   ids: %s\n", h / e, same
}'
echo "hf: $hf"

# Request-sized pieces, what `diff --tokenizer` encodes: the same text cut into 4 KB pieces (at
# character boundaries), each encoded alone; the anchor is tiktoken (pip install tiktoken), an
# Encoding from the same GPT-2 vocabulary (bench/baseline_tiktoken.py), one thread.
if "$PY" -c "import tiktoken" 2>/dev/null; then
    "$PY" - "$B/text.txt" "$B/pieces.bin" <<'PY' || exit 2
import sys
b = open(sys.argv[1], "rb").read()
out, i = [], 0
while i < len(b):
    j = min(len(b), i + 4096)
    while j < len(b) and (b[j] & 0xC0) == 0x80:
        j += 1
    out.append(b[i:j])
    i = j
open(sys.argv[2], "wb").write(b"\0".join(out) + b"\0")
PY
    zload_s=$(best /dev/null "$B/empty.ids" "$B/logdiff" tokenize --tokenizer "$B/gpt2.json" -z) || exit 2
    pieces_s=$(best "$B/pieces.bin" "$B/logdiff.pieces.ids" "$B/logdiff" tokenize --tokenizer "$B/gpt2.json" -z) || exit 2
    tt=$($PIN "$PY" bench/baseline_tiktoken.py "$B/gpt2.json" "$B/pieces.bin" "$RUNS" "$B/tt.ids") || exit 2
    tt_s=$(echo "$tt" | awk '{print $2}')
    psame=identical
    cmp -s "$B/logdiff.pieces.ids" "$B/tt.ids" || psame=DIFFERENT
    awk -v b="$bytes" -v l="$zload_s" -v f="$pieces_s" -v t="$tt_s" -v same="$psame" 'BEGIN {
        e = f - l; mb = b / 1e6
        printf "4 KB pieces: logdiff tokenize -z %.3f s encoding = %.1f MB/s; tiktoken %.3f s = %.1f MB/s\n", e, mb / e, t, mb / t
        printf "ratio (logdiff / tiktoken, pieces): %.2fx  target>=1x: %s   ids: %s\n", t / e, (t / e >= 1) ? "PASS" : "MISS", same
    }'
    echo "tiktoken: $tt"
    [ "$psame" = identical ] || same=DIFFERENT
else
    echo "4 KB pieces: not measured (pip install tiktoken)"
fi
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg), ${PIN:-unpinned}"
[ "$same" = identical ]
