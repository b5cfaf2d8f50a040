#!/usr/bin/env bash
# logdiff replay --backend cuda --tp 2: the model split over two GPUs, the ranks' partial sums
# gathered over NCCL and summed in rank order (engine/tp/comm_nccl.c); on a machine with one GPU (or a
# build without NCCL) both ranks on it, summed through host memory. Skips (77) where there is no
# CUDA device; runs in CI on the CUDA emulator's two devices and its NCCL
# (tests/support/cuda_emu/emu_nccl.c), and on a machine with GPUs for real (tools/gpu-check.sh).
#   - the ranks sharing one GPU (CUDA_VISIBLE_DEVICES=0, the emulator's LD_CUDA_EMU_DEVICES=1):
#     said so (JSON tp_gpus, absent where each rank has a GPU), and the same replay as over two,
#     with graphs too;
#   - qwen3 on replaylog's rp-greedy: the same bytes run after run (--json); `--check ref`: every
#     plane within 1e-4 normalised error of the unsplit plain-C reference, no logged token's rank
#     changed;
#   - DeepSeek-V3 (MLA heads and experts split) and V4 FP4 (query heads with wo_a's groups, the
#     experts' rows) on smallvocab's sv-forced, `--check ref` likewise; V4's layers 1-2 alone on
#     the reference fed the split replay's hc streams (`--check-layers 1-2`);
#   - `--batch-with` (qwen3, V4): split and batched, bitwise the split request alone;
#   - `--compare-kernels` (qwen3): each custom kernel within 1e-4 of all=ref, every replay split;
#   - `--kernels graphs=on|16|8` (qwen3, V4 FP4, V3, and V4 batched): the launches captured in CUDA graphs on
#     every rank, the same bytes as without.
. "$(dirname "$0")/lib.bash"
RL="$LD_SOURCE_DIR/testdata/replay/replaylog/server.log"
SV="$LD_SOURCE_DIR/testdata/replay/smallvocab/server.log"
MD="$LD_SOURCE_DIR/testdata/models"

"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 --json "$RL" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc = 2 ] && grep -qE 'CUDA|NCCL' "$WORK/err"; then
    echo "skipped: no CUDA device here: $(head -c 200 "$WORK/err")"
    exit 77
fi
check "qwen3 --backend cuda --tp 2 runs (exit $rc)" test "$rc" = 0
cp "$WORK/out" "$WORK/tp2.json"
run "qwen3 again" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 --json "$RL"
check "qwen3: the same bytes run after run" cmp -s "$WORK/out" "$WORK/tp2.json"
# CUDA graphs under --tp: every rank on a thread of its own in graph mode, the capture held around
# each collective (the emulator's NCCL refuses one captured): the same bytes as launch by launch
run "qwen3 --tp 2 --kernels graphs=on" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 \
    --kernels graphs=on --json "$RL"
check "qwen3: graphs under --tp, the same bytes" cmp -s "$WORK/out" "$WORK/tp2.json"
"$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced --backend cuda --tp 2 --json "$SV" >"$WORK/v4tp.json" \
    2>/dev/null
run "V4 FP4 --tp 2 --kernels graphs=16" 1 "$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced \
    --backend cuda --tp 2 --kernels graphs=16 --json "$SV"
check "V4 FP4: graphs of 16 under --tp, the same bytes" bash -c "grep -q verdict '$WORK/out' && cmp -s '$WORK/out' '$WORK/v4tp.json'"
"$LOGDIFF" replay --model "$MD/deepseek-v3" --rid sv-forced --backend cuda --tp 2 --json "$SV" >"$WORK/v3tp.json" \
    2>/dev/null
run "V3 --tp 2 --kernels graphs=8" 1 "$LOGDIFF" replay --model "$MD/deepseek-v3" --rid sv-forced --backend cuda \
    --tp 2 --kernels graphs=8 --json "$SV"
check "V3 (MLA, experts split): graphs of 8 under --tp, the same bytes" bash -c \
    "grep -q verdict '$WORK/out' && cmp -s '$WORK/out' '$WORK/v3tp.json'"
check "qwen3: tp 2 on cuda reported" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["backend"].startswith("cuda") and r["verdict"] == "replay.consistent", r' "$WORK/tp2.json"

