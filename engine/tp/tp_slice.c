/* tp_slice.c - see tp_slice.h. */
#include "tp_slice.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/host_tensor.h"
#include "kernels/ref/ref_ops.h"

/* ------------------------------------------------------------ ownership */

void *ld_tp_own(ld_tp_owned *o, size_t bytes)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 16;
        void **p = realloc(o->p, cap * sizeof *p);
        if (!p) return NULL;
        o->p = p;
        o->cap = cap;
    }
    void *q = malloc(bytes ? bytes : 1);
    if (q) {
        o->p[o->n++] = q;
        o->bytes += bytes;
    }
    return q;
}

void ld_tp_owned_free(ld_tp_owned *o)
{
    for (size_t i = 0; i < o->n; i++) free(o->p[i]);
    free(o->p);
    memset(o, 0, sizeof *o);
}

const char *ld_tp_tensor_name(const ld_model_tensor *t, char *buf, size_t cap)
{
    if (t->st) snprintf(buf, cap, "%s", t->st->name);
    else if (t->gg) snprintf(buf, cap, "%.*s", (int)(t->gg->name.len > 200 ? 200 : t->gg->name.len), t->gg->name.ptr);
    else snprintf(buf, cap, "?");
    return buf;
}

int ld_tp_present(const ld_model_tensor *t)
{
    return t->st || t->gg;
}

/* ------------------------------------------------------------ blocks */

static int scaled(const ld_host_tensor *h)
{
    return h->quant == LD_WQ_F8B || h->quant == LD_WQ_F4B;
}

static const char *quant_name(const ld_host_tensor *h)
{
    static const char *const names[] = {"plain", "Q4_0", "Q4_1", "Q8_0", "Q4_K", "Q6_K", "FP8", "FP4"};
    return names[h->quant];
}

/* the block a cut along `axis` must keep whole: a scale block, or along
 * the columns a GGML block (and FP4's byte of two) */
static int64_t cut_block(const ld_host_tensor *h, int axis)
{
    size_t e, b;
    ld_host_block(h, &e, &b);
    if (axis == LD_TP_ROWS) return scaled(h) ? h->scale_br : 1;
    int64_t blk = scaled(h) ? h->scale_bc : (int64_t)e;
    return blk % (int64_t)e ? blk * (int64_t)e : blk;
}

ld_status ld_tp_check_cut(const ld_model_tensor *t, int axis, int64_t start, int64_t n, ld_error *err)
{
    const ld_host_tensor *h = &t->host;
    int64_t blk = cut_block(h, axis), total = axis == LD_TP_ROWS ? h->rows : h->cols;
    if (start % blk == 0 && (n % blk == 0 || start + n == total)) return LD_OK;
    char name[224], what[96];
    const char *unit = axis == LD_TP_ROWS ? "rows" : "columns";
    if (scaled(h))
        snprintf(what, sizeof what, "%s with scale blocks of %dx%d", quant_name(h), h->scale_br, h->scale_bc);
    else
        snprintf(what, sizeof what, "%s", quant_name(h));
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "tensor '%s' is %s: this rank's %lld %s (%lld..%lld) cut its %s%s blocks of %lld %s (a split "
                   "needs a multiple of %lld %s per rank)", ld_tp_tensor_name(t, name, sizeof name), what,
                   (long long)n, unit, (long long)start, (long long)(start + n), quant_name(h),
                   scaled(h) ? " scale" : "", (long long)blk, unit, (long long)blk, unit);
}

/* ------------------------------------------------------------ slices */

ld_status ld_tp_slice_rows(ld_model_tensor *t, int64_t r0, int64_t n, ld_error *err)
{
    LD_TRY(ld_tp_check_cut(t, LD_TP_ROWS, r0, n, err));
    char name[224];
    ld_host_tensor v;
    LD_TRY(ld_host_rows(&t->host, ld_tp_tensor_name(t, name, sizeof name), r0, n, &v, err));
    t->host = v;
    return LD_OK;
}

void ld_tp_slice_vector(ld_model_tensor *t, int64_t c0, int64_t n)
{
    ld_host_tensor *h = &t->host;
    h->data = (const unsigned char *)h->data + (size_t)c0 * ld_dtype_size(h->dtype);
    h->cols = n;
}

/* the scale columns of the K-slice [c0, c0 + n): a copy owned by `o` */
static ld_status slice_scale_cols(ld_tp_owned *o, ld_host_tensor *h, int64_t c0, int64_t n, ld_error *err)
{
    int64_t brows = (h->rows + h->scale_br - 1) / h->scale_br, bcols = (h->cols + h->scale_bc - 1) / h->scale_bc;
    int64_t b0 = c0 / h->scale_bc, bn = (n + h->scale_bc - 1) / h->scale_bc;
    float *sc = ld_tp_own(o, (size_t)(brows * bn) * sizeof *sc);
    if (!sc) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int64_t r = 0; r < brows; r++) memcpy(sc + r * bn, h->scale + r * bcols + b0, (size_t)bn * sizeof *sc);
    h->scale = sc;
    return LD_OK;
}

ld_status ld_tp_slice_cols(ld_tp_owned *o, ld_model_tensor *t, int64_t c0, int64_t n, ld_error *err)
{
    LD_TRY(ld_tp_check_cut(t, LD_TP_COLS, c0, n, err));
    ld_host_tensor *h = &t->host;
    size_t e, b;
    ld_host_block(h, &e, &b);
    /* a partial last block (n not a multiple) only ends the matrix, whose
     * rows are whole blocks for the GGML types */
    size_t src_row = (size_t)h->cols / e * b, dst_row = ((size_t)n + e - 1) / e * b, off = (size_t)c0 / e * b;
    unsigned char *dst = ld_tp_own(o, (size_t)h->rows * dst_row);
    if (!dst) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const unsigned char *src = h->data;
    for (int64_t r = 0; r < h->rows; r++) memcpy(dst + (size_t)r * dst_row, src + (size_t)r * src_row + off, dst_row);
    if (scaled(h)) LD_TRY(slice_scale_cols(o, h, c0, n, err));
    h->data = dst;
    h->cols = n;
    return LD_OK;
}

ld_status ld_tp_bias_f32(ld_tp_owned *o, const ld_model_tensor *t, float **out, ld_error *err)
{
    *out = NULL;
    if (!ld_tp_present(t)) return LD_OK;
    const ld_host_tensor *h = &t->host;
    float *v = ld_tp_own(o, (size_t)h->cols * sizeof *v);
    if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_kdt dt = h->dtype == LD_DT_F16 ? LD_KDT_F16 : h->dtype == LD_DT_BF16 ? LD_KDT_BF16 : LD_KDT_F32;
    ld_ref_to_f32(v, h->data, dt, 0, (size_t)h->cols);
    *out = v;
    return LD_OK;
}
