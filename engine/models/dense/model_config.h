/* model_config.h - the description of a dense decoder model, read from an
 * HF config.json: Llama (2, 3), Qwen2, Qwen3, Mistral (and SmolLM, which is
 * Llama).  GQA, tied embeddings, explicit head_dim, q/k/v/o and MLP biases,
 * Qwen3's per-head q/k RMSNorm, sliding-window attention, RoPE with theta
 * and the "linear", "llama3", "yarn" and "dynamic" (SGLang's fixed NTK)
 * scalings.  Anything else that would change
 * the numbers (another activation, another RoPE scaling, a quantization
 * config...) is LD_ERR_UNSUPPORTED with a message naming the field.
 *
 * Both config styles are read: transformers 5 ("rope_parameters") and 4
 * ("rope_theta" + "rope_scaling").
 */
#ifndef LD_MODEL_CONFIG_H
#define LD_MODEL_CONFIG_H

#include <stddef.h>

#include "engine/formats/fp8_config.h"
#include "ld_error.h"

#define LD_MODEL_MAX_LAYERS 1024
#define LD_MODEL_MAX_HEAD_DIM 4096

typedef enum ld_arch {
    LD_ARCH_LLAMA = 0,
    LD_ARCH_QWEN2,
    LD_ARCH_QWEN3,
    LD_ARCH_MISTRAL
} ld_arch;

typedef enum ld_rope_type {
    LD_ROPE_DEFAULT = 0,
    LD_ROPE_LINEAR,
    LD_ROPE_LLAMA3,
    LD_ROPE_YARN,
    LD_ROPE_DYNAMIC
} ld_rope_type;

typedef struct ld_model_config {
    ld_arch arch;
    char arch_name[64];          /* as in "architectures" (or model_type) */
    ld_fp8_config fp8;           /* quantization_config: block-scaled FP8 linear weights */
    int vocab;
    int hidden;
    int intermediate;
    int n_layers;
    int n_heads;
    int n_kv_heads;
    int head_dim;
    int max_pos;
    float rms_eps;
    int tie_embeddings;
    int qkv_bias;                /* q/k/v projections have biases */
    int o_bias;                  /* o_proj has a bias */
    int mlp_bias;                /* gate/up/down have biases */
    int qk_norm;                 /* per-head RMSNorm of q and k (Qwen3) */
    /* RoPE (rotate_half pairs i, i + head_dim/2 as HF) */
    ld_rope_type rope_type;
    double rope_theta;
    double rope_factor;          /* linear, llama3, yarn, dynamic */
    double rope_low_freq_factor; /* llama3 */
    double rope_high_freq_factor;
    double rope_orig_max_pos;    /* llama3, yarn; dynamic: the config's
                                  * max_position_embeddings (max_pos is
                                  * then that times the factor, as SGLang's
                                  * context length) */
    double rope_beta_fast;       /* yarn (default 32) */
    double rope_beta_slow;       /* yarn (default 1) */
    int rope_truncate;           /* yarn: floor/ceil the correction range */
    /* What HF multiplies cos and sin by (yarn's attention_factor, GGUF's
     * rope.scaling.attn_factor), so q.k by its square: the session scales
     * the attention softmax scale by rope_attn_factor^2.  1 otherwise;
     * 0 (a config not made by the parsers) is read as 1. */
    double rope_attn_factor;
    /* GGUF rope_freqs.weight (llama.cpp's Llama 3 scaling): inv_freq[i] is
     * divided by rope_freq_factors[i]; 0 factors = none, else head_dim/2 */
    int rope_n_freq_factors;
    float rope_freq_factors[LD_MODEL_MAX_HEAD_DIM / 2];
    /* sliding window: window[l] > 0 means layer l attends to the last
     * window[l] positions (itself included), 0 = full causal attention */
    int window[LD_MODEL_MAX_LAYERS];
} ld_model_config;

const char *ld_arch_name(ld_arch a);

/* Parse config.json text (`len` bytes). */
ld_status ld_model_config_parse(const char *json, size_t len,
                                ld_model_config *out, ld_error *err);

/* Read and parse the file at `path` (err->path = path on failure). */
ld_status ld_model_config_load(const char *path, ld_model_config *out,
                               ld_error *err);

/* RoPE inverse frequencies, head_dim/2 of them, as HF computes them (fp32,
 * the scaling applied; "dynamic" as SGLang: fixed, from max_pos), then
 * divided by the GGUF frequency factors if any. */
void ld_model_rope_inv_freq(const ld_model_config *c, float *inv_freq);

/* The factor q.k is scaled by on top of 1/sqrt(head_dim): the square of
 * rope_attn_factor (1 when it is 0 or 1). */
double ld_model_rope_qk_scale(const ld_model_config *c);

#endif /* LD_MODEL_CONFIG_H */
