#!/usr/bin/env python3
"""gen_tiny_deepseek_v4.py - writes the tiny random-weight DeepSeek-V4
models that tests/engine/models/test_ds4.c runs, and transformers' outputs
for them.

Run by developers (not by CI), from the repository root, in the venv of
tools/gen_tiny_models.py (torch 2.15.0, transformers 5.23.0, numpy 2.4.6):
    /tmp/engvenv/bin/python tools/gen_tiny_deepseek_v4.py
    /tmp/engvenv/bin/python tools/gen_tiny_deepseek_v4.py --bench DIR   # bench/deepseek.sh's model

It writes testdata/models/deepseek-v4/ and deepseek-v4-fp4/, in the layout
of tools/gen_tiny_deepseek.py:
    config.json, model.safetensors   genuine HF format: save_pretrained of
                                      DeepseekV4ForCausalLM.  transformers'
                                      conversion mapping writes DeepSeek's
                                      own tensor names under "model."
                                      (model.layers.L.attn.wq_a.weight,
                                      ffn.experts.E.w1.weight, head.weight,
                                      ...), which from_pretrained reads back
    ref.json                          versions, seed, token sequences,
                                      shapes, the experts transformers
                                      routed each token to (per layer,
                                      ascending ids) and the decision margins
    ref-<seq>.logits.f32              [T, vocab] raw little-endian f32
    ref-<seq>.hidden.f32              [n_layers + 2, T, hidden]: the
                                      embeddings, the mean of the hc_mult
                                      residual streams after each decoder
                                      layer (transformers' output_hidden_states
                                      gives the streams [T, hc_mult, hidden];
                                      the mean is taken here in float64), the
                                      final norm's output

deepseek-v4: hidden 48 (64 does not fit in 1 MB with 4 streams), 4 layers
of the three attention types (sliding_attention,
compressed_sparse_attention (CSA, ratio 2, indexer with
8 heads of 16 and index_topk 3), heavily_compressed_attention (HCA, ratio
4), CSA), sliding_window 6, 4 heads of head_dim 32 with an 8-dim rope slice,
q_lora_rank 32, grouped output projection with 2 groups of rank 16,
per-head sinks; hc_mult 4 streams with 20 Sinkhorn iterations (V4's);
6 routed experts (top 2) + 1 shared, sqrt-softplus scores, the first two
layers hash-routed through tid2eid [300, 2], the others top-k with a
signed e_score_correction_bias; swiglu_limit 1.5, so that the clamp acts on
the random activations; the compressors' RoPE uses YaRN (factor 4,
original 8 positions) as V4's compress rope does (attention_factor forced
to 1 by transformers).  The sequences of 13 and 21 tokens are longer than
the window and hold 6 and 10 CSA / 3 and 5 HCA entries.

deepseek-v4-fp4: DeepSeek-V4's released checkpoint format on a smaller
model (hidden 32, vocab 128, the sequences' ids mod 128, moe width 64):
DeepSeek's own tensor names (no "model." prefix: embed.weight, norm.weight,
hc_head_fn, layers.L..., head.weight), the routed experts' w1/w2/w3 packed
FP4 E2M1 (I8 [rows, cols/2], two values a byte, low nibble first) with an
F8_E8M0 `.scale` [rows, cols/32] (expert_dtype "fp4"), the attention
projections (wq_a, wq_b, wkv, wo_a, wo_b, the indexer's wq_b) and the
shared expert F8_E4M3 with an F8_E8M0 `.scale` per 16 x 16 block, the
compressors' wkv / wgate BF16 (as the release: kept out of FP8), the rest
F32; quantization_config as the release's (scale_fmt ue8m0) with
weight_block_size [16, 16].  Its reference is transformers in fp32 on the
dequantized weights (q * scale, which the generator checks against
transformers' own Fp8Dequantize): what the engine computes (weights
dequantized exactly, activations fp32, not quantized).

The weights are drawn so that the discrete decisions are robust and
exercised: the generator recomputes in float64, from the tensors
transformers passed, (1) every top-k routing decision of the "moe" layers
(the k-th vs the next score + bias) and (2) every indexer top-k decision of
the CSA layers (the index_topk-th vs the next valid entry), and requires a
relative margin of at least MARGIN, so that fp32 rounding differences
cannot flip a choice; it also requires that the indexer actually drops
entries for some queries and that the clamp of the SwiGLU is active.  A
seed that fails is skipped for the next one; the seed used is in ref.json.
Reruns rewrite identical files.
"""
import json
import os
import re
import shutil
import sys

