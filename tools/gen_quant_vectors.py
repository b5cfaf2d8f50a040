#!/usr/bin/env python3
# gen_quant_vectors.py - writes the dequantization vectors of
# tests/kernels/ref/test_quant.c: random blocks of each GGML type the engine
# computes with, and what gguf-py's gguf.quants.dequantize makes of them.
#
#   pip install gguf==0.19.0      # the pinned version (pulls numpy)
#   python3 tools/gen_quant_vectors.py            # the block vectors
#   /tmp/engvenv/bin/python tools/gen_quant_vectors.py --models
#                    # also the tiny GGUF models (needs torch + transformers
#                    # as in engine/README.md, and gguf)
#
# Writes (small, committed; the test needs no Python):
#   testdata/engine/quant/<TYPE>.bin   rows of raw blocks, as in a GGUF file
#   testdata/engine/quant/<TYPE>.f32   their dequantization, little-endian fp32
#   testdata/engine/quant/index.txt    "<TYPE> <ggml type> <rows> <cols>" lines
# and with --models (tests/engine/models/test_gguf_model.c):
#   testdata/engine/quant/<model>.gguf  the tiny HF models of testdata/models/
#       (llama = smollm, qwen2, qwen3) converted to GGUF with quantized
#       weights (Q8_0, Q4_0, Q4_1; F16, BF16 for some), Llama's q/k rows
#       reordered as llama.cpp's conversion does (each head's row j*hd/2 + i
#       becomes row 2i + j)
#   testdata/engine/quant/<model>-<seq>.logits.f32  the oracle: transformers
#       (float32) running the HF model whose weights are gguf-py's
#       dequantization of the GGUF tensors (q/k rows put back in HF order)
#   testdata/engine/quant/models.txt   "<model> <seq> <ids...>" lines
#   testdata/engine/quant/bad-<what>.gguf  one-layer models with one
#       defect each (the loader's errors)
# Blocks are random bytes, except that every f16 scale/min field is a random
# finite half (zero, subnormal, negative and large values included), so that
# no value is NaN (which would not compare bitwise).  A fixed seed: the same
# bytes every time.
import os
import sys

PINNED = "0.19.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "testdata", "engine", "quant")

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as QT
    from gguf.quants import dequantize
except ImportError:
    sys.exit("gen_quant_vectors.py: needs the gguf package: pip install gguf==" + PINNED)


def finite_halves(rng, n):
    """n random finite halves as uint16 (exponent 31, inf and nan, rejected)."""
    h = rng.randint(0, 1 << 16, size=n).astype(np.uint16)
    bad = (h & 0x7C00) == 0x7C00
    while bad.any():
        h[bad] = rng.randint(0, 1 << 16, size=int(bad.sum())).astype(np.uint16)
        bad = (h & 0x7C00) == 0x7C00
    # a few fixed edge cases at the front
    edge = np.array([0x0000, 0x8000, 0x0001, 0x83FF, 0x3C00, 0x7BFF, 0xFBFF], dtype=np.uint16)
    k = min(n, len(edge))
    h[:k] = edge[:k]
    return h


def put_half(blocks, col, h):
    blocks[:, col] = (h & 0xFF).astype(np.uint8)
    blocks[:, col + 1] = (h >> 8).astype(np.uint8)


# name, type, rows, cols, offsets of f16 fields within a block
CASES = [
    ("Q4_0", QT.Q4_0, 4, 128, [0]),
    ("Q4_1", QT.Q4_1, 4, 128, [0, 2]),
    ("Q8_0", QT.Q8_0, 4, 128, [0]),
    ("Q4_K", QT.Q4_K, 3, 512, [0, 2]),
    ("Q6_K", QT.Q6_K, 3, 512, [208]),
    ("F16", QT.F16, 4, 64, None),
    ("BF16", QT.BF16, 4, 64, None),
    ("F32", QT.F32, 4, 64, None),
]


