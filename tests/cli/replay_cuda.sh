#!/usr/bin/env bash
# logdiff replay on the CUDA backend, end to end, against the reference backend (issue 9: the
# cross-backend check and the per-kernel A/B on a GPU). Skips (77) where the build or the machine
# has no CUDA device; tools/gpu-check.sh runs it on the GPU machine.
#   - dense (qwen3, FP8 qwen3-fp8), DeepSeek-V3.2 (MLA, indexer) on replaylog's rp-greedy, and
#     DeepSeek-V3 FP8 and V4 FP4 on smallvocab's sv-forced: `--backend cuda --check ref`: every
#     plane within 1e-4 normalised error of the plain-C reference, no logged token's rank changed;
#   - `--check ref --check-layers` on qwen3 (layer 1) and V4 FP4 (layers 1-2, fed the hc streams):
#     those layers alone on the reference, fed the device's state entering the first;
#   - `--kernels graphs=on --check ref` on V4 FP4: the captured launches within 1e-4 of the reference;
#   - the same replay twice on CUDA gives the same bytes (--json), and with its launches captured
#     in CUDA graphs (--kernels graphs=on / graphs=16; qwen3, V4 FP4);
#   - `--batch-with` on qwen3 and V4: the request batched with two others, bitwise its alone logits;
#   - `--backend cuda --compare-kernels` on qwen3: all=ref first, each op's custom kernel alone,
#     then all=custom, each within 1e-4 of all=ref at the final norm, the verdict unchanged;
#   - qwen3 with a NaN planted in layer 1's o_proj: an error (exit 2) naming layer 1, op attn_out,
#     as on the CPU backends (replay_nonfinite.sh), with the custom kernels and with graphs=on.
. "$(dirname "$0")/lib.bash"
RL="$LD_SOURCE_DIR/testdata/replay/replaylog/server.log"
SV="$LD_SOURCE_DIR/testdata/replay/smallvocab/server.log"
MD="$LD_SOURCE_DIR/testdata/models"

"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda "$RL" >"$WORK/out" 2>"$WORK/err"
rc=$?
if [ $rc = 2 ] && grep -q 'CUDA' "$WORK/err"; then
    echo "skipped: no CUDA here: $(head -c 200 "$WORK/err")"
    exit 77
fi

check_planes() { # NAME JSON-FILE
    check "$1: cuda against ref, layer by layer" python3 - "$2" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["backend"].startswith("cuda") and r["check"] == "ref", r
for p in r["planes"]:
    assert p["max_nerr"] < 1e-4, p
assert r["rank_changes"] == 0 and r["max_abs_dlogprob"] < 1e-3, r
print("  worst plane nerr %.3g, |d logprob| %.3g" % (max(p["max_nerr"] for p in r["planes"]), r["max_abs_dlogprob"]))
PY
}

for m in qwen3 qwen3-fp8 deepseek-v32; do
    run "$m --backend cuda --check ref" 0 "$LOGDIFF" replay --model "$MD/$m" --rid rp-greedy --backend cuda \
        --check ref --json "$RL"
    check_planes "$m" "$WORK/out"
done
# a slice: layer 1 alone on the CPU, fed the device's rows entering it (a model too large for the CPU)
run "qwen3 --backend cuda --check ref --check-layers 1" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy \
    --backend cuda --check ref --check-layers 1 --json "$RL"
check "qwen3: layer 1 alone on ref against cuda" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["backend"].startswith("cuda") and r["check"] == "ref" and r["layers"] == [1, 1], r
assert [p["where"] for p in r["planes"]] == ["layer 1"] and r["planes"][0]["max_nerr"] < 1e-4, r
PY
# --kernels graphs=on with --check: the captured launches against the reference
run "deepseek-v4-fp4 --kernels graphs=on --check ref" 0 "$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced \
    --backend cuda --kernels graphs=on --check ref --json "$SV"
check_planes "deepseek-v4-fp4 (graphs)" "$WORK/out"
check "graphs: the kernels named" python3 -c \
    "import json,sys; assert json.loads(open(sys.argv[1]).readline())['kernels'] == 'graphs=on'" "$WORK/out"
