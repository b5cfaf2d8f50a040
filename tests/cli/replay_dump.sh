#!/usr/bin/env bash
# logdiff replay --dump-layers DIR [--positions LIST] on the log of testdata/replay/replaylog/ and the
# tiny Qwen3 of testdata/models/qwen3: the .npy files are read here with the standard library only
# (struct, ast: the format as the NumPy spec says, independently of logdiff's writer) and the hidden
# states compared with transformers' (hidden-rp-greedy.{json,f32}, tools/gen_replay_fixtures.py:
# the embeddings, each decoder layer's output and the final norm's at positions 0 6 13 14 19 25 of
# rp-greedy's prompt ++ output), normalised error < 1e-5 per plane; the positions, the tokens, the
# manifest, the `dump` object of --json; the same rows whatever the list and for rp-no-output's
# prompt; the verdict and output unchanged by dumping; the errors (exit 2).
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/replaylog"
M="$LD_SOURCE_DIR/testdata/models/qwen3"
LOG="$D/server.log"

cat >"$WORK/check.py" <<'PY'
"""check.py DUMP_DIR EXPECT_JSON RID WANT_POSITIONS(comma list) [SEQ_LEN]: the dump against transformers."""
import ast, json, math, os, struct, sys

def npy(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY" and b[6:8] == b"\x01\x00", (path, b[:8])
    hl = struct.unpack("<H", b[8:10])[0]
    assert (10 + hl) % 64 == 0 and b[10 + hl - 1:10 + hl] == b"\n", (path, hl)
    h = ast.literal_eval(b[10:10 + hl].decode("latin1"))
    assert set(h) == {"descr", "fortran_order", "shape"} and h["fortran_order"] is False, h
    n = 1
    for s in h["shape"]:
        n *= s
    size, code = {"<f4": (4, "f"), "<i8": (8, "q")}[h["descr"]]
    data = b[10 + hl:]
    assert len(data) == n * size, (path, len(data), n)
    return h["descr"], h["shape"], struct.unpack("<%d%s" % (n, code), data)

d, ex, rid, want = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], [int(x) for x in sys.argv[4].split(",")]
seq_len = int(sys.argv[5]) if len(sys.argv) > 5 else len(ex["sequence"])
P, N, H = ex["shape"]
ref = struct.unpack("<%df" % (P * N * H), open(os.path.join(os.path.dirname(sys.argv[2]), ex["file"]), "rb").read())
man = json.load(open(os.path.join(d, "manifest.json")))
assert man["format"] == "logdiff-layer-dump" and man["version"] == 1 and man["rid"] == rid, man
assert man["model"]["arch"] == "Qwen3ForCausalLM" and man["model"]["n_layers"] == P - 2 and man["model"]["hidden"] == H
assert man["positions"] == want and man["sequence_length"] == seq_len, (man["positions"], man["sequence_length"])
files = ["embed.npy"] + ["layer_%02d.npy" % i for i in range(P - 2)] + ["final_norm.npy"]
assert [f["file"] for f in man["files"]] == files + ["positions.npy", "tokens.npy"], man["files"]
assert all(f["meaning"] for f in man["files"])
descr, shape, pos = npy(os.path.join(d, "positions.npy"))
assert descr == "<i8" and shape == (len(want),) and list(pos) == want, (descr, shape, pos)
descr, shape, tok = npy(os.path.join(d, "tokens.npy"))
assert descr == "<i8" and list(tok) == [ex["sequence"][p] for p in want] == man["tokens"], tok
checked = 0
for k, name in enumerate(files):
    descr, shape, v = npy(os.path.join(d, name))
    assert descr == "<f4" and shape == (len(want), H), (name, descr, shape)
    for i, p in enumerate(want):
        if p not in ex["positions"]:
            continue
        j = ex["positions"].index(p)
        got, exp = v[i * H:(i + 1) * H], ref[(k * N + j) * H:(k * N + j + 1) * H]
        num = sum((a - b) ** 2 for a, b in zip(got, exp))
        den = sum(b * b for b in exp)
        e = math.sqrt(num / den)
        assert e < 1e-5, (name, p, e)
        checked += 1
assert checked == P * len(set(want) & set(ex["positions"])), checked
print("compared %d rows with transformers" % checked)
PY

run "--help names --dump-layers" 0 "$LOGDIFF" replay --help
check "--help lists both options" grep -q -- "--dump-layers DIR" "$WORK/out"
check "--help lists --positions" grep -q -- "--positions LIST" "$WORK/out"

# the positions transformers' hidden states were written for, in a list of ranges and from the end
run "plain replay" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy "$LOG"
cp "$WORK/out" "$WORK/plain.out"
run "dump at 6 positions" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/d1" \
    --positions 0,6,13-14,19,-1 "$LOG"
check "replay output unchanged by dumping" cmp -s "$WORK/out" "$WORK/plain.out"
check "note says where" grep -q "hidden states of 6 of the 26 positions, 4 planes of 64 floats, written to $WORK/d1" "$WORK/err"
check "against transformers" python3 "$WORK/check.py" "$WORK/d1" "$D/hidden-rp-greedy.json" rp-greedy 0,6,13,14,19,25

# every position by default; a list in another order, with repeats and blanks, gives the same rows
run "dump, all positions" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --threads 1 --dump-layers "$WORK/all" "$LOG"
check "all 26, transformers' 6 among them" python3 "$WORK/check.py" "$WORK/all" "$D/hidden-rp-greedy.json" rp-greedy \
    "$(seq -s, 0 25)"
