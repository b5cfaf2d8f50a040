#!/usr/bin/env bash
# logdiff replay --kernels and --compare-kernels on the log of testdata/replay/replaylog/ and the tiny
# Qwen3 of testdata/models/qwen3.  The variants' distance to transformers is held to its band in
# tests/engine/models/test_forward.c (test_forward_kernel_variants); here: the report names every variant,
# the fp32 reorderings (fast, splitk) never depart from the reference beyond 1e-5 while the bf16 ones
# depart from the first layer on, its numbers are consistent, --json and text agree, --kernels runs
# the request on the swapped backend (named in the output), and bad specs are usage errors (exit 2).
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"

run "compare-kernels --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 2 --compare-kernels --json "$LOG"
check "report" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["rid"] == "rp-greedy" and r["reference_verdict"] == "replay.consistent" and r["tolerance"] == 1e-5, r
vs = {v["variant"]: v for v in r["variants"]}
assert sorted(vs) == sorted(["matmul=fast", "matmul=bf16", "matmul=splitk", "matmul=fp8act", "matmul=fp8ue8m0", "attention=fast",
                             "rmsnorm=bf16", "swiglu=bf16"]), sorted(vs)  # no DeepSeek op in a Qwen3
for name in ("matmul=fast", "matmul=splitk", "attention=fast"):
    v = vs[name]
    assert v["first_departure"] is None and v["final_norm_max_nerr"] < 1e-5 and v["max_abs_dlogprob"] < 1e-4, v
    assert v["rank_changes"] == 0 and v["verdict"] == "replay.consistent", v
for name in ("matmul=bf16", "matmul=fp8act", "matmul=fp8ue8m0", "rmsnorm=bf16", "swiglu=bf16"):
    v = vs[name]
    d = v["first_departure"]
    assert d is not None and 1 <= d["plane"] <= 2 and d["where"] in ("layer 0", "layer 1") and d["nerr"] > 1e-5, v
    assert 1e-5 < v["final_norm_max_nerr"] < 0.1 and 0 < v["max_abs_dlogprob"] < 1, v
PY

run "compare-kernels text" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 1 --compare-kernels "$LOG"
check "table rows" bash -c "grep -c '^  matmul=\|^  attention=\|^  rmsnorm=\|^  swiglu=' '$WORK/out' | grep -qx 8"
check "fp32 rows depart nowhere" grep -q "^  matmul=splitk  *none " "$WORK/out"
check "bf16 rows depart at layer 0" grep -q "^  matmul=bf16  *layer 0, position 0 " "$WORK/out"

run "--kernels matmul=bf16" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --kernels matmul=bf16 "$LOG"
check "backend named" grep -q "backend ref+matmul=bf16\|backend cpu+matmul=bf16" "$WORK/out"
run "--kernels bad variant" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --kernels matmul=fp8 "$LOG"
check "says which" grep -q "matmul has no variant 'fp8'" "$WORK/err"
run "--kernels bad op" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --kernels gemm=ref "$LOG"
check "says which op" grep -q "unknown op 'gemm'" "$WORK/err"
# a bad CUDA spec is named as such on any build (one without CUDA too), before the model is opened
run "--backend cuda --kernels bad variant" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --backend cuda --kernels matmul=fp8 "$LOG"
check "names the cuda variant" grep -q "unknown kernel variant 'fp8' for 'matmul'" "$WORK/err"
run "--backend cuda --kernels bad op" 2 "$LOGDIFF" replay --model /nonexistent --rid rp-greedy --backend cuda --kernels gemm=custom "$LOG"
check "names the cuda op, not the model" bash -c "grep -q \"unknown op 'gemm'\" '$WORK/err' && ! grep -q nonexistent '$WORK/err'"
run "--check ref --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref --json "$LOG"
check "cpu against ref, layer by layer" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["backend"] == "cpu" and r["check"] == "ref" and r["positions"] == 26, r
where = [p["where"] for p in r["planes"]]
assert where == ["embeddings", "layer 0", "layer 1", "final norm"], where
assert r["planes"][0]["max_nerr"] == 0 and r["planes"][0]["max_abs"] == 0, r  # the same table rows
for p in r["planes"][1:]:
    assert 0 < p["max_nerr"] < 1e-5 and p["max_abs"] < 1e-4, p   # two summation orders, not two models
