/* ds4_config.c - see ds4_config.h. */
#include "ds4_config.h"
#include "engine/formats/config_json.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/models/deepseek_v3/ds_config.h"





/* A string field that, when present, must be `ok`. */
static ld_status get_choice(const cJSON *o, const char *k, const char *ok, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    if (!v) return LD_OK;
    if (!cJSON_IsString(v)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not a string", k);
    if (strcmp(v->valuestring, ok) == 0) return LD_OK;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' = '%.40s' is not supported (%s)", k, v->valuestring,
                   ok);
}

static int names_v4(const cJSON *root)
{
    const cJSON *ar = ld_cfg_get(root, "architectures"), *mt = ld_cfg_get(root, "model_type");
    if (cJSON_IsArray(ar) && cJSON_GetArraySize(ar) == 1 && cJSON_IsString(ar->child))
        return strcmp(ar->child->valuestring, "DeepseekV4ForCausalLM") == 0;
    return !ar && cJSON_IsString(mt) && strcmp(mt->valuestring, "deepseek_v4") == 0;
}

int ld_ds4_config_detect(const char *json, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    int r = root && cJSON_IsObject(root) && names_v4(root);
    cJSON_Delete(root);
    return r;
}

/* One rope entry (an object with rope_type, rope_theta, ...); `theta` the
 * default base; `force_af`: a yarn rope without attention_factor gets 1. */
static ld_status parse_rope_entry(const cJSON *o, const char *where, double theta, int force_af, ld_ds4_rope *r,
                                  ld_error *err)
{
    memset(r, 0, sizeof *r);
    r->attention_factor = -1;
    LD_TRY(ld_cfg_num(o, where, "rope_theta", theta, 0, 0, &r->theta, err));
    const cJSON *t = ld_cfg_get(o, "rope_type");
    if (!t) t = ld_cfg_get(o, "type");
    if (t && !cJSON_IsString(t))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%srope_type' is not a string", where);
    if (!t || strcmp(t->valuestring, "default") == 0) return LD_OK;
    if (strcmp(t->valuestring, "yarn") != 0)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "config field '%srope_type' = '%.40s' is not supported (default, yarn)", where, t->valuestring);
    r->yarn = 1;
    LD_TRY(ld_cfg_num(o, where, "factor", 1.0, 1, 0, &r->factor, err));
    LD_TRY(ld_cfg_num(o, where, "original_max_position_embeddings", 0, 1, 0, &r->orig_max_pos, err));
    LD_TRY(ld_cfg_num(o, where, "beta_fast", 32.0, 0, 1, &r->beta_fast, err));
    LD_TRY(ld_cfg_num(o, where, "beta_slow", 1.0, 0, 1, &r->beta_slow, err));
    if (r->beta_fast == 0) r->beta_fast = 32.0;
    if (r->beta_slow == 0) r->beta_slow = 1.0;
    LD_TRY(ld_cfg_num(o, where, "mscale", 0.0, 0, 1, &r->mscale, err));
    LD_TRY(ld_cfg_num(o, where, "mscale_all_dim", 0.0, 0, 1, &r->mscale_all_dim, err));
    LD_TRY(ld_cfg_num(o, where, "attention_factor", force_af ? 1.0 : -1.0, 0, 1, &r->attention_factor, err));
    LD_TRY(ld_ds_yarn_check(r->factor, r->mscale, r->mscale_all_dim, r->attention_factor, where, err));
    return ld_cfg_bool(o, where, "truncate", 1, &r->truncate, err);
}

/* partial_rotary_factor of a rope entry, when present, must give rope_dim */
static ld_status check_prf(const cJSON *o, const char *where, const ld_ds4_config *c, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, "partial_rotary_factor");
    if (!v) return LD_OK;
    /* the product range-checked before it becomes an int (the fuzzer's
     * 1e45: a conversion out of range is undefined) */
    double dim = cJSON_IsNumber(v) ? c->head_dim * v->valuedouble : -1.0;
    if (!(dim > -1.0 && dim < (double)INT_MAX) || (int)dim != c->rope_dim)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field '%spartial_rotary_factor' does not give the rope dim %d of head_dim %d", where,
                       c->rope_dim, c->head_dim);
    return LD_OK;
}