# check_planes NAME: the --check JSON in $WORK/out within 1e-4 everywhere, no rank changed
check_planes() {
    check "$1: split cuda against unsplit ref, layer by layer" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["backend"].startswith("cuda") and r["check"] == "ref", r
for p in r["planes"]:
    assert p["max_nerr"] < 1e-4, p
assert r["rank_changes"] == 0, r
print("  worst plane nerr %.3g" % max(p["max_nerr"] for p in r["planes"]))
PY
}
run "qwen3 --tp 2 --check ref" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 \
    --check ref --json "$RL"
check_planes qwen3
run "qwen3 --tp 2 --kernels graphs=on --check ref" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy \
    --backend cuda --tp 2 --kernels graphs=on --check ref --json "$RL"
check_planes "qwen3 (graphs)"
for m in deepseek-v3 deepseek-v4-fp4; do
    run "$m --tp 2 --check ref" 0 "$LOGDIFF" replay --model "$MD/$m" --rid sv-forced --backend cuda --tp 2 \
        --check ref --json "$SV"
    check_planes "$m"
done
run "V4 FP4 --tp 2 --check-layers 1-2" 0 "$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced \
    --backend cuda --tp 2 --check ref --check-layers 1-2 --json "$SV"
check "V4 FP4: layers 1-2 alone on ref, fed the split replay's streams" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["layers"] == [1, 2] and [p["where"] for p in r["planes"]] == ["layer 1", "layer 2"], r
for p in r["planes"]:
    assert p["max_nerr"] < 1e-4, p
PY
for m in qwen3 deepseek-v4 "deepseek-v4 --kernels graphs=on"; do
    run "$m --tp 2 --batch-with" 0 "$LOGDIFF" replay --model "$MD/"$m --rid rp-greedy --backend cuda --tp 2 \
        --batch-with rp-altered,rp-no-output --json "$RL"
    check "$m: split and batched, bitwise the split request alone" python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["identical"] and r["positions"] == 26, r' "$WORK/out"
done
# the ranks sharing one GPU: said so, the same replay as over two
one_gpu() { CUDA_VISIBLE_DEVICES=0 LD_CUDA_EMU_DEVICES=1 "$@"; }
run "qwen3 --tp 2 on one GPU" 0 one_gpu "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 "$RL"
check "says the ranks share one GPU" grep -q "backend cuda, tp 2 on 1 GPU (the collectives through host memory)$" \
    "$WORK/out"
for k in "" "--kernels graphs=on"; do
    run "qwen3 --tp 2 on one GPU $k --json" 0 one_gpu "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy \
        --backend cuda --tp 2 $k --json "$RL"
    check "one GPU $k: the replay over two, all but tp_gpus" python3 - "$WORK/out" "$WORK/tp2.json" <<'PY'
import json, sys
one, two = (json.loads(open(p).readline()) for p in sys.argv[1:])
assert one.pop("tp_gpus") == 1 and two.pop("tp_gpus", 1) == 1, (one, two)  # said where ranks share GPUs
assert one == two, (one, two)
PY
done

# logdiff diff on the split GPU replay: the same kernels findings as on the CPU
"$LOGDIFF" diff --json --replay "$MD/qwen3" "$RL" >"$WORK/dcpu.jsonl" 2>/dev/null
run "diff --replay-backend cuda --replay-tp 2" 1 "$LOGDIFF" diff --json --replay "$MD/qwen3" --replay-backend cuda \
    --replay-tp 2 "$RL"
check "diff: the same kernels findings on split cuda as on cpu" python3 - "$WORK/dcpu.jsonl" "$WORK/out" <<'PY'
import json, sys
a = {r["rid"]: r for r in map(json.loads, open(sys.argv[1]))}
b = {r["rid"]: r for r in map(json.loads, open(sys.argv[2]))}
kinds = lambda r: [(f["kind"], f.get("first_diff")) for f in r["findings"] if f["kind"].startswith("kernels.")]
assert set(a) == set(b) and all(kinds(a[k]) == kinds(b[k]) for k in a), (a, b)
assert any("backend cuda, tp 2" in f["detail"] for r in b.values() for f in r["findings"]), b
PY
run "qwen3 --tp 2 --compare-kernels" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 \
    --compare-kernels --json "$RL"
check "qwen3: every custom kernel within 1e-4 of the reference kernels, split" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).readline())
assert r["tp"] == 2 and r["reference"] == "cuda:all=ref", r
names = [v["variant"] for v in r["variants"]]
assert names[0] == "embed=custom" and names[-1] == "all=custom", names
for v in r["variants"]:
    assert "refused" not in v and v["final_norm_max_nerr"] < 1e-4 and v["rank_changes"] == 0, v
PY
finish
