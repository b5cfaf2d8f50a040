/* ds_model.c - see ds_model.h. */
#include "ds_model.h"
#include "engine/formats/config_json.h"
#include "engine/models/dense/model_internal.h"
#include "kernels/ref/ref_ds.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* how a tensor may be stored: plain F32/F16/BF16 only, or a linear weight
 * that may be block-scaled FP8 (bound as LD_WQ_F8B, or dequantized) */
enum { PLAIN = 0, LINEAR_F8B = 1, LINEAR_DEQUANT = 2 };

/* FP8 tensor `t` (`name`) with its `<name>_scale_inv`, checked as
 * ld_model_bind_f8b does, dequantized exactly into an fp32 copy the model
 * owns, bound as `mt` (for the one consumer that needs plain rows:
 * kv_b_proj, see bind_layer). */
static ld_status bind_dequant(ld_ds_model *m, const ld_safetensors *st, ld_model_tensor *mt, const ld_st_tensor *t,
                              const char *name, int64_t rows, int64_t cols, ld_error *err)
{
    int b0 = m->cfg.fp8_block[0], b1 = m->cfg.fp8_block[1];
    LD_TRY(ld_model_bind_f8b(st, b0, b1, mt, t, name, rows, cols, err));
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? m->cap_owned * 2 : 16;
        float **o = realloc(m->owned, cap * sizeof *o);
        if (!o) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        m->owned = o;
        m->cap_owned = cap;
    }
    size_t n = (size_t)rows * (size_t)cols;
    float *w = malloc(n * sizeof *w);
    if (!w) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory dequantizing '%s'", name);
    m->owned[m->n_owned++] = w;
    m->owned_bytes += n * sizeof *w;
    ld_ref_fp8_block_dequant(w, mt->host.data, mt->host.scale, (size_t)rows, (size_t)cols, (size_t)b0, (size_t)b1, 0,
                             (size_t)rows);
    mt->host = (ld_host_tensor){.dtype = LD_DT_F32, .data = w, .rows = rows, .cols = cols};
    return LD_OK;
}

/* Bind `name` (printf-style) expecting [rows, cols], or a vector of cols
 * when rows == 0; `kind`: PLAIN, LINEAR_F8B or LINEAR_DEQUANT. */
static ld_status bind_any(ld_ds_model *m, const ld_safetensors *st, ld_model_tensor *mt, int kind, int64_t rows,
                          int64_t cols, ld_error *err, const char *fmt, va_list ap)
{
    char name[160];
    vsnprintf(name, sizeof name, fmt, ap);
    memset(mt, 0, sizeof *mt);
    const ld_st_tensor *t = ld_st_find(st, name);
    LD_TRY(ld_model_check_shape(name, t ? t->shape : NULL, t ? t->n_dims : 0, rows, cols, 0, err));
    int fp8 = t->dtype == LD_DT_F8_E4M3 && kind != PLAIN && m->cfg.fp8;
    if (fp8 && kind == LINEAR_F8B)
        return ld_model_bind_f8b(st, m->cfg.fp8_block[0], m->cfg.fp8_block[1], mt, t, name, rows, cols, err);
    if (fp8) return bind_dequant(m, st, mt, t, name, rows, cols, err);
    if (t->dtype != LD_DT_F32 && t->dtype != LD_DT_F16 && t->dtype != LD_DT_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "tensor '%s' has dtype %s (F32, F16, BF16%s supported)", name,
                       ld_dtype_name(t->dtype), kind != PLAIN && m->cfg.fp8 ? ", F8_E4M3" : "");
    mt->st = t;
    mt->host.dtype = t->dtype;
    mt->host.data = t->data;
    mt->host.rows = rows ? rows : 1;
    mt->host.cols = cols;
    return LD_OK;
}

static ld_status bind(ld_ds_model *m, const ld_safetensors *st, ld_model_tensor *mt, int64_t rows, int64_t cols,
                      ld_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_status s = bind_any(m, st, mt, PLAIN, rows, cols, err, fmt, ap);
    va_end(ap);
    return s;
}