static ld_status parse_rope(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    double theta = 10000.0, ctheta = 160000.0;
    LD_TRY(ld_cfg_num(root, "", "rope_theta", 10000.0, 0, 0, &theta, err));
    LD_TRY(ld_cfg_num(root, "", "compress_rope_theta", 160000.0, 0, 0, &ctheta, err));
    const cJSON *rp = ld_cfg_get(root, "rope_parameters");
    if (!rp) rp = ld_cfg_get(root, "rope_scaling");
    if (rp && !cJSON_IsObject(rp))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_parameters' is not an object");
    const cJSON *m = rp ? ld_cfg_get(rp, "main") : NULL, *k = rp ? ld_cfg_get(rp, "compress") : NULL;
    if (cJSON_IsObject(m) && cJSON_IsObject(k)) {
        LD_TRY(parse_rope_entry(m, "rope_parameters.main.", theta, 0, &c->rope_main, err));
        LD_TRY(parse_rope_entry(k, "rope_parameters.compress.", ctheta, 0, &c->rope_compress, err));
        LD_TRY(check_prf(m, "rope_parameters.main.", c, err));
        return check_prf(k, "rope_parameters.compress.", c, err);
    }
    if ((m && !cJSON_IsObject(m)) || (k && !cJSON_IsObject(k)) || (!m) != (!k))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_parameters' has not both 'main' and 'compress' objects");
    /* flat: main = default rope of rope_theta; compress = the flat dict
     * with compress_rope_theta (transformers' __post_init__) */
    memset(&c->rope_main, 0, sizeof c->rope_main);
    c->rope_main.theta = theta;
    c->rope_main.attention_factor = -1;
    if (!rp) {
        c->rope_compress = c->rope_main;
        c->rope_compress.theta = ctheta;
        return LD_OK;
    }
    cJSON *flat = cJSON_Duplicate(rp, 1);
    if (!flat) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    cJSON_DeleteItemFromObjectCaseSensitive(flat, "rope_theta");
    ld_status st = parse_rope_entry(flat, "rope_parameters.", ctheta, 1, &c->rope_compress, err);
    if (st == LD_OK) st = check_prf(flat, "rope_parameters.", c, err);
    cJSON_Delete(flat);
    return st;
}

/* DeepSeek's FP8 / FP4: quantization_config {"quant_method": "fp8",
 * "fmt": "e4m3", "activation_scheme": "dynamic", "scale_fmt": "ue8m0" |
 * "float", "weight_block_size": [b0, b1], "expert_dtype": "fp4" | "fp8"},
 * expert_dtype also at the top level (V4) */
