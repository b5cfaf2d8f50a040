#!/usr/bin/env python3
"""gen_tiny_models.py - writes the tiny random-weight reference models that
tests/engine/models/test_forward.c runs, and transformers' outputs for them.

Run by developers (not by CI), from the repository root, in a venv:
    python3 -m venv /tmp/engvenv
    /tmp/engvenv/bin/pip install torch==2.15.0 transformers==5.23.0 \
        safetensors==0.8.0 numpy==2.4.6
    /tmp/engvenv/bin/python tools/gen_tiny_models.py [--only NAME,...]

(--only: just those models, e.g. --only llama-yarn,qwen2-yarn,qwen2-dynamic;
the others' files are left as they are.)

For each model it writes testdata/models/<name>/:
    config.json, model.safetensors   genuine HF format (save_pretrained)
    ref.json                          versions, token sequences, shapes
    ref-<seq>.logits.f32              [T, vocab] raw little-endian f32
    ref-<seq>.hidden.f32              [n_layers + 2, T, hidden]: the
                                      embeddings, the residual stream after
                                      each decoder layer, the final norm
    ref-<seq>.logits-native.f32       (bf16/f16 models) [T, vocab] from
                                      transformers computing in that dtype
ref.json's "rope" (the yarn / dynamic models only): the inverse
frequencies transformers' rotary embedding computed with ("inv_freq",
float.hex) and its cos/sin factor ("attention_scaling"); for "dynamic" also
"inv_freq_sglang": SGLang's DynamicNTKScalingRotaryEmbedding formula (a
fixed base from max_len = max_position_embeddings * factor) evaluated here
with torch as sglang's code does (sglang itself is not imported).  The
dynamic model's sequences are max_len long, so that transformers' dynamic
RoPE (which recomputes the base from the current length) uses exactly
SGLang's base.
The reference always runs in fp32 (eager attention) on the weights as
stored: a bf16/f16 model is loaded and upcast, which is exactly what the C
engine computes (fp32 arithmetic, half-precision storage).

Weights are drawn from torch's generator with a fixed seed per model, so
reruns rewrite identical files.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import (AutoModelForCausalLM, LlamaConfig, MistralConfig,
                          Qwen2Config, Qwen3Config)

# the versions the committed fixtures were written with
PINNED = {"torch": "2.15.0", "transformers": "5.23.0", "numpy": "2.4.6"}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "testdata", "models")

# two fixed token sequences (ids < 300)
SEQS = {
    "a": [1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200],
    "b": [(i * 37 + 11) % 299 + 1 for i in range(21)],
}

# the dynamic-NTK model: sequences of max_position_embeddings * factor = 64
SEQS_64 = {
    "a": [(i * 53 + 7) % 299 + 1 for i in range(64)],
    "b": [(i * 91 + 40) % 299 + 1 for i in range(64)],
}

COMMON = dict(vocab_size=300, hidden_size=64, intermediate_size=128,
              num_hidden_layers=2, num_attention_heads=4,
              max_position_embeddings=256, rms_norm_eps=1e-5,
              hidden_act="silu", bos_token_id=1, eos_token_id=2,
              pad_token_id=0)


def models():
    """(name, config class, config kwargs, storage dtype, seed)"""
    return [
        ("llama3", LlamaConfig, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=False,
            rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0,
                             "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 16}),
         torch.float32, 1),
        ("llama3-bf16", None, None, torch.bfloat16, 1),
        ("smollm", LlamaConfig, dict(
            COMMON, num_key_value_heads=4, tie_word_embeddings=True,
            rope_parameters={"rope_type": "linear", "rope_theta": 10000.0,
                             "factor": 2.0}),
         torch.float32, 2),
        ("qwen2", Qwen2Config, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=True,
            rope_parameters={"rope_type": "default",
                             "rope_theta": 1000000.0}),
         torch.float32, 3),
        ("qwen3", Qwen3Config, dict(
            COMMON, num_key_value_heads=2, head_dim=32,
            tie_word_embeddings=False,
            rope_parameters={"rope_type": "default",
                             "rope_theta": 1000000.0}),
         torch.float32, 4),
        ("qwen3-f16", None, None, torch.float16, 4),
        # block-scaled FP8 (the Qwen3-FP8 / DeepSeek format, 16x16 blocks
        # here so that partial blocks occur): the reference is transformers
        # in fp32 on the dequantized weights
        ("qwen3-fp8", None, None, "fp8", 4),
        ("mistral", MistralConfig, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=False,
            sliding_window=5,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
         torch.float32, 5),
        # YaRN: transformers' defaults (beta 32/1, truncate, the attention
        # factor from the factor); the ramp covers dims 2..6 of 8
        ("llama-yarn", LlamaConfig, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=False,
            max_position_embeddings=16384,
            rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0,
                             "factor": 4.0,
                             "original_max_position_embeddings": 4096}),
         torch.float32, 6),
        # YaRN with the optional fields: beta_fast, no truncation, the
        # attention factor from mscale / mscale_all_dim
        ("qwen2-yarn", Qwen2Config, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=True,
            max_position_embeddings=32768,
            rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0,
                             "factor": 8.0,
                             "original_max_position_embeddings": 4096,
                             "beta_fast": 16.0, "beta_slow": 2.0,
                             "truncate": False, "mscale": 2.0,
                             "mscale_all_dim": 0.5}),
         torch.float32, 7),
        # dynamic NTK: max_len = 32 * 2 = 64 = the sequences' length
        ("qwen2-dynamic", Qwen2Config, dict(
            COMMON, num_key_value_heads=2, tie_word_embeddings=True,
            max_position_embeddings=32,
            rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0,
                             "factor": 2.0}),
         torch.float32, 8),
    ]


def seqs_for(name):
    return SEQS_64 if name.endswith("-dynamic") else SEQS


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
            elif name.endswith(".bias"):
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif "embed_tokens" in name:
                v = torch.randn(p.shape, generator=g)
            else:  # a linear [out, in]
                v = torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5)
            p.copy_(v)


def native_logits(path, dtype, seqs):
    """Logits of transformers computing in the storage dtype itself (what a
    bf16/f16 server computes), for the record: the C engine computes in
    fp32 and is compared with these only loosely."""
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=dtype, attn_implementation="eager")
    model.eval()
    out = {}
    for seq, toks in seqs.items():
        with torch.no_grad():
            out[seq] = model(torch.tensor([toks])).logits[0].float().numpy()
    return out


def sglang_dynamic_inv_freq(cfg):
    """SGLang's DynamicNTKScalingRotaryEmbedding._compute_cos_sin_cache
    (sglang 0.5.23, rotary_embedding/rope_variant.py) and
    RotaryEmbedding._compute_inv_freq, evaluated with torch."""
    rp = cfg["rope_parameters"]
    max_pos = cfg["max_position_embeddings"]
    factor = rp["factor"]
    rotary_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    max_len = max_pos * factor
    base = rp["rope_theta"] * ((factor * max_len / max_pos) - (factor - 1)) ** (
        rotary_dim / (rotary_dim - 2))
    return 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float)
                           / rotary_dim))


def rope_record(model, path):
    """the inverse frequencies and cos/sin factor transformers used (after
    the forward passes: the dynamic RoPE updates them)"""
    rot = model.model.rotary_emb
    rec = {"rope_type": rot.rope_type,
           "inv_freq": [float(x).hex() for x in rot.inv_freq.float().tolist()],
           "attention_scaling": float(rot.attention_scaling).hex()}
    if rot.rope_type == "dynamic":
        cfg = json.load(open(os.path.join(path, "config.json")))
        rec["inv_freq_sglang"] = [float(x).hex() for x in
                                  sglang_dynamic_inv_freq(cfg).tolist()]
    return rec


def reference(path, seqs):
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    inner = model.model
    hooks, caught = [], {}

    def grab(key):
        def hook(_mod, _inp, out):
            caught[key] = (out[0] if isinstance(out, tuple) else out).detach()
        return hook
    hooks.append(inner.embed_tokens.register_forward_hook(grab("embed")))
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(grab("layer.%d" % i)))
    hooks.append(inner.norm.register_forward_hook(grab("norm")))
    names = (["embed"] + ["layer.%d" % i for i in range(len(inner.layers))]
             + ["norm"])
    out = {}
    for seq, toks in seqs.items():
        caught.clear()
        with torch.no_grad():
            logits = model(torch.tensor([toks])).logits[0].float()
        hidden = torch.stack([caught[n][0].float() for n in names])
        out[seq] = (logits.numpy(), hidden.numpy())
    for h in hooks:
        h.remove()
    rope = rope_record(model, path) if model.model.rotary_emb.rope_type != "default" else None
    return names, out, rope


FP8_BLOCK = 16
FP8_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def fp8_quantize(model):
    """Each linear weight (lm_head left out, as Qwen3-FP8 does) to e4m3 with
    an fp32 scale per FP8_BLOCK x FP8_BLOCK block (amax / 448), the model's
    weight replaced by its exact dequantization; returns {name: (q, scale)}."""
    out = {}
    b = FP8_BLOCK
    for name, p in model.named_parameters():
        if not name.endswith(".weight") or name.split(".")[-2] not in FP8_LINEAR:
            continue
        w = p.detach().float()
        r, c = w.shape
        nr, nc = -(-r // b), -(-c // b)
        scale = torch.empty(nr, nc, dtype=torch.float32)
        for i in range(nr):
            for j in range(nc):
                blk = w[i * b:(i + 1) * b, j * b:(j + 1) * b]
                scale[i, j] = blk.abs().max().clamp(min=1e-12) / 448.0
        full = scale.repeat_interleave(b, 0)[:r].repeat_interleave(b, 1)[:, :c]
        q = (w / full).to(torch.float8_e4m3fn)
        with torch.no_grad():
            p.copy_(q.float() * full)
        out[name] = (q, scale)
    return out


def fp8_rewrite(d, quant):
    """model.safetensors with the FP8 bytes and their `_scale_inv`, and the
    quantization_config, once the reference has run on the fp32 weights."""
    from safetensors.torch import load_file, save_file
    path = os.path.join(d, "model.safetensors")
    tensors = load_file(path)
    for name, (q, scale) in quant.items():
        tensors[name] = q.contiguous()
        tensors[name + "_scale_inv"] = scale.contiguous()
    save_file(tensors, path, metadata={"format": "pt"})
    cp = os.path.join(d, "config.json")
    with open(cp) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                  "modules_to_not_convert": ["lm_head"],
                                  "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    with open(cp, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def write_model(name, cfg_cls, cfg_kw, dtype, seed):
    d = os.path.join(OUT, name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    torch.manual_seed(seed)
    if cfg_cls is None:  # a half-precision copy of the fp32 model
        base = name.rsplit("-", 1)[0]
        model = AutoModelForCausalLM.from_pretrained(
            os.path.join(OUT, base), dtype=torch.float32)
    else:
        cfg = cfg_cls(**cfg_kw)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        randomize(model, seed)
    quant = None
    if dtype == "fp8":
        quant = fp8_quantize(model)
        dtype = torch.float32
    model = model.to(dtype)
    model.save_pretrained(d, safe_serialization=True)
    for extra in ("generation_config.json",):
        p = os.path.join(d, extra)
        if os.path.exists(p):
            os.remove(p)
    seqs = seqs_for(name)
    names, out, rope = reference(d, seqs)
    native = native_logits(d, dtype, seqs) if dtype != torch.float32 else {}
    if quant:
        fp8_rewrite(d, quant)
    index = {"generator": "tools/gen_tiny_models.py",
             "versions": {"python": sys.version.split()[0],
                          "torch": torch.__version__,
                          "transformers": transformers.__version__,
                          "numpy": np.__version__},
             "storage_dtype": "float8_e4m3fn" if quant else str(dtype).replace("torch.", ""),
             "reference_dtype": "float32",
             "hidden_names": names, "sequences": []}
    for seq, (logits, hidden) in out.items():
        lf = "ref-%s.logits.f32" % seq
        hf = "ref-%s.hidden.f32" % seq
        logits.astype("<f4").tofile(os.path.join(d, lf))
        hidden.astype("<f4").tofile(os.path.join(d, hf))
        entry = {"name": seq, "tokens": seqs[seq],
                 "logits": {"file": lf, "shape": list(logits.shape)},
                 "hidden": {"file": hf, "shape": list(hidden.shape)}}
        if seq in native:
            nf = "ref-%s.logits-native.f32" % seq
            native[seq].astype("<f4").tofile(os.path.join(d, nf))
            entry["logits_native"] = {"file": nf,
                                      "shape": list(native[seq].shape),
                                      "dtype": index["storage_dtype"]}
        index["sequences"].append(entry)
    if rope is not None and rope["rope_type"] in ("yarn", "dynamic"):
        index["rope"] = rope
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("%-12s %s" % (name, ", ".join(sorted(os.listdir(d)))))


def st_file(header, data, pad=True):
    """A safetensors file from a header (dict or raw str) and data bytes."""
    h = header if isinstance(header, str) else json.dumps(header)
    h = h.encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write_fuzz_corpus():
    """Seeds for tests/fuzz/fuzz_safetensors.c: a valid file and damaged
    copies, each a few hundred bytes (pure Python, no torch)."""
    d = os.path.join(ROOT, "tests", "fuzz", "corpus", "safetensors")
    if os.path.isdir(d):
        shutil.rmtree(d)
    os.makedirs(d)
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    bf16 = bytes([0x80, 0x3f, 0x00, 0x40, 0x40, 0x40, 0x80, 0x40])
    f16 = bytes([0x00, 0x3c])
    good_h = {"__metadata__": {"format": "pt"},
              "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
              "b": {"dtype": "BF16", "shape": [4], "data_offsets": [24, 32]},
              "s": {"dtype": "F16", "shape": [], "data_offsets": [32, 34]},
              "z": {"dtype": "I32", "shape": [0, 5], "data_offsets": [34, 34]}}
    good = st_file(good_h, f32 + bf16 + f16)
    cases = {"valid": good}
    for n in (0, 4, 8, 9, 40, len(good) - 1):
        cases["truncated_%d" % n] = good[:n]

    def variant(name, **changes):
        h = json.loads(json.dumps(good_h))
        for k, v in changes.items():
            if v is None:
                del h[k]
            else:
                h[k] = v
        cases[name] = st_file(h, f32 + bf16 + f16)
    variant("offsets_past_end", w={"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 240]})
    variant("shape_mismatch", w={"dtype": "F32", "shape": [2, 4], "data_offsets": [0, 24]})
    variant("overlap", b={"dtype": "BF16", "shape": [4], "data_offsets": [20, 28]})
    variant("begin_after_end", b={"dtype": "BF16", "shape": [0], "data_offsets": [28, 24]})
    variant("unknown_dtype", w={"dtype": "F4", "shape": [2, 3], "data_offsets": [0, 24]})
    variant("negative_dim", w={"dtype": "F32", "shape": [-2, -3], "data_offsets": [0, 24]})
    variant("fractional_dim", w={"dtype": "F32", "shape": [1.5, 4], "data_offsets": [0, 24]})
    variant("huge_dims", w={"dtype": "F32", "shape": [2**40, 2**40, 16], "data_offsets": [0, 24]})
    variant("nine_dims", w={"dtype": "F32", "shape": [1] * 8 + [6], "data_offsets": [0, 24]})
    variant("metadata_not_object", __metadata__=["x"])
    variant("entry_not_object", w=[1, 2])
    variant("no_offsets", w={"dtype": "F32", "shape": [2, 3]})
    cases["duplicate_name"] = st_file(
        '{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        '"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}', f32)
    cases["not_json"] = st_file('{"w": {"dtype": "F32",', f32)
    cases["array_header"] = st_file("[1, 2, 3]", f32)
    cases["deep_json"] = st_file('{"__metadata__":' + "[" * 2000 + "]" * 2000 + "}", b"")
    cases["header_len_huge"] = struct.pack("<Q", 2**63) + good[8:]
    cases["header_len_past_end"] = struct.pack("<Q", len(good)) + good[8:]
    for name, data in cases.items():
        with open(os.path.join(d, name + ".safetensors"), "wb") as f:
            f.write(data)
    print("fuzz corpus: %d files in %s" % (len(cases), os.path.relpath(d, ROOT)))


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    print("python %s, torch %s, transformers %s, numpy %s" % (
        sys.version.split()[0], torch.__version__, transformers.__version__,
        np.__version__))
    have = {"torch": torch.__version__.split("+")[0],
            "transformers": transformers.__version__, "numpy": np.__version__}
    for k, v in PINNED.items():
        if have[k] != v:
            print("warning: %s %s, the fixtures were written with %s"
                  % (k, have[k], v), file=sys.stderr)
    only = None
    if len(sys.argv) == 3 and sys.argv[1] == "--only":
        only = set(sys.argv[2].split(","))
    elif len(sys.argv) != 1:
        sys.exit("usage: gen_tiny_models.py [--only NAME,...]")
    os.makedirs(OUT, exist_ok=True)
    for m in models():
        if only is None or m[0] in only:
            write_model(*m)
    if only is None:
        write_fuzz_corpus()


if __name__ == "__main__":
    main()
