#!/usr/bin/env bash
# logdiff replay --tp N: the request of testdata/replay/replaylog/ (logged by transformers) on the tiny
# Qwen3 split over 2 simulated ranks (tensor parallelism, engine/tp/tp_forward.h): the same verdict and
# per-position ranks as the unsplit replay, log-probabilities within rounding of it, the same bits
# (the whole --json report) whatever --threads and run after run, the report saying tp 2, layer dumps
# (the replicated embeddings the same bytes, the layers rounded differently); DeepSeek-V3 on
# smallvocab's request split over 2 ranks the same way, and DeepSeek-V4; sizes that do not divide the
# heads (V4: its o_groups), FP8 scale blocks cut, and cuda without NCCL/GPUs are clear errors;
# --compare-kernels under --tp (V3: every variant split, combine=bf16 refused with its reason). --tp with --check: qwen3 split over 2 ranks against ref, V4's layers 1-2
# alone on ref fed the split replay's streams, and TP 1's slice bitwise its planes.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"

run "no split --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 2 --json "$LOG"
cp "$WORK/out" "$WORK/plain.json"
run "--tp 2 --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 2 --tp 2 --json "$LOG"
cp "$WORK/out" "$WORK/tp2.json"
check "tp 2 reported, same verdict and ranks, logprobs within rounding" python3 - "$WORK/plain.json" "$WORK/tp2.json" <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).read().splitlines()[0])
b = json.loads(open(sys.argv[2]).read().splitlines()[0])
assert "tp" not in a and b["tp"] == 2 and b["backend"] == "cpu", (a.get("tp"), b.get("tp"))
assert a["verdict"] == b["verdict"] == "replay.consistent", (a["verdict"], b["verdict"])
pa, pb = a["positions"], b["positions"]
assert len(pa) == len(pb) == 12
for x, y in zip(pa, pb):
    assert x["rank"] == y["rank"] and x["top1"]["id"] == y["top1"]["id"], (x, y)
    assert abs(x["logprob"] - y["logprob"]) < 1e-5, (x, y)
PY
run "--tp 2 --threads 4" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 4 --tp 2 --json "$LOG"
check "bitwise: --threads 2 and 4 give the same report" cmp -s "$WORK/out" "$WORK/tp2.json"
run "--tp 2 again" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 2 --tp 2 --json "$LOG"
check "bitwise: a rerun gives the same report" cmp -s "$WORK/out" "$WORK/tp2.json"
run "--tp 2 --backend ref, text" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 2 --backend ref "$LOG"
check "text names backend and tp" grep -q "backend ref, tp 2$" "$WORK/out"
check "text verdict" grep -q "^replay.consistent" "$WORK/out"

run "--tp 2 --dump-layers" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 2 --dump-layers "$WORK/d2" "$LOG"
run "--dump-layers, no split" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/d1" "$LOG"
check "replicated embeddings: the same bytes" cmp -s "$WORK/d1/embed.npy" "$WORK/d2/embed.npy"
check "split layers: other sums" bash -c "! cmp -s '$WORK/d1/layer_01.npy' '$WORK/d2/layer_01.npy'"
run "--tp 3" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 3 "$LOG"
check "names the field" grep -q "tensor parallel size 3 does not divide the model's num_attention_heads (4)" "$WORK/err"
run "--tp 4" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 4 "$LOG"
check "names the KV heads" grep -q "num_key_value_heads (2)" "$WORK/err"
run "--tp 65" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 65 "$LOG"
check "range" grep -q -- "--tp: give 1 to 64" "$WORK/err"
# --check with --tp: the split replay against one unsplit backend, whole or a slice fed its state
run "--tp 2 --check ref --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 2 --check ref --json "$LOG"
check "tp 2 against ref: the embeddings equal, the layers within rounding" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["backend"] == "cpu" and r["tp"] == 2 and r["check"] == "ref" and r["rank_changes"] == 0, r
p = {x["where"]: x for x in r["planes"]}
assert p["embeddings"]["max_nerr"] == 0, r
for w in ("layer 0", "layer 1", "final norm"):
    assert 0 < p[w]["max_nerr"] < 1e-5, p[w]
