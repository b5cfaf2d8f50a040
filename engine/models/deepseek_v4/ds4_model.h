/* ds4_model.h - a DeepSeek-V4 model: its config
 * (ds4_config.h) and its weights bound by name from a safetensors
 * checkpoint, every shape checked against the config (ld_model_check_shape).
 * Weights stay in the mapping (nothing copied but tid2eid and dequantized
 * weights); F32, F16 and BF16 are accepted, and with a quantization_config
 * (ds4_config.h) DeepSeek's FP8 / FP4 linears.
 *
 * The design: docs/engine-deepseek.md, "DeepSeek-V4: the weights". */
#ifndef LD_DS4_MODEL_H
#define LD_DS4_MODEL_H

#include <stdint.h>

#include "ds4_config.h"
#include "engine/models/dense/model.h"
#include "engine/formats/safetensors.h"

typedef struct ld_ds4_mlp {
    ld_model_tensor gate, up, down;    /* w1, w3, w2 */
} ld_ds4_mlp;

typedef struct ld_ds4_compressor {
    ld_model_tensor wkv, wgate, ape, norm;
} ld_ds4_compressor;

typedef struct ld_ds4_layer {
    ld_model_tensor attn_norm, ffn_norm;
    ld_model_tensor hc_attn_fn, hc_attn_base, hc_attn_scale, hc_ffn_fn, hc_ffn_base, hc_ffn_scale;
    ld_model_tensor wq_a, q_norm, wq_b, wkv, kv_norm, wo_a, wo_b, sinks;
    ld_ds4_compressor comp;            /* CSA / HCA */
    ld_ds4_compressor icomp;           /* CSA: the indexer's */
    ld_model_tensor iwq_b, iweights;   /* CSA */
    ld_model_tensor router, router_bias;
    int32_t *tid2eid;                  /* hash_moe: [vocab][K], owned */
    ld_ds4_mlp shared;
    ld_ds4_mlp *experts;               /* [E] */
} ld_ds4_layer;

typedef struct ld_ds4_model {
    ld_ds4_config cfg;
    ld_safetensors *st;                /* owned when opened */
    ld_model_tensor embed, norm, lm_head, hc_fn, hc_base, hc_scale;
    ld_ds4_layer *layers;
    ld_ds4_mlp *expert_store;
    int official;                      /* DeepSeek's names (no "model.") */
    float **owned;                     /* fp32 copies of the FP8 / FP4 scale grids */
    size_t n_owned, cap_owned;
} ld_ds4_model;

/* Bind the weights of `st` (borrowed, outlives the model) to `cfg`. */
ld_status ld_ds4_model_bind(const ld_ds4_config *cfg, const ld_safetensors *st, ld_ds4_model **out, ld_error *err);

/* Open a HF model directory: config.json and model.safetensors (or the
 * sharded index). */
ld_status ld_ds4_model_open(const char *dir, ld_ds4_model **out, ld_error *err);

void ld_ds4_model_close(ld_ds4_model *m);

#endif /* LD_DS4_MODEL_H */
