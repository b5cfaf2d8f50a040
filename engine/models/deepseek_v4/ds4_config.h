/* ds4_config.h - the description of a DeepSeek-V4 model (HF
 * config.json, model_type "deepseek_v4" / DeepseekV4ForCausalLM, as
 * transformers 5.23's DeepseekV4Config writes it): mHC residual streams,
 * shared-KV MQA with a sliding window and per-head sinks, CSA / HCA
 * compressed attention by layer type, grouped output projection, and MoE
 * with sqrt-softplus scores, hash-routed layers and a clamped SwiGLU.
 *
 * Every field is validated; an error names the field (LD_ERR_SYNTAX for a
 * malformed or inconsistent value, LD_ERR_UNSUPPORTED for a valid value the
 * engine does not compute: another scoring_func, a quantization method
 * other than DeepSeek's FP8 / FP4, an unknown layer type
 * ("layer_types[2]" named), ...).  The legacy field names transformers
 * folds in (compress_ratios, compress_rate_csa / compress_rate_hca,
 * num_hash_layers, qk_rope_head_dim) are read too, with transformers'
 * precedence and defaults.  Fields transformers ignores at inference
 * (num_nextn_predict_layers: the MTP layer is not run; router_aux_loss_coef,
 * initializer_range, ...) are accepted.
 *
 * RoPE: "rope_parameters" is either transformers' nested form {"main":
 * {...}, "compress": {...}} or a flat dict, which (as transformers does)
 * applies to the compressed layers' "compress" rope with theta
 * compress_rope_theta, the "main" rope (sliding layers) being the default
 * rope of rope_theta.  A yarn compress rope gets attention_factor 1 unless
 * set (transformers forces it: the official code does not scale cos/sin).
 */
#ifndef LD_DS4_CONFIG_H
#define LD_DS4_CONFIG_H

#include <stddef.h>

#include "ld_error.h"

#define LD_DS4_MAX_LAYERS 256
#define LD_DS4_MAX_EXPERTS 1024
#define LD_DS4_MAX_HC 16

typedef enum ld_ds4_attn_type {
    LD_DS4_SLIDING = 0,  /* sliding_attention: the window only */
    LD_DS4_CSA = 1,      /* compressed_sparse_attention: + indexer-chosen entries */
    LD_DS4_HCA = 2       /* heavily_compressed_attention: + every entry */
} ld_ds4_attn_type;

typedef enum ld_ds4_mlp_type {
    LD_DS4_MOE = 0,      /* top-k of score + e_score_correction_bias */
    LD_DS4_HASH = 1      /* hash_moe: experts = tid2eid[token id] */
} ld_ds4_mlp_type;

/* one RoPE (as transformers' rope_parameters entry), over rope_dim dims */
typedef struct ld_ds4_rope {
    double theta;
    int yarn;                       /* 0: default rope */
    double factor, orig_max_pos, beta_fast, beta_slow, mscale, mscale_all_dim;
    double attention_factor;        /* cos/sin factor; < 0: derived */
    int truncate;
} ld_ds4_rope;

typedef struct ld_ds4_config {
    int vocab, hidden, n_layers, n_heads, head_dim, rope_dim, q_lora_rank;
    int o_groups, o_lora_rank, sliding_window;
    int moe_intermediate, n_routed, top_k;
    int norm_topk_prob;
    float routed_scaling, swiglu_limit;
    int hc_mult, hc_sinkhorn_iters;
    float hc_eps, rms_eps;
    int index_n_heads, index_head_dim, index_topk;
    int ratio_csa, ratio_hca;       /* compress_rates */
    int max_pos, tie_embeddings;
    /* quantization_config {quant_method fp8, fmt e4m3, activation_scheme
     * dynamic, scale_fmt ue8m0 | float, weight_block_size [a, b]} and
     * expert_dtype fp4 | fp8 (top level, or inside quantization_config):
     * the linear weights may be stored F8_E4M3 (block-scaled) or packed
     * FP4 E2M1 (I8 / U8, two values a byte), each with a scale grid
     * (ds4_model.h); dequantized exactly when bound.  Activations
     * are not quantized (the engine computes them in fp32) */
    int quant;
    int fp8_block[2];
    int expert_fp4;
    ld_ds4_rope rope_main, rope_compress;
    unsigned char layer_type[LD_DS4_MAX_LAYERS];  /* ld_ds4_attn_type */
    unsigned char mlp_type[LD_DS4_MAX_LAYERS];    /* ld_ds4_mlp_type */
    /* 1 as parsed; set to 0 only for ablations */
    int use_sinks;        /* the per-head sink logits */
    int use_hash;         /* 0: hash_moe layers route by top-k of the score */
    int use_compressed;   /* 0: CSA/HCA layers attend to the window only */
    int use_score_bias;   /* 0: moe layers select without the correction bias */
} ld_ds4_config;

/* 1 if the config.json text names DeepSeek-V4 (architectures
 * DeepseekV4ForCausalLM or model_type deepseek_v4), 0 otherwise. */
int ld_ds4_config_detect(const char *json, size_t len);

ld_status ld_ds4_config_parse(const char *json, size_t len, ld_ds4_config *out, ld_error *err);

/* Read and parse the file at `path` (err->path = path on failure). */
ld_status ld_ds4_config_load(const char *path, ld_ds4_config *out, ld_error *err);

/* The rope_dim/2 inverse frequencies of `r` as transformers computes them in
 * fp32, and the factor it multiplies cos and sin by. */
void ld_ds4_rope_inv_freq(const ld_ds4_config *c, const ld_ds4_rope *r, float *inv_freq, float *attn_factor);

/* The compression ratio of layer l (0 for sliding layers). */
static inline int ld_ds4_layer_ratio(const ld_ds4_config *c, int l)
{
    return c->layer_type[l] == LD_DS4_CSA ? c->ratio_csa : c->layer_type[l] == LD_DS4_HCA ? c->ratio_hca : 0;
}

#endif /* LD_DS4_CONFIG_H */