import numpy as np
import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, DeepseekV4Config

PINNED = {"torch": "2.15.0", "transformers": "5.23.0", "numpy": "2.4.6"}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "testdata", "models")

SEQS = {
    "a": [1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200],
    "b": [(i * 37 + 11) % 299 + 1 for i in range(21)],
}

MARGIN = 1e-3   # relative to the scale of the scores compared

KW = dict(
    vocab_size=300, hidden_size=48, moe_intermediate_size=16,
    num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1,
    head_dim=32, partial_rotary_factor=0.25, q_lora_rank=32,
    n_routed_experts=6, n_shared_experts=1, num_experts_per_tok=2,
    scoring_func="sqrtsoftplus", norm_topk_prob=True,
    routed_scaling_factor=1.5,
    layer_types=["sliding_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention", "compressed_sparse_attention"],
    mlp_layer_types=["hash_moe", "hash_moe", "moe", "moe"],
    compress_rates={"compressed_sparse_attention": 2,
                    "heavily_compressed_attention": 4},
    rope_theta=10000.0, compress_rope_theta=160000.0,
    rope_parameters={"rope_type": "yarn", "factor": 4.0,
                     "original_max_position_embeddings": 8,
                     "beta_fast": 32.0, "beta_slow": 1.0},
    hc_mult=4, hc_sinkhorn_iters=20, hc_eps=1e-6,
    swiglu_limit=1.5, sliding_window=6, o_groups=2, o_lora_rank=16,
    index_n_heads=8, index_head_dim=16, index_topk=3,
    num_nextn_predict_layers=0, rms_norm_eps=1e-6,
    max_position_embeddings=256, tie_word_embeddings=False,
    bos_token_id=0, eos_token_id=1)


KW_FP4 = dict(KW, vocab_size=128, hidden_size=32, moe_intermediate_size=64)

MODELS = [("deepseek-v4", KW, False), ("deepseek-v4-fp4", KW_FP4, True)]

FP8_BLOCK = [16, 16]
FP4_BLOCK = 32
QUANT = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
         "scale_fmt": "ue8m0", "weight_block_size": FP8_BLOCK}
FP8_NAMES = re.compile(r"model\.layers\.\d+\.(attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)|"
                       r"ffn\.shared_experts\.w[123])\.weight$")
FP4_NAMES = re.compile(r"model\.layers\.\d+\.ffn\.experts\.\d+\.w[123]\.weight$")
BF16_NAMES = re.compile(r"model\.layers\.\d+\.attn\.(indexer\.)?compressor\.(wkv|wgate)\.weight$")
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def pow2_scale(amax, qmax):
    """the power of two (UE8M0) that brings amax within qmax"""
    return torch.exp2(torch.ceil(torch.log2(amax.clamp(min=1e-30) / qmax)))


