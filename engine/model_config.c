/* model_config.c - see model_config.h. */
#include "model_config.h"

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

static const cJSON *get(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNull(v) ? NULL : v;
}

/* An integer field in [lo, hi]; `def` < lo means required. */
static ld_status get_int(const cJSON *o, const char *k, long lo, long hi,
                         long def, int *out, ld_error *err)
{
    const cJSON *v = get(o, k);
    if (!v) {
        if (def < lo) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is missing", k);
        *out = (int)def;
        return LD_OK;
    }
    if (!cJSON_IsNumber(v) || floor(v->valuedouble) != v->valuedouble ||
        v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not an integer in [%ld, %ld]", k, lo, hi);
    *out = (int)v->valuedouble;
    return LD_OK;
}

static ld_status get_num(const cJSON *o, const char *where, const char *k,
                         double def, int required, double *out, ld_error *err)
{
    const cJSON *v = get(o, k);
    if (!v) {
        if (required) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is missing", where, k);
        *out = def;
        return LD_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= 0)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s%s' is not a positive number", where, k);
    *out = v->valuedouble;
    return LD_OK;
}

static ld_status get_bool(const cJSON *o, const char *k, int def, int *out, ld_error *err)
{
    const cJSON *v = get(o, k);
    if (!v) {
        *out = def;
        return LD_OK;
    }
    if (!cJSON_IsBool(v)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%s' is not a boolean", k);
    *out = cJSON_IsTrue(v);
    return LD_OK;
}

static ld_status parse_rope(const cJSON *root, ld_model_config *c, ld_error *err)
{
    /* transformers 5: rope_parameters {rope_type, rope_theta, ...};
     * transformers 4: rope_theta + rope_scaling {rope_type|type, ...} */
    const cJSON *rp = get(root, "rope_parameters");
    const char *where = "rope_parameters.";
    const cJSON *sc = rp;
    if (rp && !cJSON_IsObject(rp))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'rope_parameters' is not an object (per-layer-type RoPE is not supported)");
    if (rp && get(rp, "full_attention"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'rope_parameters' per layer type is not supported");
    if (!rp) {
        where = "rope_scaling.";
        sc = get(root, "rope_scaling");
        if (sc && !cJSON_IsObject(sc)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'rope_scaling' is not an object");
    }
    double theta = 10000.0;
    LD_TRY(get_num(rp ? rp : root, rp ? where : "", "rope_theta", 10000.0, 0, &theta, err));
    c->rope_theta = theta;
    c->rope_type = LD_ROPE_DEFAULT;
    if (!sc) return LD_OK;
    const cJSON *t = get(sc, "rope_type");
    if (!t) t = get(sc, "type");
    const char *ty = cJSON_IsString(t) ? t->valuestring : NULL;
    if (!ty) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field '%srope_type' is missing", where);
    if (strcmp(ty, "default") == 0) return LD_OK;
    if (strcmp(ty, "linear") == 0) {
        c->rope_type = LD_ROPE_LINEAR;
        return get_num(sc, where, "factor", 1.0, 1, &c->rope_factor, err);
    }
    if (strcmp(ty, "llama3") == 0) {
        c->rope_type = LD_ROPE_LLAMA3;
        LD_TRY(get_num(sc, where, "factor", 1.0, 1, &c->rope_factor, err));
        LD_TRY(get_num(sc, where, "low_freq_factor", 1.0, 1, &c->rope_low_freq_factor, err));
        LD_TRY(get_num(sc, where, "high_freq_factor", 1.0, 1, &c->rope_high_freq_factor, err));
        LD_TRY(get_num(sc, where, "original_max_position_embeddings", 1.0, 1, &c->rope_orig_max_pos, err));
        if (c->rope_high_freq_factor == c->rope_low_freq_factor)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config fields '%slow_freq_factor' and 'high_freq_factor' are equal", where);
        return LD_OK;
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%srope_type' = '%.40s' is not supported (default, linear, llama3)", where, ty);
}

static ld_status parse_windows(const cJSON *root, ld_model_config *c, ld_error *err)
{
    int sw = 0;
    LD_TRY(get_int(root, "sliding_window", 0, 1L << 30, 0, &sw, err));
    const cJSON *lt = get(root, "layer_types");
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
        LD_TRY(get_bool(root, "use_sliding_window", 0, &use, err));
        LD_TRY(get_int(root, "max_window_layers", 0, 1L << 30, c->n_layers, &mwl, err));
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
    const cJSON *ar = get(root, "architectures");
    const cJSON *mt = get(root, "model_type");
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

    const cJSON *act = get(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field 'hidden_act' = '%.40s' is not supported (silu)",
                       cJSON_IsString(act) ? act->valuestring : "?");
    static const char *const unsupported[] = {
        "quantization_config", "attn_logit_softcapping", "final_logit_softcapping",
        "partial_rotary_factor"};
    for (size_t k = 0; k < sizeof unsupported / sizeof unsupported[0]; k++)
        if (get(root, unsupported[k]))
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "config field '%s' is not supported", unsupported[k]);
    int tp = 1;
    LD_TRY(get_int(root, "pretraining_tp", 1, 1, 1, &tp, err));

    LD_TRY(get_int(root, "vocab_size", 1, 1 << 24, -1, &c->vocab, err));
    LD_TRY(get_int(root, "hidden_size", 1, 1 << 16, -1, &c->hidden, err));
    LD_TRY(get_int(root, "intermediate_size", 1, 1 << 20, -1, &c->intermediate, err));
    LD_TRY(get_int(root, "num_hidden_layers", 1, LD_MODEL_MAX_LAYERS, -1, &c->n_layers, err));
    LD_TRY(get_int(root, "num_attention_heads", 1, 1 << 12, -1, &c->n_heads, err));
    LD_TRY(get_int(root, "num_key_value_heads", 1, 1 << 12, c->n_heads, &c->n_kv_heads, err));
    if (c->n_heads % c->n_kv_heads)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'num_attention_heads' (%d) is not a multiple of 'num_key_value_heads' (%d)",
                       c->n_heads, c->n_kv_heads);
    LD_TRY(get_int(root, "head_dim", 2, 1 << 12, c->hidden / c->n_heads, &c->head_dim, err));
    if (c->head_dim < 2 || c->head_dim % 2)
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "config field 'head_dim' (%d) is not a positive even number", c->head_dim);
    LD_TRY(get_int(root, "max_position_embeddings", 1, 1 << 30, 1 << 30, &c->max_pos, err));
    double eps;
    LD_TRY(get_num(root, "", "rms_norm_eps", 1e-6, 0, &eps, err));
    c->rms_eps = (float)eps;
    LD_TRY(get_bool(root, "tie_word_embeddings", 0, &c->tie_embeddings, err));
    int ab = 0;
    LD_TRY(get_bool(root, "attention_bias", 0, &ab, err));
    LD_TRY(get_bool(root, "mlp_bias", 0, &c->mlp_bias, err));
    c->qkv_bias = ab || c->arch == LD_ARCH_QWEN2;
    c->o_bias = ab && c->arch != LD_ARCH_QWEN2;
    c->qk_norm = c->arch == LD_ARCH_QWEN3;
    LD_TRY(parse_rope(root, c, err));
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
    FILE *f = fopen(path, "rb");
    if (!f) {
        ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%.200s'", path);
        if (err) err->path = path;
        return s;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    ld_status st = LD_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= (1u << 24)) {
                st = LD_FAIL(err, LD_ERR_LIMIT, 0, "config larger than 16 MiB");
                break;
            }
            char *nb = realloc(buf, cap = cap ? cap * 2 : 4096);
            if (!nb) {
                st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        if (!got) break;
        n += got;
    }
    if (st == LD_OK && ferror(f)) st = LD_FAIL(err, LD_ERR_IO, 0, "cannot read '%.200s'", path);
    fclose(f);
    if (st == LD_OK) st = ld_model_config_parse(buf, n, out, err);
    free(buf);
    if (st != LD_OK && err) err->path = path;
    return st;
}

void ld_model_rope_inv_freq(const ld_model_config *c, float *inv_freq)
{
    int half = c->head_dim / 2;
    float base = (float)c->rope_theta;
    for (int i = 0; i < half; i++) {
        float e = (float)(2 * i) / (float)c->head_dim;
        inv_freq[i] = 1.0f / powf(base, e);
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
}
