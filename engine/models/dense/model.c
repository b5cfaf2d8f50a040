/* model.c - see model.h. */
#include "model.h"
#include "engine/formats/config_json.h"
#include "model_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bind `name` expecting shape [rows, cols] (cols only when rows == 0: a
 * vector).  Optional tensors may be absent. */
ld_status ld_model_check_shape(const char *name, const uint64_t *shape, int n_dims, int64_t rows,
                               int64_t cols, uint64_t offset, ld_error *err)
{
    char want[64];
    if (rows) snprintf(want, sizeof want, "[%lld, %lld]", (long long)rows, (long long)cols);
    else snprintf(want, sizeof want, "[%lld]", (long long)cols);
    if (!shape) return LD_FAIL(err, LD_ERR_MISMATCH, offset, "tensor '%s' %s is missing", name, want);
    int ok = rows ? n_dims == 2 && shape[0] == (uint64_t)rows && shape[1] == (uint64_t)cols
                  : n_dims == 1 && shape[0] == (uint64_t)cols;
    if (ok) return LD_OK;
    char got[96] = "[";
    for (int d = 0; d < n_dims && strlen(got) < 70; d++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? ", " : "",
                 (unsigned long long)shape[d]);
    strcat(got, "]");
    return LD_FAIL(err, LD_ERR_MISMATCH, offset, "tensor '%s' has shape %s, expected %s", name, got, want);
}

/* see model_internal.h */
ld_status ld_model_bind_f8b(const ld_safetensors *st, int br, int bc, ld_model_tensor *mt, const ld_st_tensor *t,
                            const char *name, int64_t rows, int64_t cols, ld_error *err)
{
    char sname[192];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    const ld_st_tensor *s = ld_st_find(st, sname);
    LD_TRY(ld_model_check_shape(sname, s ? s->shape : NULL, s ? s->n_dims : 0, (rows + br - 1) / br,
                                (cols + bc - 1) / bc, 0, err));
    if (s->dtype != LD_DT_F32)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (F32 scales supported)", sname,
                       ld_dtype_name(s->dtype));
    if ((uintptr_t)s->data % sizeof(float))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' is not aligned to 4 bytes in its file", sname);
    mt->st = t;
    mt->host = (ld_host_tensor){.dtype = t->dtype, .data = t->data, .rows = rows, .cols = cols,
                                .quant = LD_WQ_F8B, .scale = (const float *)s->data, .scale_br = br,
                                .scale_bc = bc};
    return LD_OK;
}

/* Binds `name` (printf-style) as [rows, cols] (a vector of cols when rows
 * is 0); `fp8`: a linear weight that may be block-scaled FP8 (NULL: not). */
static ld_status bind(const ld_safetensors *st, const ld_fp8_config *fp8, ld_model_tensor *mt, int optional,
                      int64_t rows, int64_t cols, ld_error *err, const char *fmt, ...)
{
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    memset(mt, 0, sizeof *mt);
    const ld_st_tensor *t = ld_st_find(st, name);
    if (!t && optional) return LD_OK;
    LD_TRY(ld_model_check_shape(name, t ? t->shape : NULL, t ? t->n_dims : 0, rows, cols, 0, err));
    if (t->dtype == LD_DT_F8_E4M3 && fp8 && fp8->on && rows) return ld_model_bind_f8b(st, fp8->block[0], fp8->block[1], mt, t, name, rows, cols, err);
    if (t->dtype != LD_DT_F32 && t->dtype != LD_DT_F16 && t->dtype != LD_DT_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (F32, F16, BF16%s supported)", name,
                       ld_dtype_name(t->dtype), fp8 && fp8->on ? ", F8_E4M3 with block scales" : "");
    mt->st = t;
    mt->host.dtype = t->dtype;
    mt->host.data = t->data;
    mt->host.rows = rows ? rows : 1;
    mt->host.cols = cols;
    return LD_OK;
}

uint64_t ld_model_tensor_bytes(const ld_model_tensor *t)
{
    return t->st ? t->st->n_bytes : t->gg ? t->gg->n_bytes : 0;
}

/* the sum over the layers' tensors */
static uint64_t layer_bytes(const ld_model_layer *L)
{
    const ld_model_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->bq, &L->bk, &L->bv,
                                   &L->bo, &L->q_norm, &L->k_norm, &L->ffn_norm, &L->w_gate, &L->w_up,
                                   &L->w_down, &L->b_gate, &L->b_up, &L->b_down};
    uint64_t n = 0;
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) n += ld_model_tensor_bytes(ts[i]);
    return n;
}

uint64_t ld_model_weight_bytes(const ld_model *m)
{
    uint64_t n = ld_model_tensor_bytes(&m->embed) + ld_model_tensor_bytes(&m->norm);
    if (!m->cfg.tie_embeddings) n += ld_model_tensor_bytes(&m->lm_head);
    for (int l = 0; l < m->cfg.n_layers; l++) n += layer_bytes(&m->layers[l]);
    return n;
}

