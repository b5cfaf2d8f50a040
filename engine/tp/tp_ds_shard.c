/* tp_ds_shard.c - see tp_ds_shard.h. */
#include "tp_ds_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_slice.h"

struct ld_tp_ds_shard {
    ld_ds_model model;      /* st and owned NULL; layers and expert_store owned */
    int n, rank;
    ld_tp_owned copies;     /* K-slices (FP8 scale columns too) and the fp32 biases */
    float **bias;           /* [n_layers]: o_proj's bias after the reduce, or NULL */
};

/* one split: the shard being built (NULL: only check), the full config,
 * the group */
typedef struct split_ctx {
    ld_tp_ds_shard *s;
    const ld_ds_config *c;
    int n, rank;
} split_ctx;

/* kv_b_proj is stored FP8 but bound dequantized (ds_model.h): its
 * cuts are still checked against the file's scale blocks, as a server
 * holding the FP8 weights would shard them.  A copy for the check only. */
static ld_model_tensor as_stored(const split_ctx *x, const ld_model_tensor *t)
{
    ld_model_tensor v = *t;
    if (t->host.quant == LD_WQ_NONE && t->st->dtype == LD_DT_F8_E4M3) {
        v.host.quant = LD_WQ_F8B;
        v.host.scale = NULL;
        v.host.scale_br = x->c->fp8_block[0];
        v.host.scale_bc = x->c->fp8_block[1];
    }
    return v;
}

/* Rank 0's part stands for all: the parts are equal, so the boundaries
 * k * part all fall on blocks iff part does. */
static ld_status check_blocks(const split_ctx *x, const ld_model_tensor *t, int axis, int64_t part, ld_error *err)
{
    if (x->n == 1) return LD_OK;
    ld_model_tensor v = as_stored(x, t);
    return ld_tp_check_cut(&v, axis, 0, part, err);
}

/* `t` (absent: nothing) split along `axis` into parts of `part`: checked,
 * and with a shard this rank's part made */
static ld_status split(const split_ctx *x, ld_model_tensor *t, int axis, int64_t part, ld_error *err)
{
    if (!t->st) return LD_OK;
    LD_TRY(check_blocks(x, t, axis, part, err));
    if (!x->s || x->n == 1) return LD_OK;
    if (axis == LD_TP_ROWS) return ld_tp_slice_rows(t, x->rank * part, part, err);
    return ld_tp_slice_cols(&x->s->copies, t, x->rank * part, part, err);
}

/* a SwiGLU MLP of intermediate width `width`: gate/up by rows, down by columns */
static ld_status split_mlp(const split_ctx *x, ld_ds_expert *e, int64_t width, ld_error *err)
{
    int64_t part = width / x->n;
    LD_TRY(split(x, &e->gate, LD_TP_ROWS, part, err));
    LD_TRY(split(x, &e->up, LD_TP_ROWS, part, err));
    return split(x, &e->down, LD_TP_COLS, part, err);
}

/* Layer `L` (a copy of the model's: its tensors are rewritten only with a
 * shard) split over the heads and the intermediate rows. */
static ld_status split_layer(const split_ctx *x, ld_ds_layer *L, ld_error *err)
{
    const ld_ds_config *c = x->c;
    int64_t hn = c->n_heads / x->n;
    LD_TRY(split(x, &L->q_b, LD_TP_ROWS, hn * (c->qk_nope + c->qk_rope), err));
    LD_TRY(split(x, &L->q, LD_TP_ROWS, hn * (c->qk_nope + c->qk_rope), err));
    LD_TRY(split(x, &L->kv_b, LD_TP_ROWS, hn * (c->qk_nope + c->v_head), err));
    LD_TRY(split(x, &L->o, LD_TP_COLS, hn * c->v_head, err));
    if (!L->moe) return split_mlp(x, &L->mlp, c->intermediate, err);
    LD_TRY(split_mlp(x, &L->mlp, (int64_t)c->moe_intermediate * c->n_shared, err));
    for (int e = 0; e < c->n_routed; e++) LD_TRY(split_mlp(x, &L->experts[e], c->moe_intermediate, err));
    return LD_OK;
}

/* ------------------------------------------------------------ checks */