PY
V4="$LD_SOURCE_DIR/testdata/models/deepseek-v4"
run "V4 --tp 2 --check ref --check-layers 1-2" 0 "$LOGDIFF" replay --model "$V4" --rid rp-greedy --tp 2 --check ref \
    --check-layers 1-2 --json "$LOG"
check "V4 layers 1-2 alone on ref, fed the split replay's streams" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["tp"] == 2 and r["layers"] == [1, 2] and [p["where"] for p in r["planes"]] == ["layer 1", "layer 2"], r
for p in r["planes"]:
    assert 0 < p["max_nerr"] < 1e-5, p
PY
run "V4 --tp 1 --backend ref --check ref --check-layers 1-2" 0 "$LOGDIFF" replay --model "$V4" --rid rp-greedy --tp 1 \
    --backend ref --check ref --check-layers 1-2 "$LOG"
check "tp 1 is the plain forward: the slice gives its planes bit for bit" bash -c \
    "grep -q 'backend ref, tp 1 against layers 1-2 alone on ref' '$WORK/out' &&
     grep -c '^  layer [12]  *0  *0$' '$WORK/out' | grep -qx 2"
# --batch-with under --tp: the request alone and batched with two others, both split, each rank
# batching its share: bitwise (qwen3, DeepSeek-V3, V4)
for bm in qwen3 deepseek-v3 deepseek-v4; do
    run "$bm --tp 2 --batch-with" 0 "$LOGDIFF" replay --model "$LD_SOURCE_DIR/testdata/models/$bm" --rid rp-greedy \
        --tp 2 --batch-with rp-altered,rp-no-output --json "$LOG"
    check "$bm: split and batched, bitwise the split run alone" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["identical"] and r["positions"] == 26 and r["steps"] == 7, r' "$WORK/out"
done
# --compare-kernels with --tp: every variant's replay split as the reference's; one the split refuses
# (combine=bf16 rounds a whole expert sum, of which a rank holds a part) reported with its reason
DV3="$LD_SOURCE_DIR/testdata/models/deepseek-v3"
SVLOG="$LD_SOURCE_DIR/testdata/replay/smallvocab/server.log"
run "V3 --compare-kernels" 0 "$LOGDIFF" replay --model "$DV3" --rid sv-forced --compare-kernels --json "$SVLOG"
cp "$WORK/out" "$WORK/kc1.json"
run "V3 --tp 2 --compare-kernels" 0 "$LOGDIFF" replay --model "$DV3" --rid sv-forced --tp 2 --compare-kernels --json \
    "$SVLOG"
check "split variants: tp 2, combine=bf16 refused, the others compared under the split" python3 - "$WORK/kc1.json" \
    "$WORK/out" <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).readline())
b = json.loads(open(sys.argv[2]).readline())
assert "tp" not in a and b["tp"] == 2, (a.get("tp"), b.get("tp"))
va = {v["variant"]: v for v in a["variants"]}
vb = {v["variant"]: v for v in b["variants"]}
assert list(va) == list(vb), (list(va), list(vb))
assert "refused" not in va["combine=bf16"], va["combine=bf16"]
assert "a rank holds a partial sum" in vb["combine=bf16"]["refused"] and "verdict" not in vb["combine=bf16"], vb
for k in ("matmul=bf16", "rmsnorm=bf16", "router=bf16"):
    assert vb[k]["first_departure"] is not None and vb[k]["final_norm_max_nerr"] > 1e-5, vb[k]
# the split is applied: the fp32 reorderings depart by other roundings than unsplit
assert any(va[k]["final_norm_max_nerr"] != vb[k]["final_norm_max_nerr"] for k in ("matmul=fast", "mla=absorbed")), (va, vb)
PY
run "qwen3 --tp 2 --compare-kernels, text" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 2 --compare-kernels \
    "$LOG"
