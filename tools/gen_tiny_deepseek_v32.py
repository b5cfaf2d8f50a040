#!/usr/bin/env python3
"""gen_tiny_deepseek_v32.py - writes the tiny random-weight DeepSeek-V3.2
model (DeepSeek Sparse Attention: the lightning indexer and MLA over its
top-k tokens) that tests/engine/models/test_ds.c runs, and transformers'
outputs for it.

Run by developers (not by CI), from the repository root, in the venv of
tools/gen_tiny_deepseek.py (torch 2.15.0, transformers 5.23.0, numpy 2.4.6):
    /tmp/engvenv/bin/python tools/gen_tiny_deepseek_v32.py

It writes testdata/models/deepseek-v32/ in the layout of
tools/gen_tiny_deepseek.py (config.json and model.safetensors by
save_pretrained of DeepseekV32ForCausalLM, fp32; ref-<seq>.logits.f32
[T, vocab]; ref-<seq>.hidden.f32 [n_layers + 2, T, hidden]; ref.json) and
in ref.json, per sequence, the indexer's selection: "selected" {layer.L:
[t][...]}, the positions query t attends to, ascending (all of 0..t when t
+ 1 <= index_topk).  transformers' indexer returns min(index_topk, T)
indices per query, masked (future) positions included when fewer are
visible; those are dropped here (its attention masks them anyway).

The model: V3's structure scaled down (q LoRA, which V3.2 requires; YaRN
factor 4 with mscale = mscale_all_dim; 1 dense then 2 MoE layers, 8
experts in 4 groups, top-2 groups, top-2 experts, 1 shared expert) plus an
indexer of 4 heads of 16 dims (its RoPE on the first qk_rope_head_dim = 8,
rotate_half pairs) and index_topk 4, smaller than the sequences (13 and 21
tokens), so most queries attend to a strict subset of their context.

Robustness: the generator recomputes in float64, from the weights and the
inputs transformers' indexer received, every indexer score and top-k, and
checks (1) that its selection is transformers', (2) that each decision
(the index_topk-th best score against the next) has a relative margin of
at least IDX_MARGIN, so that fp32 rounding in another implementation
cannot flip a choice; the router's decisions are checked as in
gen_tiny_deepseek.py (margin, bias and group limit exercised).  It also
records how far transformers' own logits move when index_topk is raised
past the sequence length (dense attention): the sparsity matters.
A seed that fails is skipped for the next; the seed used is in ref.json.
Reruns rewrite identical files.
"""
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import AutoModelForCausalLM, DeepseekV32Config

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tiny_deepseek as v3  # noqa: E402  (its helpers; it writes nothing on import)

NAME = "deepseek-v32"
IDX_MARGIN = 1e-3  # relative to the largest |score| of the row

KW = dict(
    vocab_size=300, hidden_size=32, intermediate_size=48,
    moe_intermediate_size=16, num_hidden_layers=3,
    num_attention_heads=4, num_key_value_heads=4,
    q_lora_rank=24, kv_lora_rank=16, qk_nope_head_dim=8,
    qk_rope_head_dim=8, v_head_dim=8,
    n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2,
    n_group=4, topk_group=2, first_k_dense_replace=1,
    routed_scaling_factor=2.5, norm_topk_prob=True,
    rms_norm_eps=1e-6, max_position_embeddings=256,
    tie_word_embeddings=False, attention_bias=False,
    rope_parameters=dict(v3.YARN),
    index_n_heads=4, index_head_dim=16, index_topk=4,
    bos_token_id=0, eos_token_id=1)
SEED0 = 40


def rotate_half(x):
    h = x.shape[-1] // 2
    return np.concatenate([-x[..., h:], x[..., :h]], axis=-1)


def index_scores64(ix, x, q_resid, cos, sin):
    """float64 indexer scores [T, T] (future positions -inf) of one
    sequence: x, q_resid the indexer's inputs [T, .], cos/sin [T, dr]."""
    Hi, di, dr = ix.n_heads, ix.head_dim, ix.qk_rope_head_dim
    T = x.shape[0]
    wq = ix.wq_b.weight.detach().double().numpy()
    wk = ix.wk.weight.detach().double().numpy()
    wp = ix.weights_proj.weight.detach().double().numpy()
    g = ix.k_norm.weight.detach().double().numpy()
    b = ix.k_norm.bias.detach().double().numpy()
    q = (q_resid @ wq.T).reshape(T, Hi, di)
    k = x @ wk.T
    mu = k.mean(-1, keepdims=True)
    var = ((k - mu) ** 2).mean(-1, keepdims=True)
    k = (k - mu) / np.sqrt(var + ix.k_norm.eps) * g + b
    c, s = cos[:, None, :], sin[:, None, :]
    q[..., :dr] = q[..., :dr] * c + rotate_half(q[..., :dr]) * s
    k[..., :dr] = k[..., :dr] * cos + rotate_half(k[..., :dr]) * sin
    w = (x @ wp.T) * Hi ** -0.5                                   # [T, Hi]
    dots = np.maximum(np.einsum("thd,sd->ths", q, k) * di ** -0.5, 0)  # [T, Hi, S]
    sc = np.einsum("th,ths->ts", w, dots)
    sc[np.triu_indices(T, 1)] = -np.inf
    return sc


