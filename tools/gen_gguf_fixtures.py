#!/usr/bin/env python3
# gen_gguf_fixtures.py - writes the GGUF fixtures of tests/engine/formats/test_gguf.c and
# tests/replay/template/test_tpl_source.c, the oracle of what gguf-py's reader reads back
# from them, and the seed corpus of tests/fuzz/fuzz_gguf.c.
#
#   pip install gguf==0.19.0      # the pinned version (pulls numpy)
#   python3 tools/gen_gguf_fixtures.py [--shared ../shared]
#   /tmp/engvenv/bin/python tools/gen_gguf_fixtures.py --rope-models
#       (only the RoPE-scaling models below; needs safetensors too)
#
# Writes (all small, committed; tests need no Python at test time):
#   testdata/engine/gguf/<name>.gguf    written with gguf.GGUFWriter
#   testdata/engine/gguf/<name>.json    what gguf.GGUFReader reads back from it
#   testdata/engine/gguf/shared.json    facts GGUFReader reports about the real
#                                       files ../shared/tokenizers/*.gguf
#   tests/fuzz/corpus/gguf/*            the fixtures, truncated and damaged copies
# and with --rope-models (tests/engine/models/test_gguf_model.c; nothing else):
#   testdata/engine/rope/<model>.gguf   tiny HF models of testdata/models/
#       converted as llama.cpp's convert_hf_to_gguf.py does, weights F32
#       (Llama's q/k rows reordered), so the oracle is transformers' logits
#       of the HF model, testdata/models/<src>/ref-<seq>.logits.f32:
#         llama3-freqs.gguf  llama3 -> rope_freqs.weight (the converter's
#                            Llama 3 divisors), no rope.scaling.type
#         llama-yarn.gguf    llama-yarn -> rope.scaling.type yarn, factor,
#                            original_context_length
#   testdata/engine/rope/models.txt    "<gguf> <src model>" lines
#   testdata/engine/rope/bad-<what>.gguf  one-layer llamas with one RoPE
#       defect each, and ok-*.gguf (rope_freqs, yarn with every key,
#       linear with the attention factors: the config read is checked)
#
# Oracle encoding (<name>.json): integers are decimal strings (64-bit exact),
# floats are float.hex() strings ("nan", "inf" too), bools are JSON booleans,
# strings are the hex of their bytes (they may hold NUL).  "types" is
# GGUFReader's list of value types of a field: [ARRAY, ..., leaf] for arrays,
# and "value" of an array is GGUFReader's flattened list of leaves (it
# flattens nested arrays); "nested" keeps the nested structure as written.
# Same inputs give byte-identical outputs.
import argparse
import hashlib
import json
import os
import sys

PINNED = "0.19.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "testdata", "engine", "gguf")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus", "gguf")

try:
    import numpy as np
    import gguf
    from gguf import GGUFValueType as VT
except ImportError:
    sys.exit("gen_gguf_fixtures.py: needs the gguf package: pip install gguf==" + PINNED)


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def enc_leaf(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).hex()
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v.encode("utf-8").hex()
    raise TypeError(type(v))


def enc_nested(v):
    return [enc_nested(x) for x in v] if isinstance(v, list) else enc_leaf(v)


def field_value(f):
    """What GGUFReader read for field f: leaves taken from its parts."""
    leaf = f.types[-1]
    def one(idx):
        part = f.parts[idx]
        if leaf == VT.STRING:
            return bytes(part.tobytes()).hex()
        return enc_leaf(part.tolist()[0])
    if f.types[0] == VT.ARRAY:
        return [one(i) for i in f.data]
    return one(f.data[0])


