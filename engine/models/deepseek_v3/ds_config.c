/* ds_config.c - see ds_config.h. */
#include "ds_config.h"
#include "engine/formats/config_json.h"
#include "engine/formats/fp8_config.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>





/* A string field that, when present, must be one of `ok` (NULL-ended). */
static ld_status get_choice(const cJSON *o, const char *k, const char *const *ok, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    if (!v) return LD_OK;
    if (!cJSON_IsString(v)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not a string", k);
    for (const char *const *p = ok; *p; p++)
        if (strcmp(v->valuestring, *p) == 0) return LD_OK;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' = '%.40s' is not supported (%s)", k,
                   v->valuestring, ok[0]);
}

/* 1: DeepSeek-V3, 2: DeepSeek-V3.2, 0: neither */
static int names_deepseek(const cJSON *root)
{
    const cJSON *ar = ld_cfg_get(root, "architectures"), *mt = ld_cfg_get(root, "model_type");
    if (cJSON_IsArray(ar) && cJSON_GetArraySize(ar) == 1 && cJSON_IsString(ar->child)) {
        if (strcmp(ar->child->valuestring, "DeepseekV3ForCausalLM") == 0) return 1;
        return strcmp(ar->child->valuestring, "DeepseekV32ForCausalLM") == 0 ? 2 : 0;
    }
    if (ar || !cJSON_IsString(mt)) return 0;
    if (strcmp(mt->valuestring, "deepseek_v3") == 0) return 1;
    return strcmp(mt->valuestring, "deepseek_v32") == 0 ? 2 : 0;
}

int ld_ds_config_detect(const char *json, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    int r = root && cJSON_IsObject(root) && names_deepseek(root) != 0;
    cJSON_Delete(root);
    return r;
}

/* A list field, when present: n_layers strings, item l equal to want(l). */
static ld_status check_layer_list(const cJSON *root, const char *k, const ld_ds_config *c,
                                  const char *(*want)(const ld_ds_config *, int), ld_error *err)
{
    const cJSON *v = ld_cfg_get(root, k);
    if (!v) return LD_OK;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != c->n_layers)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not a list of %d strings", k, c->n_layers);
    int l = 0;
    for (const cJSON *e = v->child; e; e = e->next, l++) {
        if (!cJSON_IsString(e))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not a list of %d strings", k, c->n_layers);
        if (strcmp(e->valuestring, want(c, l)) != 0)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s[%d]' = '%.40s' is not supported (%s)", k, l,
                           e->valuestring, want(c, l));
    }
    return LD_OK;
}

static const char *mlp_type(const ld_ds_config *c, int l)
{
    return ld_ds_layer_is_moe(c, l) ? "sparse" : "dense";
}

static const char *attn_type(const ld_ds_config *c, int l)
{
    (void)c;
    (void)l;
    return "indexed_attention";
}

/* V3.2's indexer fields and the V3 options its transformers class drops */
static ld_status parse_v32(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    c->v32 = 1;
    LD_TRY(ld_cfg_int(root, "", "index_n_heads", 1, 1 << 12, 64, &c->index_n_heads, err));
    LD_TRY(ld_cfg_int(root, "", "index_head_dim", 1, 1 << 12, 128, &c->index_head_dim, err));
    LD_TRY(ld_cfg_int(root, "", "index_topk", 1, 1 << 30, 2048, &c->index_topk, err));
    if (c->index_head_dim < c->qk_rope)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'index_head_dim' (%d) is smaller than qk_rope_head_dim (%d),"
                       " the dims the indexer rotates",
                       c->index_head_dim, c->qk_rope);
    if (!c->q_lora_rank)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'q_lora_rank' is missing or 0: DeepSeek-V3.2's indexer reads the q latent");
    if (!c->rope_interleave)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "config field 'rope_interleave' = false is not supported by DeepSeek-V3.2"
                       " (MLA rotates interleaved pairs)");
    int mlp_bias = 0;
    LD_TRY(ld_cfg_bool(root, "", "mlp_bias", 0, &mlp_bias, err));
    if (mlp_bias) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'mlp_bias' = true is not supported");
    LD_TRY(check_layer_list(root, "mlp_layer_types", c, mlp_type, err));
    return check_layer_list(root, "layer_types", c, attn_type, err);
}