static ld_status parse_quant(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    const cJSON *q = ld_cfg_get(root, "quantization_config"), *ed = ld_cfg_get(root, "expert_dtype");
    if (q && !cJSON_IsObject(q))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config' is not an object");
    if (!q) {
        if (ed) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'expert_dtype' without a quantization_config");
        return LD_OK;
    }
    if (!ld_cfg_get(q, "quant_method"))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'quantization_config.quant_method' is missing");
    static const struct {
        const char *key, *ok1, *ok2;
    } fields[] = {{"quant_method", "fp8", NULL},
                  {"fmt", "e4m3", NULL},
                  {"activation_scheme", "dynamic", NULL},
                  {"scale_fmt", "ue8m0", "float"},
                  {"expert_dtype", "fp4", "fp8"}};
    for (const cJSON *e = q->child; e; e = e->next) {
        size_t i;
        for (i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (strcmp(e->string, fields[i].key) == 0) break;
        if (i < sizeof fields / sizeof fields[0]) {
            if (!cJSON_IsString(e) || (strcmp(e->valuestring, fields[i].ok1) != 0 &&
                                       (!fields[i].ok2 || strcmp(e->valuestring, fields[i].ok2) != 0)))
                return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                               "config field 'quantization_config.%s' = '%.40s' is not supported (%s%s%s)", e->string,
                               cJSON_IsString(e) ? e->valuestring : "?", fields[i].ok1, fields[i].ok2 ? ", " : "",
                               fields[i].ok2 ? fields[i].ok2 : "");
        } else if (strcmp(e->string, "weight_block_size") != 0) {
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'quantization_config.%.60s' is not supported",
                           e->string);
        }
    }
    const cJSON *b = ld_cfg_get(q, "weight_block_size");
    c->fp8_block[0] = c->fp8_block[1] = 128;
    if (b) {
        if (!cJSON_IsArray(b) || cJSON_GetArraySize(b) != 2)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                           "config field 'quantization_config.weight_block_size' is not a list of 2 integers");
        int k = 0;
        for (const cJSON *e = b->child; e; e = e->next, k++) {
            if (!cJSON_IsNumber(e) || floor(e->valuedouble) != e->valuedouble || e->valuedouble < 1 ||
                e->valuedouble > 1 << 16)
                return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                               "config field 'quantization_config.weight_block_size' is not a list of 2 integers in [1, 65536]");
            c->fp8_block[k] = (int)e->valuedouble;
        }
    }
    const cJSON *qe = ld_cfg_get(q, "expert_dtype");
    if (ed && (!cJSON_IsString(ed) || (strcmp(ed->valuestring, "fp4") && strcmp(ed->valuestring, "fp8"))))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'expert_dtype' = '%.40s' is not supported (fp4, fp8)",
                       cJSON_IsString(ed) ? ed->valuestring : "?");
    if (ed && qe && strcmp(ed->valuestring, qe->valuestring))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'expert_dtype' differs from 'quantization_config.expert_dtype'");
    if (!qe) qe = ed;
    c->quant = 1;
    c->expert_fp4 = qe && strcmp(qe->valuestring, "fp4") == 0;
    return LD_OK;
}

static const char *const attn_names[] = {"sliding_attention", "compressed_sparse_attention",
                                         "heavily_compressed_attention"};

