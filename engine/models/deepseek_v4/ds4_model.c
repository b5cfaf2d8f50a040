/* ds4_model.c - see ds4_model.h. */
#include "ds4_model.h"
#include "engine/formats/config_json.h"
#include "engine/models/dense/model_internal.h"
#include "kernels/ref/ref_ds4.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names of the two layouts: "model." + transformers' save_pretrained
 * names, or DeepSeek's own (the released checkpoints). */
static const char *tname(const ld_ds4_model *m, int which)
{
    static const char *const hf[] = {"model.embed_tokens.weight", "model.norm.weight", "model.hc_head.hc_fn",
                                     "model.hc_head.hc_base", "model.hc_head.hc_scale"};
    static const char *const ds[] = {"embed.weight", "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale"};
    return m->official ? ds[which] : hf[which];
}

/* an owned fp32 array of n floats */
static float *own(ld_ds4_model *m, size_t n)
{
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 64;
        float **o = realloc(m->owned, cap * sizeof *o);
        if (!o) return NULL;
        m->owned = o;
        m->cap_owned = cap;
    }
    float *w = malloc((n ? n : 1) * sizeof *w);
    if (w) m->owned[m->n_owned++] = w;
    return w;
}

/* the scale grid of quantized linear `name`: `<stem>.scale` or
 * `<stem>.weight_scale_inv` */
static ld_status find_scale(const ld_safetensors *st, const char *name, int fp4, const ld_st_tensor **out,
                            ld_error *err)
{
    char stem[176], sname[200];
    snprintf(stem, sizeof stem, "%s", name);
    size_t sl = strlen(stem);
    if (sl > 7 && strcmp(stem + sl - 7, ".weight") == 0) stem[sl - 7] = 0;
    snprintf(sname, sizeof sname, "%s.scale", stem);
    *out = ld_st_find(st, sname);
    if (!*out) {
        snprintf(sname, sizeof sname, "%s.weight_scale_inv", stem);
        *out = ld_st_find(st, sname);
    }
    if (!*out)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "tensor '%s.scale' (or '%s.weight_scale_inv') of %s '%s' is missing",
                       stem, stem, fp4 ? "FP4" : "FP8", name);
    return LD_OK;
}

/* A quantized linear `name` [rows, cols] stored as t: FP8 E4M3 [rows, cols]
 * or packed FP4 [rows, cols/2], its scale grid `<stem>.scale` (DeepSeek) or
 * `<stem>.weight_scale_inv` (transformers) dividing the shape, F8_E8M0, F32
 * or U8 (exponent bytes).  The codes stay in the mapping (the backend
 * takes them as LD_WQ_F8B / LD_WQ_F4B); the scale grid becomes an owned
 * fp32 copy, [sr][sc] over blocks of rows/sr x cols/sc. */
static ld_status bind_quant(ld_ds4_model *m, const ld_safetensors *st, ld_model_tensor *mt, const ld_st_tensor *t,
                            const char *name, int64_t rows, int64_t cols, ld_error *err)
{
    int fp4 = t->dtype != LD_DT_F8_E4M3;
    if (fp4) {
        if (cols % 2)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' is packed FP4 with an odd column count %lld", name,
                           (long long)cols);
        LD_TRY(ld_model_check_shape(name, t->shape, t->n_dims, rows, cols / 2, 0, err));
    } else {
        LD_TRY(ld_model_check_shape(name, t->shape, t->n_dims, rows, cols, 0, err));
    }
    const ld_st_tensor *s = NULL;
    LD_TRY(find_scale(st, name, fp4, &s, err));
    if (s->n_dims != 2 || s->shape[0] < 1 || s->shape[1] < 1 || (uint64_t)rows % s->shape[0] ||
        (uint64_t)cols % s->shape[1])
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "tensor '%s' is not a 2-d grid dividing [%lld, %lld]", s->name,
                       (long long)rows, (long long)cols);
    if (s->dtype != LD_DT_F8_E8M0 && s->dtype != LD_DT_F32 && s->dtype != LD_DT_U8)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (F8_E8M0, F32, U8 supported)", s->name,
                       ld_dtype_name(s->dtype));
    size_t sr = (size_t)s->shape[0], sc = (size_t)s->shape[1];
    float *scale = own(m, sr * sc);
    if (!scale) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for the scales of '%s'", name);
    for (size_t i = 0; i < sr * sc; i++) {
        if (s->dtype == LD_DT_F32) memcpy(&scale[i], s->data + 4 * i, 4);
        else scale[i] = ld_ref_ds4_e8m0_to_f32(s->data[i]); /* U8: transformers reads it as exponents too */
    }
    mt->st = t;
    mt->host = (ld_host_tensor){.dtype = t->dtype, .data = t->data, .rows = rows, .cols = cols,
                                .quant = fp4 ? LD_WQ_F4B : LD_WQ_F8B, .scale = scale,
                                .scale_br = (int)((size_t)rows / sr), .scale_bc = (int)((size_t)cols / sc)};
    return LD_OK;
}