static ld_status parse_rope(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    const cJSON *rp = ld_cfg_get(root, "rope_parameters");
    const char *where = "rope_parameters.";
    const cJSON *sc = rp;
    if (rp && !cJSON_IsObject(rp))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'rope_parameters' is not an object");
    if (!rp) {
        where = "rope_scaling.";
        sc = ld_cfg_get(root, "rope_scaling");
        if (sc && !cJSON_IsObject(sc))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_scaling' is not an object");
    }
    LD_TRY(ld_cfg_num(rp ? rp : root, rp ? where : "", "rope_theta", 10000.0, 0, 0, &c->rope_theta, err));
    c->yarn = 0;
    c->attention_factor = -1;
    if (!sc) return LD_OK;
    const cJSON *t = ld_cfg_get(sc, "rope_type");
    if (!t) t = ld_cfg_get(sc, "type");
    if (!t) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%srope_type' is missing", where);
    if (!cJSON_IsString(t)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%srope_type' is not a string", where);
    if (strcmp(t->valuestring, "default") == 0) return LD_OK;
    if (strcmp(t->valuestring, "yarn") != 0)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%srope_type' = '%.40s' is not supported (default, yarn)",
                       where, t->valuestring);
    c->yarn = 1;
    LD_TRY(ld_cfg_num(sc, where, "factor", 1.0, 1, 0, &c->rope_factor, err));
    LD_TRY(ld_cfg_num(sc, where, "original_max_position_embeddings", 0, 1, 0, &c->rope_orig_max_pos, err));
    LD_TRY(ld_cfg_num(sc, where, "beta_fast", 32.0, 0, 1, &c->beta_fast, err));
    LD_TRY(ld_cfg_num(sc, where, "beta_slow", 1.0, 0, 1, &c->beta_slow, err));
    /* transformers: `or 32` / `or 1` */
    if (c->beta_fast == 0) c->beta_fast = 32.0;
    if (c->beta_slow == 0) c->beta_slow = 1.0;
    LD_TRY(ld_cfg_num(sc, where, "mscale", 0.0, 0, 1, &c->mscale, err));
    LD_TRY(ld_cfg_num(sc, where, "mscale_all_dim", 0.0, 0, 1, &c->mscale_all_dim, err));
    LD_TRY(ld_cfg_num(sc, where, "attention_factor", -1.0, 0, 1, &c->attention_factor, err));
    if (!ld_cfg_get(sc, "attention_factor")) c->attention_factor = -1;
    LD_TRY(ld_ds_yarn_check(c->rope_factor, c->mscale, c->mscale_all_dim, c->attention_factor, where, err));
    LD_TRY(ld_cfg_bool(sc, "", "truncate", 1, &c->yarn_truncate, err));
    if (ld_cfg_get(sc, "partial_rotary_factor"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%spartial_rotary_factor' is not supported", where);
    return LD_OK;
}

/* DeepSeek's FP8 (engine/formats/fp8_config.h) */
static ld_status parse_quant(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    ld_fp8_config f;
    LD_TRY(ld_fp8_config_parse(root, &f, err));
    c->fp8 = f.on;
    c->fp8_block[0] = f.block[0];
    c->fp8_block[1] = f.block[1];
    return LD_OK;
}

/* the widths and MLA: heads, the low-rank query and latent, the nope and
 * rope parts (the fields transformers derives must agree) */
static ld_status parse_attention(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    LD_TRY(ld_cfg_int(root, "", "vocab_size", 1, 1 << 24, -1, &c->vocab, err));
    LD_TRY(ld_cfg_int(root, "", "hidden_size", 1, 1 << 16, -1, &c->hidden, err));
    LD_TRY(ld_cfg_int(root, "", "intermediate_size", 1, 1 << 20, -1, &c->intermediate, err));
    LD_TRY(ld_cfg_int(root, "", "moe_intermediate_size", 1, 1 << 20, -1, &c->moe_intermediate, err));
    LD_TRY(ld_cfg_int(root, "", "num_hidden_layers", 1, LD_DS_MAX_LAYERS, -1, &c->n_layers, err));
    LD_TRY(ld_cfg_int(root, "", "num_attention_heads", 1, 1 << 12, -1, &c->n_heads, err));
    int nkv = 0;
    LD_TRY(ld_cfg_int(root, "", "num_key_value_heads", 1, 1 << 12, c->n_heads, &nkv, err));
    if (nkv != c->n_heads)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'num_key_value_heads' (%d) differs from 'num_attention_heads' (%d) (MLA)", nkv,
                       c->n_heads);
    LD_TRY(ld_cfg_int(root, "", "q_lora_rank", 0, 1 << 16, 0, &c->q_lora_rank, err)); /* null, 0: none */
    LD_TRY(ld_cfg_int(root, "", "kv_lora_rank", 1, 1 << 16, -1, &c->kv_lora_rank, err));
    LD_TRY(ld_cfg_int(root, "", "qk_nope_head_dim", 1, 1 << 12, -1, &c->qk_nope, err));
    LD_TRY(ld_cfg_int(root, "", "qk_rope_head_dim", 2, 1 << 12, -1, &c->qk_rope, err));
    LD_TRY(ld_cfg_int(root, "", "v_head_dim", 1, 1 << 12, -1, &c->v_head, err));
    if (c->qk_rope % 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'qk_rope_head_dim' (%d) is not even", c->qk_rope);
    int v = 0;
    /* derived fields transformers writes: must agree when present */
    LD_TRY(ld_cfg_int(root, "", "qk_head_dim", 1, 1 << 13, c->qk_nope + c->qk_rope, &v, err));
    if (v != c->qk_nope + c->qk_rope)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'qk_head_dim' (%d) is not qk_nope_head_dim + qk_rope_head_dim (%d)",
                       v, c->qk_nope + c->qk_rope);
    LD_TRY(ld_cfg_int(root, "", "head_dim", 1, 1 << 12, c->qk_rope, &v, err));
    if (v != c->qk_rope)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'head_dim' (%d) is not qk_rope_head_dim (%d)", v,
                       c->qk_rope);
    return LD_OK;
}