def hf_to_gguf_rows(w, n_head):
    """llama.cpp's reordering of a Llama q/k projection: within each head,
    row j*hd/2 + i goes to row 2i + j (rotation pairs adjacent)."""
    n, k = w.shape
    hd = n // n_head
    return w.reshape(n_head, 2, hd // 2, k).transpose(0, 2, 1, 3).reshape(n, k)


def gguf_to_hf_rows(w, n_head):
    n, k = w.shape
    hd = n // n_head
    return w.reshape(n_head, hd // 2, 2, k).transpose(0, 2, 1, 3).reshape(n, k)


# tiny model -> (GGUF arch, {GGUF tensor suffix: storage type})
TINY = {
    "smollm": ("llama", "llama-q", {
        "token_embd": QT.Q8_0, "attn_q": QT.Q8_0, "attn_k": QT.Q4_1, "attn_v": QT.Q4_0,
        "attn_output": QT.Q8_0, "ffn_gate": QT.Q4_1, "ffn_up": QT.Q4_0, "ffn_down": QT.Q8_0}),
    "qwen2": ("qwen2", "qwen2-q", {
        "token_embd": QT.F16, "attn_q": QT.Q8_0, "attn_k": QT.Q8_0, "attn_v": QT.Q4_1,
        "attn_output": QT.Q4_0, "ffn_gate": QT.Q8_0, "ffn_up": QT.Q8_0, "ffn_down": QT.Q4_1}),
    "qwen3": ("qwen3", "qwen3-q", {
        "token_embd": QT.Q4_1, "output": QT.Q8_0, "attn_q": QT.Q4_0, "attn_k": QT.Q8_0,
        "attn_v": QT.BF16, "attn_output": QT.Q8_0, "ffn_gate": QT.Q4_1, "ffn_up": QT.Q8_0,
        "ffn_down": QT.F16}),
}

HF_NAMES = [  # GGUF suffix, HF suffix (per layer)
    ("attn_norm.weight", "input_layernorm.weight"),
    ("attn_q.weight", "self_attn.q_proj.weight"),
    ("attn_k.weight", "self_attn.k_proj.weight"),
    ("attn_v.weight", "self_attn.v_proj.weight"),
    ("attn_output.weight", "self_attn.o_proj.weight"),
    ("attn_q.bias", "self_attn.q_proj.bias"),
    ("attn_k.bias", "self_attn.k_proj.bias"),
    ("attn_v.bias", "self_attn.v_proj.bias"),
    ("attn_q_norm.weight", "self_attn.q_norm.weight"),
    ("attn_k_norm.weight", "self_attn.k_norm.weight"),
    ("ffn_norm.weight", "post_attention_layernorm.weight"),
    ("ffn_gate.weight", "mlp.gate_proj.weight"),
    ("ffn_up.weight", "mlp.up_proj.weight"),
    ("ffn_down.weight", "mlp.down_proj.weight"),
]


def store(w, name, arr, qt):
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    if qt == QT.F32:
        w.add_tensor(name, arr)
    elif qt == QT.F16:
        w.add_tensor(name, arr.astype(np.float16))
    else:
        w.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)


def write_models():
    import json
    import torch
    from safetensors.numpy import load_file
    from transformers import AutoConfig, AutoModelForCausalLM
    lines = []
    for src, (arch, out, types) in TINY.items():
        d = os.path.join(ROOT, "testdata", "models", src)
        cfg = json.load(open(os.path.join(d, "config.json")))
        sd = load_file(os.path.join(d, "model.safetensors"))
        nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
        hd = cfg.get("head_dim") or cfg["hidden_size"] // nh
        rp = cfg.get("rope_parameters") or {}
        path = os.path.join(OUT, out + ".gguf")
        w = gguf.GGUFWriter(path, arch)
        w.add_block_count(cfg["num_hidden_layers"])
        w.add_context_length(cfg["max_position_embeddings"])
        w.add_embedding_length(cfg["hidden_size"])
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(nh)
        w.add_head_count_kv(nkv)
        w.add_key_length(hd)
        w.add_value_length(hd)
        w.add_rope_dimension_count(hd)
        w.add_rope_freq_base(rp.get("rope_theta", 10000.0))
        if rp.get("rope_type") == "linear":
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rp["factor"])
        w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
        w.add_vocab_size(cfg["vocab_size"])
        w.add_file_type(1)
        store(w, "token_embd.weight", sd["model.embed_tokens.weight"], types["token_embd"])
        store(w, "output_norm.weight", sd["model.norm.weight"], QT.F32)
        if "lm_head.weight" in sd and not cfg.get("tie_word_embeddings"):
            store(w, "output.weight", sd["lm_head.weight"], types["output"])
        for l in range(cfg["num_hidden_layers"]):
            for g, h in HF_NAMES:
                t = sd.get("model.layers.%d.%s" % (l, h))
                if t is None:
                    continue
                key = g.split(".")[0]
                if arch == "llama" and key in ("attn_q", "attn_k"):
                    t = hf_to_gguf_rows(t, nh if key == "attn_q" else nkv)
                store(w, "blk.%d.%s" % (l, g), t, types.get(key, QT.F32) if t.ndim == 2 else QT.F32)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        # the oracle: read the file back, dequantize with gguf-py, run transformers
        r = gguf.GGUFReader(path)
        hf = {}
        gmap = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                "output.weight": "lm_head.weight"}
        for t in r.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            a = a.reshape([int(x) for x in reversed(t.shape.tolist())]) if len(t.shape) > 1 else a.reshape(-1)
            name = t.name
            if name in gmap:
                hf[gmap[name]] = a
                continue
            _, l, rest = name.split(".", 2)
            h = dict(HF_NAMES)[rest]
            if arch == "llama" and rest in ("attn_q.weight", "attn_k.weight"):
                a = gguf_to_hf_rows(a, nh if rest == "attn_q.weight" else nkv)
            hf["model.layers.%s.%s" % (l, h)] = a
        config = AutoConfig.from_pretrained(d)
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
        missing, unexpected = model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in hf.items()},
                                                    strict=False)
        assert not unexpected, unexpected
        assert all(m == "lm_head.weight" for m in missing), missing
        if config.tie_word_embeddings:
            model.tie_weights()
        ref = json.load(open(os.path.join(d, "ref.json")))
        for seq in ref["sequences"]:
            ids = seq["tokens"]
            with torch.no_grad():
                lg = model(torch.tensor([ids])).logits[0].numpy().astype("<f4")
            with open(os.path.join(OUT, "%s-%s.logits.f32" % (out, seq["name"])), "wb") as f:
                f.write(lg.tobytes())
            lines.append("%s %s %s\n" % (out, seq["name"], " ".join(str(i) for i in ids)))
    with open(os.path.join(OUT, "models.txt"), "w") as f:
        f.writelines(lines)
    write_bad()


