/* model_config.c - see model_config.h. */
#include "model_config.h"
#include "engine/formats/config_json.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *cls, *type;
    ld_arch arch;
} archs[] = {
    {"LlamaForCausalLM", "llama", LD_ARCH_LLAMA},
    {"Qwen2ForCausalLM", "qwen2", LD_ARCH_QWEN2},
    {"Qwen3ForCausalLM", "qwen3", LD_ARCH_QWEN3},
    {"MistralForCausalLM", "mistral", LD_ARCH_MISTRAL},
};

const char *ld_arch_name(ld_arch a)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (archs[i].arch == a) return archs[i].cls;
    return "?";
}





/* A finite number >= 0 (or null: *present = 0). */
static ld_status get_opt_num(const cJSON *o, const char *where, const char *k, int *present, double *out, ld_error *err)
{
    const cJSON *v = ld_cfg_get(o, k);
    *present = 0;
    if (!v) return LD_OK;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is not a non-negative number", where, k);
    *present = 1;
    *out = v->valuedouble;
    return LD_OK;
}

/* transformers' get_mscale */
static double yarn_mscale(double scale, double mscale)
{
    return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

/* rope_type "yarn" as transformers 5.23's _compute_yarn_parameters reads
 * it: factor (null: max_position_embeddings / original), the top-level
 * original_max_position_embeddings first, else the scaling's, else
 * max_position_embeddings; beta_fast / beta_slow (absent, null or 0: 32 /
 * 1); truncate (default true; null is false); attention_factor, else from
 * mscale and mscale_all_dim when both are non-zero, else from the factor. */
static ld_status parse_yarn(const cJSON *root, const cJSON *sc, const char *where, ld_model_config *c, ld_error *err)
{
    c->rope_type = LD_ROPE_YARN;
    int has = 0;
    if (c->rope_theta == 1.0) /* log(base) divides: transformers fails too */
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_theta' is 1 (%srope_type yarn needs a base above 1)", where);
    const cJSON *top = ld_cfg_get(root, "original_max_position_embeddings");
    if (top) LD_TRY(ld_cfg_num(root, "", "original_max_position_embeddings", 0, 1, 0, &c->rope_orig_max_pos, err));
    else if (ld_cfg_get(sc, "original_max_position_embeddings"))
        LD_TRY(ld_cfg_num(sc, where, "original_max_position_embeddings", 0, 1, 0, &c->rope_orig_max_pos, err));
    else if (ld_cfg_get(root, "max_position_embeddings")) c->rope_orig_max_pos = c->max_pos;
    else return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%soriginal_max_position_embeddings' is missing", where);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(sc, "factor");
    if (!f) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%sfactor' is missing", where);
    if (cJSON_IsNull(f)) {
        if (!ld_cfg_get(root, "max_position_embeddings"))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%sfactor' is null and 'max_position_embeddings' is missing", where);
        c->rope_factor = (double)c->max_pos / c->rope_orig_max_pos;
    } else {
        LD_TRY(ld_cfg_num(sc, where, "factor", 1.0, 1, 0, &c->rope_factor, err));
    }
    c->rope_beta_fast = 32;
    c->rope_beta_slow = 1;
    double v = 0;
    LD_TRY(get_opt_num(sc, where, "beta_fast", &has, &v, err));
    if (has && v != 0) c->rope_beta_fast = v;
    LD_TRY(get_opt_num(sc, where, "beta_slow", &has, &v, err));
    if (has && v != 0) c->rope_beta_slow = v;
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(sc, "truncate");
    c->rope_truncate = 1;
    if (tr && cJSON_IsNull(tr)) c->rope_truncate = 0;
    else if (tr && !cJSON_IsBool(tr)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%struncate' is not a boolean", where);
    else if (tr) c->rope_truncate = cJSON_IsTrue(tr);
    const cJSON *af = ld_cfg_get(sc, "attention_factor");
    if (af) {
        if (!cJSON_IsNumber(af) || !isfinite(af->valuedouble) || af->valuedouble <= 0)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%sattention_factor' is not a positive number", where);
        c->rope_attn_factor = af->valuedouble;
    } else {
        double ms = 0, msa = 0;
        int has_ms = 0, has_msa = 0;
        LD_TRY(get_opt_num(sc, where, "mscale", &has_ms, &ms, err));
        LD_TRY(get_opt_num(sc, where, "mscale_all_dim", &has_msa, &msa, err));
        if (has_ms && has_msa && ms != 0 && msa != 0)
            c->rope_attn_factor = yarn_mscale(c->rope_factor, ms) / yarn_mscale(c->rope_factor, msa);
        else
            c->rope_attn_factor = yarn_mscale(c->rope_factor, 1.0);
    }
    return LD_OK;
}

static ld_status parse_rope(const cJSON *root, ld_model_config *c, ld_error *err)
{
    /* transformers 5: rope_parameters {rope_type, rope_theta, ...};
     * transformers 4: rope_theta + rope_scaling {rope_type|type, ...} */
    const cJSON *rp = ld_cfg_get(root, "rope_parameters");
    const char *where = "rope_parameters.";
    const cJSON *sc = rp;
    if (rp && !cJSON_IsObject(rp))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'rope_parameters' is not an object (per-layer-type RoPE is not supported)");
    if (rp && ld_cfg_get(rp, "full_attention"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'rope_parameters' per layer type is not supported");
    if (!rp) {
        where = "rope_scaling.";
        sc = ld_cfg_get(root, "rope_scaling");
        if (sc && !cJSON_IsObject(sc)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_scaling' is not an object");
    }
    double theta = 10000.0;
    LD_TRY(ld_cfg_num(rp ? rp : root, rp ? where : "", "rope_theta", 10000.0, 0, 0, &theta, err));
    c->rope_theta = theta;
    c->rope_type = LD_ROPE_DEFAULT;
    c->rope_attn_factor = 1.0;
    if (!sc) return LD_OK;
    const cJSON *t = ld_cfg_get(sc, "rope_type");
    if (!t) t = ld_cfg_get(sc, "type");
    const char *ty = cJSON_IsString(t) ? t->valuestring : NULL;
    if (!ty) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%srope_type' is missing", where);
    if (strcmp(ty, "default") == 0) return LD_OK;
    if (strcmp(ty, "linear") == 0) {
        c->rope_type = LD_ROPE_LINEAR;
        return ld_cfg_num(sc, where, "factor", 1.0, 1, 0, &c->rope_factor, err);
    }
    if (strcmp(ty, "llama3") == 0) {
        c->rope_type = LD_ROPE_LLAMA3;
        LD_TRY(ld_cfg_num(sc, where, "factor", 1.0, 1, 0, &c->rope_factor, err));
        LD_TRY(ld_cfg_num(sc, where, "low_freq_factor", 1.0, 1, 0, &c->rope_low_freq_factor, err));
        LD_TRY(ld_cfg_num(sc, where, "high_freq_factor", 1.0, 1, 0, &c->rope_high_freq_factor, err));
        LD_TRY(ld_cfg_num(sc, where, "original_max_position_embeddings", 1.0, 1, 0, &c->rope_orig_max_pos, err));
        if (c->rope_high_freq_factor == c->rope_low_freq_factor)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config fields '%slow_freq_factor' and 'high_freq_factor' are equal", where);
        return LD_OK;
    }
    if (strcmp(ty, "yarn") == 0) return parse_yarn(root, sc, where, c, err);
    if (strcmp(ty, "dynamic") == 0) {
        /* SGLang's DynamicNTKScalingRotaryEmbedding: one base for the whole
         * context max_position_embeddings * factor (transformers instead
         * recomputes it from each forward call's length) */
        c->rope_type = LD_ROPE_DYNAMIC;
        LD_TRY(ld_cfg_num(sc, where, "factor", 1.0, 1, 0, &c->rope_factor, err));
        if (!ld_cfg_get(root, "max_position_embeddings"))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'max_position_embeddings' is missing (needed by %srope_type 'dynamic')", where);
        if (c->head_dim <= 2)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%srope_type' 'dynamic' needs a head dim above 2", where);
        double ctx = floor((double)c->max_pos * c->rope_factor);
        if (!(ctx >= 1 && ctx <= (double)(1 << 30)))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config fields 'max_position_embeddings' * '%sfactor' = %g is outside [1, 2^30]", where, ctx);
        c->rope_orig_max_pos = c->max_pos;
        c->max_pos = (int)ctx;
        return LD_OK;
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%srope_type' = '%.40s' is not supported (default, linear, llama3, yarn, dynamic)", where, ty);
}

static ld_status parse_windows(const cJSON *root, ld_model_config *c, ld_error *err)
{
    int sw = 0;
    LD_TRY(ld_cfg_int(root, "", "sliding_window", 0, 1L << 30, 0, &sw, err));
    const cJSON *lt = ld_cfg_get(root, "layer_types");
    if (lt) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'layer_types' is not a list of %d strings", c->n_layers);
        int l = 0;
        for (const cJSON *e = lt->child; e; e = e->next, l++) {
            const char *s = cJSON_IsString(e) ? e->valuestring : "";
            if (strcmp(s, "full_attention") == 0) c->window[l] = 0;
            else if (strcmp(s, "sliding_attention") == 0) {
                if (!sw) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'layer_types' names sliding_attention but 'sliding_window' is not set");
                c->window[l] = sw;
            } else return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'layer_types[%d]' = '%.40s' is not supported", l, s);
        }
        return LD_OK;
    }
    if (!sw) return LD_OK;
    if (c->arch == LD_ARCH_MISTRAL) {
        for (int l = 0; l < c->n_layers; l++) c->window[l] = sw;
        return LD_OK;
    }
    if (c->arch == LD_ARCH_QWEN2 || c->arch == LD_ARCH_QWEN3) {
        int use = 0, mwl = 0;
        LD_TRY(ld_cfg_bool(root, "", "use_sliding_window", 0, &use, err));
        LD_TRY(ld_cfg_int(root, "", "max_window_layers", 0, 1L << 30, c->n_layers, &mwl, err));
        if (use)
            for (int l = mwl; l < c->n_layers; l++) c->window[l] = sw;
        return LD_OK;
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'sliding_window' is not supported for %s", c->arch_name);
}

static ld_status parse(const cJSON *root, ld_model_config *c, ld_error *err)
{
    memset(c, 0, sizeof *c);
    if (!cJSON_IsObject(root)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not a JSON object");
    const cJSON *ar = ld_cfg_get(root, "architectures");
    const cJSON *mt = ld_cfg_get(root, "model_type");
    const char *name = NULL;
    if (cJSON_IsArray(ar) && cJSON_GetArraySize(ar) == 1 && cJSON_IsString(ar->child))
        name = ar->child->valuestring;
    else if (ar)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'architectures' must name exactly one architecture");
    else if (cJSON_IsString(mt))
        name = mt->valuestring;
    if (!name) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config has neither 'architectures' nor 'model_type'");
    size_t i;
    for (i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (strcmp(name, archs[i].cls) == 0 || strcmp(name, archs[i].type) == 0) break;
    if (i == sizeof archs / sizeof archs[0])
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "architecture '%.60s' is not supported (Llama, Qwen2, Qwen3, Mistral)", name);
    c->arch = archs[i].arch;
    snprintf(c->arch_name, sizeof c->arch_name, "%s", archs[i].cls);

    const cJSON *act = ld_cfg_get(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'hidden_act' = '%.40s' is not supported (silu)",
                       cJSON_IsString(act) ? act->valuestring : "?");
    static const char *const unsupported[] = {
        "attn_logit_softcapping", "final_logit_softcapping",
        "partial_rotary_factor"};
    for (size_t k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++)
        if (ld_cfg_get(root, unsupported[k]))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' is not supported", unsupported[k]);
    int tp = 1;
    LD_TRY(ld_cfg_int(root, "", "pretraining_tp", 1, 1, 1, &tp, err));

    LD_TRY(ld_cfg_int(root, "", "vocab_size", 1, 1 << 24, -1, &c->vocab, err));
    LD_TRY(ld_cfg_int(root, "", "hidden_size", 1, 1 << 16, -1, &c->hidden, err));
    LD_TRY(ld_cfg_int(root, "", "intermediate_size", 1, 1 << 20, -1, &c->intermediate, err));
    LD_TRY(ld_cfg_int(root, "", "num_hidden_layers", 1, LD_MODEL_MAX_LAYERS, -1, &c->n_layers, err));
    LD_TRY(ld_cfg_int(root, "", "num_attention_heads", 1, 1 << 12, -1, &c->n_heads, err));
    LD_TRY(ld_cfg_int(root, "", "num_key_value_heads", 1, 1 << 12, c->n_heads, &c->n_kv_heads, err));
    if (c->n_heads % c->n_kv_heads)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'num_attention_heads' (%d) is not a multiple of 'num_key_value_heads' (%d)",
                       c->n_heads, c->n_kv_heads);
    LD_TRY(ld_cfg_int(root, "", "head_dim", 2, 1 << 12, c->hidden / c->n_heads, &c->head_dim, err));
    if (c->head_dim < 2 || c->head_dim % 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'head_dim' (%d) is not a positive even number", c->head_dim);
    LD_TRY(ld_cfg_int(root, "", "max_position_embeddings", 1, 1 << 30, 1 << 30, &c->max_pos, err));
    double eps;
    LD_TRY(ld_cfg_num(root, "", "rms_norm_eps", 1e-6, 0, 0, &eps, err));
    c->rms_eps = (float)eps;
    LD_TRY(ld_cfg_bool(root, "", "tie_word_embeddings", 0, &c->tie_embeddings, err));
    int ab = 0;
    LD_TRY(ld_cfg_bool(root, "", "attention_bias", 0, &ab, err));
    LD_TRY(ld_cfg_bool(root, "", "mlp_bias", 0, &c->mlp_bias, err));
    c->qkv_bias = ab || c->arch == LD_ARCH_QWEN2;
    c->o_bias = ab && c->arch != LD_ARCH_QWEN2;
    c->qk_norm = c->arch == LD_ARCH_QWEN3;
    LD_TRY(parse_rope(root, c, err));
    LD_TRY(ld_fp8_config_parse(root, &c->fp8, err));
    return parse_windows(root, c, err);
}

ld_status ld_model_config_parse(const char *json, size_t len, ld_model_config *out, ld_error *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config is not valid JSON");
    ld_status st = parse(root, out, err);
    cJSON_Delete(root);
    return st;
}

ld_status ld_model_config_load(const char *path, ld_model_config *out, ld_error *err)
{
    char *buf = NULL;
    size_t n = 0;
    LD_TRY(ld_cfg_read_file(path, &buf, &n, err));
    ld_status st = ld_model_config_parse(buf, n, out, err);
    free(buf);
    if (st != LD_OK && err) err->path = path;
    return st;
}

/* transformers' find_correction_dim (double, as Python) */
static double yarn_corr_dim(double rot, int dim, double base, double orig)
{
    return ((double)dim * log(orig / (rot * 2 * 3.14159265358979323846))) / (2 * log(base));
}

/* _compute_yarn_parameters: the blend in fp32 as torch computes it (the
 * Python scalars rounded to fp32 where they meet a float32 tensor). */
static void yarn_inv_freq(const ld_model_config *c, float *inv_freq)
{
    int half = c->head_dim / 2, dim = c->head_dim;
    double low = yarn_corr_dim(c->rope_beta_fast, dim, c->rope_theta, c->rope_orig_max_pos);
    double high = yarn_corr_dim(c->rope_beta_slow, dim, c->rope_theta, c->rope_orig_max_pos);
    if (c->rope_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    if (low < 0) low = 0;
    if (high > dim - 1) high = dim - 1;
    if (low == high) high += 0.001;
    float lo = (float)low, span = (float)(high - low), factor = (float)c->rope_factor;
    float base = (float)c->rope_theta;
    for (int i = 0; i < half; i++) {
        float pos_freq = powf(base, (float)(2 * i) / (float)dim);
        float extra = 1.0f / pos_freq;
        float inter = 1.0f / (factor * pos_freq);
        float ramp = ((float)i - lo) / span;
        ramp = ramp < 0.0f ? 0.0f : ramp > 1.0f ? 1.0f : ramp;
        float ef = 1.0f - ramp; /* inv_freq_extrapolation_factor */
        float a = inter * (1.0f - ef), b = extra * ef;
        inv_freq[i] = a + b;
    }
}

double ld_model_rope_qk_scale(const ld_model_config *c)
{
    double a = c->rope_attn_factor > 0 ? c->rope_attn_factor : 1.0;
    return a * a;
}

void ld_model_rope_inv_freq(const ld_model_config *c, float *inv_freq)
{
    int half = c->head_dim / 2;
    float base = (float)c->rope_theta;
    if (c->rope_type == LD_ROPE_DYNAMIC) {
        /* SGLang: max_len = max_position_embeddings * factor, base' = base *
         * (factor * max_len / max_position_embeddings - (factor - 1)) **
         * (rotary_dim / (rotary_dim - 2)), in double (Python floats) */
        double f = c->rope_factor, mp = c->rope_orig_max_pos, max_len = mp * f;
        double b = c->rope_theta * pow(f * max_len / mp - (f - 1), (double)c->head_dim / (double)(c->head_dim - 2));
        base = (float)b;
    }
    if (c->rope_type == LD_ROPE_YARN) {
        yarn_inv_freq(c, inv_freq);
    } else {
        for (int i = 0; i < half; i++) {
            float e = (float)(2 * i) / (float)c->head_dim;
            inv_freq[i] = 1.0f / powf(base, e);
        }
    }
    if (c->rope_type == LD_ROPE_LINEAR) {
        for (int i = 0; i < half; i++) inv_freq[i] /= (float)c->rope_factor;
    } else if (c->rope_type == LD_ROPE_LLAMA3) {
        float factor = (float)c->rope_factor;
        float lo = (float)c->rope_low_freq_factor, hi = (float)c->rope_high_freq_factor;
        float old = (float)c->rope_orig_max_pos;
        double lo_wl = c->rope_orig_max_pos / c->rope_low_freq_factor;
        double hi_wl = c->rope_orig_max_pos / c->rope_high_freq_factor;
        for (int i = 0; i < half; i++) {
            float f = inv_freq[i];
            float wl = (float)(2.0 * 3.14159265358979323846) / f;
            float scaled = (double)wl > lo_wl ? f / factor : f;
            if (!((double)wl < hi_wl) && !((double)wl > lo_wl)) {
                float smooth = (old / wl - lo) / (hi - lo);
                scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
            }
            inv_freq[i] = scaled;
        }
    }
    if (c->rope_n_freq_factors == half)
        for (int i = 0; i < half; i++) inv_freq[i] /= c->rope_freq_factors[i];
}