assert r["rank_changes"] == 0 and r["max_abs_dlogprob"] < 1e-5 and r["verdicts"] == ["replay.consistent"] * 2, r
PY
run "--check text" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref --backend ref "$LOG"
check "ref against itself: zero everywhere" bash -c "grep -c '^  layer [01]  *0  *0$' '$WORK/out' | grep -qx 2"
# --check-layers: only those layers on the check backend, fed --backend's rows entering the first
run "--check ref --check-layers 0-1 --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref \
    --check-layers 0-1 --json "$LOG"
check "layers 0-1 alone on ref against cpu" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["backend"] == "cpu" and r["check"] == "ref" and r["layers"] == [0, 1] and r["positions"] == 26, r
assert [p["where"] for p in r["planes"]] == ["layer 0", "layer 1"], r
for p in r["planes"]:
    assert 0 < p["max_nerr"] < 1e-5 and p["max_abs"] < 1e-4, p
assert r["rank_changes"] is None and r["max_abs_dlogprob"] is None and r["verdicts"] == ["replay.consistent"], r
PY
run "--backend ref --check ref --check-layers 1" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --backend ref \
    --check ref --check-layers 1 "$LOG"
check "a slice on the same backend: the whole pass's rows, bit for bit" bash -c \
    "grep -q 'against layer 1 alone on ref' '$WORK/out' && grep -c '^  layer 1  *0  *0$' '$WORK/out' | grep -qx 1"
# --kernels applies to --backend: a production-style variant against the reference, layer by layer
run "--kernels matmul=bf16 --check ref --json" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --kernels matmul=bf16 \
    --check ref --json "$LOG"
check "bf16 matmuls against ref: every layer departs, the embeddings do not" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["kernels"] == "matmul=bf16" and r["check"] == "ref", r
p = {x["where"]: x for x in r["planes"]}
assert p["embeddings"]["max_nerr"] == 0, r
for w in ("layer 0", "layer 1", "final norm"):
    assert 1e-4 < p[w]["max_nerr"] < 0.05, p[w]
PY
# the worst row of each plane, against the same rows recomputed from the two backends' dumps
run "dump with matmul=bf16" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --kernels matmul=bf16 \
    --dump-layers "$WORK/da" "$LOG"
run "dump on ref" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --backend ref --dump-layers "$WORK/db" "$LOG"
run "--kernels matmul=bf16 --check ref --json again" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy \
    --kernels matmul=bf16 --check ref --json "$LOG"
check "worst_position: the argmax of ||ref - bf16|| / ||bf16|| per plane, from the dumps" python3 - "$WORK/out" \
    "$WORK/da" "$WORK/db" <<'PY'
import ast, json, math, struct, sys
r = json.loads(open(sys.argv[1]).readline())
def npy(path):  # a float32 C-order 2-D .npy, read without numpy
    b = open(path, "rb").read()
    hl = struct.unpack("<H", b[8:10])[0]
    h = ast.literal_eval(b[10:10 + hl].decode())
    assert h["descr"] == "<f4" and not h["fortran_order"], h
    n, d = h["shape"]
    v = struct.unpack("<%df" % (n * d), b[10 + hl:10 + hl + 4 * n * d])
    return [v[i * d:(i + 1) * d] for i in range(n)]
files = {"embeddings": "embed.npy", "layer 0": "layer_00.npy", "layer 1": "layer_01.npy", "final norm": "final_norm.npy"}
pos = json.load(open(sys.argv[2] + "/manifest.json"))["positions"]
for p in r["planes"]:
    a, b = npy(sys.argv[2] + "/" + files[p["where"]]), npy(sys.argv[3] + "/" + files[p["where"]])
    errs = []
    for x, y in zip(a, b):
        d = sum((float(v) - float(u)) ** 2 for u, v in zip(x, y))
        m = sum(float(u) ** 2 for u in x)
        errs.append(math.sqrt(d / m) if m > 0 else math.sqrt(d))
    top = max(errs)
    want = None if top == 0 else pos[errs.index(top)]
    assert p["worst_position"] == want, (p, want)
    assert abs(p["max_nerr"] - top) <= 1e-9 * max(top, 1e-30), (p, top)