def fp8_quantize(w):
    """(q e4m3 [R, C], scale e8m0 [R/b0, C/b1], dequantized f32)"""
    b0, b1 = FP8_BLOCK
    R, C = w.shape
    blocks = w.reshape(R // b0, b0, C // b1, b1)
    scale = pow2_scale(blocks.abs().amax(dim=(1, 3)), 448.0)
    full = scale[:, None, :, None]
    q = (blocks / full).to(torch.float8_e4m3fn)
    deq = (q.to(torch.float32) * full).reshape(R, C)
    return q.reshape(R, C), scale.to(torch.float8_e8m0fnu), deq


def fp4_quantize(w):
    """(packed int8 [R, C/2], scale e8m0 [R, C/32], dequantized f32)"""
    R, C = w.shape
    blocks = w.reshape(R, C // FP4_BLOCK, FP4_BLOCK)
    scale = pow2_scale(blocks.abs().amax(dim=2), 6.0)
    v = (blocks / scale[:, :, None]).reshape(R, C)
    mag = (v.abs()[..., None] - E2M1).abs().argmin(dim=-1)   # nearest magnitude
    code = mag | ((v < 0) & (mag > 0)).long() * 8
    deq = torch.where(code >= 8, -E2M1[code & 7], E2M1[code & 7])
    deq = (deq.reshape(R, C // FP4_BLOCK, FP4_BLOCK) * scale[:, :, None]).reshape(R, C)
    packed = (code[:, 0::2] | (code[:, 1::2] << 4)).to(torch.uint8).view(torch.int8)
    return packed, scale.to(torch.float8_e8m0fnu), deq


def quantize_checkpoint(path):
    """Replace the tensors of the saved fp32 checkpoint by what their stored
    form dequantizes to (the oracle's weights); returns the stored forms."""
    from transformers.integrations.finegrained_fp8 import Fp8Dequantize
    deq_op = Fp8Dequantize(None)
    sd = load_file(path)
    stored = {}
    for k in sorted(sd):
        if FP8_NAMES.match(k) or FP4_NAMES.match(k):
            q, sc, deq = (fp4_quantize if FP4_NAMES.match(k) else fp8_quantize)(sd[k])
            # transformers' own dequantization gives the same fp32 weights
            hf = deq_op._dequantize_one(q, sc, output_dtype=torch.float32)
            assert torch.equal(hf, deq), k
            sd[k] = deq
            stored[k] = (q, sc)
        elif BF16_NAMES.match(k):
            b = sd[k].to(torch.bfloat16)
            sd[k] = b.to(torch.float32)
            stored[k] = (b, None)
    save_file(sd, path, metadata={"format": "pt"})
    return stored


def official_name(k):
    """DeepSeek's name of a transformers-saved tensor"""
    for a, b in (("model.embed_tokens.weight", "embed.weight"), ("model.norm.weight", "norm.weight"),
                 ("model.hc_head.hc_", "hc_head_"), ("model.layers.", "layers.")):
        if k.startswith(a):
            return b + k[len(a):]
    return k


def write_stored(d, stored):
    """the checkpoint in d in its stored form, under DeepSeek's names"""
    path = os.path.join(d, "model.safetensors")
    sd = load_file(path)
    out = {}
    for k, v in sd.items():
        if k in stored:
            q, sc = stored[k]
            v = q
            if sc is not None:
                out[official_name(k[:-len(".weight")]) + ".scale"] = sc
        out[official_name(k)] = v
    save_file(out, path, metadata={"format": "pt"})
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = QUANT
    cfg["expert_dtype"] = "fp4"
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)

    def rn(shape):
        return torch.randn(shape, generator=g)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                v = 1.0 + 0.1 * rn(p.shape)
            elif "embed_tokens" in name:
                v = rn(p.shape)
            elif name.endswith(".sinks"):
                v = 0.5 * rn(p.shape)
            elif name.endswith("position_bias"):
                v = 0.5 * rn(p.shape)
            elif name.endswith("_hc.fn") or name.endswith("hc_head.hc_fn"):
                v = 0.5 * rn(p.shape) / (p.shape[-1] ** 0.5)
            elif name.endswith("_hc.base") or name.endswith("hc_head.hc_base"):
                v = 0.5 * rn(p.shape)
            elif name.endswith("_hc.scale") or name.endswith("hc_head.hc_scale"):
                v = 1.0 + 0.3 * rn(p.shape)
            elif name.endswith("mlp.gate.weight"):
                v = 2.0 * rn(p.shape) / (p.shape[-1] ** 0.5)
            else:  # a linear [out, in] or fused experts [E, out, in]
                v = rn(p.shape) / (p.shape[-1] ** 0.5)
            p.copy_(v)
        cfg = model.config
        for name, b in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.3 * (2 * torch.rand(b.shape, generator=g) - 1))
            elif name.endswith("tid2eid"):
                rows = [torch.randperm(cfg.n_routed_experts, generator=g)[:cfg.num_experts_per_tok]
                        for _ in range(b.shape[0])]
                b.copy_(torch.stack(rows).to(b.dtype))


def softplus_sqrt(x):
    return np.sqrt(np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))))


