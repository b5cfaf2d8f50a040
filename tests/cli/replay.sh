#!/usr/bin/env bash
# logdiff replay on the log of testdata/replay/replaylog/ (tools/gen_replay_fixtures.py, numbers
# from transformers) and the tiny Qwen3 of testdata/models/qwen3: exit status 0 for the greedy
# output, 1 at the divergence P of the altered one, 0 for a request without output; the JSON
# fields against expect.json (logprobs within 1e-4 of transformers' log_softmax, the greedy
# continuations); the prompt text tokenized with model/tokenizer.json; --help; the errors (2).
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"

run "--help" 0 "$LOGDIFF" replay --help
check "--help names the options" grep -q -- "--max-tokens N" "$WORK/out"
check "--help names --batch-with" grep -q -- "--batch-with RID" "$WORK/out"
run "listed in logdiff --help" 0 "$LOGDIFF" --help
check "logdiff --help lists replay" grep -q "^ *replay " "$WORK/out"

run "greedy output: consistent" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 2 "$LOG"
check "verdict line" grep -q "^replay.consistent: all 12 logged tokens" "$WORK/out"
run "altered output: divergent" 1 "$LOGDIFF" replay --model "$M" --rid rp-altered "$LOG"
check "divergence marked" grep -q "^  >>   4 .*divergence$" "$WORK/out"
check "verdict line names P" grep -q "^replay.divergent at position 4: logged 119" "$WORK/out"
run "no output: greedy continuation" 0 "$LOGDIFF" replay --model "$M" --rid rp-no-output "$LOG"
check "no-output verdict" grep -q "^replay.no_output: no Finish line" "$WORK/out"

# JSON against transformers' numbers
jcheck() { # NAME RID EXIT [OPTIONS...]
    local name=$1 rid=$2 want=$3; shift 3
    run "$name" "$want" "$LOGDIFF" replay --json --model "$M" --rid "$rid" "$@" "$LOG"
    check "$name: fields" python3 - "$WORK/out" "$D/expect.json" "$rid" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 1, lines
got, ex = json.loads(lines[0]), json.load(open(sys.argv[2]))["requests"][sys.argv[3]]
for k in ("rid", "where", "verdict", "model", "prompt_source", "prompt_tokens", "output_tokens", "top_k",
          "near_tie", "divergence", "greedy", "positions", "near_ties", "first_outside_top_k"):
    assert k in got, k
assert got["verdict"] == ex["verdict"], (got["verdict"], ex["verdict"])
assert got["prompt_source"] == "input_ids"
for g, w in zip(got["positions"], ex.get("positions", [])):
    assert g["logged"]["id"] == w["id"] and g["rank"] == w["rank"] and g["top1"]["id"] == w["top1"], (g, w)
    assert abs(g["logprob"] - w["logprob"]) < 1e-4, (g, w)
    assert abs(g["margin"] - w["margin"]) < 1e-4, (g, w)
assert len(got["positions"]) == len(ex.get("positions", []))
if ex["verdict"] == "replay.divergent":
    d = got["divergence"]
    assert d["position"] == ex["divergence"] and got["first_outside_top_k"] == ex["divergence"]
    assert d["logged"]["id"] == ex["output_ids"][ex["divergence"]] and d["logged"]["rank"] == 300
    assert d["replay"]["id"] == d["top_k"][0]["id"] and len(d["top_k"]) == got["top_k"]
    assert d["gap"] > got["near_tie"] and d["margin"] >= 0
    assert got["greedy"]["from"] == ex["divergence"]
    assert got["greedy"]["ids"] == ex["greedy_from_divergence"], got["greedy"]
elif ex["verdict"] == "replay.consistent":
    assert got["divergence"] is None and got["greedy"] is None and got["first_outside_top_k"] is None
else:
    assert got["output_tokens"] == 0 and got["positions"] == [] and got["no_output_reason"]
    assert got["greedy"] == {"from": 0, "ids": ex["greedy_from_prompt"], "text": None}, got["greedy"]
PY
}
jcheck "json greedy" rp-greedy 0
jcheck "json altered" rp-altered 1 --threads 1
jcheck "json no output" rp-no-output 0