def oracle(path, nested=None):
    r = gguf.GGUFReader(path)
    data = bytes(r.data)
    fields = []
    for key, f in r.fields.items():
        if key.startswith("GGUF."):
            continue
        fields.append({"key": key, "offset": int(f.offset), "types": [int(t) for t in f.types],
                       "value": field_value(f)})
    tensors = []
    for t in r.tensors:
        start = int(t.data_offset)
        tensors.append({
            "name": t.name, "type": int(t.tensor_type), "type_name": t.tensor_type.name,
            "dims": [int(d) for d in t.shape], "n_elements": int(t.n_elements),
            "n_bytes": int(t.n_bytes), "offset": int(t.field.parts[5][0]),
            "data_offset": start, "fnv1a64": fnv1a64(data[start:start + int(t.n_bytes)]),
        })
    return {
        "file": os.path.basename(path), "size": len(data), "gguf_py": gguf_version(),
        "version": int(r.fields["GGUF.version"].parts[0][0]),
        "byte_order": "big" if r.endianess == gguf.GGUFEndian.BIG else "little",
        "tensor_count": len(r.tensors), "kv_count": len(fields),
        "alignment": int(r.alignment), "data_offset": int(r.data_offset),
        "fields": fields, "tensors": tensors, "nested": nested or {},
    }


def gguf_version():
    from importlib.metadata import version
    return version("gguf")


def write(path, build, endianess=gguf.GGUFEndian.LITTLE):
    w = gguf.GGUFWriter(path, "test", endianess=endianess)
    nested = build(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return nested


SCALARS = [
    ("t.u8", 255, VT.UINT8), ("t.i8", -128, VT.INT8), ("t.u16", 65535, VT.UINT16),
    ("t.i16", -32768, VT.INT16), ("t.u32", 4294967295, VT.UINT32),
    ("t.i32", -2147483648, VT.INT32), ("t.f32", 3.14159, VT.FLOAT32),
    ("t.f32_inf", float("-inf"), VT.FLOAT32), ("t.bool_t", True, VT.BOOL),
    ("t.bool_f", False, VT.BOOL), ("t.u64", 2**64 - 1, VT.UINT64),
    ("t.i64", -2**63, VT.INT64), ("t.f64", 1e300, VT.FLOAT64), ("t.f64_negzero", -0.0, VT.FLOAT64),
    ("t.f64_nan", float("nan"), VT.FLOAT64),
    ("t.str", "h\u00e9llo w\u00f6rld \u2713 \U0001F600", VT.STRING), ("t.str_empty", "", VT.STRING),
    ("t.str_nul", "a\x00b", VT.STRING),
]

ARRAYS = [
    ("a.u8", [0, 1, 255], VT.UINT8), ("a.i8", [-1, 0, 127], VT.INT8),
    ("a.u16", [1, 65535], VT.UINT16), ("a.i16", [-300, 300], VT.INT16),
    ("a.u32", [7, 4000000000], VT.UINT32), ("a.i32", [-5, 5, 2147483647], VT.INT32),
    ("a.f32", [0.5, -1.25, 1e-7], VT.FLOAT32), ("a.bool", [True, False, True], VT.BOOL),
    ("a.str", ["a", "", "\u65e5\u672c"], VT.STRING), ("a.u64", [0, 2**64 - 1], VT.UINT64),
    ("a.i64", [-2**63, 2**63 - 1], VT.INT64), ("a.f64", [2.5, -1e-300], VT.FLOAT64),
]

NESTED = [
    ("n.i32", [[1, 2], [3], [4, 5, 6]]),
    ("n.str", [["x", "y"], ["z"]]),
    ("n.deep", [[[1]], [[2, 3], [4]]]),
]


def build_all_types(w):
    for key, val, t in SCALARS:
        w.add_key_value(key, val, t)
    for key, val, t in ARRAYS:
        w.add_key_value(key, val, VT.ARRAY, sub_type=t)
    for key, val in NESTED:
        w.add_key_value(key, val, VT.ARRAY)
    w.add_tensor("f32.weight", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("f16.bias", np.array([1, -2, 3.5, 0], dtype=np.float16))
    w.add_tensor("q8.weight", np.arange(2 * 34, dtype=np.uint8).reshape(2, 34),
                 raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    w.add_tensor("i32.idx", np.array([7, 8, 9], dtype=np.int32))
    return {key: enc_nested(val) for key, val in NESTED}


# The chat fixture: a template that shows the tokens and the messages, a
# named one, and a small vocabulary whose bos/eos ids pick "<s>" and "</s>".
CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content }}"
                 "{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}")
