/* tp_deepseek_shard.c - see tp_deepseek_shard.h. */
#include "tp_deepseek_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

struct ld_tp_ds_shard {
    ld_ds_model model;      /* st and owned NULL; layers and expert_store owned */
    int n, rank;
    void **copies;          /* K-slices and the fp32 biases */
    size_t n_copies, cap_copies, copied;
    float **bias;           /* [n_layers]: o_proj's bias after the reduce, or NULL */
};

/* one split: the shard being built (NULL: only check), the full config,
 * the group */
typedef struct split_ctx {
    ld_tp_ds_shard *s;
    const ld_ds_config *c;
    int n, rank;
} split_ctx;

enum { AXIS_ROWS = 0, AXIS_COLS = 1 }; /* column-parallel, row-parallel */

static void *own(ld_tp_ds_shard *s, size_t bytes)
{
    if (s->n_copies == s->cap_copies) {
        size_t cap = s->cap_copies ? 2 * s->cap_copies : 16;
        void **p = realloc(s->copies, cap * sizeof *p);
        if (!p) return NULL;
        s->copies = p;
        s->cap_copies = cap;
    }
    void *q = malloc(bytes ? bytes : 1);
    if (q) {
        s->copies[s->n_copies++] = q;
        s->copied += bytes;
    }
    return q;
}

/* A tensor stored as F8_E4M3 (bound dequantized): its parts must be whole
 * scale blocks.  The parts are equal, so the boundaries k * part all fall
 * on blocks iff part does. */
static ld_status check_blocks(const split_ctx *x, const ld_model_tensor *t, int axis, int64_t part, ld_error *err)
{
    if (x->n == 1 || !t->st || t->st->dtype != LD_DT_F8_E4M3) return LD_OK;
    int64_t b = x->c->fp8_block[axis];
    if (part % b == 0) return LD_OK;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "tensor parallel size %d: tensor '%s' is FP8 with scale blocks of %dx%d, and a rank's %lld %s "
                   "of it would cut them (the split needs a multiple of %lld %s per rank)", x->n, t->st->name,
                   x->c->fp8_block[0], x->c->fp8_block[1], (long long)part, axis == AXIS_ROWS ? "rows" : "columns",
                   (long long)b, axis == AXIS_ROWS ? "rows" : "columns");
}

/* rows [r0, r0 + n): a view */
static void rows_view(ld_model_tensor *t, int64_t r0, int64_t n)
{
    ld_host_tensor *h = &t->host;
    h->data = (const unsigned char *)h->data + (size_t)r0 * (size_t)h->cols * ld_dtype_size(h->dtype);
    h->rows = n;
}

/* columns [c0, c0 + n) of every row: a copy the shard owns */
static ld_status cols_copy(ld_tp_ds_shard *s, ld_model_tensor *t, int64_t c0, int64_t n, ld_error *err)
{
    ld_host_tensor *h = &t->host;
    size_t es = ld_dtype_size(h->dtype), src_row = (size_t)h->cols * es, dst_row = (size_t)n * es;
    unsigned char *dst = own(s, (size_t)h->rows * dst_row);
    if (!dst) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const unsigned char *src = h->data;
    for (int64_t r = 0; r < h->rows; r++) memcpy(dst + (size_t)r * dst_row, src + (size_t)r * src_row + (size_t)c0 * es,
                                                  dst_row);
    h->data = dst;
    h->cols = n;
    return LD_OK;
}

/* `t` (absent: nothing) split along `axis` into parts of `part`: checked,
 * and with a shard this rank's part made */
static ld_status split(const split_ctx *x, ld_model_tensor *t, int axis, int64_t part, ld_error *err)
{
    if (!t->st) return LD_OK;
    LD_TRY(check_blocks(x, t, axis, part, err));
    if (!x->s || x->n == 1) return LD_OK;
    if (axis == AXIS_ROWS) {
        rows_view(t, x->rank * part, part);
        return LD_OK;
    }
    return cols_copy(x->s, t, x->rank * part, part, err);
}

/* a SwiGLU MLP of intermediate width `width`: gate/up by rows, down by columns */
static ld_status split_mlp(const split_ctx *x, ld_ds_expert *e, int64_t width, ld_error *err)
{
    int64_t part = width / x->n;
    LD_TRY(split(x, &e->gate, AXIS_ROWS, part, err));
    LD_TRY(split(x, &e->up, AXIS_ROWS, part, err));
    return split(x, &e->down, AXIS_COLS, part, err);
}

/* Layer `L` (a copy of the model's: its tensors are rewritten only with a
 * shard) split over the heads and the intermediate rows. */
static ld_status split_layer(const split_ctx *x, ld_ds_layer *L, ld_error *err)
{
    const ld_ds_config *c = x->c;
    int64_t hn = c->n_heads / x->n;
    LD_TRY(split(x, &L->q_b, AXIS_ROWS, hn * (c->qk_nope + c->qk_rope), err));
    LD_TRY(split(x, &L->q, AXIS_ROWS, hn * (c->qk_nope + c->qk_rope), err));
    LD_TRY(split(x, &L->kv_b, AXIS_ROWS, hn * (c->qk_nope + c->v_head), err));
    LD_TRY(split(x, &L->o, AXIS_COLS, hn * c->v_head, err));
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
    if (s->n == 1 || !L->o_bias.st) return LD_OK;
    const ld_host_tensor *h = &L->o_bias.host;
    float *b = own(s, (size_t)h->cols * sizeof *b);
    if (!b) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_kdt dt = h->dtype == LD_DT_F16 ? LD_KDT_F16 : h->dtype == LD_DT_BF16 ? LD_KDT_BF16 : LD_KDT_F32;
    ld_ref_to_f32(b, h->data, dt, 0, (size_t)h->cols);
    s->bias[l] = b;
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
    return s->copied;
}

void ld_tp_ds_shard_free(ld_tp_ds_shard *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_copies; i++) free(s->copies[i]);
    free(s->copies);
    free(s->bias);
    free(s->model.layers);
    free(s->model.expert_store);
    free(s);
}
