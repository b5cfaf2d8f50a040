#!/usr/bin/env bash
# NaN weights: a copy of the tiny Qwen3 of testdata/models/qwen3 with a NaN planted in layer 1's
# o_proj (written here with the standard library only), replayed on the log of
# testdata/replay/replaylog/.  Every logit is then NaN, which no logit compares larger than, so a
# verdict read from them would be consistent: instead `logdiff replay` fails (exit 2) naming where
# the first non-finite value was computed (layer 1, op attn_out), on the cpu and ref backends, for
# a teacher-forced output and for a continuation; `logdiff diff --replay` gives the request an error
# finding, kernels.divergence (exit 1, verdict kernels), with the same words; --tp 2 names the
# layer.  The intact model still replays consistent.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"
NAN="$WORK/nan"
WHERE="non-finite values: first at layer 1, op attn_out (NaN at position 0)"

mkdir "$NAN" && cp "$M/config.json" "$NAN/"
python3 - "$M/model.safetensors" "$NAN/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["model.layers.1.self_attn.o_proj.weight"]
assert t["dtype"] == "F32"
at = 8 + n + t["data_offsets"][0] + 4 * 5  # row 0, column 5: every position's output takes it
b[at:at + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
PY

for be in cpu ref; do
    run "replay --backend $be: NaN weights are an error" 2 "$LOGDIFF" replay --model "$NAN" --backend "$be" \
        --rid rp-greedy "$LOG"
    check "$be: names layer and op" grep -qF "logdiff replay: rp-greedy: $WHERE" "$WORK/err"
    check "$be: no verdict printed" bash -c '! grep -q "replay\.consistent\|^rp-greedy" "$0"' "$WORK/out"
done
run "replay: the continuation of a request without output too" 2 "$LOGDIFF" replay --model "$NAN" \
    --rid rp-no-output "$LOG"
check "continuation: names layer and op" grep -qF "$WHERE" "$WORK/err"
run "replay --tp 2: the layer" 2 "$LOGDIFF" replay --model "$NAN" --backend ref --tp 2 --rid rp-greedy "$LOG"
check "tp 2: names the layer" grep -qF "non-finite values: first at layer 1's output (NaN at position 0)" "$WORK/err"
run "replay: the intact model is consistent" 0 "$LOGDIFF" replay --json --model "$M" --backend ref \
    --rid rp-greedy "$LOG"
check "intact: replay.consistent" grep -q '"replay.consistent"' "$WORK/out"

for be in cpu ref; do
    run "diff --replay-backend $be: an error finding" 1 "$LOGDIFF" diff --json --replay "$NAN" \
        --replay-backend "$be" --rid rp-greedy "$LOG"
    check "$be: kernels.divergence naming layer and op" python3 - "$WORK/out" "$WHERE" "$be" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in rows if x.get("rid") == "rp-greedy"][0]
k = [f for f in r["findings"] if f["kind"].startswith("kernels.")]
assert r["verdict"] == "kernels" and [f["kind"] for f in k] == ["kernels.divergence"], r
f = k[0]
assert f["severity"] == "error" and f["first_diff"] == 0 and f["actual_len"] == 12, f
assert sys.argv[2] in f["detail"] and "backend %s" % sys.argv[3] in f["detail"], f["detail"]
assert "from output position 0 of 12 on" in f["detail"], f["detail"]
PY
done
run "diff --replay, text" 1 "$LOGDIFF" diff --replay "$NAN" --rid rp-greedy "$LOG"
check "verdict line" grep -q "^rp-greedy  *kernels .*kernels.divergence$" "$WORK/out"
check "detail line" grep -qF "$WHERE" "$WORK/out"
run "diff --replay: the intact model is consistent" 0 "$LOGDIFF" diff --replay "$M" --rid rp-greedy "$LOG"

finish