def reference(model, seqs):
    inner = model.model
    caught = {}
    hooks = []

    def grab(key):
        def hook(_mod, _inp, out):
            caught[key] = (out[0] if isinstance(out, tuple) else out).detach().clone()
        return hook

    def grab_in(key):
        def hook(_mod, inp, _out):
            caught[key] = inp[0].detach().clone()
        return hook

    def grab_gate_up(key):
        def hook(_mod, inp, out):
            caught.setdefault(key, []).append(out.detach().clone())
        return hook
    hooks.append(inner.embed_tokens.register_forward_hook(grab("embed")))
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(grab("layer.%d" % i)))
        hooks.append(layer.mlp.gate.register_forward_hook(grab_in("gate_in.%d" % i)))
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            hooks.append(comp.indexer.scorer.register_forward_hook(grab("iscore.%d" % i)))
    hooks.append(inner.norm.register_forward_hook(grab("norm")))
    out = {}
    cfg = model.config
    for seq, toks in seqs.items():
        caught.clear()
        with torch.no_grad():
            res = model(torch.tensor([toks]), output_hidden_states=True)
        logits = res.logits[0].float()
        L = cfg.num_hidden_layers
        streams = torch.stack([caught["layer.%d" % i][0] for i in range(L)])  # [L, T, N, D]
        hidden = [caught["embed"][0].double()]
        hidden += [streams[i].double().mean(dim=1) for i in range(L)]
        hidden.append(caught["norm"][0].double())
        hidden = torch.stack(hidden).float()
        hs = res.hidden_states
        # output_hidden_states: the embeddings as hc_mult streams, the
        # streams after each layer but the last, the final norm's output
        assert len(hs) == L + 1
        for i in range(1, L):
            assert torch.equal(hs[i][0], streams[i - 1]), (seq, i)
        assert torch.equal(hs[-1][0], caught["norm"][0]), seq
        extra = {k: v for k, v in caught.items() if k.startswith(("gate_in.", "iscore."))}
        out[seq] = (logits.numpy(), hidden.numpy(), streams.numpy(), extra)
    for h in hooks:
        h.remove()
    return out


def check(model, seqs, out):
    cfg = model.config
    E, K = cfg.n_routed_experts, cfg.num_experts_per_tok
    info = {"min_route_margin": np.inf, "min_index_margin": np.inf,
            "index_drops": 0, "routes": {}, "clamped": 0}
    for seq, (_l, _h, _s, extra) in out.items():
        toks = seqs[seq]
        info["routes"][seq] = {}
        for i, layer in enumerate(model.model.layers):
            x = extra["gate_in.%d" % i].reshape(-1, cfg.hidden_size).double().numpy()
            gate = layer.mlp.gate
            s = softplus_sqrt(x @ gate.weight.detach().double().numpy().T)
            sel = []
            if cfg.mlp_layer_types[i] == "hash_moe":
                tab = gate.tid2eid.numpy()
                sel = [sorted(int(e) for e in tab[t]) for t in toks]
            else:
                b = gate.e_score_correction_bias.detach().double().numpy()
                for t in range(x.shape[0]):
                    sc = s[t] + b
                    order = sorted(range(E), key=lambda e: (-sc[e], e))
                    m = (sc[order[K - 1]] - sc[order[K]]) / max(1e-9, np.abs(sc).max())
                    info["min_route_margin"] = min(info["min_route_margin"], m)
                    sel.append(sorted(order[:K]))
            info["routes"][seq]["layer.%d" % i] = sel
            # the clamp of the routed / shared SwiGLU must act somewhere
            xx = torch.tensor(x, dtype=torch.float32)
            for e in range(E):
                gu = torch.nn.functional.linear(xx, layer.mlp.experts.gate_up_proj[e])
                info["clamped"] += int((gu.abs() > cfg.swiglu_limit).sum())
            key = "iscore.%d" % i
            if key in extra:
                ratio = cfg.compress_rates["compressed_sparse_attention"]
                sc = extra[key][0].double().numpy()  # [T, n_entries]
                for t in range(sc.shape[0]):
                    nvalid = (t + 1) // ratio
                    k = min(cfg.index_topk, nvalid)
                    if nvalid > k:
                        row = np.sort(sc[t, :nvalid])[::-1]
                        m = (row[k - 1] - row[k]) / max(1e-9, np.abs(row).max())
                        info["min_index_margin"] = min(info["min_index_margin"], m)
                        info["index_drops"] += 1
    ok = (info["min_route_margin"] >= MARGIN and info["min_index_margin"] >= MARGIN
          and info["index_drops"] > 0 and info["clamped"] > 0)
    return info, ok


