#!/usr/bin/env bash
# logdiff tokenize: the llama.cpp gpt-2 vectors through ../shared/tokenizers/gpt2-tokenizer.json
# (less the one merge whose product is not in its vocabulary, as tests/replay/tokenizer/test_tok.c),
# --add-special/--parse-special, --decode giving the exact bytes back (invalid UTF-8 too),
# a model directory as SRC, and the errors.
. "$(dirname "$0")/lib.bash"
SHARED=${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}
S="$SHARED/tokenizers"
if [ ! -f "$S/gpt2-tokenizer.json" ]; then
    echo "skipped: $S/gpt2-tokenizer.json absent"
    exit 77
fi

# a repaired copy in $WORK (never committed), with one TemplateProcessing and added tokens
python3 - "$S/gpt2-tokenizer.json" "$WORK" <<'PY' || { echo "cannot prepare the tokenizer"; exit 1; }
import json, os, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
v = d["model"]["vocab"]
d["model"]["merges"] = [m for m in d["model"]["merges"] if "".join(m.split(" ")) in v]
json.dump(d, open(f"{sys.argv[2]}/gpt2.json", "w"), ensure_ascii=False)
d["added_tokens"].append({"id": 50257, "content": "<|im_start|>", "special": True, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False})
d["post_processor"] = {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}], "pair": [],
                       "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [50257], "tokens": ["<|im_start|>"]}}}
os.mkdir(f"{sys.argv[2]}/model")
json.dump(d, open(f"{sys.argv[2]}/model/tokenizer.json", "w"), ensure_ascii=False)
# the vectors, one file per case
inp = open(f"{os.path.dirname(sys.argv[1])}/ggml-vocab-gpt-2.gguf.inp", encoding="utf-8").read()
cases = inp.split("\n__ggml_vocab_test__\n")[:-1]
out = open(f"{os.path.dirname(sys.argv[1])}/ggml-vocab-gpt-2.gguf.out").read().split("\n")
for i, c in enumerate(cases):
    open(f"{sys.argv[2]}/case{i}.txt", "w", encoding="utf-8", newline="").write(c)
    open(f"{sys.argv[2]}/case{i}.ids", "w").write(" ".join(out[i].split()) + "\n")
open(f"{sys.argv[2]}/n", "w").write(str(len(cases)))
PY

T="$WORK/gpt2.json"
n=$(cat "$WORK/n")
bad=0
for ((i = 0; i < n; i++)); do
    "$LOGDIFF" tokenize --tokenizer "$T" <"$WORK/case$i.txt" >"$WORK/got" 2>"$WORK/err" &&
        cmp -s "$WORK/got" "$WORK/case$i.ids" &&
        "$LOGDIFF" tokenize --tokenizer "$T" --decode <"$WORK/got" >"$WORK/back" &&
        cmp -s "$WORK/back" "$WORK/case$i.txt" || { bad=$((bad + 1)); echo "     case $i differs"; }
done
check "llama.cpp gpt-2 vectors: $n cases, ids and decoded bytes" test "$bad" -eq 0
# -z: the same cases in one input, NUL-separated: each encoded alone, a line of ids each
: >"$WORK/all.txt"; : >"$WORK/all.ids"
for ((i = 0; i < n; i++)); do
    cat "$WORK/case$i.txt" >>"$WORK/all.txt"; printf '\0' >>"$WORK/all.txt"
    cat "$WORK/case$i.ids" >>"$WORK/all.ids"
done
"$LOGDIFF" tokenize --tokenizer "$T" -z <"$WORK/all.txt" >"$WORK/all.got"
check "-z: $n NUL-separated cases, a line of ids each" cmp "$WORK/all.got" "$WORK/all.ids"
run "-z with --decode: exit 2" 2 "$LOGDIFF" tokenize --tokenizer "$T" -z --decode

# expected ids below: HF tokenizers 0.23.3 on the same repaired file
printf 'Hello world' >"$WORK/hw"
run "encode" 0 "$LOGDIFF" tokenize --tokenizer "$T" <"$WORK/hw"
check "Hello world" test "$("$LOGDIFF" tokenize --tokenizer "$T" <"$WORK/hw")" = "15496 995"
printf '' | "$LOGDIFF" tokenize --tokenizer "$T" >"$WORK/empty"
check "empty input: one empty line" test "$(od -An -c "$WORK/empty" | tr -d ' ')" = '\n'
printf 'a<|endoftext|>b' >"$WORK/sp"
check "special tokens are text by default" test "$("$LOGDIFF" tokenize --tokenizer "$T" <"$WORK/sp")" = "64 27 91 437 1659 5239 91 29 65"
check "--parse-special" test "$("$LOGDIFF" tokenize --tokenizer "$T" --parse-special <"$WORK/sp")" = "64 50256 65"
check "--add-special without a template adds nothing" \
    test "$("$LOGDIFF" tokenize --tokenizer "$T" --add-special <"$WORK/hw")" = "15496 995"
check "model directory, --add-special: BOS" \
    test "$("$LOGDIFF" tokenize --tokenizer "$WORK/model" --add-special <"$WORK/hw")" = "50257 15496 995"
check "model directory, default: no BOS" \
    test "$("$LOGDIFF" tokenize --tokenizer "$WORK/model" <"$WORK/hw")" = "15496 995"
printf 'caf\xc3\xa9 \xff\xfe\xe4\xb8 ok\n' >"$WORK/bin"
"$LOGDIFF" tokenize --tokenizer "$T" <"$WORK/bin" | "$LOGDIFF" tokenize --tokenizer "$T" --decode >"$WORK/bin.back"
check "invalid UTF-8 round-trips" cmp "$WORK/bin" "$WORK/bin.back"
printf '50256 220\n' | "$LOGDIFF" tokenize --tokenizer "$T" --decode >"$WORK/dec"
check "--decode: special token and space" test "$(cat "$WORK/dec")" = "<|endoftext|> "
printf '1 2\n3\t4' | "$LOGDIFF" tokenize --tokenizer "$T" --decode >"$WORK/dec"
check "--decode: any white space between ids" test "$(cat "$WORK/dec")" = '"#$%'

# errors
run "--help" 0 "$LOGDIFF" tokenize --help
check "--help names the options" grep -q -- "--parse-special" "$WORK/out"
run "no --tokenizer: exit 2" 2 "$LOGDIFF" tokenize </dev/null
run "missing file: exit 2" 2 "$LOGDIFF" tokenize --tokenizer "$WORK/nope.json" </dev/null
check "missing file named" grep -q "nope.json" "$WORK/err"
run "the shared file as it is: refused like HF" 2 "$LOGDIFF" tokenize --tokenizer "$S/gpt2-tokenizer.json" </dev/null
check "names the merge" grep -q "Cla ude" "$WORK/err"
echo '{"model": {"type": "Unigram", "vocab": []}}' >"$WORK/uni.json"
run "unsupported model: exit 2" 2 "$LOGDIFF" tokenize --tokenizer "$WORK/uni.json" </dev/null
check "says Unigram" grep -q "Unigram" "$WORK/err"
run "bad id: exit 2" 2 sh -c "echo '1 99999999' | \"$LOGDIFF\" tokenize --tokenizer \"$T\" --decode"
check "says which id" grep -q "99999999" "$WORK/err"
run "not an id: exit 2" 2 sh -c "echo '1 x' | \"$LOGDIFF\" tokenize --tokenizer \"$T\" --decode"
run "positional argument: exit 2" 2 "$LOGDIFF" tokenize --tokenizer "$T" file.txt </dev/null
finish
