/* ds_config.h - the description of a DeepSeek-V3 model (HF
 * config.json, model_type "deepseek_v3" / DeepseekV3ForCausalLM) or a
 * DeepSeek-V3.2 one ("deepseek_v32" / DeepseekV32ForCausalLM: V3 plus
 * DeepSeek Sparse Attention, a lightning indexer per layer whose top
 * index_topk tokens are all MLA attends to): MLA
 * attention with optional q LoRA, RoPE (default or YaRN with DeepSeek's
 * mscale), dense layers then MoE layers with the noaux_tc sigmoid router,
 * group limit and shared experts.
 *
 * Every field is validated; an error names the field (LD_ERR_SYNTAX for a
 * malformed or inconsistent value, LD_ERR_UNSUPPORTED for a valid value the
 * engine does not compute: another scoring_func or topk_method, another
 * rope_type, a quantization_config other than DeepSeek's block FP8...).  Both config styles are read:
 * transformers 5 ("rope_parameters") and 4 ("rope_theta" + "rope_scaling").
 * Fields both transformers and DeepSeek's code ignore (moe_layer_freq,
 * num_nextn_predict_layers: the MTP layer is not run) are accepted.
 *
 * V3.2 adds index_n_heads, index_head_dim and index_topk (transformers'
 * defaults 64, 128, 2048 when absent, as transformers reads them):
 * index_n_heads >= 1, index_head_dim >= qk_rope_head_dim (the indexer
 * rotates its first qk_rope_head_dim dims) and index_topk >= 1, else an
 * error naming the field.  An index_topk larger than max_position_embeddings
 * or than a query's context is not an error: a query with at most
 * index_topk visible tokens attends to all of them (the official code's
 * topk(min(index_topk, end_pos)); transformers' too, whose extra picks are
 * masked).  V3.2 needs q LoRA (the indexer's query is read from the q
 * latent): q_lora_rank null or 0 is an error.  transformers' V3.2 always
 * rotates MLA's rope dims in interleaved pairs, so rope_interleave false is
 * LD_ERR_UNSUPPORTED; mlp_layer_types, when present, must be the
 * first_k_dense_replace pattern (["dense"] * k + ["sparse"] * ...) and
 * layer_types all "indexed_attention"; mlp_bias must be false.
 */
#ifndef LD_DS_CONFIG_H
#define LD_DS_CONFIG_H

#include <stddef.h>

#include "ld_error.h"

#define LD_DS_MAX_LAYERS 1024
#define LD_DS_MAX_EXPERTS 1024

/* eps of the q_a / kv_a latent RMSNorms: fixed at 1e-6 by transformers
 * (DeepseekV3RMSNorm's default) and by the official code (RMSNorm's
 * default), whatever rms_norm_eps says */
#define LD_DS_LATENT_NORM_EPS 1e-6f

/* eps of V3.2's indexer k_norm (a LayerNorm): 1e-6 in transformers and in
 * the official code, not in config.json */
#define LD_DS_INDEX_NORM_EPS 1e-6f