check "text says the replays are split" grep -q "every replay split over 2 ranks" "$WORK/out"
# DeepSeek-V3 (MLA heads and MoE experts split) on smallvocab's sv-forced: its logged ids are forced,
# not the model's choice, so the verdict is divergent (exit 1) either way; what matters is the same
DS="$LD_SOURCE_DIR/testdata/models"
SV="$LD_SOURCE_DIR/testdata/replay/smallvocab/server.log"
# tp_matches NAME ARCH: NAME's replay of sv-forced under --tp 2 against the unsplit one (same verdict,
# ranks and top-1, logprobs within rounding; the model's architecture ARCH), then --threads 4 bitwise
tp_matches() {
    local name=$1 arch=$2
    run "$name no split" 1 "$LOGDIFF" replay --model "$DS/$name" --rid sv-forced --threads 2 --json "$SV"
    cp "$WORK/out" "$WORK/$name-1.json"
    run "$name --tp 2" 1 "$LOGDIFF" replay --model "$DS/$name" --rid sv-forced --threads 2 --tp 2 --json "$SV"
    cp "$WORK/out" "$WORK/$name-2.json"
    check "$name tp 2: same verdict and ranks, logprobs within rounding" python3 - "$WORK/$name-1.json" \
        "$WORK/$name-2.json" "$arch" <<'PY'
import json, sys
a = json.loads(open(sys.argv[1]).read().splitlines()[0])
b = json.loads(open(sys.argv[2]).read().splitlines()[0])
assert "tp" not in a and b["tp"] == 2 and b["model"] == sys.argv[3], (a.get("tp"), b.get("tp"), b.get("model"))
assert a["verdict"] == b["verdict"], (a["verdict"], b["verdict"])
pa, pb = a["positions"], b["positions"]
assert len(pa) == len(pb) == 8
for x, y in zip(pa, pb):
    assert x["rank"] == y["rank"] and x["top1"]["id"] == y["top1"]["id"], (x, y)
    assert abs(x["logprob"] - y["logprob"]) < 1e-5, (x, y)
PY
    run "$name --tp 2 --threads 4" 1 "$LOGDIFF" replay --model "$DS/$name" --rid sv-forced --threads 4 --tp 2 \
        --json "$SV"
    check "$name bitwise: --threads 2 and 4 give the same report" cmp -s "$WORK/out" "$WORK/$name-2.json"
}
tp_matches deepseek-v3 DeepseekV3ForCausalLM
run "deepseek-v3 --tp 3" 2 "$LOGDIFF" replay --model "$DS/deepseek-v3" --rid sv-forced --tp 3 "$SV"
check "deepseek: names the field" grep -q "does not divide the model's num_attention_heads (4)" "$WORK/err"
run "deepseek-v3-fp8 --tp 2" 2 "$LOGDIFF" replay --model "$DS/deepseek-v3-fp8" --rid sv-forced --tp 2 "$SV"
check "fp8: the scale blocks" grep -q "q_b_proj.weight' is FP8 with scale blocks of 16x16" "$WORK/err"
# DeepSeek-V4 (query heads with wo_a's groups, and the experts, split; engine/tp/tp_ds4_shard.h) the same way
tp_matches deepseek-v4 DeepseekV4ForCausalLM
run "deepseek-v4 --tp 4" 2 "$LOGDIFF" replay --model "$DS/deepseek-v4" --rid sv-forced --tp 4 "$SV"
check "v4: names o_groups" grep -q "does not divide the model's o_groups (2)" "$WORK/err"
# cuda: NCCL over GPUs 0..1 where built with NCCL and the machine has two GPUs; else a clear error
"$LOGDIFF" replay --model "$M" --rid rp-greedy --tp 2 --backend cuda "$LOG" >"$WORK/out" 2>"$WORK/err"
rc=$?
check "--tp 2 --backend cuda runs or says why" bash -c "[ $rc = 0 ] || { [ $rc = 2 ] && grep -q 'CUDA\|NCCL' '$WORK/err'; }"
check "help names --tp" bash -c "'$LOGDIFF' replay --help | grep -q -- '--tp N'"
finish