run "--top-k 1 --max-tokens 3" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --top-k 1 --max-tokens 3 "$LOG"
check "continuation of 3, top-1 list" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert len(d["greedy"]["ids"]) == 3 and len(d["divergence"]["top_k"]) == 1 and d["top_k"] == 1' "$WORK/out"
run "--near-tie 100: near-ties, consistent" 0 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --near-tie 100 "$LOG"
check "near-ties listed" python3 -c '
import json, sys; d = json.load(open(sys.argv[1]))
assert d["verdict"] == "replay.consistent" and d["near_ties"] == list(range(4, 12)) and d["first_outside_top_k"] == 4' "$WORK/out"

# the prompt text tokenized with the model directory's tokenizer.json
run "text only, tokenized" 0 "$LOGDIFF" replay --json --model "$D/model" --rid rp-text-only "$LOG"
check "tokenized prompt, transformers' numbers" python3 - "$WORK/out" "$D/expect.json" <<'PY'
import json, sys
got = json.loads(open(sys.argv[1]).read())
ex = json.load(open(sys.argv[2]))["requests"]["rp-text-only"]
assert got["prompt_source"] == "tokenized_text" and got["tokenizer"] is True
assert got["prompt_tokens"] == len(ex["prompt_ids"]) and got["verdict"] == ex["verdict_with_tokenizer"]
for g, w in zip(got["positions"], ex["positions"]):
    assert g["logged"]["id"] == w["id"] and g["rank"] == w["rank"] and abs(g["logprob"] - w["logprob"]) < 1e-4
PY
run "input_ids cut, text tokenized" 0 "$LOGDIFF" replay --json --model "$D/model" --rid rp-ids-cut "$LOG"
check "cut ids: tokenized prompt" python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); ex = json.load(open(sys.argv[2]))["requests"]["rp-ids-cut"]
assert d["prompt_source"] == "tokenized_text" and d["prompt_tokens"] == len(ex["prompt_ids"]) and d["verdict"] == ex["verdict_with_tokenizer"]' "$WORK/out" "$D/expect.json"
run "input_ids cut, no tokenizer" 2 "$LOGDIFF" replay --model "$M" --rid rp-ids-cut "$LOG"
check "says the logger cut them" grep -q "the logger cut the input_ids list" "$WORK/err"
run "text only, human output says so" 0 "$LOGDIFF" replay --model "$D/model" --rid rp-text-only "$LOG"
check "note on stderr" grep -q "tokenized with .*tokenizer.json, special tokens parsed" "$WORK/err"
run "decoded tokens shown" 1 "$LOGDIFF" replay --model "$D/model" --rid rp-altered "$LOG"
check "decoded logged token" grep -q 'logged 119 "w"' "$WORK/out"

# --seed: the continuation sampled with the logged parameters, reproducibly
sed "s/'temperature': 0.0/'temperature': 0.8, 'top_p': 0.9, 'min_p': 0.05/g" "$LOG" >"$WORK/hot.log"
sed "s/'temperature': 0.0/'temperature': 0.8, 'top_k': 1/g" "$LOG" >"$WORK/topk1.log"
run "--seed 7" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --seed 7 "$WORK/hot.log"
cp "$WORK/out" "$WORK/s7a"
run "--seed 7 again" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --seed 7 --threads 1 "$WORK/hot.log"
cp "$WORK/out" "$WORK/s7b"
run "--seed 8" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --seed 8 "$WORK/hot.log"
check "same seed, same continuation; another seed, another; logged parameters" python3 - "$WORK/s7a" "$WORK/s7b" "$WORK/out" "$D/expect.json" <<'PY'
import json, sys
a, b, c = (json.load(open(p)) for p in sys.argv[1:4])
ex = json.load(open(sys.argv[4]))["requests"]["rp-altered"]
assert a["greedy"] is None and a["sampled"]["from"] == ex["divergence"], a
assert a["sampled"]["ids"] == b["sampled"]["ids"] and len(a["sampled"]["ids"]) == 8
assert c["sampled"]["ids"] != a["sampled"]["ids"]
s = a["sampled"]
assert (s["seed"], s["temperature"], s["top_p"], s["min_p"], s["top_k"]) == ("7", 0.8, 0.9, 0.05, None), s
PY
run "--seed, temperature 0 logged: greedy" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --seed 7 "$LOG"
check "transformers' greedy continuation" python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); ex = json.load(open(sys.argv[2]))["requests"]["rp-altered"]
assert d["sampled"] is None and d["greedy"]["ids"] == ex["greedy_from_divergence"], d["greedy"]' "$WORK/out" "$D/expect.json"
run "--seed, top_k 1 logged: greedy (as SGLang)" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --seed 3 "$WORK/topk1.log"
check "transformers' greedy continuation" python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); ex = json.load(open(sys.argv[2]))["requests"]["rp-altered"]
assert d["greedy"]["ids"] == ex["greedy_from_divergence"], d' "$WORK/out" "$D/expect.json"
run "--seed, text output" 1 "$LOGDIFF" replay --model "$M" --rid rp-altered --seed 7 "$WORK/hot.log"
check "says sampled, with the parameters" grep -q "^sampled (seed 7, temperature 0.8, top-k -1, top-p 0.9, min-p 0.05) from position 4:" "$WORK/out"
run "bad --seed" 2 "$LOGDIFF" replay --model "$M" --rid rp-altered --seed -1 "$LOG"
check "says what to give" grep -q -- "--seed: give an integer" "$WORK/err"

