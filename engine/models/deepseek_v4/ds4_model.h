/* ds4_model.h - a DeepSeek-V4 model: its config
 * (ds4_config.h) and its weights bound by name from a safetensors
 * checkpoint, every shape checked against the config (ld_model_check_shape).
 * Weights stay in the mapping (nothing copied but tid2eid and dequantized
 * weights); F32, F16 and BF16 are accepted, and with a quantization_config
 * (ds4_config.h) DeepSeek's FP8 / FP4 linears.
 *
 * Names: what transformers 5.23's save_pretrained of DeepseekV4ForCausalLM
 * writes (its conversion mapping turns its module names back into
 * DeepSeek's own, under "model." but for head.weight), which
 * from_pretrained reads; or DeepSeek's released names, without "model."
 * (embed.weight, norm.weight, hc_head_fn / hc_head_base / hc_head_scale,
 * layers.L...): chosen by whether model.embed_tokens.weight or
 * embed.weight is present.  L = layer,
 * D = hidden, N = hc_mult, H heads of hd = head_dim, QR = q_lora_rank,
 * G = o_groups, OL = o_lora_rank, E = n_routed_experts, I =
 * moe_intermediate_size, K = num_experts_per_tok, c = 2 for CSA / 1 for
 * HCA, r = the layer's compression ratio, ih / nih = index_head_dim /
 * index_n_heads:
 *   model.embed_tokens.weight [vocab, D]    model.norm.weight [D]
 *   head.weight [vocab, D]                  (absent when tied)
 *   model.hc_head.hc_fn [N, N*D], hc_base [N], hc_scale [1]
 *   model.layers.L.
 *     attn_norm.weight [D], ffn_norm.weight [D]
 *     hc_attn_fn, hc_ffn_fn [(2+N)*N, N*D], hc_{attn,ffn}_base [(2+N)*N],
 *       hc_{attn,ffn}_scale [3]
 *     attn.wq_a.weight [QR, D], attn.q_norm.weight [QR],
 *     attn.wq_b.weight [H*hd, QR], attn.wkv.weight [hd, D],
 *     attn.norm.weight [hd], attn.wo_a.weight [G*OL, H*hd/G],
 *     attn.wo_b.weight [D, G*OL], attn.attn_sink [H]
 *     CSA / HCA layers: attn.compressor.wkv.weight, wgate.weight [c*hd, D],
 *       attn.compressor.ape [r, c*hd], attn.compressor.norm.weight [hd]
 *     CSA layers: attn.indexer.compressor.{wkv,wgate}.weight [2*ih, D],
 *       attn.indexer.compressor.ape [r, 2*ih],
 *       attn.indexer.compressor.norm.weight [ih],
 *       attn.indexer.wq_b.weight [nih*ih, QR],
 *       attn.indexer.weights_proj.weight [nih, D]
 *     ffn.gate.weight [E, D]; hash_moe layers: ffn.gate.tid2eid [vocab, K]
 *       (I64 or I32, every id < E); moe layers: ffn.gate.bias [E] (the
 *       e_score_correction_bias)
 *     ffn.experts.e.w1.weight [I, D] (gate), w3.weight [I, D] (up),
 *       w2.weight [D, I] (down), e < E; ffn.shared_experts.w1/w3/w2 the same
 * Quantized linears (every [rows, cols] weight above but the router, the
 * embeddings, the head and the mHC tensors), as transformers'
 * Fp8Dequantize reads them: F8_E4M3 [rows, cols], or packed FP4 E2M1 I8 /
 * U8 [rows, cols/2] (two values a byte, the low nibble first: DeepSeek's
 * float4_e2m1fn_x2 experts), each with a scale grid `<stem>.scale`
 * (DeepSeek) or `<stem>.weight_scale_inv` [sr, sc] that divides [rows,
 * cols] (blocks of rows/sr x cols/sc: 128 x 128 for FP8, 1 x 32 for FP4),
 * F8_E8M0 (2^(v-127)), U8 (the same exponents) or F32; w = q * scale in
 * fp32.  The codes stay in the mapping, handed to the backend as
 * LD_WQ_F8B / LD_WQ_F4B weights (backend.h: dequantized in its kernels, a
 * row or a tile at a time, the same fp32 products), with the scale grid
 * as an fp32 copy the model owns.
 * A missing tensor or a wrong shape is LD_ERR_MISMATCH naming the tensor and
 * the shape expected; another dtype is LD_ERR_UNSUPPORTED; a tid2eid entry
 * outside [0, E) is LD_ERR_SYNTAX naming the tensor, row and column.  Other
 * tensors (the MTP layer) are ignored.
 */
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