/* the experts and the router's groups */
static ld_status parse_moe(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    LD_TRY(ld_cfg_int(root, "", "first_k_dense_replace", 0, LD_DS_MAX_LAYERS, 0, &c->first_k_dense, err));
    LD_TRY(ld_cfg_int(root, "", "n_routed_experts", 1, LD_DS_MAX_EXPERTS, -1, &c->n_routed, err));
    LD_TRY(ld_cfg_int(root, "", "n_shared_experts", 0, 1 << 10, 0, &c->n_shared, err));
    LD_TRY(ld_cfg_int(root, "", "num_experts_per_tok", 1, LD_DS_MAX_EXPERTS, -1, &c->top_k, err));
    LD_TRY(ld_cfg_int(root, "", "n_group", 1, LD_DS_MAX_EXPERTS, 1, &c->n_group, err));
    LD_TRY(ld_cfg_int(root, "", "topk_group", 1, LD_DS_MAX_EXPERTS, 1, &c->topk_group, err));
    if (c->n_routed % c->n_group)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'n_routed_experts' (%d) is not a multiple of 'n_group' (%d)",
                       c->n_routed, c->n_group);
    if (c->n_routed / c->n_group < 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'n_group' (%d) leaves fewer than 2 experts per group (a group scores its top 2)",
                       c->n_group);
    if (c->topk_group > c->n_group)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'topk_group' (%d) exceeds 'n_group' (%d)", c->topk_group,
                       c->n_group);
    if (c->top_k > c->topk_group * (c->n_routed / c->n_group))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'num_experts_per_tok' (%d) exceeds the %d experts of 'topk_group' groups", c->top_k,
                       c->topk_group * (c->n_routed / c->n_group));
    LD_TRY(ld_cfg_bool(root, "", "norm_topk_prob", 0, &c->norm_topk_prob, err));
    double rs = 1.0;
    LD_TRY(ld_cfg_num(root, "", "routed_scaling_factor", 1.0, 0, 0, &rs, err));
    c->routed_scaling = (float)rs;
    c->score_bias = 1;
    return LD_OK;
}

static ld_status parse(const cJSON *root, ld_ds_config *c, ld_error *err)
{
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not a JSON object");
    int which = names_deepseek(root);
    if (!which)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "config names no DeepSeek-V3 or V3.2 model ('architectures' DeepseekV3ForCausalLM /"
                       " DeepseekV32ForCausalLM or 'model_type' deepseek_v3 / deepseek_v32)");
    static const char *const silu[] = {"silu", NULL}, *const sigmoid[] = {"sigmoid", NULL},
                             *const noaux[] = {"noaux_tc", NULL};
    LD_TRY(get_choice(root, "hidden_act", silu, err));
    LD_TRY(get_choice(root, "scoring_func", sigmoid, err));
    LD_TRY(get_choice(root, "topk_method", noaux, err));
    LD_TRY(parse_quant(root, c, err));
    static const char *const unsupported[] = {"attn_logit_softcapping",
                                              "final_logit_softcapping", "partial_rotary_factor"};
    for (size_t k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++)
        if (ld_cfg_get(root, unsupported[k]))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' is not supported", unsupported[k]);
    int tp = 1, freq = 1;
    LD_TRY(ld_cfg_int(root, "", "pretraining_tp", 1, 1, 1, &tp, err));
    LD_TRY(ld_cfg_int(root, "", "moe_layer_freq", 1, 1, 1, &freq, err));

    LD_TRY(parse_attention(root, c, err));
    LD_TRY(parse_moe(root, c, err));
    LD_TRY(ld_cfg_int(root, "", "max_position_embeddings", 1, 1 << 30, 1 << 30, &c->max_pos, err));
    double eps;
    LD_TRY(ld_cfg_num(root, "", "rms_norm_eps", 1e-6, 0, 0, &eps, err));
    c->rms_eps = (float)eps;
    LD_TRY(ld_cfg_bool(root, "", "tie_word_embeddings", 0, &c->tie_embeddings, err));
    LD_TRY(ld_cfg_bool(root, "", "attention_bias", 0, &c->attention_bias, err));
    LD_TRY(ld_cfg_bool(root, "", "rope_interleave", 1, &c->rope_interleave, err));
    LD_TRY(parse_rope(root, c, err));
    return which == 2 ? parse_v32(root, c, err) : LD_OK;
}

