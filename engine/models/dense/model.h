/* model.h - a dense decoder model: its config (model_config.h) and its
 * weights bound by HF tensor name from a safetensors checkpoint, each shape
 * checked against the config.
 *
 * Weights stay in the mapping: nothing is copied here (the reference backend
 * reads f32 in place and converts f16/bf16 row by row as it multiplies).
 *
 * Names bound (L = layer):
 *   model.embed_tokens.weight [vocab, hidden]     model.norm.weight [hidden]
 *   lm_head.weight [vocab, hidden]                (absent when tied)
 *   model.layers.L.input_layernorm.weight, post_attention_layernorm.weight
 *   model.layers.L.self_attn.{q,k,v,o}_proj.weight (+ .bias as configured)
 *   model.layers.L.self_attn.{q,k}_norm.weight [head_dim]      (Qwen3)
 *   model.layers.L.mlp.{gate,up,down}_proj.weight (+ .bias with mlp_bias)
 * A missing tensor or a wrong shape is LD_ERR_MISMATCH naming the tensor
 * and the expected shape; an unsupported dtype is LD_ERR_UNSUPPORTED.
 */
#ifndef LD_MODEL_H
#define LD_MODEL_H

#include "engine/backend/backend.h"
#include "engine/formats/gguf.h"
#include "model_config.h"
#include "engine/formats/safetensors.h"

/* One bound weight: rows x cols (a vector: rows = 1). */
typedef struct ld_model_tensor {
    const ld_st_tensor *st;   /* the safetensors tensor, or */
    const ld_gguf_tensor *gg; /* the GGUF tensor; both NULL when the model
                                 has no such tensor */
    ld_host_tensor host;
} ld_model_tensor;

typedef struct ld_model_layer {
    ld_model_tensor attn_norm, wq, wk, wv, wo, bq, bk, bv, bo, q_norm, k_norm;
    ld_model_tensor ffn_norm, w_gate, w_up, w_down, b_gate, b_up, b_down;
} ld_model_layer;

typedef struct ld_model {
    ld_model_config cfg;
    ld_safetensors *st;          /* owned (HF models) */
    ld_gguf *gguf;               /* owned (GGUF models, model_gguf.c) */
    ld_model_tensor embed, norm, lm_head;  /* lm_head = embed when tied */
    ld_model_layer *layers;      /* cfg.n_layers */
} ld_model;

/* Bind the weights of `st` (borrowed, must outlive the model) to `cfg`;
 * on success *out is a model that does not own `st` (ld_model_close leaves
 * `st` open). */
ld_status ld_model_bind(const ld_model_config *cfg, const ld_safetensors *st,
                        ld_model **out, ld_error *err);

/* Open a HF model directory: config.json and model.safetensors (or the
 * sharded index). */
ld_status ld_model_open(const char *dir, ld_model **out, ld_error *err);

/* Open a GGUF model file (model_gguf.c): the config from the metadata
 * (general.architecture llama, qwen2 or qwen3), the weights by GGUF name
 * (token_embd, blk.N.attn_q, ..., output_norm, output or tied), each
 * shape and type checked (F32, F16, BF16, Q4_0, Q4_1, Q8_0, Q4_K, Q6_K),
 * used in place from the mapping.  Llama's q/k rows, which the conversion
 * to GGUF reordered for GGML's rope, are read in HF order (rope_hd). */
ld_status ld_model_open_gguf(const char *path, ld_model **out, ld_error *err);



/* Open `path`: a GGUF file or a directory holding one (as
 * ld_model_find_gguf says), else an HF directory (ld_model_open). */
ld_status ld_model_open_any(const char *path, ld_model **out, ld_error *err);

/* Bytes of one bound tensor in its file (0 when absent). */
uint64_t ld_model_tensor_bytes(const ld_model_tensor *t);

/* Bytes of all the bound weights: what the mappings hold in memory once
 * every weight has been read. */
uint64_t ld_model_weight_bytes(const ld_model *m);

/* Bytes of weights one decode step reads: every weight once (the lm_head,
 * tied or not, whole), but of the embedding table only the token's row.
 * Divided by a memory bandwidth: the roofline of decode speed. */
uint64_t ld_model_decode_bytes(const ld_model *m);

void ld_model_close(ld_model *m);

#endif /* LD_MODEL_H */