def reference_indexer(model, seqs):
    """Per sequence and layer: transformers' top-k (future positions
    dropped, ascending), the float64 recomputation's, and the smallest
    relative decision margin."""
    caught = {}

    def hook(key):
        def f(_mod, inp, out):
            caught[key] = (inp[0][0].detach().double().numpy(),
                           inp[1][0].detach().double().numpy(),
                           inp[2][0][0].detach().double().numpy(),
                           inp[2][1][0].detach().double().numpy(),
                           out[0].detach().numpy())
        return f
    hooks = [layer.self_attn.indexer.register_forward_hook(hook(i))
             for i, layer in enumerate(model.model.layers)]
    K = model.config.index_topk
    sel, margin, agree = {}, np.inf, True
    for seq, toks in seqs.items():
        caught.clear()
        with torch.no_grad():
            model(torch.tensor([toks]))
        sel[seq] = {}
        for i, layer in enumerate(model.model.layers):
            x, qr, cos, sin, hf = caught[i]
            sc = index_scores64(layer.self_attn.indexer, x, qr, cos, sin)
            rows = []
            for t in range(len(toks)):
                hf_t = sorted(int(j) for j in hf[t] if j <= t)
                order = sorted(range(t + 1), key=lambda s: (-sc[t, s], s))
                mine = sorted(order[:K])
                if t + 1 > K:
                    scale = np.abs(sc[t, :t + 1]).max()
                    margin = min(margin, (sc[t, order[K - 1]] - sc[t, order[K]]) / scale)
                if hf_t != mine:
                    agree = False
                    print("  layer %d seq %s t %d: transformers %s, float64 %s"
                          % (i, seq, t, hf_t, mine))
                rows.append(mine)
            sel[seq]["layer.%d" % i] = rows
    for h in hooks:
        h.remove()
    return sel, margin, agree


def dense_shift(model, seqs, out):
    """The largest normalised logits change when index_topk exceeds the
    sequence (dense attention) in transformers itself."""
    worst = 0.0
    saved = [layer.self_attn.indexer.index_topk for layer in model.model.layers]
    for layer in model.model.layers:
        layer.self_attn.indexer.index_topk = 1 << 20
    for seq, toks in seqs.items():
        with torch.no_grad():
            d = model(torch.tensor([toks])).logits[0].double().numpy()
        ref = out[seq][0].astype(np.float64)
        worst = max(worst, float(np.sqrt(((d - ref) ** 2).sum() / (ref ** 2).sum())))
    for layer, k in zip(model.model.layers, saved):
        layer.self_attn.indexer.index_topk = k
    return worst


def build(tmp):
    seqs = v3.seqs_for(KW["vocab_size"])
    for seed in range(SEED0, SEED0 + 50):
        torch.manual_seed(seed)
        cfg = DeepseekV32Config(**KW)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        v3.randomize(model, seed)
        if os.path.isdir(tmp):
            shutil.rmtree(tmp)
        model.save_pretrained(tmp, safe_serialization=True)
        p = os.path.join(tmp, "generation_config.json")
        if os.path.exists(p):
            os.remove(p)
        model = AutoModelForCausalLM.from_pretrained(
            tmp, dtype=torch.float32, attn_implementation="eager")
        model.eval()
        names, out = v3.reference(model, seqs)
        info, ok = v3.check_routing(model, model.config, out)
        sel, margin, agree = reference_indexer(model, seqs)
        shift = dense_shift(model, seqs, out)
        ok = ok and agree and margin >= IDX_MARGIN and shift > 1e-2
        print("  %s seed %d: router margin %.3g, bias changes %d, group limit "
              "changes %d, %d expert sets; indexer margin %.3g (%s), dense "
              "attention moves logits %.3g%s" % (
                  NAME, seed, info["min_margin"], info["changed_without_bias"],
                  info["changed_without_group_limit"],
                  info["distinct_expert_sets"], margin,
                  "agrees" if agree else "DISAGREES", shift,
                  "" if ok else " (rejected)"))
        if ok:
            return seed, seqs, names, out, info, sel, margin, shift
    raise SystemExit("%s: no seed gives robust routing and selection" % NAME)


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    print("python %s, torch %s, transformers %s, numpy %s" % (
        sys.version.split()[0], torch.__version__, transformers.__version__,
        np.__version__))
    d = os.path.join(v3.OUT, NAME)
    tmp = d + ".tmp"
    if os.path.isdir(d):
        shutil.rmtree(d)
    seed, seqs, names, out, info, sel, margin, shift = build(tmp)
    shutil.move(tmp, d)
    index = {"generator": "tools/gen_tiny_deepseek_v32.py",
             "versions": {"python": sys.version.split()[0],
                          "torch": torch.__version__,
                          "transformers": transformers.__version__,
                          "numpy": np.__version__},
             "seed": seed, "storage_dtype": "float32",
             "reference_dtype": "float32", "reference_weights": "as stored",
             "routing": {"min_margin": float(info["min_margin"]),
                         "tokens_changed_without_bias": info["changed_without_bias"],
                         "tokens_changed_without_group_limit": info["changed_without_group_limit"],
                         "distinct_expert_sets": info["distinct_expert_sets"]},
             "indexer": {"index_topk": KW["index_topk"],
                         "min_relative_margin": float(margin),
                         "dense_attention_logits_nerr": shift},
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
            "experts": info["routes"][seq],
            "selected": sel[seq]})
    with open(os.path.join(d, "ref.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    print("%-18s %7d bytes: %s" % (NAME, size, ", ".join(sorted(os.listdir(d)))))
    assert size < 700000, "the fixture must stay under 700 KB"


if __name__ == "__main__":
    main()
