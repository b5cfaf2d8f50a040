#!/usr/bin/env python3
"""gen_tiny_deepseek.py - writes the tiny random-weight DeepSeek-V3 models
that tests/engine/models/test_ds.c runs, and transformers' outputs for them.

Run by developers (not by CI), from the repository root, in the venv of
tools/gen_tiny_models.py (torch 2.15.0, transformers 5.23.0, numpy 2.4.6):
    /tmp/engvenv/bin/python tools/gen_tiny_deepseek.py

For each model it writes testdata/models/<name>/, in the layout of
tools/gen_tiny_models.py:
    config.json, model.safetensors   genuine HF format (save_pretrained of
                                      DeepseekV3ForCausalLM; transformers 5
                                      writes the experts one tensor each,
                                      mlp.experts.E.{gate,up,down}_proj)
    ref.json                          versions, seeds, token sequences,
                                      shapes, and the experts transformers
                                      routed each token to (per MoE layer)
    ref-<seq>.logits.f32              [T, vocab] raw little-endian f32
    ref-<seq>.hidden.f32              [n_layers + 2, T, hidden]: the
                                      embeddings, the residual stream after
                                      each decoder layer, the final norm

The models:
  deepseek-v3          V3's structure scaled down: q_lora_rank, YaRN with
                       mscale = mscale_all_dim (as V3), first_k_dense_replace
                       1 of 3 layers, 8 experts in 4 groups, top-2 groups,
                       top-2 experts, 1 shared expert, noaux_tc with a
                       signed random e_score_correction_bias
  deepseek-v3-lite     the other branches: no q_lora_rank (plain q_proj),
                       tied embeddings, 2 shared experts, every layer MoE,
                       n_group 2 / topk_group 1, YaRN factor 8 with mscale =
                       mscale_all_dim = 0.707 (V2's values); and two options
                       of transformers' config that DeepSeek's code does not
                       have (it always rotates interleaved pairs and its
                       MLA has no biases): rope_interleave false (q/k rows
                       permuted for rotate_half) and attention_bias
  deepseek-v3-fp8      DeepSeek's FP8 checkpoint format: every linear of
                       attention, MLP and experts stored F8_E4M3 with an F32
                       `<name>_scale_inv` per block of weight_block_size
                       (here [16, 16], so partial blocks occur; V3 uses
                       [128, 128]), quantization_config as V3's; vocab 128
                       and the sequences' ids mod 128 to stay small.  Its
                       reference is transformers in fp32 on the dequantized
                       weights (q * scale_inv, as DeepSeek's weight_dequant):
                       what the engine computes (weights dequantized
                       exactly, activations fp32, not quantized)

Config values are chosen where transformers and DeepSeek's official
inference code (DeepSeek-V3 inference/model.py) compute the same thing:
YaRN factor 4 (a power of two, so freqs/factor == 1/(factor*pos_freqs)
bitwise), mscale == mscale_all_dim (so HF's cos/sin attention_factor is 1,
which the official code does not have), max_position_embeddings >
original_max_position_embeddings (the official code applies YaRN only
then), sigmoid scoring with norm_topk_prob true in the main model (the
official code always normalises sigmoid weights).  The lite model's
rope_interleave false and attention_bias are transformers-only options,
tested against transformers.

The weights are drawn so that the router's decisions are robust and
exercised: the generator recomputes every routing decision in float64 and
(1) requires each decision (the topk_group-th vs the next group score, the
k-th vs the next expert score) to have a margin of at least MARGIN, so that
fp32 rounding differences between implementations cannot flip a choice;
(2) requires the correction bias and the group limit to change the experts
chosen for some tokens (so the C ablation tests can fail).  A seed that
fails is skipped for the next one; the seeds used are in ref.json.
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
from transformers import AutoModelForCausalLM, DeepseekV3Config

PINNED = {"torch": "2.15.0", "transformers": "5.23.0", "numpy": "2.4.6"}

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "testdata", "models")

SEQS = {
    "a": [1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200],
    "b": [(i * 37 + 11) % 299 + 1 for i in range(21)],
}

MARGIN = 2e-4

YARN = {"rope_type": "yarn", "rope_theta": 100.0, "factor": 4.0,
        "original_max_position_embeddings": 64, "beta_fast": 32,
        "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}

MODELS = [
    ("deepseek-v3", dict(
        vocab_size=300, hidden_size=64, intermediate_size=64,
        moe_intermediate_size=16, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=4,
        q_lora_rank=32, kv_lora_rank=32, qk_nope_head_dim=16,
        qk_rope_head_dim=8, v_head_dim=16,
        n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
        n_group=4, topk_group=2, first_k_dense_replace=1,
        routed_scaling_factor=2.5, norm_topk_prob=True,
        rms_norm_eps=1e-6, max_position_embeddings=256,
        tie_word_embeddings=False, rope_interleave=True,
        attention_bias=False, rope_parameters=dict(YARN),
        bos_token_id=0, eos_token_id=1), 10),
    ("deepseek-v3-lite", dict(
        vocab_size=300, hidden_size=32, intermediate_size=32,
        moe_intermediate_size=8, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2,
        q_lora_rank=None, kv_lora_rank=16, qk_nope_head_dim=8,
        qk_rope_head_dim=4, v_head_dim=12,
        n_routed_experts=6, n_shared_experts=2, num_experts_per_tok=2,
        n_group=2, topk_group=1, first_k_dense_replace=0,
        routed_scaling_factor=1.5, norm_topk_prob=True,
        rms_norm_eps=1e-6, max_position_embeddings=256,
        tie_word_embeddings=True, rope_interleave=False,
        attention_bias=True,
        rope_parameters=dict(YARN, factor=8.0, mscale=0.707,
                             mscale_all_dim=0.707,
                             original_max_position_embeddings=32),
        bos_token_id=0, eos_token_id=1), 20),
    ("deepseek-v3-fp8", dict(
        vocab_size=128, hidden_size=32, intermediate_size=32,
        moe_intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=2,
        q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8,
        qk_rope_head_dim=4, v_head_dim=8,
        n_routed_experts=6, n_shared_experts=1, num_experts_per_tok=2,
        n_group=2, topk_group=1, first_k_dense_replace=1,
        routed_scaling_factor=2.5, norm_topk_prob=True,
        rms_norm_eps=1e-6, max_position_embeddings=256,
        tie_word_embeddings=True, rope_interleave=True,
        attention_bias=False, rope_parameters=dict(YARN),
        bos_token_id=0, eos_token_id=1), 30),
]

FP8_BLOCK = [16, 16]
FP8_MAX = 448.0
FP8_QUANT = {"activation_scheme": "dynamic", "fmt": "e4m3",
             "quant_method": "fp8", "weight_block_size": FP8_BLOCK}
FP8_NAMES = re.compile(
    r"model\.layers\.\d+\.(self_attn\.(q_a_proj|q_b_proj|q_proj|"
    r"kv_a_proj_with_mqa|kv_b_proj|o_proj)|mlp\.((experts\.\d+|"
    r"shared_experts)\.)?(gate|up|down)_proj)\.weight$")


def fp8_quantize(w):
    """(q e4m3 [R, C], scale_inv f32 [ceil(R/b0), ceil(C/b1)], dequant)"""
    b0, b1 = FP8_BLOCK
    R, C = w.shape
    nr, nc = -(-R // b0), -(-C // b1)
    scale = torch.empty(nr, nc, dtype=torch.float32)
    for i in range(nr):
        for j in range(nc):
            blk = w[i * b0:(i + 1) * b0, j * b1:(j + 1) * b1]
            scale[i, j] = blk.abs().max().clamp(min=1e-12) / FP8_MAX
    full = scale.repeat_interleave(b0, 0)[:R].repeat_interleave(b1, 1)[:, :C]
    q = (w / full).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, scale, q.to(torch.float32) * full


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
            elif name.endswith("mlp.gate.weight"):
                # router logits of about unit scale: sigmoid scores spread
                v = 1.5 * torch.randn(p.shape, generator=g) / (p.shape[1] ** 0.5)
            else:  # a linear [out, in] or fused experts [E, out, in]
                v = torch.randn(p.shape, generator=g) / (p.shape[-1] ** 0.5)
            p.copy_(v)
        for name, b in sorted(model.named_buffers()):
            if name.endswith("e_score_correction_bias"):
                b.copy_(0.25 * (2 * torch.rand(b.shape, generator=g) - 1))


def route(x, w, bias, cfg, use_bias=True, use_groups=True):
    """float64 routing of rows x: (selected expert ids sorted, weights, the
    smallest decision margin)."""
    E, G = cfg.n_routed_experts, cfg.n_group
    s = 1.0 / (1.0 + np.exp(-(x @ w.T)))
    sc = s + bias if use_bias else s.copy()
    sel, wts, margin = [], [], np.inf
    for t in range(x.shape[0]):
        row = sc[t].copy()
        if use_groups:
            gs = np.sort(row.reshape(G, E // G), axis=1)[:, ::-1][:, :2].sum(1)
            order = sorted(range(G), key=lambda j: (-gs[j], j))
            if cfg.topk_group < G:
                margin = min(margin, gs[order[cfg.topk_group - 1]]
                             - gs[order[cfg.topk_group]])
            keep = set(order[:cfg.topk_group])
            for e in range(E):
                if e // (E // G) not in keep:
                    row[e] = -np.inf
        order = sorted(range(E), key=lambda e: (-row[e], e))
        k = cfg.num_experts_per_tok
        if np.isfinite(row[order[k]]):
            margin = min(margin, row[order[k - 1]] - row[order[k]])
        idx = sorted(order[:k])
        ww = s[t, idx]
        if cfg.norm_topk_prob:
            ww = ww / ww.sum()
        sel.append(idx)
        wts.append(list(ww * cfg.routed_scaling_factor))
    return sel, wts, margin


def reference(model, seqs):
    inner = model.model
    hooks, caught = [], {}

    def grab(key):
        def hook(_mod, _inp, out):
            caught[key] = (out[0] if isinstance(out, tuple) else out).detach()
        return hook

    def grab_in(key):
        def hook(_mod, inp, _out):
            caught[key] = inp[0].detach()
        return hook

    def grab_all(key):
        def hook(_mod, _inp, out):
            caught[key] = tuple(o.detach() for o in out)
        return hook
    hooks.append(inner.embed_tokens.register_forward_hook(grab("embed")))
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(grab("layer.%d" % i)))
        if hasattr(layer.mlp, "gate"):
            hooks.append(layer.mlp.gate.register_forward_hook(grab_in("gate.%d" % i)))
            hooks.append(layer.mlp.gate.register_forward_hook(grab_all("route.%d" % i)))
    hooks.append(inner.norm.register_forward_hook(grab("norm")))
    names = (["embed"] + ["layer.%d" % i for i in range(len(inner.layers))]
             + ["norm"])
    out = {}
    for seq, toks in seqs.items():
        caught.clear()
        with torch.no_grad():
            res = model(torch.tensor([toks]), output_hidden_states=True)
        logits = res.logits[0].float()
        hidden = torch.stack([caught[n][0].float() for n in names])
        # output_hidden_states agrees with the hooks (embeddings, layers
        # but the last, then the final norm's output)
        hs = res.hidden_states
        for i in range(len(hs) - 1):
            assert torch.equal(hs[i][0], hidden[i]), (seq, i)
        assert torch.equal(hs[-1][0], hidden[-1]), seq
        gates = {k: v for k, v in caught.items() if k.startswith(("gate.", "route."))}
        out[seq] = (logits.numpy(), hidden.numpy(), gates)
    for h in hooks:
        h.remove()
    return names, out


def check_routing(model, cfg, out):
    """The float64 routing must match transformers', have margins, and
    depend on the bias and on the group limit.  Returns (info, ok)."""
    info = {"min_margin": np.inf, "changed_without_bias": 0,
            "changed_without_group_limit": 0, "distinct_expert_sets": 0,
            "routes": {}}
    sets = set()
    for seq, (_l, _h, gates) in out.items():
        info["routes"][seq] = {}
        for i, layer in enumerate(model.model.layers):
            if "gate.%d" % i not in gates:
                continue
            x = gates["gate.%d" % i].reshape(-1, cfg.hidden_size).double().numpy()
            gate = layer.mlp.gate
            w = gate.weight.detach().double().numpy()
            b = gate.e_score_correction_bias.detach().double().numpy()
            sel, _w, margin = route(x, w, b, cfg)
            hf_idx = gates["route.%d" % i][2].numpy()
            for t in range(len(sel)):
                assert sorted(hf_idx[t].tolist()) == sel[t], (seq, i, t)
            info["min_margin"] = min(info["min_margin"], margin)
            nb, _, _ = route(x, w, b, cfg, use_bias=False)
            ng, _, _ = route(x, w, b, cfg, use_groups=False)
            info["changed_without_bias"] += sum(a != c for a, c in zip(sel, nb))
            info["changed_without_group_limit"] += sum(a != c for a, c in zip(sel, ng))
            sets.update(tuple(s) for s in sel)
            info["routes"][seq]["layer.%d" % i] = sel
    info["distinct_expert_sets"] = len(sets)
    ok = (info["min_margin"] >= MARGIN and info["changed_without_bias"] > 0
          and info["changed_without_group_limit"] > 0
          and info["distinct_expert_sets"] >= 4)
    return info, ok


def seqs_for(vocab):
    return {k: [t % vocab for t in v] for k, v in SEQS.items()}


def build(name, kw, seed0, tmp):
    """The first seed from seed0 whose routing is robust and exercised:
    the model saved in `tmp` (fp32; an FP8 model's weights replaced by
    their dequantization) reloaded, its reference outputs, and for an FP8
    model the quantized tensors."""
    seqs = seqs_for(kw["vocab_size"])
    for seed in range(seed0, seed0 + 50):
        torch.manual_seed(seed)
        cfg = DeepseekV3Config(**kw)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        randomize(model, seed)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        for extra in ("generation_config.json",):
            p = os.path.join(tmp, extra)
            if os.path.exists(p):
                os.remove(p)
        q8 = {}
        if name.endswith("-fp8"):
            path = os.path.join(tmp, "model.safetensors")
            sd = load_file(path)
            for k in sorted(sd):
                if FP8_NAMES.match(k):
                    q, sc, deq = fp8_quantize(sd[k])
                    sd[k] = deq
                    q8[k] = (q, sc)
            save_file(sd, path, metadata={"format": "pt"})
        # the oracle is the saved checkpoint, reloaded
        model = AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        names, out = reference(model, seqs)
        info, ok = check_routing(model, model.config, out)
        print("  %s seed %d: min margin %.3g, bias changes %d, group limit "
              "changes %d, %d expert sets%s" % (
                  name, seed, info["min_margin"], info["changed_without_bias"],
                  info["changed_without_group_limit"],
                  info["distinct_expert_sets"], "" if ok else " (rejected)"))
        if ok:
            return seed, seqs, names, out, info, q8
    raise SystemExit("%s: no seed gives robust routing" % name)


def write_model(name, kw, seed0):
    d = os.path.join(OUT, name)
    tmp = d + ".tmp"
    if os.path.isdir(d):
        shutil.rmtree(d)
    seed, seqs, names, out, info, q8 = build(name, kw, seed0, tmp)
    shutil.move(tmp, d)
    if q8:
        path = os.path.join(d, "model.safetensors")
        sd = load_file(path)
        for k, (q, sc) in q8.items():
            sd[k] = q
            sd[k + "_scale_inv"] = sc
        save_file(sd, path, metadata={"format": "pt"})
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["quantization_config"] = FP8_QUANT
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2, sort_keys=True)
            f.write("\n")
    index = {"generator": "tools/gen_tiny_deepseek.py",
             "versions": {"python": sys.version.split()[0],
                          "torch": torch.__version__,
                          "transformers": transformers.__version__,
                          "numpy": np.__version__},
             "seed": seed,
             "storage_dtype": "float8_e4m3fn" if q8 else "float32",
             "reference_dtype": "float32",
             "reference_weights": ("dequantized: q * scale_inv per %s block"
                                   % FP8_BLOCK) if q8 else "as stored",
             "routing": {"min_margin": float(info["min_margin"]),
                         "tokens_changed_without_bias": info["changed_without_bias"],
                         "tokens_changed_without_group_limit": info["changed_without_group_limit"],
                         "distinct_expert_sets": info["distinct_expert_sets"]},
             "hidden_names": names, "sequences": []}
    for seq, (logits, hidden, _g) in out.items():
        lf = "ref-%s.logits.f32" % seq
        hf = "ref-%s.hidden.f32" % seq
        logits.astype("<f4").tofile(os.path.join(d, lf))
        hidden.astype("<f4").tofile(os.path.join(d, hf))
        index["sequences"].append({
            "name": seq, "tokens": seqs[seq],
            "logits": {"file": lf, "shape": list(logits.shape)},
            "hidden": {"file": hf, "shape": list(hidden.shape)},
            "experts": info["routes"][seq]})
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-18s %7d bytes: %s" % (name, size, ", ".join(sorted(os.listdir(d)))))
    return size


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
    os.makedirs(OUT, exist_ok=True)
    total = sum(write_model(*m) for m in MODELS)
    print("total %d bytes" % total)
    assert total < 1000000, "fixtures must stay under 1 MB"


if __name__ == "__main__":
    main()