static ld_status parse_layers(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    int n = c->n_layers;
    const cJSON *lt = ld_cfg_get(root, "layer_types"), *cr = ld_cfg_get(root, "compress_ratios");
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) < n)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'layer_types' is not a list of %d layer types", n);
        int i = 0;
        for (const cJSON *e = lt->child; e && i < n; e = e->next, i++) {
            int t = -1;
            for (int k = 0; k < 3 && cJSON_IsString(e); k++)
                if (strcmp(e->valuestring, attn_names[k]) == 0) t = k;
            if (t < 0)
                return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                               "config field 'layer_types[%d]' = '%.40s' is not a DeepSeek-V4 layer type (%s, %s, %s)",
                               i, cJSON_IsString(e) ? e->valuestring : "?", attn_names[0], attn_names[1],
                               attn_names[2]);
            c->layer_type[i] = (unsigned char)t;
        }
    } else if (cr) {
        if (!cJSON_IsArray(cr) || cJSON_GetArraySize(cr) < n)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'compress_ratios' is not a list of %d ratios", n);
        int i = 0;
        for (const cJSON *e = cr->child; e && i < n; e = e->next, i++) {
            int v = cJSON_IsNumber(e) ? (int)e->valuedouble : -1;
            if (v != 0 && v != 4 && v != 128)
                return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'compress_ratios[%d]' is not 0, 4 or 128", i);
            c->layer_type[i] = (unsigned char)(v == 0 ? LD_DS4_SLIDING : v == 4 ? LD_DS4_CSA : LD_DS4_HCA);
        }
    } else { /* transformers' default: 2 x HCA, then HCA / CSA alternating */
        for (int i = 0; i < n; i++)
            c->layer_type[i] = (unsigned char)(i < 2 ? LD_DS4_HCA : ((i - 2) % 2 ? LD_DS4_CSA : LD_DS4_HCA));
    }
    const cJSON *mt = ld_cfg_get(root, "mlp_layer_types");
    if (mt) {
        if (!cJSON_IsArray(mt) || cJSON_GetArraySize(mt) < n)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'mlp_layer_types' is not a list of %d layer types", n);
        int i = 0;
        for (const cJSON *e = mt->child; e && i < n; e = e->next, i++) {
            if (cJSON_IsString(e) && strcmp(e->valuestring, "moe") == 0) c->mlp_type[i] = LD_DS4_MOE;
            else if (cJSON_IsString(e) && strcmp(e->valuestring, "hash_moe") == 0) c->mlp_type[i] = LD_DS4_HASH;
            else
                return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                               "config field 'mlp_layer_types[%d]' = '%.40s' is not a DeepSeek-V4 MLP type (hash_moe, moe)",
                               i, cJSON_IsString(e) ? e->valuestring : "?");
        }
    } else {
        int nh = 3;
        LD_TRY(ld_cfg_int(root, "", "num_hash_layers", 0, LD_DS4_MAX_LAYERS, 3, &nh, err));
        for (int i = 0; i < n; i++) c->mlp_type[i] = (unsigned char)(i < nh ? LD_DS4_HASH : LD_DS4_MOE);
    }
    /* compress_rates {type: ratio}, legacy compress_rate_csa / _hca */
    c->ratio_csa = 4;
    c->ratio_hca = 128;
    const cJSON *rates = ld_cfg_get(root, "compress_rates");
    if (rates) {
        if (!cJSON_IsObject(rates)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'compress_rates' is not an object");
        for (const cJSON *e = rates->child; e; e = e->next)
            if (strcmp(e->string, attn_names[1]) && strcmp(e->string, attn_names[2]))
                return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'compress_rates.%.60s' is not a compressed layer type",
                               e->string);
        LD_TRY(ld_cfg_int(rates, "compress_rates.", attn_names[1], 1, 1 << 16, 4, &c->ratio_csa, err));
        LD_TRY(ld_cfg_int(rates, "compress_rates.", attn_names[2], 1, 1 << 16, 128, &c->ratio_hca, err));
    }
    LD_TRY(ld_cfg_int(root, "", "compress_rate_csa", 1, 1 << 16, c->ratio_csa, &c->ratio_csa, err));
    return ld_cfg_int(root, "", "compress_rate_hca", 1, 1 << 16, c->ratio_hca, &c->ratio_hca, err);
}

/* what the config may ask for that logdiff does not run (biases, soft-capping) */
static ld_status refuse_unsupported(const cJSON *root, ld_error *err)
{
    static const char *const unsupported[] = {"attn_logit_softcapping", "final_logit_softcapping"};
    for (size_t k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++)
        if (ld_cfg_get(root, unsupported[k]))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' is not supported", unsupported[k]);
    int b = 0;
    LD_TRY(ld_cfg_bool(root, "", "attention_bias", 0, &b, err));
    if (b) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'attention_bias' = true is not supported");
    LD_TRY(ld_cfg_bool(root, "", "mlp_bias", 0, &b, err));
    if (b) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'mlp_bias' = true is not supported");
    double jitter = 0;
    LD_TRY(ld_cfg_num(root, "", "router_jitter_noise", 0.0, 0, 1, &jitter, err)); /* training only */
    return LD_OK;
}

/* the widths and the attention: heads, the low-rank query, the RoPE dim, the
 * output groups, the window */