ld_status ld_tp_ds_check_config(const ld_ds_config *c, int n, ld_error *err)
{
    if (n < 1 || n > 1024) return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d: give 1 to 1024", n);
    int dense = c->first_k_dense > 0, moe = c->first_k_dense < c->n_layers;
    const struct { const char *field; int v, used; } f[] = {
        {"num_attention_heads", c->n_heads, 1}, {"intermediate_size", c->intermediate, dense},
        {"moe_intermediate_size", c->moe_intermediate, moe}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].used && f[i].v % n)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d does not divide the model's %s (%d)", n,
                           f[i].field, f[i].v);
    return LD_OK;
}

ld_status ld_tp_ds_check(const ld_ds_model *m, int n, ld_error *err)
{
    LD_TRY(ld_tp_ds_check_config(&m->cfg, n, err));
    split_ctx x = {NULL, &m->cfg, n, 0};
    for (int l = 0; l < m->cfg.n_layers; l++) {
        ld_ds_layer L = m->layers[l]; /* a copy: nothing is rewritten without a shard */
        LD_TRY(split_layer(&x, &L, err));
    }
    return LD_OK;
}

/* ------------------------------------------------------------ shard */

/* layer l: its own expert table, its tensors split, o_proj's bias moved
 * after the reduce */
static ld_status shard_layer(ld_tp_ds_shard *s, const ld_ds_model *m, int l, ld_ds_expert *experts, ld_error *err)
{
    ld_ds_layer *L = &s->model.layers[l];
    *L = m->layers[l];
    if (L->moe) {
        memcpy(experts, m->layers[l].experts, (size_t)m->cfg.n_routed * sizeof *experts);
        L->experts = experts;
    }
    split_ctx x = {s, &m->cfg, s->n, s->rank};
    LD_TRY(split_layer(&x, L, err));
    if (s->n == 1) return LD_OK;
    LD_TRY(ld_tp_bias_f32(&s->copies, &L->o_bias, &s->bias[l], err));
    memset(&L->o_bias, 0, sizeof L->o_bias);
    return LD_OK;
}

/* the shard's config: the heads and intermediate widths of one rank */
static void shard_config(ld_ds_config *c, int n)
{
    c->n_heads /= n;
    c->intermediate /= n;
    c->moe_intermediate /= n;
}

ld_status ld_tp_ds_shard_create(const ld_ds_model *m, int n, int rank, ld_tp_ds_shard **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_ds_check(m, n, err));
    if (rank < 0 || rank >= n) return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d outside [0, %d)", rank, n);
    size_t L = (size_t)m->cfg.n_layers, E = (size_t)m->cfg.n_routed;
    ld_tp_ds_shard *s = calloc(1, sizeof *s);
    if (s) {
        s->model.layers = calloc(L ? L : 1, sizeof *s->model.layers);
        s->model.expert_store = calloc(L * E > 0 ? L * E : 1, sizeof *s->model.expert_store);
        s->bias = calloc(L ? L : 1, sizeof *s->bias);
    }
    if (!s || !s->model.layers || !s->model.expert_store || !s->bias) {
        ld_tp_ds_shard_free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->n = n;
    s->rank = rank;
    s->model.cfg = m->cfg;
    s->model.embed = m->embed;
    s->model.norm = m->norm;
    s->model.lm_head = m->lm_head;
    for (size_t l = 0; l < L; l++) {
        ld_status st = shard_layer(s, m, (int)l, s->model.expert_store + l * E, err);
        if (st != LD_OK) {
            ld_tp_ds_shard_free(s);
            return st;
        }
    }
    shard_config(&s->model.cfg, n);
    *out = s;
    return LD_OK;
}

const ld_ds_model *ld_tp_ds_shard_model(const ld_tp_ds_shard *s)
{
    return &s->model;
}

const float *ld_tp_ds_shard_bias(const ld_tp_ds_shard *s, int layer, int which)
{
    return which == 0 ? s->bias[layer] : NULL;
}

size_t ld_tp_ds_shard_copied_bytes(const ld_tp_ds_shard *s)
{
    return s->copies.bytes;
}

void ld_tp_ds_shard_free(ld_tp_ds_shard *s)
{
    if (!s) return;
    ld_tp_owned_free(&s->copies);
    free(s->bias);
    free(s->model.layers);
    free(s->model.expert_store);
    free(s);
}
