/* npy.c - NumPy .npy files, format version 1.0 (npy.h). */
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define PREAMBLE 10      /* magic, two version bytes, uint16 header length */
#define ALIGN 64         /* numpy's ARRAY_ALIGN */
#define GROWTH_DIGITS 21 /* numpy's GROWTH_AXIS_MAX_DIGITS: room to grow axis 0 in place */

static int descr_ok(const char *descr)
{
    size_t n = descr ? strlen(descr) : 0;
    if (n < 2 || n > 16) return 0;
    for (size_t i = 0; i < n; i++)
        if (descr[i] == '\'' || descr[i] == '\\' || descr[i] < 0x20 || descr[i] > 0x7e) return 0;
    return 1;
}

ld_status ld_npy_header(const char *descr, const size_t *shape, int ndim, char *buf, size_t cap,
                        size_t *out_len, ld_error *err)
{
    *out_len = 0;
    if (!descr_ok(descr)) return LD_FAIL(err, LD_ERR_USAGE, 0, "bad npy type string");
    if (ndim < 0 || ndim > LD_NPY_MAX_DIMS || (ndim > 0 && !shape))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "npy arrays of %d dimensions: give 0 to %d", ndim, LD_NPY_MAX_DIMS);
    /* the dict as numpy writes it: keys sorted, "(n,)" for one dimension */
    char dict[LD_NPY_HEADER_MAX]; /* at most ~240 bytes: 8 dimensions of 20 digits */
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, i ? ", %zu" : "%zu", shape[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, ndim == 1 ? ",), }" : "), }");
    if (ndim > 0) {
        char first[24];
        int d = snprintf(first, sizeof first, "%zu", shape[0]);
        for (int i = d; i < GROWTH_DIGITS; i++) n += snprintf(dict + n, sizeof dict - (size_t)n, " ");
    }
    if (n < 0 || (size_t)n >= sizeof dict) return LD_FAIL(err, LD_ERR_LIMIT, 0, "npy header too long");
    size_t hlen = (size_t)n + 1; /* the dict and its '\n' */
    size_t pad = ALIGN - (PREAMBLE + hlen) % ALIGN; /* 1..64, as numpy */
    size_t total = PREAMBLE + hlen + pad;
    if (total > cap) return LD_FAIL(err, LD_ERR_LIMIT, 0, "npy header of %zu bytes: buffer of %zu", total, cap);
    memcpy(buf, MAGIC, MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    size_t len = total - PREAMBLE;
    buf[8] = (char)(len & 0xff);
    buf[9] = (char)(len >> 8);
    memcpy(buf + PREAMBLE, dict, (size_t)n);
    memset(buf + PREAMBLE + n, ' ', pad);
    buf[total - 1] = '\n';
    *out_len = total;
    return LD_OK;
}

static int host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* The elements, little-endian, in blocks (swapped when the host is not). */
static int write_data(FILE *f, const unsigned char *data, size_t n, size_t elem_size)
{
    if (host_little_endian() || elem_size == 1) return fwrite(data, elem_size, n, f) == n;
    unsigned char block[4096];
    size_t per = sizeof block / elem_size;
    for (size_t i = 0; i < n; i += per) {
        size_t k = n - i < per ? n - i : per;
        for (size_t j = 0; j < k; j++)
            for (size_t b = 0; b < elem_size; b++)
                block[j * elem_size + b] = data[(i + j) * elem_size + (elem_size - 1 - b)];
        if (fwrite(block, elem_size, k, f) != k) return 0;
    }
    return 1;
}

ld_status ld_npy_write(const char *path, const char *descr, const size_t *shape, int ndim, const void *data,
                       size_t elem_size, ld_error *err)
{
    if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "npy elements of %zu bytes: give 1, 2, 4 or 8", elem_size);
    if (!descr_ok(descr) || (elem_size > 1 && descr[0] != '<'))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "npy type string: give a little-endian type");
    size_t count = 1;
    for (int i = 0; i < ndim && shape; i++) {
        if (shape[i] && count > SIZE_MAX / elem_size / shape[i])
            return LD_FAIL(err, LD_ERR_LIMIT, 0, "npy array too large");
        count *= shape[i];
    }
    if (count && !data) return LD_FAIL(err, LD_ERR_USAGE, 0, "npy array without data");
    char head[LD_NPY_HEADER_MAX];
    size_t head_len;
    LD_TRY(ld_npy_header(descr, shape, ndim, head, sizeof head, &head_len, err));
    FILE *f = fopen(path, "wb");
    if (!f) {
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot write '%.180s': %s", path, strerror(errno));
    }
    int ok = fwrite(head, 1, head_len, f) == head_len && (count == 0 || write_data(f, data, count, elem_size));
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    if (!ok) return LD_FAIL(err, LD_ERR_IO, 0, "cannot write '%.180s': %s", path, strerror(saved));
    return LD_OK;
}

ld_status ld_npy_write_f32(const char *path, const float *data, size_t rows, size_t cols, ld_error *err)
{
    const size_t shape[2] = { rows, cols };
    return ld_npy_write(path, "<f4", shape, 2, data, sizeof *data, err);
}

ld_status ld_npy_write_i64(const char *path, const int64_t *data, size_t n, ld_error *err)
{
    const size_t shape[1] = { n };
    return ld_npy_write(path, "<i8", shape, 1, data, sizeof *data, err);
}