TOOL_TEMPLATE = "tool:{{ messages | length }}{{ eos_token }}"
TOKENS = ["<unk>", "<s>", "</s>", "a", "b", "ab", "\u0120the", "\u00e9", "<|im_start|>",
          "<|im_end|>"]


def build_chat(w):
    w.add_name("tiny-chat")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(TOKENS)
    w.add_token_types([2, 3, 3] + [1] * (len(TOKENS) - 3))
    w.add_token_merges(["a b"])
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template([{"name": "default", "template": CHAT_TEMPLATE},
                         {"name": "tool_use", "template": TOOL_TEMPLATE}])
    w.add_tensor("token_embd.weight", np.zeros((len(TOKENS), 4), dtype=np.float32))
    return {}


def build_big_endian(w):
    w.add_uint32("t.u32", 0x01020304)
    w.add_int16("t.i16", -2)
    w.add_float64("t.f64", 1.5)
    w.add_string("t.str", "big")
    w.add_key_value("a.u16", [1, 258], VT.ARRAY, sub_type=VT.UINT16)
    w.add_key_value("a.str", ["p", "qq"], VT.ARRAY, sub_type=VT.STRING)
    w.add_key_value("n.i32", [[1, 2], [3]], VT.ARRAY)
    w.add_tensor("w", np.array([1.0, 2.0], dtype=np.float32))
    return {"n.i32": enc_nested([[1, 2], [3]])}


def build_align64(w):
    w.add_custom_alignment(64)
    w.add_string("general.name", "aligned")
    w.add_tensor("a", np.ones(3, dtype=np.float32))
    w.add_tensor("b", np.arange(10, dtype=np.int8))
    w.add_tensor("c", np.zeros((2, 2, 2), dtype=np.float64))
    return {}


def patch_version(path, version):
    with open(path, "r+b") as f:
        f.seek(4)
        f.write(version.to_bytes(4, "little"))


def dump(obj, path):
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False, ensure_ascii=True)
        f.write("\n")


def shared_facts(shared):
    """What GGUFReader reports about the real vocab files, for the C test."""
    out = {"gguf_py": gguf_version(), "files": []}
    tdir = os.path.join(shared, "tokenizers")
    names = sorted(n for n in os.listdir(tdir) if n.endswith(".gguf")) if os.path.isdir(tdir) else []
    for name in names:
        path = os.path.join(tdir, name)
        r = gguf.GGUFReader(path)
        with open(path, "rb") as f:
            sha = hashlib.sha256(f.read()).hexdigest()
        keys = []
        for key, fl in r.fields.items():
            if key.startswith("GGUF."):
                continue
            e = {"key": key, "offset": int(fl.offset), "types": [int(t) for t in fl.types]}
            if fl.types[0] == VT.ARRAY:
                vals = [fl.parts[i] for i in fl.data]
                e["count"] = len(vals)
                # FNV-1a 64 over each leaf: strings as u64 length + bytes,
                # numbers as int64 little-endian
                h = 0xcbf29ce484222325
                for p in vals:
                    if fl.types[-1] == VT.STRING:
                        b = p.tobytes()
                        blob = len(b).to_bytes(8, "little") + b
                    else:
                        blob = int(p.tolist()[0]).to_bytes(8, "little", signed=True)
                    for c in blob:
                        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
                e["fnv1a64"] = "%016x" % h
                e["first"] = field_value_at(fl, 0)
                e["last"] = field_value_at(fl, len(vals) - 1)
            else:
                e["value"] = field_value(fl)
            keys.append(e)
        tokens = r.fields["tokenizer.ggml.tokens"].contents()
        facts = {"file": name, "size": os.path.getsize(path), "sha256": sha,
                 "version": int(r.fields["GGUF.version"].parts[0][0]),
                 "tensor_count": len(r.tensors), "kv_count": len(keys),
                 "alignment": int(r.alignment), "data_offset": int(r.data_offset),
                 "name": r.fields["general.name"].contents(), "n_tokens": len(tokens),
                 "fields": keys}
        for what in ("bos", "eos"):
            f = r.fields.get("tokenizer.ggml.%s_token_id" % what)
            if f is not None:
                tid = int(f.contents())
                facts[what + "_id"] = tid
                facts[what + "_token"] = tokens[tid]
        out["files"].append(facts)
    return out


