/* host_tensor.c - see host_tensor.h. */
#include "host_tensor.h"

void ld_host_block(const ld_host_tensor *t, size_t *elems, size_t *bytes)
{
    static const size_t blk[][2] = {
        [LD_WQ_Q4_0] = {32, 18}, [LD_WQ_Q4_1] = {32, 20}, [LD_WQ_Q8_0] = {32, 34},
        [LD_WQ_Q4_K] = {256, 144}, [LD_WQ_Q6_K] = {256, 210}, [LD_WQ_F8B] = {1, 1}, [LD_WQ_F4B] = {2, 1},
    };
    *elems = 1;
    *bytes = 0;
    if (t->quant == LD_WQ_NONE) {
        *bytes = ld_dtype_size(t->dtype);
    } else if ((size_t)t->quant < sizeof blk / sizeof blk[0]) {
        *elems = blk[t->quant][0];
        *bytes = blk[t->quant][1];
    }
}

/* bytes of one row of t (0 for a type this file does not know) */
static size_t row_bytes(const ld_host_tensor *t)
{
    size_t elems, bytes;
    ld_host_block(t, &elems, &bytes);
    return (size_t)t->cols / elems * bytes;
}

ld_status ld_host_rows(const ld_host_tensor *t, const char *name, int64_t r0, int64_t n, ld_host_tensor *out,
                       ld_error *err)
{
    if (r0 < 0 || n < 1 || r0 > t->rows - n)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rows [%lld, %lld) of '%s' outside its %lld rows", (long long)r0,
                       (long long)(r0 + n), name, (long long)t->rows);
    if (t->rope_hd && (r0 % t->rope_hd || n % t->rope_hd))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rows [%lld, %lld) of '%s' cut a head of %d rows", (long long)r0,
                       (long long)(r0 + n), name, t->rope_hd);
    size_t rb = row_bytes(t);
    if (!rb) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "a view of '%s': unknown storage type", name);
    *out = *t;
    out->rows = n;
    out->data = (const unsigned char *)t->data + (size_t)r0 * rb;
    if (t->quant == LD_WQ_F8B || t->quant == LD_WQ_F4B) {
        if (r0 % t->scale_br)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                           "rows from %lld of '%s' start inside a scale block of %d rows", (long long)r0, name,
                           t->scale_br);
        int64_t nbc = (t->cols + t->scale_bc - 1) / t->scale_bc;
        out->scale = t->scale + (size_t)(r0 / t->scale_br) * (size_t)nbc;
    }
    return LD_OK;
}