PY
run "--check ref, no --kernels" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref --json "$LOG"
check "no kernels: null" python3 -c "import json,sys; assert json.loads(open(sys.argv[1]).readline())['kernels'] is None" \
    "$WORK/out"
run "--kernels matmul=bf16 --check ref --check-layers 1" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy \
    --kernels matmul=bf16 --check ref --check-layers 1 "$LOG"
check "the slice fed the variant's state: layer 1's own departure" bash -c \
    "grep -q 'backend cpu+matmul=bf16 against layer 1 alone on ref' '$WORK/out' && ! grep -q '^  layer 1  *0  *0$' '$WORK/out'"
run "--check-layers past the model" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref --check-layers 1-2 "$LOG"
check "names the model's layers" grep -q "check-layers 1-2: the model has 2 layers (0-1)" "$WORK/err"
run "--check-layers without --check" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check-layers 0 "$LOG"
run "--check-layers backwards" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check ref --check-layers 1-0 "$LOG"
run "--check-layers on DeepSeek-V3.2" 0 "$LOGDIFF" replay --model "$LD_SOURCE_DIR/testdata/models/deepseek-v32" \
    --rid rp-greedy --check ref --check-layers 1-2 --json "$LOG"
check "V3.2 layers 1-2 alone (MLA, the indexer, MoE)" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["layers"] == [1, 2] and [p["where"] for p in r["planes"]] == ["layer 1", "layer 2"], r
for p in r["planes"]:
    assert p["max_nerr"] < 1e-5, p
PY
run "--check-layers on DeepSeek-V4" 0 "$LOGDIFF" replay --model "$LD_SOURCE_DIR/testdata/models/deepseek-v4" \
    --rid rp-greedy --check ref --check-layers 1-3 --json "$LOG"
check "V4 layers 1-3 alone (fed the hc streams; hash routing, CSA, HCA)" python3 - "$WORK/out" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r["layers"] == [1, 3] and [p["where"] for p in r["planes"]] == ["layer 1", "layer 2", "layer 3"], r
for p in r["planes"]:
    assert 0 < p["max_nerr"] < 1e-5, p
PY
run "V4 --backend ref --check ref --check-layers 0-1" 0 "$LOGDIFF" replay \
    --model "$LD_SOURCE_DIR/testdata/models/deepseek-v4" --rid rp-greedy --backend ref --check ref --check-layers 0-1 "$LOG"
check "a V4 slice on the same backend: the whole pass's planes, bit for bit" bash -c \
    "grep -c '^  layer [01]  *0  *0$' '$WORK/out' | grep -qx 2"
# the CUDA backend: where this build or machine has none, a clear usage/platform error
"$LOGDIFF" replay --model "$M" --rid rp-greedy --backend cuda "$LOG" >"$WORK/out" 2>"$WORK/err"
rc=$?
check "--backend cuda runs or says why" bash -c "[ $rc = 0 ] || { [ $rc = 2 ] && grep -q 'CUDA' '$WORK/err'; }"
"$LOGDIFF" replay --model "$M" --rid rp-greedy --backend cuda --compare-kernels --json "$LOG" >"$WORK/out" 2>"$WORK/err"
rc=$?
check "--backend cuda --compare-kernels runs each custom kernel alone, or says why not" bash -c "
  { [ $rc = 2 ] && grep -q 'CUDA' '$WORK/err'; } ||
  { [ $rc = 0 ] && python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[0])
assert r[\"reference\"] == \"cuda:all=ref\", r
names = [v[\"variant\"] for v in r[\"variants\"]]
assert names[-1] == \"all=custom\" and \"matmul=custom\" in names and \"attention=custom\" in names, names
' '$WORK/out'; }"
run "--check bad" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --check gpu "$LOG"
run "--compare-kernels with --kernels" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --compare-kernels --kernels matmul=ref "$LOG"
finish