def field_value_at(fl, i):
    part = fl.parts[fl.data[i]]
    if fl.types[-1] == VT.STRING:
        return part.tobytes().hex()
    return enc_leaf(part.tolist()[0])


def corpus(fixtures):
    os.makedirs(CORPUS, exist_ok=True)
    for old in os.listdir(CORPUS):
        os.remove(os.path.join(CORPUS, old))
    for name in fixtures:
        with open(os.path.join(OUT, name + ".gguf"), "rb") as f:
            data = f.read()
        with open(os.path.join(CORPUS, name + ".gguf"), "wb") as f:
            f.write(data)
        # truncated copies: inside the header, the key/values, the tensor
        # infos and the data
        for cut in sorted({7, 23, len(data) // 4, len(data) // 2, len(data) - 1}):
            if 0 < cut < len(data):
                with open(os.path.join(CORPUS, "%s.cut%d" % (name, cut)), "wb") as f:
                    f.write(data[:cut])
    with open(os.path.join(OUT, "all_types.gguf"), "rb") as f:
        data = bytearray(f.read())
    damaged = {
        "bad_magic": (0, b"GGUX"),
        "version1": (4, (1).to_bytes(4, "little")),
        "huge_kv_count": (16, (2**62).to_bytes(8, "little")),
        "huge_key_len": (24, (2**40).to_bytes(8, "little")),
        "bad_value_type": (24 + 8 + len("general.architecture"), (77).to_bytes(4, "little")),
    }
    for name, (at, patch) in damaged.items():
        d = bytearray(data)
        d[at:at + len(patch)] = patch
        with open(os.path.join(CORPUS, "damaged_" + name), "wb") as f:
            f.write(bytes(d))


ROPE_OUT = os.path.join(ROOT, "testdata", "engine", "rope")


def hf_to_gguf_rows(w, n_head):
    """llama.cpp's reordering of a Llama q/k projection: within each head,
    row j*hd/2 + i goes to row 2i + j."""
    n, k = w.shape
    hd = n // n_head
    return w.reshape(n_head, 2, hd // 2, k).transpose(0, 2, 1, 3).reshape(n, k)


def llama3_rope_freqs(cfg):
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for
    rope_type llama3 (with the scaling's own original_max_position_embeddings)"""
    import math
    rp = cfg["rope_parameters"]
    base = rp["rope_theta"]
    dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    freqs = 1.0 / (base ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, lo, hi = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
    old = rp["original_max_position_embeddings"]
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1.0)
        elif wl > lo_wl:
            out.append(factor)
        else:
            smooth = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


HF_NAMES = [  # GGUF suffix, HF suffix (per layer)
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
]


def rope_model(src, out, keys):
    """testdata/models/<src> (a Llama) as GGUF with F32 weights; keys(w, cfg)
    writes the RoPE metadata and extra tensors"""
    from safetensors.numpy import load_file
    d = os.path.join(ROOT, "testdata", "models", src)
    cfg = json.load(open(os.path.join(d, "config.json")))
    sd = load_file(os.path.join(d, "model.safetensors"))
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
    w = gguf.GGUFWriter(os.path.join(ROPE_OUT, out + ".gguf"), "llama")
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    w.add_file_type(0)
    keys(w, cfg)
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)
    w.add_tensor("token_embd.weight", f32(sd["model.embed_tokens.weight"]))
    w.add_tensor("output_norm.weight", f32(sd["model.norm.weight"]))
    if not cfg.get("tie_word_embeddings"):
        w.add_tensor("output.weight", f32(sd["lm_head.weight"]))
    for l in range(cfg["num_hidden_layers"]):
        for g, h in HF_NAMES:
            t = sd["model.layers.%d.%s" % (l, h)]
            if g in ("attn_q.weight", "attn_k.weight"):
                t = hf_to_gguf_rows(t, nh if g == "attn_q.weight" else nkv)
            w.add_tensor("blk.%d.%s" % (l, g), f32(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return "%s %s\n" % (out, src)


def yarn_keys(w, cfg):
    """convert_hf_to_gguf.py's yarn metadata (no attention_factor in the
    config: llama.cpp derives the magnitude from the factor, as HF)"""
    rp = cfg["rope_parameters"]
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(rp["factor"])
    w.add_rope_scaling_orig_ctx_len(rp["original_max_position_embeddings"])


def rope_bad():
    """one-layer llamas (hidden 32, 2 heads: head dim 16, vocab 8, F32)"""
    rng = np.random.RandomState(11)
    D, I, V, NH = 32, 32, 8, 2

    def model(name, arch="llama", meta=None, extra=None):
        w = gguf.GGUFWriter(os.path.join(ROPE_OUT, name + ".gguf"), arch)
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_embedding_length(D)
        w.add_feed_forward_length(I)
        w.add_head_count(NH)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(V)
        if meta:
            meta(w)
        names = {"token_embd.weight": (V, D), "output_norm.weight": (D,), "blk.0.attn_norm.weight": (D,),
                 "blk.0.attn_q.weight": (D, D), "blk.0.attn_k.weight": (D, D), "blk.0.attn_v.weight": (D, D),
                 "blk.0.attn_output.weight": (D, D), "blk.0.ffn_norm.weight": (D,),
                 "blk.0.ffn_gate.weight": (I, D), "blk.0.ffn_up.weight": (I, D), "blk.0.ffn_down.weight": (D, I)}
        if arch == "qwen2":
            names.update({"blk.0.attn_q.bias": (D,), "blk.0.attn_k.bias": (D,), "blk.0.attn_v.bias": (D,)})
        for n, shp in names.items():
            w.add_tensor(n, rng.standard_normal(shp).astype(np.float32))
        for n, arr in (extra or {}).items():
            w.add_tensor(n, arr)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    freqs = np.array([1, 1, 1.5, 2, 3, 4, 4, 4], dtype=np.float32)

    def yarn(factor=True, ext=None):
        def meta(w):
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            if factor:
                w.add_rope_scaling_factor(4.0)
            w.add_rope_scaling_orig_ctx_len(16)
            if ext is not None:
                w.add_rope_scaling_yarn_ext_factor(ext)
        return meta

    def yarn_attn(w):
        # yarn_* keys at llama.cpp's defaults (it ignores them for llama)
        yarn(ext=1.0)(w)
        w.add_rope_scaling_yarn_beta_fast(32.0)
        w.add_rope_scaling_yarn_beta_slow(1.0)
        w.add_rope_scaling_yarn_log_mul(0.0)
        w.add_rope_scaling_yarn_attn_factor(1.0)
        w.add_rope_scaling_attn_factors(2.0)

    def linear_attn(w):
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(2.0)
        w.add_rope_scaling_attn_factors(2.0)

    def yarn_beta(w):
        yarn()(w)
        w.add_rope_scaling_yarn_beta_fast(24.0)

    def yarn_log_mul(w):
        yarn()(w)
        w.add_rope_scaling_yarn_log_mul(0.1)

    model("ok-freqs", extra={"rope_freqs.weight": freqs})
    model("ok-yarn-attn", meta=yarn_attn)
    model("ok-linear-attn", meta=linear_attn)
    model("bad-freqs-shape", extra={"rope_freqs.weight": np.ones(9, dtype=np.float32)})
    model("bad-freqs-value", extra={"rope_freqs.weight": np.array([1, 1, 0, 2, 3, 4, 4, 4], dtype=np.float32)})
    model("bad-freqs-type", extra={"rope_freqs.weight": freqs.astype(np.float16)})
    model("bad-freqs-qwen2", arch="qwen2", extra={"rope_freqs.weight": freqs})
    model("bad-yarn-factor", meta=yarn(factor=False))
    model("bad-yarn-ext", meta=yarn(ext=0.5))
    model("bad-yarn-beta", meta=yarn_beta)
    model("bad-yarn-logmul", meta=yarn_log_mul)
    model("bad-scaling-type", meta=lambda w: w.add_string("llama.rope.scaling.type", "longrope"))


def rope_models():
    os.makedirs(ROPE_OUT, exist_ok=True)

    def freqs(w, cfg):
        w.add_tensor("rope_freqs.weight", llama3_rope_freqs(cfg))
    lines = [rope_model("llama3", "llama3-freqs", freqs),
             rope_model("llama-yarn", "llama-yarn", yarn_keys)]
    with open(os.path.join(ROPE_OUT, "models.txt"), "w") as f:
        f.writelines(lines)
    rope_bad()
    for n in sorted(os.listdir(ROPE_OUT)):
        print("%7d  %s" % (os.path.getsize(os.path.join(ROPE_OUT, n)), os.path.relpath(os.path.join(ROPE_OUT, n), ROOT)))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--any-version", action="store_true",
                    help="run with a gguf other than the pinned " + PINNED)
    ap.add_argument("--rope-models", action="store_true",
                    help="write only testdata/engine/rope/ (the RoPE-scaling GGUF models)")
    args = ap.parse_args()
    if gguf_version() != PINNED and not args.any_version:
        sys.exit("gen_gguf_fixtures.py: gguf %s installed, %s pinned (pip install gguf==%s)"
                 % (gguf_version(), PINNED, PINNED))
    if args.rope_models:
        rope_models()
        return
    os.makedirs(OUT, exist_ok=True)
    fixtures = {
        "all_types": (build_all_types, gguf.GGUFEndian.LITTLE),
        "chat": (build_chat, gguf.GGUFEndian.LITTLE),
        "big_endian": (build_big_endian, gguf.GGUFEndian.BIG),
        "align64": (build_align64, gguf.GGUFEndian.LITTLE),
    }
    for name, (build, endian) in fixtures.items():
        path = os.path.join(OUT, name + ".gguf")
        nested = write(path, build, endian)
        dump(oracle(path, nested), os.path.join(OUT, name + ".json"))
    # v2 has v3's layout (v3 only added big-endian files): the chat fixture
    # with version 2 in its header
    v2 = os.path.join(OUT, "v2.gguf")
    write(v2, build_chat)
    patch_version(v2, 2)
    dump(oracle(v2), os.path.join(OUT, "v2.json"))
    dump(shared_facts(args.shared), os.path.join(OUT, "shared.json"))
    corpus(["all_types", "chat", "big_endian", "align64"])
    for n in sorted(os.listdir(OUT)):
        print("%7d  %s" % (os.path.getsize(os.path.join(OUT, n)), os.path.relpath(os.path.join(OUT, n), ROOT)))
    print("%d files in %s" % (len(os.listdir(CORPUS)), os.path.relpath(CORPUS, ROOT)))


if __name__ == "__main__":
    main()
