/* ds_model.h - a DeepSeek-V3 or V3.2 model: its config (ds_config.h)
 * and its weights bound by HF tensor name from a safetensors checkpoint,
 * every shape checked against the config (ld_model_check_shape).  Weights
 * stay in the mapping (nothing copied but FP8 kv_b_proj, below); F32, F16
 * and BF16 are accepted.
 *
 * Names bound (L = layer; H heads, dn/dr/dv head dims, c = kv_lora_rank,
 * qr = q_lora_rank, D = hidden, E = n_routed_experts):
 *   model.embed_tokens.weight [vocab, D]    model.norm.weight [D]
 *   lm_head.weight [vocab, D]               (absent when tied)
 *   model.layers.L.input_layernorm.weight [D], post_attention_layernorm.weight [D]
 *   model.layers.L.self_attn.
 *     q_a_proj.weight [qr, D], q_a_layernorm.weight [qr],
 *     q_b_proj.weight [H*(dn+dr), qr]        (q_lora_rank set), or
 *     q_proj.weight [H*(dn+dr), D]           (q_lora_rank null)
 *     kv_a_proj_with_mqa.weight [c+dr, D], kv_a_layernorm.weight [c],
 *     kv_b_proj.weight [H*(dn+dv), c], o_proj.weight [D, H*dv]
 *     q_a_proj.bias [qr], kv_a_proj_with_mqa.bias [c+dr], o_proj.bias [D]
 *                                            (attention_bias)
 *   dense layers (L < first_k_dense_replace):
 *     model.layers.L.mlp.{gate,up}_proj.weight [I, D], down_proj.weight [D, I]
 *   MoE layers:
 *     model.layers.L.mlp.gate.weight [E, D], gate.e_score_correction_bias [E]
 *     model.layers.L.mlp.experts.e.{gate,up}_proj.weight [Im, D],
 *       down_proj.weight [D, Im]             (e < E, Im = moe_intermediate_size)
 *     model.layers.L.mlp.shared_experts.{gate,up}_proj.weight [Is, D],
 *       down_proj.weight [D, Is]             (Is = Im * n_shared_experts; none
 *                                             when n_shared_experts = 0)
 * DeepSeek-V3.2 (cfg.v32) adds per layer the lightning indexer (Hi =
 * index_n_heads, di = index_head_dim):
 *   model.layers.L.self_attn.indexer.
 *     wq_b.weight [Hi*di, qr], wk.weight [di, D],
 *     k_norm.weight [di], k_norm.bias [di]     (a LayerNorm)
 *     weights_proj.weight [Hi, D]
 * With a quantization_config (ds_config.h: DeepSeek's block FP8) the
 * linear weights above (attention projections, the indexer's wq_b and wk,
 * dense MLP, experts, shared experts; not the indexer's weights_proj, the
 * router, embeddings, lm_head, norms or biases) may be
 * F8_E4M3, each with `<name>_scale_inv` F32 [ceil(rows/b0), ceil(cols/b1)];
 * they are bound as the backends' block-scaled FP8 weights (LD_WQ_F8B:
 * bytes and scales read in place from the mapping, a byte a weight, the
 * backends dequantizing a row at a time; model.c's dense FP8 binding),
 * except kv_b_proj, dequantized exactly (kernels/ref/ref_ds.h) into an
 * fp32 copy the model owns: MLA's absorbed products read its rows as
 * W_UK / W_UV, plain F32/F16/BF16 only (SGLang dequantizes it at load too).
 * A missing tensor or a wrong shape is LD_ERR_MISMATCH naming the tensor and
 * the shape expected; another dtype is LD_ERR_UNSUPPORTED.  Tensors of the
 * checkpoint that are not bound (the MTP layer model.layers.<n_layers>...)
 * are ignored.
 */
#ifndef LD_DS_MODEL_H
#define LD_DS_MODEL_H

#include "ds_config.h"
#include "engine/models/dense/model.h"
#include "engine/formats/safetensors.h"

typedef struct ld_ds_expert {
    ld_model_tensor gate, up, down;
} ld_ds_expert;

typedef struct ld_ds_layer {
    ld_model_tensor attn_norm;                 /* [D] */
    ld_model_tensor q_a, q_a_bias, q_a_norm;   /* [qr, D], [qr], [qr] */
    ld_model_tensor q_b;                       /* [H*(dn+dr), qr] */
    ld_model_tensor q;                         /* [H*(dn+dr), D] (no q LoRA) */
    ld_model_tensor kv_a, kv_a_bias, kv_a_norm;/* [c+dr, D], [c+dr], [c] */
    ld_model_tensor kv_b;                      /* [H*(dn+dv), c] */
    ld_model_tensor o, o_bias;                 /* [D, H*dv], [D] */
    ld_model_tensor ffn_norm;                  /* [D] */
    int moe;
    ld_ds_expert mlp;       /* dense: [I, D] x2, [D, I]; MoE: the shared experts */
    ld_model_tensor router, router_bias;       /* [E, D], [E] */
    ld_ds_expert *experts;                     /* [E] (MoE layers) */
    /* the V3.2 indexer (st NULL for V3) */
    ld_model_tensor idx_wq_b, idx_wk;          /* [Hi*di, qr], [di, D] */
    ld_model_tensor idx_k_norm, idx_k_bias;    /* [di], [di] */
    ld_model_tensor idx_weights;               /* [Hi, D] */
} ld_ds_layer;

typedef struct ld_ds_model {
    ld_ds_config cfg;
    ld_safetensors *st;                        /* owned when opened */
    ld_model_tensor embed, norm, lm_head;      /* lm_head = embed when tied */
    ld_ds_layer *layers;                       /* cfg.n_layers */
    ld_ds_expert *expert_store;                /* all layers' experts */
    float **owned;                             /* dequantized FP8 weights (kv_b_proj) */
    size_t n_owned, cap_owned;
    size_t owned_bytes;                        /* their bytes */
} ld_ds_model;

/* Bind the weights of `st` (borrowed, outlives the model) to `cfg`. */
ld_status ld_ds_model_bind(const ld_ds_config *cfg, const ld_safetensors *st, ld_ds_model **out, ld_error *err);

/* Open a HF model directory: config.json and model.safetensors (or the
 * sharded index). */
ld_status ld_ds_model_open(const char *dir, ld_ds_model **out, ld_error *err);

void ld_ds_model_close(ld_ds_model *m);

#endif /* LD_DS_MODEL_H */
