/* tp_shard.c - see tp_shard.h. */
#include "tp_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ref_ops.h"

struct ld_tp_shard {
    ld_model model;       /* layers owned; st/gguf NULL (borrowed tensors) */
    int n, rank;
    void **copies;        /* K-slice data and FP8 scale copies */
    size_t n_copies, cap_copies, copied;
    float **bias;         /* [n_layers][2] fp32 row-parallel biases, or NULL */
};

/* ------------------------------------------------------------ helpers */

static const char *tensor_name(const ld_model_tensor *t, char *buf, size_t cap)
{
    if (t->st) snprintf(buf, cap, "%s", t->st->name);
    else if (t->gg) snprintf(buf, cap, "%.*s", (int)(t->gg->name.len > 200 ? 200 : t->gg->name.len), t->gg->name.ptr);
    else snprintf(buf, cap, "?");
    return buf;
}

static int present(const ld_model_tensor *t)
{
    return t->st || t->gg;
}

/* elements per block and bytes per block of a storage type (plain types:
 * 1 and the element size; FP8: 1 byte per element) */
static void block_of(const ld_host_tensor *h, size_t *elems, size_t *bytes)
{
    static const size_t blk[][2] = {
        [LD_WQ_Q4_0] = {32, 18}, [LD_WQ_Q4_1] = {32, 20}, [LD_WQ_Q8_0] = {32, 34},
        [LD_WQ_Q4_K] = {256, 144}, [LD_WQ_Q6_K] = {256, 210}, [LD_WQ_F8B] = {1, 1},
    };
    if (h->quant != LD_WQ_NONE) {
        *elems = blk[h->quant][0];
        *bytes = blk[h->quant][1];
    } else {
        *elems = 1;
        *bytes = ld_dtype_size(h->dtype);
    }
}

static const char *quant_name(const ld_host_tensor *h)
{
    static const char *const names[] = {"", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K", "FP8"};
    return h->quant != LD_WQ_NONE ? names[h->quant] : "plain";
}

static size_t row_bytes(const ld_host_tensor *h)
{
    size_t e, b;
    block_of(h, &e, &b);
    return (size_t)h->cols / e * b;
}

static void *own(ld_tp_shard *s, size_t bytes)
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

/* ------------------------------------------------------------ slices */

/* Rows [r0, r0 + n) of a matrix: a view.  FP8 scale rows must not be cut. */
static ld_status slice_rows(ld_model_tensor *t, int64_t r0, int64_t n, ld_error *err)
{
    ld_host_tensor *h = &t->host;
    if (h->quant == LD_WQ_F8B && (r0 % h->scale_br || (n % h->scale_br && r0 + n != h->rows))) {
        char name[256];
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                       "tensor '%s': rows %lld..%lld for this rank cut its FP8 scale blocks of %d rows",
                       tensor_name(t, name, sizeof name), (long long)r0, (long long)(r0 + n), h->scale_br);
    }
    if (h->quant == LD_WQ_F8B) {
        int64_t bcols = (h->cols + h->scale_bc - 1) / h->scale_bc;
        h->scale += (size_t)(r0 / h->scale_br) * (size_t)bcols;
    }
    h->data = (const unsigned char *)h->data + (size_t)r0 * row_bytes(h);
    h->rows = n;
    return LD_OK;
}

/* Elements [c0, c0 + n) of a vector (a bias): a view. */
static void slice_vector(ld_model_tensor *t, int64_t c0, int64_t n)
{
    ld_host_tensor *h = &t->host;
    h->data = (const unsigned char *)h->data + (size_t)c0 * ld_dtype_size(h->dtype);
    h->cols = n;
}

/* Refuses a K-slice [c0, c0 + n) that cuts a block. */
static ld_status check_kslice(const ld_model_tensor *t, int64_t c0, int64_t n, ld_error *err)
{
    const ld_host_tensor *h = &t->host;
    size_t e, b;
    block_of(h, &e, &b);
    int64_t blk = h->quant == LD_WQ_F8B ? h->scale_bc : (int64_t)e;
    if (c0 % blk == 0 && (n % blk == 0 || c0 + n == h->cols)) return LD_OK;
    char name[256];
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "tensor '%s': its columns %lld..%lld for this rank cut its %s blocks of %lld (the split needs "
                   "a multiple of %lld columns per rank)", tensor_name(t, name, sizeof name), (long long)c0,
                   (long long)(c0 + n), quant_name(h), (long long)blk, (long long)blk);
}

