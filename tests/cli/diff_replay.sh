#!/usr/bin/env bash
# logdiff diff --replay and logdiff regress --replay / --model on the log of
# testdata/replay/replaylog/ (tools/gen_replay_fixtures.py; the expected divergence P, the logged
# ids and the greedy continuations are transformers' numbers in expect.json) and the tiny Qwen3 of
# testdata/models/qwen3: kernels.consistent on the true greedy output, kernels.divergence at P on
# the altered one (verdict kernels), kernels.not_replayed (with the reason) where there is nothing
# to replay; regress with a baseline of the true log against the altered log regresses exactly
# the altered request; --replay-backend ref --replay-tp 2 gives the same findings and regressions.
# Without --replay, diff's output is unchanged.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"

run "--help names --replay" 0 "$LOGDIFF" diff --help
check "help text" grep -q -- "--replay DIR" "$WORK/out"
check "help names the kinds" grep -q "kernels.divergence" "$WORK/out"

run "diff --replay: the altered output diverges" 1 "$LOGDIFF" diff --json --replay "$M" "$LOG"
check "kernels findings as transformers says" python3 - "$WORK/out" "$D/expect.json" <<'PY'
import json, sys
rows = {r["rid"]: r for r in map(json.loads, open(sys.argv[1]))}
ex = json.load(open(sys.argv[2]))["requests"]
def kern(rid):
    return [f for f in rows[rid]["findings"] if f["kind"].startswith("kernels.")]
# the true greedy output: consistent, info, verdict untouched
g = kern("rp-greedy")
assert [f["kind"] for f in g] == ["kernels.consistent"] and g[0]["severity"] == "info", g
assert rows["rp-greedy"]["verdict"] == "ok"
assert "all %d logged tokens" % len(ex["rp-greedy"]["output_ids"]) in g[0]["detail"], g
# the altered one: divergence at P, error, verdict kernels
a = kern("rp-altered")
assert [f["kind"] for f in a] == ["kernels.divergence"] and a[0]["severity"] == "error", a
assert rows["rp-altered"]["verdict"] == "kernels"
P = ex["rp-altered"]["divergence"]
pos = ex["rp-altered"]["positions"][P]
f = a[0]
assert f["first_diff"] == P, f
assert f["expected_len"] == pos["rank"] and f["actual_len"] == len(ex["rp-altered"]["output_ids"]), f
d = f["detail"]
assert "position %d of 12" % P in d and "logged %d (rank %d, logprob %.4f)" % (pos["id"], pos["rank"], pos["logprob"]) in d, d
assert "top-1 %d (logprob %.4f)" % (pos["top1"], pos["top1_logprob"]) in d, d
assert "margin %.4f" % pos["margin"] in d, d
out = ex["rp-altered"]["output_ids"]
ctx = " ".join(map(str, out[max(0, P - 8):P]))
assert f["prompt_excerpt"] == ctx + " | " + " ".join(map(str, out[P:P + 8])), f["prompt_excerpt"]
assert f["array_excerpt"] == ctx + " | " + " ".join(map(str, ex["rp-altered"]["greedy_from_divergence"])), f["array_excerpt"]
# nothing to replay: info with the reason
n = kern("rp-no-output")
assert [x["kind"] for x in n] == ["kernels.not_replayed"] and n[0]["severity"] == "info", n
assert "no Finish line" in n[0]["detail"], n
b = kern("rp-bad-id")
assert [x["kind"] for x in b] == ["kernels.not_replayed"] and "input_ids[5] = 300" in b[0]["detail"], b
t = kern("rp-text-only")
assert [x["kind"] for x in t] == ["kernels.not_replayed"] and "no tokenizer" in t[0]["detail"], t
c = kern("rp-ids-cut")
assert [x["kind"] for x in c] == ["kernels.not_replayed"] and "cut the input_ids" in c[0]["detail"], c
PY

