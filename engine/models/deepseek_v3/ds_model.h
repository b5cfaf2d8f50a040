/* ds_model.h - a DeepSeek-V3 or V3.2 model: its config (ds_config.h)
 * and its weights bound by HF tensor name from a safetensors checkpoint,
 * every shape checked against the config (ld_model_check_shape).  Weights
 * stay in the mapping (nothing copied but FP8 kv_b_proj, below); F32, F16
 * and BF16 are accepted.
 *
 * The design: docs/engine-deepseek.md, "DeepSeek-V3 and V3.2: the weights". */
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