static ld_status parse_attention(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    LD_TRY(ld_cfg_int(root, "", "vocab_size", 1, 1 << 24, -1, &c->vocab, err));
    LD_TRY(ld_cfg_int(root, "", "hidden_size", 1, 1 << 16, -1, &c->hidden, err));
    LD_TRY(ld_cfg_int(root, "", "num_hidden_layers", 1, LD_DS4_MAX_LAYERS, -1, &c->n_layers, err));
    LD_TRY(ld_cfg_int(root, "", "num_attention_heads", 1, 1 << 12, -1, &c->n_heads, err));
    int nkv = 1;
    LD_TRY(ld_cfg_int(root, "", "num_key_value_heads", 1, 1 << 12, 1, &nkv, err));
    if (nkv != 1)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "config field 'num_key_value_heads' = %d is not supported (V4's shared-KV MQA has 1)", nkv);
    LD_TRY(ld_cfg_int(root, "", "head_dim", 2, 1 << 12, -1, &c->head_dim, err));
    LD_TRY(ld_cfg_int(root, "", "q_lora_rank", 1, 1 << 16, -1, &c->q_lora_rank, err));
    /* rope dim: qk_rope_head_dim (legacy, and written back by transformers)
     * or head_dim * partial_rotary_factor (default 1/8) */
    const cJSON *prf = ld_cfg_get(root, "partial_rotary_factor");
    if (prf && (!cJSON_IsNumber(prf) || !(prf->valuedouble > 0) || prf->valuedouble > 1))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'partial_rotary_factor' is not a number in (0, 1]");
    int rd = prf ? (int)(c->head_dim * prf->valuedouble) : -1;
    LD_TRY(ld_cfg_int(root, "", "qk_rope_head_dim", 2, c->head_dim, rd > 0 ? rd : c->head_dim / 8, &c->rope_dim, err));
    if (rd >= 0 && rd != c->rope_dim)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'qk_rope_head_dim' (%d) is not head_dim * partial_rotary_factor (%d)", c->rope_dim,
                       rd);
    if (c->rope_dim < 2 || c->rope_dim % 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'qk_rope_head_dim' (%d) is not even and >= 2", c->rope_dim);
    LD_TRY(ld_cfg_int(root, "", "o_groups", 1, 1 << 10, 8, &c->o_groups, err));
    LD_TRY(ld_cfg_int(root, "", "o_lora_rank", 1, 1 << 16, 1024, &c->o_lora_rank, err));
    if ((c->n_heads * c->head_dim) % c->o_groups)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0,
                       "config field 'o_groups' (%d) does not divide num_attention_heads * head_dim (%d)", c->o_groups,
                       c->n_heads * c->head_dim);
    LD_TRY(ld_cfg_int(root, "", "sliding_window", 1, 1 << 24, 128, &c->sliding_window, err));
    return LD_OK;
}

/* the experts and the router */
static ld_status parse_moe(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    LD_TRY(ld_cfg_int(root, "", "moe_intermediate_size", 1, 1 << 20, 2048, &c->moe_intermediate, err));
    LD_TRY(ld_cfg_int(root, "", "n_routed_experts", 1, LD_DS4_MAX_EXPERTS, 256, &c->n_routed, err));
    LD_TRY(ld_cfg_int(root, "", "num_experts_per_tok", 1, LD_DS4_MAX_EXPERTS, 6, &c->top_k, err));
    if (c->top_k > c->n_routed)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'num_experts_per_tok' (%d) exceeds 'n_routed_experts' (%d)",
                       c->top_k, c->n_routed);
    int ns = 1;
    LD_TRY(ld_cfg_int(root, "", "n_shared_experts", 0, 1 << 10, 1, &ns, err));
    if (ns != 1) /* transformers builds one shared MLP of moe_intermediate_size whatever the value */
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'n_shared_experts' = %d is not supported (1)", ns);
    LD_TRY(ld_cfg_bool(root, "", "norm_topk_prob", 1, &c->norm_topk_prob, err));
    if (!c->norm_topk_prob) /* transformers normalises whatever it says */
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'norm_topk_prob' = false is not supported");
    double v = 0;
    LD_TRY(ld_cfg_num(root, "", "routed_scaling_factor", 1.5, 0, 0, &v, err));
    c->routed_scaling = (float)v;
    LD_TRY(ld_cfg_num(root, "", "swiglu_limit", 10.0, 0, 0, &v, err));
    c->swiglu_limit = (float)v;
    return LD_OK;
}