# --batch-with: the request alone and batched with others, bitwise (dense and DeepSeek-V4 fixtures)
for bm in qwen3 deepseek-v4; do
    run "--batch-with ($bm)" 0 "$LOGDIFF" replay --model "$LD_SOURCE_DIR/testdata/models/$bm" --rid rp-greedy \
        --batch-with rp-altered,rp-no-output "$LOG"
    check "$bm: identical" grep -q "^batch.identical: the logits and hidden planes of all 26 positions are bitwise" \
        "$WORK/out"
done
run "plain replay of rp-altered" 1 "$LOGDIFF" replay --json --model "$M" --rid rp-altered "$LOG"
cp "$WORK/out" "$WORK/plain.json"
run "--batch-with --json" 0 "$LOGDIFF" replay --json --model "$M" --rid rp-altered --batch-with rp-greedy "$LOG"
check "--batch-with JSON fields" python3 -c '
import json, sys; d = json.load(open(sys.argv[1])); ex = json.load(open(sys.argv[2]))["requests"]["rp-altered"]
plain = json.load(open(sys.argv[3]))
assert d["rid"] == "rp-altered" and d["batch_with"] == ["rp-greedy"], d
assert d["identical"] is True and d["first_difference"] is None and d["max_abs_difference"] == 0, d
assert d["first_in"] is None and d["first_layer"] is None and d["max_abs_hidden_difference"] == 0, d
assert d["positions_differing"] == 0 and d["positions_logits_differing"] == 0, d
# every position of the prompt and the logged output (transformers fixture: its output_ids)
assert d["positions"] == plain["prompt_tokens"] + len(ex["output_ids"]), (d, plain["prompt_tokens"])' \
    "$WORK/out" "$D/expect.json" "$WORK/plain.json"
run "--batch-with an unknown rid" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --batch-with rp-altered,nope "$LOG"
check "names it" grep -q "no request with rid 'nope'" "$WORK/err"
run "--batch-with itself" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --batch-with rp-greedy "$LOG"
run "--batch-with a bad id" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --batch-with rp-bad-id "$LOG"
check "names the other request" grep -q -- "--batch-with rp-bad-id: ids\[5\] = 300 is outside" "$WORK/err"
run "--batch-with --check" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --batch-with rp-altered --check ref "$LOG"
check "not with --check" grep -q -- "--batch-with: not with --check" "$WORK/err"

# errors: exit 2 with the reason
run "id outside the vocabulary" 2 "$LOGDIFF" replay --model "$M" --rid rp-bad-id "$LOG"
check "names input_ids[5]" grep -q "input_ids\[5\] = 300 is outside the model's vocabulary" "$WORK/err"
run "text only, no tokenizer" 2 "$LOGDIFF" replay --model "$M" --rid rp-text-only "$LOG"
check "says there is no tokenizer" grep -q "no input_ids .*no tokenizer" "$WORK/err"
run "unknown rid" 2 "$LOGDIFF" replay --model "$M" --rid nope "$LOG"
check "unknown rid named" grep -q "no request with rid 'nope'" "$WORK/err"
run "no --model" 2 "$LOGDIFF" replay --rid rp-greedy "$LOG"
run "no --rid" 2 "$LOGDIFF" replay --model "$M" "$LOG"
run "no log" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy
run "bad --top-k" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --top-k 0 "$LOG"
run "bad --near-tie" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --near-tie x "$LOG"
run "not a model directory" 2 "$LOGDIFF" replay --model "$D" --rid rp-greedy "$LOG"
run "missing log" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy "$WORK/absent.log"
finish