uint64_t ld_model_decode_bytes(const ld_model *m)
{
    uint64_t table = ld_model_tensor_bytes(&m->embed);
    uint64_t row = m->cfg.vocab > 0 ? table / (uint64_t)m->cfg.vocab : 0;
    /* the table is read as the lm_head when tied, else one row of it */
    return ld_model_weight_bytes(m) - table + (m->cfg.tie_embeddings ? table : row);
}

void ld_model_close(ld_model *m)
{
    if (!m) return;
    ld_st_close(m->st);
    ld_gguf_close(m->gguf);
    free(m->layers);
    free(m);
}

ld_status ld_model_bind(const ld_model_config *cfg, const ld_safetensors *st, ld_model **out, ld_error *err)
{
    *out = NULL;
    ld_model *m = calloc(1, sizeof *m);
    if (!m) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    m->cfg = *cfg;
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    if (!m->layers) {
        free(m);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    const int64_t V = cfg->vocab, D = cfg->hidden, I = cfg->intermediate, hd = cfg->head_dim;
    const int64_t Q = (int64_t)cfg->n_heads * hd, KV = (int64_t)cfg->n_kv_heads * hd;
    ld_status s = LD_OK;
    const ld_fp8_config *f8 = &cfg->fp8; /* for the linear weights */
#define B(mt, opt, r, c, ...) \
    if (s == LD_OK) s = bind(st, NULL, (mt), (opt), (r), (c), err, __VA_ARGS__)
#define BL(mt, r, c, ...) \
    if (s == LD_OK) s = bind(st, f8, (mt), 0, (r), (c), err, __VA_ARGS__)
    B(&m->embed, 0, V, D, "model.embed_tokens.weight");
    B(&m->norm, 0, 0, D, "model.norm.weight");
    if (cfg->tie_embeddings) m->lm_head = m->embed;
    else BL(&m->lm_head, V, D, "lm_head.weight");
    for (int l = 0; l < cfg->n_layers && s == LD_OK; l++) {
        ld_model_layer *L = &m->layers[l];
        const char *p = "model.layers";
        B(&L->attn_norm, 0, 0, D, "%s.%d.input_layernorm.weight", p, l);
        BL(&L->wq, Q, D, "%s.%d.self_attn.q_proj.weight", p, l);
        BL(&L->wk, KV, D, "%s.%d.self_attn.k_proj.weight", p, l);
        BL(&L->wv, KV, D, "%s.%d.self_attn.v_proj.weight", p, l);
        BL(&L->wo, D, Q, "%s.%d.self_attn.o_proj.weight", p, l);
        if (cfg->qkv_bias) {
            B(&L->bq, 0, 0, Q, "%s.%d.self_attn.q_proj.bias", p, l);
            B(&L->bk, 0, 0, KV, "%s.%d.self_attn.k_proj.bias", p, l);
            B(&L->bv, 0, 0, KV, "%s.%d.self_attn.v_proj.bias", p, l);
        }
        if (cfg->o_bias) B(&L->bo, 0, 0, D, "%s.%d.self_attn.o_proj.bias", p, l);
        if (cfg->qk_norm) {
            B(&L->q_norm, 0, 0, hd, "%s.%d.self_attn.q_norm.weight", p, l);
            B(&L->k_norm, 0, 0, hd, "%s.%d.self_attn.k_norm.weight", p, l);
        }
        B(&L->ffn_norm, 0, 0, D, "%s.%d.post_attention_layernorm.weight", p, l);
        BL(&L->w_gate, I, D, "%s.%d.mlp.gate_proj.weight", p, l);
        BL(&L->w_up, I, D, "%s.%d.mlp.up_proj.weight", p, l);
        BL(&L->w_down, D, I, "%s.%d.mlp.down_proj.weight", p, l);
        if (cfg->mlp_bias) {
            B(&L->b_gate, 0, 0, I, "%s.%d.mlp.gate_proj.bias", p, l);
            B(&L->b_up, 0, 0, I, "%s.%d.mlp.up_proj.bias", p, l);
            B(&L->b_down, 0, 0, D, "%s.%d.mlp.down_proj.bias", p, l);
        }
    }
#undef B
#undef BL
    if (s != LD_OK) {
        free(m->layers);
        free(m);
        return s;
    }
    *out = m;
    return LD_OK;
}

ld_status ld_model_open(const char *dir, ld_model **out, ld_error *err)
{
    *out = NULL;
    char *cp = ld_cfg_path(dir);
    if (!cp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_model_config *cfg = malloc(sizeof *cfg);
    ld_status s = cfg ? ld_model_config_load(cp, cfg, err) : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (s != LD_OK) {
        if (err) err->path = dir;  /* cp is freed below */
        free(cp);
        free(cfg);
        return s;
    }
    free(cp);
    ld_safetensors *st = NULL;
    s = ld_st_open(dir, &st, err);
    if (s == LD_OK) s = ld_model_bind(cfg, st, out, err);
    free(cfg);
    if (s != LD_OK) {
        ld_st_close(st);
        if (err) err->path = dir;
        return s;
    }
    (*out)->st = st;
    return LD_OK;
}