/* Bind `name` (printf-style) expecting [rows, cols], or a vector of cols
 * when rows == 0; `lin`: a linear weight that may be quantized. */
static ld_status bind_any(ld_ds4_model *m, const ld_safetensors *st, ld_model_tensor *mt, int lin, int64_t rows,
                          int64_t cols, ld_error *err, const char *fmt, va_list ap)
{
    char name[160];
    vsnprintf(name, sizeof name, fmt, ap);
    memset(mt, 0, sizeof *mt);
    const ld_st_tensor *t = ld_st_find(st, name);
    int q = t && lin && m->cfg.quant && (t->dtype == LD_DT_F8_E4M3 || t->dtype == LD_DT_I8 || t->dtype == LD_DT_U8);
    if (q) return bind_quant(m, st, mt, t, name, rows, cols, err);
    LD_TRY(ld_model_check_shape(name, t ? t->shape : NULL, t ? t->n_dims : 0, rows, cols, 0, err));
    if (t->dtype != LD_DT_F32 && t->dtype != LD_DT_F16 && t->dtype != LD_DT_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (F32, F16, BF16%s supported)", name,
                       ld_dtype_name(t->dtype), lin && m->cfg.quant ? ", F8_E4M3, packed FP4 I8/U8" : "");
    mt->st = t;
    mt->host.dtype = t->dtype;
    mt->host.data = t->data;
    mt->host.rows = rows ? rows : 1;
    mt->host.cols = cols;
    return LD_OK;
}

static ld_status bind(ld_ds4_model *m, const ld_safetensors *st, ld_model_tensor *mt, int64_t rows, int64_t cols,
                      ld_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_status s = bind_any(m, st, mt, 0, rows, cols, err, fmt, ap);
    va_end(ap);
    return s;
}

static ld_status bind_lin(ld_ds4_model *m, const ld_safetensors *st, ld_model_tensor *mt, int64_t rows, int64_t cols,
                          ld_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_status s = bind_any(m, st, mt, 1, rows, cols, err, fmt, ap);
    va_end(ap);
    return s;
}

static ld_status bind_mlp(ld_ds4_model *m, const ld_safetensors *st, ld_ds4_mlp *x, int64_t D, int64_t I, ld_error *err,
                          const char *prefix)
{
    LD_TRY(bind_lin(m, st, &x->gate, I, D, err, "%s.w1.weight", prefix));
    LD_TRY(bind_lin(m, st, &x->up, I, D, err, "%s.w3.weight", prefix));
    return bind_lin(m, st, &x->down, D, I, err, "%s.w2.weight", prefix);
}

static ld_status bind_comp(ld_ds4_model *m, const ld_safetensors *st, ld_ds4_compressor *x, int64_t D, int64_t width, int64_t dim,
                           int64_t ratio, ld_error *err, const char *prefix)
{
    LD_TRY(bind_lin(m, st, &x->wkv, width, D, err, "%s.wkv.weight", prefix));
    LD_TRY(bind_lin(m, st, &x->wgate, width, D, err, "%s.wgate.weight", prefix));
    LD_TRY(bind(m, st, &x->ape, ratio, width, err, "%s.ape", prefix));
    return bind(m, st, &x->norm, 0, dim, err, "%s.norm.weight", prefix);
}