ld_status ld_ds_config_parse(const char *json, size_t len, ld_ds_config *out, ld_error *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not valid JSON");
    ld_status st = parse(root, out, err);
    cJSON_Delete(root);
    return st;
}

ld_status ld_ds_config_load(const char *path, ld_ds_config *out, ld_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    LD_TRY(ld_cfg_read_file(path, &buf, &n, err));
    ld_status st = ld_ds_config_parse(buf, n, out, err);
    free(buf);
    if (st != LD_OK && err) err->path = path;
    return st;
}

static double yarn_mscale(double scale, double m)
{
    return scale <= 1 ? 1.0 : 0.1 * m * log(scale) + 1.0;
}

static int positive_float(double v)
{
    float f = (float)v;
    return isfinite(f) && f > 0;
}

ld_status ld_ds_yarn_check(double factor, double mscale, double mscale_all_dim, double attention_factor,
                           const char *where, ld_error *err)
{
    double a = yarn_mscale(factor, mscale), b = yarn_mscale(factor, mscale_all_dim);
    if (!positive_float(a / b) || !positive_float(b * b) || (attention_factor >= 0 && !isfinite((float)attention_factor)))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config fields '%smscale' = %g, '%smscale_all_dim' = %g, '%sattention_factor' = %g with factor "
                       "%g do not give a finite attention scale",
                       where, mscale, where, mscale_all_dim, where, attention_factor, factor);
    return LD_OK;
}

static double correction_dim(double rot, int dim, double base, double orig)
{
    return (double)dim * log(orig / (rot * 2 * 3.14159265358979323846)) / (2 * log(base));
}

void ld_ds_rope_inv_freq(const ld_ds_config *c, float *inv_freq)
{
    int dim = c->qk_rope, half = dim / 2;
    float base = (float)c->rope_theta;
    if (!c->yarn) {
        for (int i = 0; i < half; i++) inv_freq[i] = 1.0f / powf(base, (float)(2 * i) / (float)dim);
        return;
    }
    /* transformers' _compute_yarn_parameters, fp32 tensors, op by op */
    double low = correction_dim(c->beta_fast, dim, c->rope_theta, c->rope_orig_max_pos);
    double high = correction_dim(c->beta_slow, dim, c->rope_theta, c->rope_orig_max_pos);
    if (c->yarn_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    float f = (float)c->rope_factor, span = (float)(high - low), lo = (float)low;
    for (int i = 0; i < half; i++) {
        float p = powf(base, (float)(2 * i) / (float)dim);
        float extra = 1.0f / p, inter = 1.0f / (f * p);
        float ramp = ((float)i - lo) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float ef = 1.0f - ramp;           /* inv_freq_extrapolation_factor */
        float a = inter * (1.0f - ef), b = extra * ef;
        inv_freq[i] = a + b;
    }
}

float ld_ds_rope_attn_factor(const ld_ds_config *c)
{
    if (!c->yarn) return 1.0f;
    if (c->attention_factor >= 0) return (float)c->attention_factor;
    if (c->mscale != 0 && c->mscale_all_dim != 0)
        return (float)(yarn_mscale(c->rope_factor, c->mscale) / yarn_mscale(c->rope_factor, c->mscale_all_dim));
    return (float)yarn_mscale(c->rope_factor, 1.0);
}

float ld_ds_softmax_scale(const ld_ds_config *c)
{
    double s = pow((double)(c->qk_nope + c->qk_rope), -0.5);
    if (c->yarn && c->mscale_all_dim != 0) {
        double m = yarn_mscale(c->rope_factor, c->mscale_all_dim);
        s = s * m * m;
    }
    return (float)s;
}