run "diff --replay, text" 1 "$LOGDIFF" diff --replay "$M" --rid rp-altered "$LOG"
check "verdict line" grep -q "^rp-altered  *kernels .*kernels.divergence$" "$WORK/out"
check "evidence: replay and logged excerpts" grep -q '^        replay    "211 266 43 122 | 269 160' "$WORK/out"
check "evidence: logged side" grep -q '^        logged    "211 266 43 122 | 119 105' "$WORK/out"
run "diff --replay, consistent request" 0 "$LOGDIFF" diff --replay "$M" --rid rp-greedy "$LOG"

# the model directory with a tokenizer: tokens decoded, the text-only prompt tokenized
run "diff --replay with a tokenizer" 1 "$LOGDIFF" diff --json --replay "$D/model" "$LOG"
check "decoded evidence, text prompt replayed" python3 - "$WORK/out" "$D/expect.json" <<'PY'
import json, sys
rows = {r["rid"]: r for r in map(json.loads, open(sys.argv[1]))}
ex = json.load(open(sys.argv[2]))["requests"]
f = [x for x in rows["rp-altered"]["findings"] if x["kind"] == "kernels.divergence"][0]
assert 'logged 119 "w"' in f["detail"] and f["first_diff"] == ex["rp-altered"]["divergence"], f
assert " | w" in f["prompt_excerpt"], f
t = [x for x in rows["rp-text-only"]["findings"] if x["kind"].startswith("kernels.")]
want = {"replay.consistent": "kernels.consistent"}[ex["rp-text-only"]["verdict_with_tokenizer"]]
assert [x["kind"] for x in t] == [want] and "prompt text tokenized" in t[0]["detail"], t
PY

# without --replay: byte for byte what diff said before (no kernels finding, same text)
run "diff without --replay" 1 "$LOGDIFF" diff -v "$LOG"
check "no kernels findings" bash -c '! grep -q kernels "$0"' "$WORK/out"
run "diff --replay: not a model directory" 2 "$LOGDIFF" diff --replay "$D" "$LOG"
check "names --replay" grep -q "logdiff diff: --replay" "$WORK/err"

# regress: a baseline of the true log (rp-altered with its greedy output), then the altered log
python3 - "$LOG" "$WORK/true.log" "$D/expect.json" <<'PY'
import json, sys
ex = json.load(open(sys.argv[3]))["requests"]
alt = "'output_ids': %s" % ex["rp-altered"]["output_ids"]
true = "'output_ids': %s" % ex["rp-greedy"]["output_ids"]
text = open(sys.argv[1]).read()
assert alt in text
open(sys.argv[2], "w").write(text.replace(alt, true))
PY
run "regress --replay: baseline of the true log" 0 "$LOGDIFF" regress --replay "$M" --baseline "$WORK/b.json" --update-baseline "$WORK/true.log"
check "baseline holds kernels.consistent" grep -q '"rid": "rp-altered", "verdict": "ok", "errors": \[\], "info": \["kernels.consistent"\]' "$WORK/b.json"
run "regress --replay: the altered log regresses" 1 "$LOGDIFF" regress --json --replay "$M" --baseline "$WORK/b.json" "$LOG"
check "exactly rp-altered regressed, with kernels.divergence" python3 - "$WORK/out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
reg = [r for r in rows if r.get("regression")]
assert [r["rid"] for r in reg] == ["rp-altered"], reg
assert reg[0]["verdict"] == "kernels" and reg[0]["new_errors"] == ["kernels.divergence"], reg[0]
PY
run "regress --model DIR with weights replays too" 1 "$LOGDIFF" regress --model "$M" --baseline "$WORK/b.json" "$LOG"
check "the note says it is replayed" grep -q "no chat template .*its weights are replayed" "$WORK/err"
check "rp-altered named" grep -q "rp-altered" "$WORK/out"
run "regress --help says what --model does" 0 "$LOGDIFF" regress --help
check "help: --model replays" grep -q "when DIR holds" "$WORK/out"
# --replay-backend / --replay-tp: the same verdicts on the reference backend split over 2 ranks
run "diff --replay on cpu" 1 "$LOGDIFF" diff --json --replay "$M" "$LOG"
cp "$WORK/out" "$WORK/cpu.jsonl"
run "diff --replay-backend ref --replay-tp 2" 1 "$LOGDIFF" diff --json --replay "$M" --replay-backend ref \
    --replay-tp 2 "$LOG"
