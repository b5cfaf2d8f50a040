/* tp_ds4_shard.c - see tp_ds4_shard.h. */
#include "tp_ds4_shard.h"

#include <stdlib.h>
#include <string.h>

#include "tp_slice.h"

struct ld_tp_ds4_shard {
    ld_ds4_model model;     /* st and owned NULL; layers and expert_store owned */
    int n, rank;
    ld_tp_owned copies;     /* K-slices (their scale columns too) */
};

/* one split: the shard being built (NULL: only check), the group */
typedef struct split_ctx {
    ld_tp_ds4_shard *s;
    int n, rank;
} split_ctx;

/* `t` (absent: nothing) split along `axis` into parts of `part`: checked
 * (rank 0's part stands for all: the parts are equal, so every boundary
 * falls on a block iff the first does), and with a shard this rank's part
 * made */
static ld_status split(const split_ctx *x, ld_model_tensor *t, int axis, int64_t part, ld_error *err)
{
    if (!ld_tp_present(t) || x->n == 1) return LD_OK;
    LD_TRY(ld_tp_check_cut(t, axis, 0, part, err));
    if (!x->s) return LD_OK;
    if (axis == LD_TP_ROWS) return ld_tp_slice_rows(t, x->rank * part, part, err);
    return ld_tp_slice_cols(&x->s->copies, t, x->rank * part, part, err);
}

/* a clamped SwiGLU MLP of intermediate width I: w1/w3 by rows, w2 by
 * columns */
static ld_status split_mlp(const split_ctx *x, ld_ds4_mlp *e, int64_t I, ld_error *err)
{
    int64_t part = I / x->n;
    LD_TRY(split(x, &e->gate, LD_TP_ROWS, part, err));
    LD_TRY(split(x, &e->up, LD_TP_ROWS, part, err));
    return split(x, &e->down, LD_TP_COLS, part, err);
}

/* Layer `L` (a copy of the model's: its tensors are rewritten only with a
 * shard) split over the heads, wo_a's groups and the intermediate rows. */
static ld_status split_layer(const split_ctx *x, const ld_ds4_config *c, ld_ds4_layer *L, ld_error *err)
{
    int64_t hn = c->n_heads / x->n, gn = c->o_groups / x->n;
    LD_TRY(split(x, &L->wq_b, LD_TP_ROWS, hn * c->head_dim, err));
    LD_TRY(split(x, &L->wo_a, LD_TP_ROWS, gn * c->o_lora_rank, err));
    LD_TRY(split(x, &L->wo_b, LD_TP_COLS, gn * c->o_lora_rank, err));
    if (x->s && x->n > 1) ld_tp_slice_vector(&L->sinks, x->rank * hn, hn); /* plain [H] */
    LD_TRY(split_mlp(x, &L->shared, c->moe_intermediate, err));
    for (int e = 0; e < c->n_routed; e++) LD_TRY(split_mlp(x, &L->experts[e], c->moe_intermediate, err));
    return LD_OK;
}

/* ------------------------------------------------------------ checks */

ld_status ld_tp_ds4_check_config(const ld_ds4_config *c, int n, ld_error *err)
{
    if (n < 1 || n > 1024) return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d: give 1 to 1024", n);
    const struct { const char *field; int v; } f[] = {
        {"num_attention_heads", c->n_heads}, {"o_groups", c->o_groups}, {"moe_intermediate_size", c->moe_intermediate}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v % n)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "tensor parallel size %d does not divide the model's %s (%d)", n,
                           f[i].field, f[i].v);
    return LD_OK;
}

ld_status ld_tp_ds4_check(const ld_ds4_model *m, int n, ld_error *err)
{
    LD_TRY(ld_tp_ds4_check_config(&m->cfg, n, err));
    split_ctx x = {NULL, n, 0};
    for (int l = 0; l < m->cfg.n_layers; l++) {
        ld_ds4_layer L = m->layers[l]; /* a copy: nothing is rewritten without a shard */
        LD_TRY(split_layer(&x, &m->cfg, &L, err));
    }
    return LD_OK;
}

/* ------------------------------------------------------------ shard */

/* layer l: its own expert table, its tensors split */
static ld_status shard_layer(ld_tp_ds4_shard *s, const ld_ds4_model *m, int l, ld_ds4_mlp *experts, ld_error *err)
{
    ld_ds4_layer *L = &s->model.layers[l];
    *L = m->layers[l];
    memcpy(experts, m->layers[l].experts, (size_t)m->cfg.n_routed * sizeof *experts);
    L->experts = experts;
    split_ctx x = {s, s->n, s->rank};
    return split_layer(&x, &m->cfg, L, err);
}

ld_status ld_tp_ds4_shard_create(const ld_ds4_model *m, int n, int rank, ld_tp_ds4_shard **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_ds4_check(m, n, err));
    if (rank < 0 || rank >= n) return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d outside [0, %d)", rank, n);
    size_t L = (size_t)m->cfg.n_layers, E = (size_t)m->cfg.n_routed;
    ld_tp_ds4_shard *s = calloc(1, sizeof *s);
    if (s) {
        s->model = *m; /* the replicated tensors, the config; tables replaced below */
        s->model.st = NULL;
        s->model.owned = NULL;
        s->model.n_owned = s->model.cap_owned = 0;
        s->model.layers = calloc(L ? L : 1, sizeof *s->model.layers);
        s->model.expert_store = calloc(L * E > 0 ? L * E : 1, sizeof *s->model.expert_store);
    }
    if (!s || !s->model.layers || !s->model.expert_store) {
        ld_tp_ds4_shard_free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->n = n;
    s->rank = rank;
    for (size_t l = 0; l < L; l++) {
        ld_status st = shard_layer(s, m, (int)l, s->model.expert_store + l * E, err);
        if (st != LD_OK) {
            ld_tp_ds4_shard_free(s);
            return st;
        }
    }
    s->model.cfg.n_heads /= n;
    s->model.cfg.o_groups /= n;
    s->model.cfg.moe_intermediate /= n;
    *out = s;
    return LD_OK;
}

const ld_ds4_model *ld_tp_ds4_shard_model(const ld_tp_ds4_shard *s)
{
    return &s->model;
}

size_t ld_tp_ds4_shard_copied_bytes(const ld_tp_ds4_shard *s)
{
    return s->copies.bytes;
}

void ld_tp_ds4_shard_free(ld_tp_ds4_shard *s)
{
    if (!s) return;
    ld_tp_owned_free(&s->copies);
    free(s->model.layers);
    free(s->model.expert_store);
    free(s);
}