run "unsorted, repeated, blanks" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/d2" \
    --positions "-1, 19 ,13-14,6,0,-26--26,25" "$LOG"
check "sorted and distinct" python3 "$WORK/check.py" "$WORK/d2" "$D/hidden-rp-greedy.json" rp-greedy 0,6,13,14,19,25
check "same rows as the first dump, bit for bit" cmp -s "$WORK/d1/layer_01.npy" "$WORK/d2/layer_01.npy"
check "same rows as in the full dump" python3 - "$WORK/all" "$WORK/d1" <<'PY'
import struct, sys
def rows(path):
    b = open(path, "rb").read(); hl = struct.unpack("<H", b[8:10])[0]; return b[10 + hl:]
for name in ("embed", "layer_00", "layer_01", "final_norm"):
    a, b = rows("%s/%s.npy" % (sys.argv[1], name)), rows("%s/%s.npy" % (sys.argv[2], name))
    sel = b"".join(a[p * 256:(p + 1) * 256] for p in (0, 6, 13, 14, 19, 25))
    assert sel == b, name
PY

# --json: the dump object; a divergent request still dumps and keeps its verdict
run "--json" 0 "$LOGDIFF" replay --json --model "$M" --rid rp-greedy --dump-layers "$WORK/d3" --positions 13-14 "$LOG"
check "dump object" python3 -c '
import json, sys; o = json.loads(open(sys.argv[1]).read()); d = o["dump"]
assert o["verdict"] == "replay.consistent" and d["dir"] == sys.argv[2], o
assert d["positions"] == [13, 14] and d["sequence_length"] == 26 and d["n_layers"] == 2 and d["hidden"] == 64, d
assert d["files"] == ["embed.npy", "layer_00.npy", "layer_01.npy", "final_norm.npy", "positions.npy", "tokens.npy",
                      "manifest.json"], d' "$WORK/out" "$WORK/d3"
run "--json without --dump-layers: no dump key" 0 "$LOGDIFF" replay --json --model "$M" --rid rp-greedy "$LOG"
check "no dump key" python3 -c 'import json, sys; assert "dump" not in json.loads(open(sys.argv[1]).read())' "$WORK/out"
run "divergent request, dumped" 1 "$LOGDIFF" replay --model "$M" --rid rp-altered --dump-layers "$WORK/d4" --positions -1 "$LOG"
check "verdict kept" grep -q "^replay.divergent at position 4" "$WORK/out"
check "its last token" python3 -c '
import json, sys; m = json.load(open(sys.argv[1] + "/manifest.json")); ex = json.load(open(sys.argv[2]))["requests"]["rp-altered"]
assert m["positions"] == [25] and m["tokens"] == [ex["output_ids"][-1]], m' "$WORK/d4" "$D/expect.json"

# no output: the sequence is the prompt, whose rows are those of rp-greedy's (causal)
run "no output: the prompt" 0 "$LOGDIFF" replay --model "$M" --rid rp-no-output --dump-layers "$WORK/d5" \
    --positions 0,6,-1 "$LOG"
check "the prompt's rows against transformers" python3 "$WORK/check.py" "$WORK/d5" "$D/hidden-rp-greedy.json" \
    rp-no-output 0,6,13 14
run "DIR exists: files replaced" 0 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/d5" \
    --positions 0,6,13-14,19,-1 "$LOG"
check "rewritten" python3 "$WORK/check.py" "$WORK/d5" "$D/hidden-rp-greedy.json" rp-greedy 0,6,13,14,19,25

# errors: exit 2, with the reason
run "position past the end" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/e1" --positions 0,26 "$LOG"
check "names it and the length" grep -q "position 26 is outside the replayed sequence of 26 positions" "$WORK/err"
check "nothing written" test ! -e "$WORK/e1/manifest.json"
run "negative past the start" 2 "$LOGDIFF" replay --model "$M" --rid rp-no-output --dump-layers "$WORK/e1" --positions=-15 "$LOG"
check "names it and the length" grep -q "position -15 is outside the replayed sequence of 14 positions" "$WORK/err"
run "backwards range" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/e1" --positions 10-5 "$LOG"
check "says backwards" grep -q "range 10-5 runs backwards" "$WORK/err"
run "bad list" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/e1" --positions 1,,2 "$LOG"
check "says where" grep -q -- "--positions: position list '1,,2': expected a number at byte 2" "$WORK/err"
run "bad list: letters" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/e1" --positions 3-x "$LOG"
check "says where" grep -q "expected a number at byte 2" "$WORK/err"
run "--positions without --dump-layers" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --positions 3 "$LOG"
check "says so" grep -q -- "--positions: give it with --dump-layers DIR" "$WORK/err"
: >"$WORK/afile"
run "DIR under a file" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/afile/sub" "$LOG"
check "names the directory" grep -q -- "--dump-layers: cannot create directory '$WORK/afile/sub'" "$WORK/err"
run "DIR is a file" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/afile" "$LOG"
check "says it is not a directory" grep -q "'$WORK/afile' exists and is not a directory" "$WORK/err"
run "parent missing (one level only)" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/no/such" "$LOG"
check "the system's reason" grep -q "No such file or directory" "$WORK/err"
mkdir "$WORK/ro" && mkdir "$WORK/ro/embed.npy"   # a file that cannot be opened for writing, even as root
run "a file cannot be written" 2 "$LOGDIFF" replay --model "$M" --rid rp-greedy --dump-layers "$WORK/ro" "$LOG"
check "names the file" grep -q "cannot write '$WORK/ro/embed.npy'" "$WORK/err"
finish
