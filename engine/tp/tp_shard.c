/* tp_shard.c - see tp_shard.h. */
#include "tp_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_slice.h"

struct ld_tp_shard {
    ld_model model;       /* layers owned; st/gguf NULL (borrowed tensors) */
    int n, rank;
    ld_tp_owned copies;   /* K-slice data, FP8 scale copies, fp32 biases */
    float **bias;         /* [n_layers][2] fp32 row-parallel biases, or NULL */
};

/* ------------------------------------------------------------ shard */

ld_status ld_tp_check_config(const ld_model_config *c, int n, ld_error *err)
{
    if (n < 1 || n > 1024) return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d: give 1 to 1024", n);
    const struct { const char *field; int v; } f[] = {
        {"num_attention_heads", c->n_heads}, {"num_key_value_heads", c->n_kv_heads},
        {"intermediate_size", c->intermediate}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v % n)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d does not divide the model's %s (%d)", n,
                           f[i].field, f[i].v);
    return LD_OK;
}

static ld_status shard_layer(ld_tp_shard *s, int l, ld_error *err)
{
    const ld_model_config *c = &s->model.cfg; /* already divided */
    ld_model_layer *L = &s->model.layers[l];
    int64_t r = s->rank, hd = c->head_dim;
    int64_t q = (int64_t)c->n_heads * hd, kv = (int64_t)c->n_kv_heads * hd, I = c->intermediate;
    LD_TRY(ld_tp_slice_rows(&L->wq, r * q, q, err));
    LD_TRY(ld_tp_slice_rows(&L->wk, r * kv, kv, err));
    LD_TRY(ld_tp_slice_rows(&L->wv, r * kv, kv, err));
    if (ld_tp_present(&L->bq)) ld_tp_slice_vector(&L->bq, r * q, q);
    if (ld_tp_present(&L->bk)) ld_tp_slice_vector(&L->bk, r * kv, kv);
    if (ld_tp_present(&L->bv)) ld_tp_slice_vector(&L->bv, r * kv, kv);
    LD_TRY(ld_tp_slice_rows(&L->w_gate, r * I, I, err));
    LD_TRY(ld_tp_slice_rows(&L->w_up, r * I, I, err));
    if (ld_tp_present(&L->b_gate)) ld_tp_slice_vector(&L->b_gate, r * I, I);
    if (ld_tp_present(&L->b_up)) ld_tp_slice_vector(&L->b_up, r * I, I);
    LD_TRY(ld_tp_slice_cols(&s->copies, &L->wo, r * q, q, err));
    LD_TRY(ld_tp_slice_cols(&s->copies, &L->w_down, r * I, I, err));
    /* the row-parallel biases: after the reduce */
    LD_TRY(ld_tp_bias_f32(&s->copies, &L->bo, &s->bias[2 * l], err));
    LD_TRY(ld_tp_bias_f32(&s->copies, &L->b_down, &s->bias[2 * l + 1], err));
    memset(&L->bo, 0, sizeof L->bo);
    memset(&L->b_down, 0, sizeof L->b_down);
    return LD_OK;
}

ld_status ld_tp_shard_create(const ld_model *m, int n, int rank, ld_tp_shard **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_check_config(&m->cfg, n, err));
    if (rank < 0 || rank >= n) return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d outside [0, %d)", rank, n);
    ld_tp_shard *s = calloc(1, sizeof *s);
    size_t L = (size_t)m->cfg.n_layers;
    if (s) {
        s->model.layers = malloc((L ? L : 1) * sizeof *s->model.layers);
        s->bias = calloc(2 * (L ? L : 1), sizeof *s->bias);
    }
    if (!s || !s->model.layers || !s->bias) {
        ld_tp_shard_free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->n = n;
    s->rank = rank;
    s->model.cfg = m->cfg;
    s->model.embed = m->embed;
    s->model.norm = m->norm;
    s->model.lm_head = m->lm_head;
    memcpy(s->model.layers, m->layers, L * sizeof *s->model.layers);
    if (n > 1) {
        s->model.cfg.n_heads /= n;
        s->model.cfg.n_kv_heads /= n;
        s->model.cfg.intermediate /= n;
        for (size_t l = 0; l < L; l++) {
            ld_status st = shard_layer(s, (int)l, err);
            if (st != LD_OK) {
                ld_tp_shard_free(s);
                return st;
            }
        }
    }
    *out = s;
    return LD_OK;
}

const ld_model *ld_tp_shard_model(const ld_tp_shard *s)
{
    return &s->model;
}

const float *ld_tp_shard_bias(const ld_tp_shard *s, int layer, int which)
{
    return s->bias[2 * layer + which];
}

size_t ld_tp_shard_copied_bytes(const ld_tp_shard *s)
{
    return s->copies.bytes;
}

void ld_tp_shard_free(ld_tp_shard *s)
{
    if (!s) return;
    ld_tp_owned_free(&s->copies);
    free(s->bias);
    free(s->model.layers);
    free(s);
}