static ld_status parse(const cJSON *root, ld_ds4_config *c, ld_error *err)
{
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not a JSON object");
    if (!names_v4(root))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "config names no DeepSeek-V4 model ('architectures' DeepseekV4ForCausalLM or 'model_type' deepseek_v4)");
    LD_TRY(get_choice(root, "hidden_act", "silu", err));
    LD_TRY(get_choice(root, "scoring_func", "sqrtsoftplus", err));
    LD_TRY(parse_quant(root, c, err));
    LD_TRY(refuse_unsupported(root, err));
    LD_TRY(parse_attention(root, c, err));
    LD_TRY(parse_moe(root, c, err));
    double v = 0;
    LD_TRY(ld_cfg_int(root, "", "hc_mult", 1, LD_DS4_MAX_HC, 4, &c->hc_mult, err));
    LD_TRY(ld_cfg_int(root, "", "hc_sinkhorn_iters", 0, 1 << 10, 20, &c->hc_sinkhorn_iters, err));
    LD_TRY(ld_cfg_num(root, "", "hc_eps", 1e-6, 0, 1, &v, err));
    c->hc_eps = (float)v;
    LD_TRY(ld_cfg_num(root, "", "rms_norm_eps", 1e-6, 0, 0, &v, err));
    c->rms_eps = (float)v;

    LD_TRY(ld_cfg_int(root, "", "index_n_heads", 1, 1 << 12, 64, &c->index_n_heads, err));
    LD_TRY(ld_cfg_int(root, "", "index_head_dim", 1, 1 << 12, 128, &c->index_head_dim, err));
    LD_TRY(ld_cfg_int(root, "", "index_topk", 1, 1 << 24, 512, &c->index_topk, err));
    LD_TRY(ld_cfg_int(root, "", "max_position_embeddings", 1, 1 << 30, 1048576, &c->max_pos, err));
    LD_TRY(ld_cfg_bool(root, "", "tie_word_embeddings", 0, &c->tie_embeddings, err));
    int mtp = 0;
    LD_TRY(ld_cfg_int(root, "", "num_nextn_predict_layers", 0, 1 << 10, 1, &mtp, err)); /* not run */
    LD_TRY(parse_layers(root, c, err));
    int any_csa = 0;
    for (int i = 0; i < c->n_layers; i++) any_csa |= c->layer_type[i] == LD_DS4_CSA;
    if (any_csa && c->index_head_dim < c->rope_dim)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'index_head_dim' (%d) is below the rope dim %d",
                       c->index_head_dim, c->rope_dim);
    LD_TRY(parse_rope(root, c, err));
    c->use_sinks = c->use_hash = c->use_compressed = c->use_score_bias = 1;
    return LD_OK;
}

ld_status ld_ds4_config_parse(const char *json, size_t len, ld_ds4_config *out, ld_error *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not valid JSON");
    ld_status st = parse(root, out, err);
    cJSON_Delete(root);
    return st;
}

ld_status ld_ds4_config_load(const char *path, ld_ds4_config *out, ld_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    LD_TRY(ld_cfg_read_file(path, &buf, &n, err));
    ld_status st = ld_ds4_config_parse(buf, n, out, err);
    free(buf);
    if (st != LD_OK && err) err->path = path;
    return st;
}

void ld_ds4_rope_inv_freq(const ld_ds4_config *c, const ld_ds4_rope *r, float *inv_freq, float *attn_factor)
{
    /* transformers' default and yarn rope over rope_dim dims: the V3
     * config's functions compute exactly these from the same fields */
    ld_ds_config v3;
    memset(&v3, 0, sizeof v3);
    v3.qk_rope = c->rope_dim;
    v3.rope_theta = r->theta;
    v3.yarn = r->yarn;
    v3.rope_factor = r->factor;
    v3.rope_orig_max_pos = r->orig_max_pos;
    v3.beta_fast = r->beta_fast;
    v3.beta_slow = r->beta_slow;
    v3.mscale = r->mscale;
    v3.mscale_all_dim = r->mscale_all_dim;
    v3.attention_factor = r->attention_factor;
    v3.yarn_truncate = r->truncate;
    ld_ds_rope_inv_freq(&v3, inv_freq);
    *attn_factor = ld_ds_rope_attn_factor(&v3);
}