check "the same kernels findings, positions and ranks; the detail says where it ran" python3 - "$WORK/cpu.jsonl" \
    "$WORK/out" <<'PY'
import json, sys
a = {r["rid"]: r for r in map(json.loads, open(sys.argv[1]))}
b = {r["rid"]: r for r in map(json.loads, open(sys.argv[2]))}
assert set(a) == set(b)
for rid in a:
    ka = [f for f in a[rid]["findings"] if f["kind"].startswith("kernels.")]
    kb = [f for f in b[rid]["findings"] if f["kind"].startswith("kernels.")]
    assert [f["kind"] for f in ka] == [f["kind"] for f in kb] and a[rid]["verdict"] == b[rid]["verdict"], rid
    for x, y in zip(ka, kb):
        assert x.get("first_diff") == y.get("first_diff") and x.get("expected_len") == y.get("expected_len"), (x, y)
        if x["kind"] != "kernels.not_replayed":
            assert "backend cpu" in x["detail"] and "backend ref, tp 2" in y["detail"], (x["detail"], y["detail"])
PY
run "regress --replay-backend ref --replay-tp 2: the altered log regresses the same way" 1 "$LOGDIFF" regress --json \
    --replay "$M" --replay-backend ref --replay-tp 2 --baseline "$WORK/b.json" "$LOG"
check "exactly rp-altered regressed" python3 -c '
import json, sys
reg = [r for r in map(json.loads, open(sys.argv[1])) if r.get("regression")]
assert [r["rid"] for r in reg] == ["rp-altered"] and reg[0]["new_errors"] == ["kernels.divergence"], reg' "$WORK/out"
run "--replay-tp without a model" 2 "$LOGDIFF" diff --replay-tp 2 "$LOG"
check "says it needs --replay" grep -q "go with a model to replay" "$WORK/err"
run "--replay-backend gpu" 2 "$LOGDIFF" regress --replay "$M" --replay-backend gpu --baseline "$WORK/b.json" "$LOG"
check "names the choices" grep -q -- "--replay-backend: give cpu, ref or cuda" "$WORK/err"
run "--replay-tp 3 on 4 heads" 2 "$LOGDIFF" diff --replay "$M" --replay-tp 3 "$LOG"
check "names the field" grep -q -- "--replay-tp: tensor parallel size 3 does not divide the model's num_attention_heads" \
    "$WORK/err"
run "diff --help names them" 0 "$LOGDIFF" diff --help
check "help text" grep -q -- "--replay-tp N" "$WORK/out"
run "regress without --replay: the altered log is not a regression" 0 "$LOGDIFF" regress --baseline "$WORK/b.json" "$LOG"
# output_ids the logger cut (head ... tail): the head is replayed, and the finding says so
python3 - "$LOG" "$WORK/cut.log" <<'PY'
import sys
text = open(sys.argv[1], encoding="utf-8").read()
whole = "'output_ids': [211, 266, 43, 122, 269, 160, 89, 155, 4, 43, 9, 159]"
start = text.index("Finish: obj=GenerateReqInput(rid='rp-greedy'")
at = text.index(whole, start)
assert at < text.index("\n", start)
open(sys.argv[2], "w", encoding="utf-8").write(
    text[:at] + "'output_ids': [211, 266, 43, 122, 269] ... [43, 9, 159]" + text[at + len(whole):])
PY
run "diff --replay: a cut output is replayed up to the cut" 0 "$LOGDIFF" diff --json --rid rp-greedy --replay "$M" "$WORK/cut.log"
check "consistent, the cut said" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
k = [f for f in r["findings"] if f["kind"].startswith("kernels.")]
assert [f["kind"] for f in k] == ["kernels.consistent"], k
assert "all 5 logged tokens (the logger cut the output_ids: the first 5 of 12)" in k[0]["detail"], k[0]["detail"]
PY
finish