/* a linear weight (FP8 allowed: LD_WQ_F8B) */
static ld_status bind_lin(ld_ds_model *m, const ld_safetensors *st, ld_model_tensor *mt, int64_t rows, int64_t cols,
                          ld_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_status s = bind_any(m, st, mt, LINEAR_F8B, rows, cols, err, fmt, ap);
    va_end(ap);
    return s;
}

/* a linear weight whose consumers need plain rows (FP8: dequantized) */
static ld_status bind_lin_plain(ld_ds_model *m, const ld_safetensors *st, ld_model_tensor *mt, int64_t rows,
                                int64_t cols, ld_error *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ld_status s = bind_any(m, st, mt, LINEAR_DEQUANT, rows, cols, err, fmt, ap);
    va_end(ap);
    return s;
}

void ld_ds_model_close(ld_ds_model *m)
{
    if (!m) return;
    ld_st_close(m->st);
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->expert_store);
    free(m->layers);
    free(m);
}

static ld_status bind_mlp(ld_ds_model *m, const ld_safetensors *st, ld_ds_expert *x, int64_t D, int64_t I,
                          ld_error *err, const char *prefix)
{
    LD_TRY(bind_lin(m, st, &x->gate, I, D, err, "%s.gate_proj.weight", prefix));
    LD_TRY(bind_lin(m, st, &x->up, I, D, err, "%s.up_proj.weight", prefix));
    return bind_lin(m, st, &x->down, D, I, err, "%s.down_proj.weight", prefix);
}

static ld_status bind_layer(ld_ds_model *m, const ld_safetensors *st, ld_ds_layer *L, int l, ld_error *err)
{
    const ld_ds_config *c = &m->cfg;
    const int64_t D = c->hidden, H = c->n_heads, dn = c->qk_nope, dr = c->qk_rope, dv = c->v_head;
    const int64_t C = c->kv_lora_rank, QR = c->q_lora_rank;
    char p[64];
    snprintf(p, sizeof p, "model.layers.%d", l);
    LD_TRY(bind(m, st, &L->attn_norm, 0, D, err, "%s.input_layernorm.weight", p));
    if (QR) {
        LD_TRY(bind_lin(m, st, &L->q_a, QR, D, err, "%s.self_attn.q_a_proj.weight", p));
        if (c->attention_bias) LD_TRY(bind(m, st, &L->q_a_bias, 0, QR, err, "%s.self_attn.q_a_proj.bias", p));
        LD_TRY(bind(m, st, &L->q_a_norm, 0, QR, err, "%s.self_attn.q_a_layernorm.weight", p));
        LD_TRY(bind_lin(m, st, &L->q_b, H * (dn + dr), QR, err, "%s.self_attn.q_b_proj.weight", p));
    } else {
        LD_TRY(bind_lin(m, st, &L->q, H * (dn + dr), D, err, "%s.self_attn.q_proj.weight", p));
    }
    LD_TRY(bind_lin(m, st, &L->kv_a, C + dr, D, err, "%s.self_attn.kv_a_proj_with_mqa.weight", p));
    if (c->attention_bias) LD_TRY(bind(m, st, &L->kv_a_bias, 0, C + dr, err, "%s.self_attn.kv_a_proj_with_mqa.bias", p));
    LD_TRY(bind(m, st, &L->kv_a_norm, 0, C, err, "%s.self_attn.kv_a_layernorm.weight", p));
    /* kv_b_proj: the only FP8 weight kept dequantized (fp32, owned).  MLA's
     * absorbed forms read it as W_UK / W_UV rows (ds_forward.c's
     * absorbed products on the host, the backends' mla_absorb_q /
     * mla_absorb_out entries), which take F32/F16/BF16 only.  SGLang too
     * dequantizes kv_b_proj to bf16 at load for its w_kc / w_vc. */
    LD_TRY(bind_lin_plain(m, st, &L->kv_b, H * (dn + dv), C, err, "%s.self_attn.kv_b_proj.weight", p));
    LD_TRY(bind_lin(m, st, &L->o, D, H * dv, err, "%s.self_attn.o_proj.weight", p));
    if (c->attention_bias) LD_TRY(bind(m, st, &L->o_bias, 0, D, err, "%s.self_attn.o_proj.bias", p));
    if (c->v32) {
        const int64_t HI = c->index_n_heads, DI = c->index_head_dim;
        LD_TRY(bind_lin(m, st, &L->idx_wq_b, HI * DI, QR, err, "%s.self_attn.indexer.wq_b.weight", p));
        LD_TRY(bind_lin(m, st, &L->idx_wk, DI, D, err, "%s.self_attn.indexer.wk.weight", p));
        LD_TRY(bind(m, st, &L->idx_k_norm, 0, DI, err, "%s.self_attn.indexer.k_norm.weight", p));
        LD_TRY(bind(m, st, &L->idx_k_bias, 0, DI, err, "%s.self_attn.indexer.k_norm.bias", p));
        LD_TRY(bind(m, st, &L->idx_weights, HI, D, err, "%s.self_attn.indexer.weights_proj.weight", p));
    }
    LD_TRY(bind(m, st, &L->ffn_norm, 0, D, err, "%s.post_attention_layernorm.weight", p));
    L->moe = ld_ds_layer_is_moe(c, l);
    char q[96];
    if (!L->moe) {
        snprintf(q, sizeof q, "%s.mlp", p);
        return bind_mlp(m, st, &L->mlp, D, c->intermediate, err, q);
    }
    LD_TRY(bind(m, st, &L->router, c->n_routed, D, err, "%s.mlp.gate.weight", p));
    LD_TRY(bind(m, st, &L->router_bias, 0, c->n_routed, err, "%s.mlp.gate.e_score_correction_bias", p));
    for (int e = 0; e < c->n_routed; e++) {
        snprintf(q, sizeof q, "%s.mlp.experts.%d", p, e);
        LD_TRY(bind_mlp(m, st, &L->experts[e], D, c->moe_intermediate, err, q));
    }
    if (c->n_shared) {
        snprintf(q, sizeof q, "%s.mlp.shared_experts", p);
        LD_TRY(bind_mlp(m, st, &L->mlp, D, (int64_t)c->moe_intermediate * c->n_shared, err, q));
    }
    return LD_OK;
}