# V4's slice on the reference, fed the device's hc streams entering layer 1
run "deepseek-v4-fp4 --backend cuda --check ref --check-layers 1-2" 0 "$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" \
    --rid sv-forced --backend cuda --check ref --check-layers 1-2 --json "$SV"
check "V4 FP4: layers 1-2 alone on ref against cuda" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["layers"] == [1, 2] and [p["where"] for p in r["planes"]] == ["layer 1", "layer 2"], r
for p in r["planes"]:
    assert p["max_nerr"] < 1e-4, p
PY
for m in deepseek-v3-fp8 deepseek-v4-fp4; do
    run "$m --backend cuda --check ref" 0 "$LOGDIFF" replay --model "$MD/$m" --rid sv-forced --backend cuda \
        --check ref --json "$SV"
    check_planes "$m" "$WORK/out"
done

"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --json "$RL" >"$WORK/a" 2>/dev/null
"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --json "$RL" >"$WORK/b" 2>/dev/null
check "two CUDA replays, the same bytes" cmp -s "$WORK/a" "$WORK/b"
# on the CPU emulator (tests/support/cuda_emu) threads and blocks then run last first; a GPU ignores it
LD_CUDA_EMU_ORDER=reverse "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --json "$RL" \
    >"$WORK/c" 2>/dev/null
check "a third replay (threads in reverse order on the emulator), the same bytes" cmp -s "$WORK/a" "$WORK/c"

# the launches captured in CUDA graphs (--kernels graphs=N): the same bytes as one by one
"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --kernels graphs=on --json "$RL" \
    >"$WORK/g" 2>"$WORK/err"
check "qwen3 --kernels graphs=on, the same bytes" cmp -s "$WORK/a" "$WORK/g"
"$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced --backend cuda --json "$SV" >"$WORK/a4" 2>/dev/null
"$LOGDIFF" replay --model "$MD/deepseek-v4-fp4" --rid sv-forced --backend cuda --kernels graphs=16 --json "$SV" \
    >"$WORK/g4" 2>"$WORK/err"
check "deepseek-v4-fp4 --kernels graphs=16, the same bytes" cmp -s "$WORK/a4" "$WORK/g4"
check "deepseek-v4-fp4: a replay at all" grep -q '"verdict"' "$WORK/g4"

# batched with other requests on the device: every position's logits and hidden planes bitwise the request's alone
for m in qwen3 deepseek-v4; do
    run "$m --backend cuda --batch-with" 0 "$LOGDIFF" replay --model "$MD/$m" --rid rp-greedy --backend cuda \
        --batch-with rp-altered,rp-no-output "$RL"
    check "$m: batch.identical" grep -q "^batch.identical: the logits and hidden planes of all 26 positions" "$WORK/out"
done

run "qwen3 --backend cuda --compare-kernels" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy \
    --backend cuda --compare-kernels --json "$RL"
check "each custom kernel alone, then all" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["reference"] == "cuda:all=ref", r
vs = r["variants"]
assert vs[-1]["variant"] == "all=custom" and all(v["variant"].endswith("=custom") for v in vs), vs
for v in vs:
    assert v["final_norm_max_nerr"] < 1e-4 and v["rank_changes"] == 0, v
    print("  %-18s final-norm nerr %.3g" % (v["variant"], v["final_norm_max_nerr"]))
PY

# NaN weights on the device: the replay names where the first non-finite value was computed
mkdir "$WORK/nan" && cp "$MD/qwen3/config.json" "$WORK/nan/"
python3 - "$MD/qwen3/model.safetensors" "$WORK/nan/model.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
t = json.loads(b[8:8 + n])["model.layers.1.self_attn.o_proj.weight"]
at = 8 + n + t["data_offsets"][0] + 4 * 5
b[at:at + 4] = struct.pack("<f", float("nan"))
open(sys.argv[2], "wb").write(b)
PY
for k in all=custom graphs=on; do
    run "NaN weights --backend cuda --kernels $k" 2 "$LOGDIFF" replay --model "$WORK/nan" --rid rp-greedy \
        --backend cuda --kernels "$k" "$RL"
    check "$k: layer 1, op attn_out" \
        grep -qF "non-finite values: first at layer 1, op attn_out (NaN at position 0)" "$WORK/err"
done
finish