typedef struct ld_ds_config {
    int vocab, hidden, n_layers, n_heads;
    int intermediate;          /* dense layers' MLP */
    int moe_intermediate;      /* each routed expert; shared: x n_shared */
    int q_lora_rank;           /* 0: plain q_proj */
    int kv_lora_rank;          /* c: the latent that is cached */
    int qk_nope, qk_rope, v_head;  /* dn, dr, dv */
    int first_k_dense;         /* layers < this are dense */
    int n_routed, n_shared, top_k, n_group, topk_group;
    int norm_topk_prob;
    float routed_scaling;
    int score_bias;            /* 1: the e_score_correction_bias selects
                                  (noaux_tc); 0 only for ablations */
    int max_pos;
    float rms_eps;
    int tie_embeddings;
    int attention_bias;        /* q_a_proj, kv_a_proj_with_mqa, o_proj */
    int rope_interleave;       /* 1: pairs (2i, 2i+1) (DeepSeek), 0: (i, i+dr/2) */
    /* RoPE over the dr dims */
    double rope_theta;
    int yarn;                  /* 0: plain RoPE */
    double rope_factor, rope_orig_max_pos, beta_fast, beta_slow;
    double mscale, mscale_all_dim;  /* 0 when absent */
    double attention_factor;   /* cos/sin factor; < 0: absent (derived) */
    int yarn_truncate;
    /* quantization_config {quant_method fp8, fmt e4m3, weight_block_size}:
     * the linear weights may be F8_E4M3 with an F32 `<name>_scale_inv` per
     * block; dequantized exactly (q * scale_inv) when the model is bound.
     * Activations are not quantized (activation_scheme "dynamic" is
     * accepted and ignored: the engine computes them in fp32) */
    int fp8;
    int fp8_block[2];          /* rows, cols of a scale block */
    /* DeepSeek-V3.2 (DSA); all 0 for V3 */
    int v32;                   /* 1: the layers have a lightning indexer */
    int index_n_heads, index_head_dim;  /* Hi, di */
    int index_topk;            /* tokens each query's MLA attends to (at most) */
    int index_rope_interleave; /* 0: the indexer rotates pairs (i, i+dr/2)
                                  (transformers, the fixed official code);
                                  1: pairs (2i, 2i+1), as the official code
                                  before DeepSeek-V3.2-Exp@8631a81 (2025-11)
                                  did.  Not in config.json: for ablations and
                                  for replaying servers that ran that code */
} ld_ds_config;

/* 1 if the config.json text names DeepSeek-V3 or V3.2 (architectures
 * DeepseekV3ForCausalLM / DeepseekV32ForCausalLM, or without architectures
 * model_type deepseek_v3 / deepseek_v32), 0 otherwise (also for text that
 * is not JSON). */
int ld_ds_config_detect(const char *json, size_t len);

ld_status ld_ds_config_parse(const char *json, size_t len, ld_ds_config *out, ld_error *err);

/* Read and parse the file at `path` (err->path = path on failure). */
ld_status ld_ds_config_load(const char *path, ld_ds_config *out, ld_error *err);

/* The dr/2 RoPE inverse frequencies as transformers computes them in fp32
 * (_compute_yarn_parameters with YaRN; 1/base^(2i/dr) without). */
void ld_ds_rope_inv_freq(const ld_ds_config *c, float *inv_freq);

/* YaRN's magnitude corrections from (factor, mscale, mscale_all_dim,
 * attention_factor < 0 when absent) stay finite positive floats: the cos/sin
 * factor and the softmax scale's multiplier; else LD_ERR_SYNTAX naming the
 * fields under `where` ("rope_parameters.").  The V3 and V4 parsers call it
 * for every yarn entry. */
ld_status ld_ds_yarn_check(double factor, double mscale, double mscale_all_dim, double attention_factor,
                           const char *where, ld_error *err);

/* The factor transformers multiplies cos and sin by: with YaRN,
 * attention_factor, or mscale(factor, mscale) / mscale(factor,
 * mscale_all_dim) when both are set, else mscale(factor, 1); 1 without
 * YaRN.  mscale(f, m) = 0.1 m ln f + 1 (1 when f <= 1). */
float ld_ds_rope_attn_factor(const ld_ds_config *c);

/* The softmax scale: (dn + dr)^-0.5, times mscale(factor, mscale_all_dim)^2
 * with YaRN when mscale_all_dim is set (transformers; the official code:
 * the same when max_seq_len > original_max_position_embeddings). */
float ld_ds_softmax_scale(const ld_ds_config *c);

/* 1 if layer `l` is MoE */
static inline int ld_ds_layer_is_moe(const ld_ds_config *c, int l)
{
    return l >= c->first_k_dense;
}

#endif /* LD_DS_CONFIG_H */