ld_status ld_ds_model_bind(const ld_ds_config *cfg, const ld_safetensors *st, ld_ds_model **out, ld_error *err)
{
    *out = NULL;
    ld_ds_model *m = calloc(1, sizeof *m);
    if (!m) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    m->cfg = *cfg;
    int n_moe = cfg->n_layers > cfg->first_k_dense ? cfg->n_layers - cfg->first_k_dense : 0;
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    m->expert_store = calloc((size_t)n_moe * (size_t)cfg->n_routed + 1, sizeof *m->expert_store);
    if (!m->layers || !m->expert_store) {
        ld_ds_model_close(m);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    const int64_t V = cfg->vocab, D = cfg->hidden;
    ld_status s = bind(m, st, &m->embed, V, D, err, "model.embed_tokens.weight");
    if (s == LD_OK) s = bind(m, st, &m->norm, 0, D, err, "model.norm.weight");
    if (s == LD_OK) {
        if (cfg->tie_embeddings) m->lm_head = m->embed;
        else s = bind(m, st, &m->lm_head, V, D, err, "lm_head.weight");
    }
    for (int l = 0, k = 0; l < cfg->n_layers && s == LD_OK; l++) {
        if (ld_ds_layer_is_moe(cfg, l)) m->layers[l].experts = m->expert_store + (size_t)(k++) * (size_t)cfg->n_routed;
        s = bind_layer(m, st, &m->layers[l], l, err);
    }
    if (s != LD_OK) {
        ld_ds_model_close(m);
        return s;
    }
    *out = m;
    return LD_OK;
}

ld_status ld_ds_model_open(const char *dir, ld_ds_model **out, ld_error *err)
{
    *out = NULL;
    char *cp = ld_cfg_path(dir);
    ld_ds_config *cfg = malloc(sizeof *cfg);
    if (!cp || !cfg) {
        free(cp);
        free(cfg);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    ld_status s = ld_ds_config_load(cp, cfg, err);
    free(cp);
    ld_safetensors *st = NULL;
    if (s == LD_OK) s = ld_st_open(dir, &st, err);
    if (s == LD_OK) s = ld_ds_model_bind(cfg, st, out, err);
    free(cfg);
    if (s != LD_OK) {
        ld_st_close(st);
        if (err) err->path = dir;
        return s;
    }
    (*out)->st = st;
    return LD_OK;
}