static ld_status bind_tid2eid(ld_ds4_model *m, const ld_safetensors *st, ld_ds4_layer *L, int l, ld_error *err)
{
    const ld_ds4_config *c = &m->cfg;
    char name[96];
    char pre[64];
    snprintf(pre, sizeof pre, "%s%d", m->official ? "layers." : "model.layers.", l);
    snprintf(name, sizeof name, "%s.ffn.gate.tid2eid", pre);
    const ld_st_tensor *t = ld_st_find(st, name);
    LD_TRY(ld_model_check_shape(name, t ? t->shape : NULL, t ? t->n_dims : 0, c->vocab, c->top_k, 0, err));
    if (t->dtype != LD_DT_I64 && t->dtype != LD_DT_I32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (I64, I32 supported)", name,
                       ld_dtype_name(t->dtype));
    size_t n = (size_t)c->vocab * (size_t)c->top_k;
    L->tid2eid = malloc(n * sizeof *L->tid2eid);
    if (!L->tid2eid) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (t->dtype == LD_DT_I64) {
            memcpy(&v, t->data + i * 8, 8);
        } else {
            int32_t v32;
            memcpy(&v32, t->data + i * 4, 4);
            v = v32;
        }
        if (v < 0 || v >= c->n_routed)
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "tensor '%s' [%zu][%zu] = %lld is not an expert id in [0, %d)", name,
                           i / (size_t)c->top_k, i % (size_t)c->top_k, (long long)v, c->n_routed);
        L->tid2eid[i] = (int32_t)v;
        /* a token's experts are distinct: the MoE gathers each expert's
           tokens once (at most T rows an expert) */
        size_t k = i % (size_t)c->top_k, row = i - k;
        for (size_t j = 0; j < k; j++)
            if (L->tid2eid[row + j] == L->tid2eid[i])
                return LD_FAIL(err, LD_ERR_SYNTAX, 0, "tensor '%s' row %zu names expert %d twice (columns %zu and %zu)",
                               name, i / (size_t)c->top_k, (int)L->tid2eid[i], j, k);
    }
    return LD_OK;
}

static ld_status bind_layer(ld_ds4_model *m, const ld_safetensors *st, ld_ds4_layer *L, int l, ld_error *err)
{
    const ld_ds4_config *c = &m->cfg;
    const int64_t D = c->hidden, N = c->hc_mult, H = c->n_heads, hd = c->head_dim, QR = c->q_lora_rank;
    const int64_t G = c->o_groups, OL = c->o_lora_rank, E = c->n_routed, HC = (2 + N) * N;
    char p[64], q[128];
    snprintf(p, sizeof p, "%s%d", m->official ? "layers." : "model.layers.", l);
    LD_TRY(bind(m, st, &L->attn_norm, 0, D, err, "%s.attn_norm.weight", p));
    LD_TRY(bind(m, st, &L->ffn_norm, 0, D, err, "%s.ffn_norm.weight", p));
    LD_TRY(bind(m, st, &L->hc_attn_fn, HC, N * D, err, "%s.hc_attn_fn", p));
    LD_TRY(bind(m, st, &L->hc_attn_base, 0, HC, err, "%s.hc_attn_base", p));
    LD_TRY(bind(m, st, &L->hc_attn_scale, 0, 3, err, "%s.hc_attn_scale", p));
    LD_TRY(bind(m, st, &L->hc_ffn_fn, HC, N * D, err, "%s.hc_ffn_fn", p));
    LD_TRY(bind(m, st, &L->hc_ffn_base, 0, HC, err, "%s.hc_ffn_base", p));
    LD_TRY(bind(m, st, &L->hc_ffn_scale, 0, 3, err, "%s.hc_ffn_scale", p));
    LD_TRY(bind_lin(m, st, &L->wq_a, QR, D, err, "%s.attn.wq_a.weight", p));
    LD_TRY(bind(m, st, &L->q_norm, 0, QR, err, "%s.attn.q_norm.weight", p));
    LD_TRY(bind_lin(m, st, &L->wq_b, H * hd, QR, err, "%s.attn.wq_b.weight", p));
    LD_TRY(bind_lin(m, st, &L->wkv, hd, D, err, "%s.attn.wkv.weight", p));
    LD_TRY(bind(m, st, &L->kv_norm, 0, hd, err, "%s.attn.norm.weight", p));
    LD_TRY(bind_lin(m, st, &L->wo_a, G * OL, H * hd / G, err, "%s.attn.wo_a.weight", p));
    LD_TRY(bind_lin(m, st, &L->wo_b, D, G * OL, err, "%s.attn.wo_b.weight", p));
    LD_TRY(bind(m, st, &L->sinks, 0, H, err, "%s.attn.attn_sink", p));
    int type = c->layer_type[l];
    if (type != LD_DS4_SLIDING) {
        int64_t r = ld_ds4_layer_ratio(c, l), cw = type == LD_DS4_CSA ? 2 : 1;
        snprintf(q, sizeof q, "%s.attn.compressor", p);
        LD_TRY(bind_comp(m, st, &L->comp, D, cw * hd, hd, r, err, q));
        if (type == LD_DS4_CSA) {
            int64_t ih = c->index_head_dim, nih = c->index_n_heads;
            snprintf(q, sizeof q, "%s.attn.indexer.compressor", p);
            LD_TRY(bind_comp(m, st, &L->icomp, D, 2 * ih, ih, r, err, q));
            LD_TRY(bind_lin(m, st, &L->iwq_b, nih * ih, QR, err, "%s.attn.indexer.wq_b.weight", p));
            LD_TRY(bind_lin(m, st, &L->iweights, nih, D, err, "%s.attn.indexer.weights_proj.weight", p));
        }
    }
    LD_TRY(bind(m, st, &L->router, E, D, err, "%s.ffn.gate.weight", p));
    if (c->mlp_type[l] == LD_DS4_HASH) LD_TRY(bind_tid2eid(m, st, L, l, err));
    else LD_TRY(bind(m, st, &L->router_bias, 0, E, err, "%s.ffn.gate.bias", p));
    for (int e = 0; e < c->n_routed; e++) {
        snprintf(q, sizeof q, "%s.ffn.experts.%d", p, e);
        LD_TRY(bind_mlp(m, st, &L->experts[e], D, c->moe_intermediate, err, q));
    }
    snprintf(q, sizeof q, "%s.ffn.shared_experts", p);
    return bind_mlp(m, st, &L->shared, D, c->moe_intermediate, err, q);
}