def write_model(name, kw, quant):
    d = os.path.join(OUT, name)
    tmp = d + ".tmp"
    seqs = {k: [t % kw["vocab_size"] for t in v] for k, v in SEQS.items()}
    for seed in range(1, 60):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(DeepseekV4Config(**kw), dtype=torch.float32)
        randomize(model, seed)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        p = os.path.join(tmp, "generation_config.json")
        if os.path.exists(p):
            os.remove(p)
        stored = quantize_checkpoint(os.path.join(tmp, "model.safetensors")) if quant else None
        # the oracle is the saved checkpoint, reloaded
        model = AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        out = reference(model, seqs)
        info, ok = check(model, seqs, out)
        print("  %s seed %d: route margin %.3g, index margin %.3g, %d index drops, %d clamped%s" % (
            name, seed, info["min_route_margin"], info["min_index_margin"], info["index_drops"],
            info["clamped"], "" if ok else " (rejected)"))
        if ok:
            break
    else:
        raise SystemExit("%s: no seed gives robust decisions" % name)
    if os.path.isdir(d):
        shutil.rmtree(d)
    shutil.move(tmp, d)
    if quant:
        write_stored(d, stored)
    index = {"generator": "tools/gen_tiny_deepseek_v4.py",
             "versions": {"python": sys.version.split()[0],
                          "torch": torch.__version__,
                          "transformers": transformers.__version__,
                          "numpy": np.__version__},
             "seed": seed,
             "storage_dtype": "fp4 experts, fp8 linears, bf16 compressors" if quant else "float32",
             "reference_dtype": "float32",
             "reference_weights": "dequantized: q * scale (transformers' Fp8Dequantize)" if quant else "as stored",
             "margins": {"route": float(info["min_route_margin"]),
                         "index": float(info["min_index_margin"]),
                         "index_drops": info["index_drops"],
                         "clamped_activations": info["clamped"]},
             "hidden_names": (["embed"] + ["layer.%d stream mean" % i for i in range(kw["num_hidden_layers"])]
                              + ["norm"]),
             "sequences": []}
    for seq, (logits, hidden, _s, _e) in out.items():
        files = {}
        for what, arr in (("logits", logits), ("hidden", hidden)):
            f = "ref-%s.%s.f32" % (seq, what)
            arr.astype("<f4").tofile(os.path.join(d, f))
            files[what] = {"file": f, "shape": list(arr.shape)}
        index["sequences"].append(dict(name=seq, tokens=seqs[seq], **files,
                                       experts=info["routes"][seq]))
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-18s %7d bytes: %s" % (name, size, ", ".join(sorted(os.listdir(d)))))
    assert size < 1000000, "a fixture must stay under 1 MB"


# bench/deepseek.sh's model: the largest "tiny but not toy" V4 that stays a
# few hundred MB (hidden 1024, 8 layers, 64 experts), random weights, no
# reference outputs
KW_BENCH = dict(
    KW, vocab_size=4096, hidden_size=1024, moe_intermediate_size=128,
    num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=1,
    head_dim=128, q_lora_rank=256, n_routed_experts=64, num_experts_per_tok=4,
    layer_types=["sliding_attention", "compressed_sparse_attention",
                 "heavily_compressed_attention", "compressed_sparse_attention"] * 2,
    mlp_layer_types=["hash_moe", "hash_moe"] + ["moe"] * 6,
    compress_rates={"compressed_sparse_attention": 4,
                    "heavily_compressed_attention": 16},
    rope_parameters={"rope_type": "yarn", "factor": 4.0,
                     "original_max_position_embeddings": 1024,
                     "beta_fast": 32.0, "beta_slow": 1.0},
    sliding_window=128, o_groups=4, o_lora_rank=128,
    index_n_heads=8, index_head_dim=64, index_topk=64,
    max_position_embeddings=4096)


def write_bench_model(d):
    torch.manual_seed(1)
    model = AutoModelForCausalLM.from_config(DeepseekV4Config(**KW_BENCH), dtype=torch.float32)
    randomize(model, 1)
    model.save_pretrained(d, safe_serialization=True)
    p = os.path.join(d, "generation_config.json")
    if os.path.exists(p):
        os.remove(p)
    n = sum(p.numel() for p in model.parameters())
    print("bench model: %d parameters in %s" % (n, d))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--bench":
        torch.set_num_threads(2)
        write_bench_model(sys.argv[2])
        return
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
    for name, kw, quant in MODELS:
        write_model(name, kw, quant)


if __name__ == "__main__":
    main()