def write_bad():
    """one-layer llama models (hidden 32, vocab 8, Q8_0 matrices) with one defect each"""
    rng = np.random.RandomState(7)
    D, I, V, NH = 32, 32, 8, 2

    def model(name, arch="llama", skip=(), extra=None, shapes=None, types=None):
        w = gguf.GGUFWriter(os.path.join(OUT, "bad-%s.gguf" % name), arch)
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_embedding_length(D)
        w.add_feed_forward_length(I)
        w.add_head_count(NH)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_vocab_size(V)
        names = {"token_embd.weight": (V, D), "output_norm.weight": (D,), "blk.0.attn_norm.weight": (D,),
                 "blk.0.attn_q.weight": (D, D), "blk.0.attn_k.weight": (D, D), "blk.0.attn_v.weight": (D, D),
                 "blk.0.attn_output.weight": (D, D), "blk.0.ffn_norm.weight": (D,),
                 "blk.0.ffn_gate.weight": (I, D), "blk.0.ffn_up.weight": (I, D), "blk.0.ffn_down.weight": (D, I)}
        names.update(shapes or {})
        if extra:
            names.update(extra)
        for n, shp in names.items():
            if n in skip:
                continue
            store(w, n, rng.standard_normal(shp).astype(np.float32),
                  (types or {}).get(n, QT.Q8_0 if len(shp) == 2 else QT.F32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()

    model("ok")
    model("shape", shapes={"blk.0.attn_k.weight": (D // 2, D)})
    model("missing", skip=("blk.0.ffn_up.weight",))
    model("arch", arch="gpt2")
    model("extra", extra={"rope_freqs.weight": (D // NH // 2,)})
    model("normtype", types={"blk.0.ffn_norm.weight": QT.Q8_0})


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.RandomState(20261129)
    index = []
    for name, qt, rows, cols, halves in CASES:
        block, size = gguf.GGML_QUANT_SIZES[qt]
        nblk = rows * cols // block
        raw = rng.randint(0, 256, size=(nblk, size)).astype(np.uint8)
        if halves is not None:
            for off in halves:
                put_half(raw, off, finite_halves(rng, nblk))
        elif qt == QT.F16:
            raw = finite_halves(rng, nblk).view(np.uint8).reshape(nblk, 2)
        elif qt == QT.BF16:
            v = rng.randint(0, 1 << 16, size=nblk).astype(np.uint16)
            v[(v & 0x7F80) == 0x7F80] &= 0xBFFF  # no inf/nan exponent
            raw = v.view(np.uint8).reshape(nblk, 2)
        else:
            v = rng.randint(0, 1 << 32, size=nblk, dtype=np.uint64).astype(np.uint32)
            v[(v & 0x7F800000) == 0x7F800000] &= 0xBFFFFFFF
            raw = v.view(np.uint8).reshape(nblk, 4)
        data = raw.reshape(rows, cols // block * size)
        out = dequantize(data, qt).astype("<f4", copy=False)
        assert out.shape == (rows, cols), (name, out.shape)
        assert np.isfinite(out).all(), name
        with open(os.path.join(OUT, name + ".bin"), "wb") as f:
            f.write(data.tobytes())
        with open(os.path.join(OUT, name + ".f32"), "wb") as f:
            f.write(out.tobytes())
        index.append("%s %d %d %d\n" % (name, int(qt), rows, cols))
    with open(os.path.join(OUT, "index.txt"), "w") as f:
        f.writelines(index)


if __name__ == "__main__":
    main()
    if "--models" in sys.argv[1:]:
        write_models()