void ld_ds4_model_close(ld_ds4_model *m)
{
    if (!m) return;
    ld_st_close(m->st);
    if (m->layers)
        for (int l = 0; l < m->cfg.n_layers; l++) free(m->layers[l].tid2eid);
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->expert_store);
    free(m->layers);
    free(m);
}

ld_status ld_ds4_model_bind(const ld_ds4_config *cfg, const ld_safetensors *st, ld_ds4_model **out, ld_error *err)
{
    *out = NULL;
    ld_ds4_model *m = calloc(1, sizeof *m);
    if (!m) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    m->cfg = *cfg;
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    m->expert_store = calloc((size_t)cfg->n_layers * (size_t)cfg->n_routed, sizeof *m->expert_store);
    if (!m->layers || !m->expert_store) {
        ld_ds4_model_close(m);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    const int64_t V = cfg->vocab, D = cfg->hidden, N = cfg->hc_mult;
    m->official = !ld_st_find(st, "model.embed_tokens.weight") && ld_st_find(st, "embed.weight");
    ld_status s = bind(m, st, &m->embed, V, D, err, "%s", tname(m, 0));
    if (s == LD_OK) s = bind(m, st, &m->norm, 0, D, err, "%s", tname(m, 1));
    if (s == LD_OK) {
        if (cfg->tie_embeddings) m->lm_head = m->embed;
        else s = bind(m, st, &m->lm_head, V, D, err, "head.weight");
    }
    if (s == LD_OK) s = bind(m, st, &m->hc_fn, N, N * D, err, "%s", tname(m, 2));
    if (s == LD_OK) s = bind(m, st, &m->hc_base, 0, N, err, "%s", tname(m, 3));
    if (s == LD_OK) s = bind(m, st, &m->hc_scale, 0, 1, err, "%s", tname(m, 4));
    for (int l = 0; l < cfg->n_layers && s == LD_OK; l++) {
        m->layers[l].experts = m->expert_store + (size_t)l * (size_t)cfg->n_routed;
        s = bind_layer(m, st, &m->layers[l], l, err);
    }
    if (s != LD_OK) {
        ld_ds4_model_close(m);
        return s;
    }
    *out = m;
    return LD_OK;
}

ld_status ld_ds4_model_open(const char *dir, ld_ds4_model **out, ld_error *err)
{
    *out = NULL;
    char *cp = ld_cfg_path(dir);
    ld_ds4_config *cfg = malloc(sizeof *cfg);
    if (!cp || !cfg) {
        free(cp);
        free(cfg);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    ld_status s = ld_ds4_config_load(cp, cfg, err);
    free(cp);
    ld_safetensors *st = NULL;
    if (s == LD_OK) s = ld_st_open(dir, &st, err);
    if (s == LD_OK) s = ld_ds4_model_bind(cfg, st, out, err);
    free(cfg);
    if (s != LD_OK) {
        ld_st_close(st);
        if (err) err->path = dir;
        return s;
    }
    (*out)->st = st;
    return LD_OK;
}