/* Columns [c0, c0 + n) of every row: a copy the shard owns. */
static ld_status slice_cols(ld_tp_shard *s, ld_model_tensor *t, int64_t c0, int64_t n, ld_error *err)
{
    ld_host_tensor *h = &t->host;
    LD_TRY(check_kslice(t, c0, n, err));
    size_t e, b;
    block_of(h, &e, &b);
    size_t src_row = row_bytes(h), dst_row = (size_t)n / e * b, off = (size_t)c0 / e * b;
    unsigned char *dst = own(s, (size_t)h->rows * dst_row);
    if (!dst) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const unsigned char *src = h->data;
    for (int64_t r = 0; r < h->rows; r++) memcpy(dst + (size_t)r * dst_row, src + (size_t)r * src_row + off, dst_row);
    if (h->quant == LD_WQ_F8B) { /* the scale columns of the slice */
        int64_t brows = (h->rows + h->scale_br - 1) / h->scale_br, bcols = (h->cols + h->scale_bc - 1) / h->scale_bc;
        int64_t b0 = c0 / h->scale_bc, bn = (n + h->scale_bc - 1) / h->scale_bc;
        float *sc = own(s, (size_t)(brows * bn) * sizeof *sc);
        if (!sc) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        for (int64_t r = 0; r < brows; r++)
            memcpy(sc + r * bn, h->scale + r * bcols + b0, (size_t)bn * sizeof *sc);
        h->scale = sc;
    }
    h->data = dst;
    h->cols = n;
    return LD_OK;
}

/* A bias vector as fp32 (owned by the shard). */
static ld_status bias_f32(ld_tp_shard *s, const ld_model_tensor *t, float **out, ld_error *err)
{
    *out = NULL;
    if (!present(t)) return LD_OK;
    const ld_host_tensor *h = &t->host;
    float *v = own(s, (size_t)h->cols * sizeof *v);
    if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_kdt dt = h->dtype == LD_DT_F16 ? LD_KDT_F16 : h->dtype == LD_DT_BF16 ? LD_KDT_BF16 : LD_KDT_F32;
    ld_ref_to_f32(v, h->data, dt, 0, (size_t)h->cols);
    *out = v;
    return LD_OK;
}

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
    LD_TRY(slice_rows(&L->wq, r * q, q, err));
    LD_TRY(slice_rows(&L->wk, r * kv, kv, err));
    LD_TRY(slice_rows(&L->wv, r * kv, kv, err));
    if (present(&L->bq)) slice_vector(&L->bq, r * q, q);
    if (present(&L->bk)) slice_vector(&L->bk, r * kv, kv);
    if (present(&L->bv)) slice_vector(&L->bv, r * kv, kv);
    LD_TRY(slice_rows(&L->w_gate, r * I, I, err));
    LD_TRY(slice_rows(&L->w_up, r * I, I, err));
    if (present(&L->b_gate)) slice_vector(&L->b_gate, r * I, I);
    if (present(&L->b_up)) slice_vector(&L->b_up, r * I, I);
    LD_TRY(slice_cols(s, &L->wo, r * q, q, err));
    LD_TRY(slice_cols(s, &L->w_down, r * I, I, err));
    /* the row-parallel biases: after the reduce */
    LD_TRY(bias_f32(s, &L->bo, &s->bias[2 * l], err));
    LD_TRY(bias_f32(s, &L->b_down, &s->bias[2 * l + 1], err));
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
    return s->copied;
}

void ld_tp_shard_free(ld_tp_shard *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n_copies; i++) free(s->copies[i]);
    free(s->copies);
    free(s->bias);
    free(s->model.layers);
    free(s);
}
