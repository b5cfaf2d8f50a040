/* gguf.c - the GGUF v2/v3 reader (gguf.h). */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ allocation */

/* Every array index lives in blocks chained from g->alloc_, freed together. */
typedef struct blk {
    struct blk *next;
    max_align_t data[];
} blk;

static void *g_alloc(ld_gguf *g, size_t n)
{
    if (n > SIZE_MAX - sizeof(blk)) return NULL;
    blk *b = malloc(sizeof(blk) + n);
    if (!b) return NULL;
    b->next = g->alloc_;
    g->alloc_ = b;
    return b->data;
}

/* ------------------------------------------------------------ types */

static const struct { const char *name; size_t size; } value_types[LD_GGUF_NTYPES] = {
    { "uint8", 1 }, { "int8", 1 }, { "uint16", 2 }, { "int16", 2 },
    { "uint32", 4 }, { "int32", 4 }, { "float32", 4 }, { "bool", 1 },
    { "string", 0 }, { "array", 0 }, { "uint64", 8 }, { "int64", 8 },
    { "float64", 8 },
};

const char *ld_gguf_type_name(ld_gguf_type t)
{
    return (unsigned)t < LD_GGUF_NTYPES ? value_types[t].name : "?";
}

size_t ld_gguf_type_size(ld_gguf_type t)
{
    return (unsigned)t < LD_GGUF_NTYPES ? value_types[t].size : 0;
}

/* ggml tensor types: name, elements per block, bytes per block.  Numbers
 * with no entry were removed from ggml (Q4_2, Q4_3, the repacked types). */
static const struct { const char *name; uint32_t block, bytes; } ggml_types[] = {
    [0] = { "F32", 1, 4 },        [1] = { "F16", 1, 2 },
    [2] = { "Q4_0", 32, 18 },     [3] = { "Q4_1", 32, 20 },
    [6] = { "Q5_0", 32, 22 },     [7] = { "Q5_1", 32, 24 },
    [8] = { "Q8_0", 32, 34 },     [9] = { "Q8_1", 32, 40 },
    [10] = { "Q2_K", 256, 84 },   [11] = { "Q3_K", 256, 110 },
    [12] = { "Q4_K", 256, 144 },  [13] = { "Q5_K", 256, 176 },
    [14] = { "Q6_K", 256, 210 },  [15] = { "Q8_K", 256, 292 },
    [16] = { "IQ2_XXS", 256, 66 }, [17] = { "IQ2_XS", 256, 74 },
    [18] = { "IQ3_XXS", 256, 98 }, [19] = { "IQ1_S", 256, 50 },
    [20] = { "IQ4_NL", 32, 18 },  [21] = { "IQ3_S", 256, 110 },
    [22] = { "IQ2_S", 256, 82 },  [23] = { "IQ4_XS", 256, 136 },
    [24] = { "I8", 1, 1 },        [25] = { "I16", 1, 2 },
    [26] = { "I32", 1, 4 },       [27] = { "I64", 1, 8 },
    [28] = { "F64", 1, 8 },       [29] = { "IQ1_M", 256, 56 },
    [30] = { "BF16", 1, 2 },      [34] = { "TQ1_0", 256, 54 },
    [35] = { "TQ2_0", 256, 66 },  [39] = { "MXFP4", 32, 17 },
    [40] = { "NVFP4", 64, 36 },   [41] = { "Q1_0", 128, 18 },
};

const char *ld_gguf_ggml_type(uint32_t type, uint32_t *block, uint32_t *bytes)
{
    if (type >= sizeof ggml_types / sizeof ggml_types[0] || !ggml_types[type].name)
        return NULL;
    if (block) *block = ggml_types[type].block;
    if (bytes) *bytes = ggml_types[type].bytes;
    return ggml_types[type].name;
}

/* ------------------------------------------------------------ byte reading */

static uint32_t bswap32(uint32_t x)
{
    return x >> 24 | (x >> 8 & 0xff00u) | (x << 8 & 0xff0000u) | x << 24;
}

/* Loads a scalar of `size` bytes at `p` as an unsigned integer in host
 * order (the file is little-endian unless `be`). */
static uint64_t load(const uint8_t *p, size_t size, int be)
{
    uint64_t v = 0;
    for (size_t k = 0; k < size; k++)
        v |= (uint64_t)p[be ? size - 1 - k : k] << (8 * k);
    return v;
}

static uint64_t sign_extend(uint64_t v, size_t size)
{
    if (size >= 8) return v;
    uint64_t bit = (uint64_t)1 << (8 * size - 1);
    return (v ^ bit) - bit;
}

static double as_float(uint64_t bits, size_t size)
{
    if (size == 4) {
        uint32_t b32 = (uint32_t)bits;
        float f;
        memcpy(&f, &b32, sizeof f);
        return f;
    }
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

typedef struct rd {
    const uint8_t *p;
    size_t len;
    size_t off;
    int be;
    uint64_t items;   /* indexed array items allocated so far */
    ld_gguf *g;
    ld_error *err;
} rd;

static size_t left(const rd *r) { return r->len - r->off; }

/* Fails unless `n` more bytes are there for `what`. */
static ld_status need(rd *r, uint64_t n, const char *what)
{
    if (n <= left(r)) return LD_OK;
    return LD_FAIL(r->err, LD_ERR_TRUNCATED, r->off,
                   "gguf truncated at byte %zu: expected %s (%" PRIu64 " bytes), %zu left",
                   r->off, what, n, left(r));
}

static ld_status rd_u32(rd *r, const char *what, uint32_t *out)
{
    LD_TRY(need(r, 4, what));
    *out = (uint32_t)load(r->p + r->off, 4, r->be);
    r->off += 4;
    return LD_OK;
}

static ld_status rd_u64(rd *r, const char *what, uint64_t *out)
{
    LD_TRY(need(r, 8, what));
    *out = load(r->p + r->off, 8, r->be);
    r->off += 8;
    return LD_OK;
}

/* A string: u64 length then bytes.  `max` limits the length (LD_ERR_LIMIT);
 * `no_nul` refuses NUL bytes (keys and names are looked up as C strings). */
static ld_status rd_str(rd *r, const char *what, uint64_t max, int no_nul, ld_gguf_str *out)
{
    size_t at = r->off;
    uint64_t n;
    LD_TRY(rd_u64(r, what, &n));
    if (n > max)
        return LD_FAIL(r->err, LD_ERR_LIMIT, at,
                       "gguf %s at byte %zu is %" PRIu64 " bytes long, at most %" PRIu64
                       " allowed", what, at, n, max);
    if (n > left(r))
        return LD_FAIL(r->err, LD_ERR_TRUNCATED, r->off,
                       "gguf truncated at byte %zu: expected %s of %" PRIu64 " bytes, %zu left",
                       r->off, what, n, left(r));
    out->ptr = (const char *)r->p + r->off;
    out->len = n;
    if (no_nul && memchr(out->ptr, 0, (size_t)n))
        return LD_FAIL(r->err, LD_ERR_SYNTAX, at, "gguf %s at byte %zu contains a NUL byte",
                       what, at);
    r->off += (size_t)n;
    return LD_OK;
}

/* ------------------------------------------------------------ hashing */

static uint64_t fnv1a(const void *p, size_t n)
{
    const uint8_t *s = p;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static uint64_t table_cap(uint64_t n)
{
    uint64_t cap = 8;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* Open addressing over names: slot = index + 1, 0 = empty. */
static const ld_gguf_str *kv_name(const ld_gguf *g, uint64_t i) { return &g->kv[i].key; }
static const ld_gguf_str *tensor_name(const ld_gguf *g, uint64_t i) { return &g->tensors[i].name; }

static int64_t table_find(const ld_gguf *g, const uint64_t *table, uint64_t cap,
                          const ld_gguf_str *(*name)(const ld_gguf *, uint64_t),
                          const char *s, size_t n)
{
    if (!table) return -1;
    for (uint64_t h = fnv1a(s, n) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (!table[h]) return -1;
        const ld_gguf_str *k = name(g, table[h] - 1);
        if (k->len == n && memcmp(k->ptr, s, n) == 0) return (int64_t)(table[h] - 1);
    }
}

/* Inserts entry `i`; returns the index of an existing entry with the same
 * name, or -1. */
static int64_t table_add(const ld_gguf *g, uint64_t *table, uint64_t cap,
                         const ld_gguf_str *(*name)(const ld_gguf *, uint64_t), uint64_t i)
{
    const ld_gguf_str *s = name(g, i);
    for (uint64_t h = fnv1a(s->ptr, (size_t)s->len) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (!table[h]) {
            table[h] = i + 1;
            return -1;
        }
        const ld_gguf_str *k = name(g, table[h] - 1);
        if (k->len == s->len && memcmp(k->ptr, s->ptr, (size_t)s->len) == 0)
            return (int64_t)(table[h] - 1);
    }
}

/* ------------------------------------------------------------ values */

static ld_status value_type(rd *r, size_t at, uint32_t t, const char *what)
{
    if (t < LD_GGUF_NTYPES) return LD_OK;
    return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                   "gguf %s at byte %zu is %" PRIu32 ", expected a value type 0-12",
                   what, at, t);
}

static ld_status check_bools(rd *r, const uint8_t *p, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (p[i] > 1) {
            size_t at = (size_t)(p + i - r->p);
            return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                           "gguf bool at byte %zu is %u, expected 0 or 1", at, p[i]);
        }
    return LD_OK;
}

static ld_status rd_value(rd *r, ld_gguf_type t, int depth, ld_gguf_value *out);

static ld_status rd_array(rd *r, int depth, ld_gguf_array *a)
{
    size_t at = r->off;
    uint32_t it;
    LD_TRY(rd_u32(r, "array item type", &it));
    LD_TRY(value_type(r, at, it, "array item type"));
    a->type = (ld_gguf_type)it;
    size_t count_at = r->off;
    LD_TRY(rd_u64(r, "array length", &a->n));
    /* the smallest an item can be: a scalar, a string's length, an array's
     * type and length */
    size_t min = it == LD_GGUF_STRING ? 8 : it == LD_GGUF_ARRAY ? 12 : value_types[it].size;
    if (a->n > left(r) / min)
        return LD_FAIL(r->err, LD_ERR_TRUNCATED, count_at,
                       "gguf array at byte %zu claims %" PRIu64 " %s items (at least %" PRIu64
                       " bytes), %zu bytes left", count_at, a->n, value_types[it].name,
                       a->n > UINT64_MAX / min ? UINT64_MAX : a->n * min, left(r));
    if (it != LD_GGUF_STRING && it != LD_GGUF_ARRAY) {
        a->raw = r->p + r->off;
        if (it == LD_GGUF_BOOL) LD_TRY(check_bools(r, a->raw, a->n));
        r->off += (size_t)(a->n * min);
        return LD_OK;
    }
    if (it == LD_GGUF_ARRAY && depth + 1 >= LD_GGUF_MAX_DEPTH)
        return LD_FAIL(r->err, LD_ERR_LIMIT, at,
                       "gguf array at byte %zu nests arrays deeper than %d", at,
                       LD_GGUF_MAX_DEPTH);
    if (a->n > LD_GGUF_MAX_ITEMS - r->items)
        return LD_FAIL(r->err, LD_ERR_LIMIT, count_at,
                       "gguf array at byte %zu: more than %u string or array items in all",
                       count_at, LD_GGUF_MAX_ITEMS);
    r->items += a->n;
    if (a->n == 0) return LD_OK;
    if (it == LD_GGUF_STRING) {
        ld_gguf_str *s = g_alloc(r->g, (size_t)a->n * sizeof *s);
        if (!s) return LD_FAIL(r->err, LD_ERR_NOMEM, at, "out of memory");
        a->strs = s;
        for (uint64_t i = 0; i < a->n; i++)
            LD_TRY(rd_str(r, "string", UINT64_MAX, 0, &s[i]));
        return LD_OK;
    }
    ld_gguf_value *v = g_alloc(r->g, (size_t)a->n * sizeof *v);
    if (!v) return LD_FAIL(r->err, LD_ERR_NOMEM, at, "out of memory");
    a->items = v;
    for (uint64_t i = 0; i < a->n; i++) LD_TRY(rd_value(r, LD_GGUF_ARRAY, depth + 1, &v[i]));
    return LD_OK;
}

static ld_status rd_value(rd *r, ld_gguf_type t, int depth, ld_gguf_value *out)
{
    memset(out, 0, sizeof *out);
    out->type = t;
    if (t == LD_GGUF_STRING) return rd_str(r, "string", UINT64_MAX, 0, &out->v.s);
    if (t == LD_GGUF_ARRAY) return rd_array(r, depth, &out->v.a);
    size_t size = value_types[t].size;
    LD_TRY(need(r, size, value_types[t].name));
    uint64_t bits = load(r->p + r->off, size, r->be);
    switch (t) {
    case LD_GGUF_BOOL:
        LD_TRY(check_bools(r, r->p + r->off, 1));
        out->v.u = bits;
        break;
    case LD_GGUF_INT8: case LD_GGUF_INT16: case LD_GGUF_INT32: case LD_GGUF_INT64:
        out->v.i = (int64_t)sign_extend(bits, size);
        break;
    case LD_GGUF_FLOAT32: case LD_GGUF_FLOAT64:
        out->v.f = as_float(bits, size);
        break;
    default:
        out->v.u = bits;
        break;
    }
    r->off += size;
    return LD_OK;
}

/* ------------------------------------------------------------ the file */

static ld_status rd_header(rd *r, ld_gguf *g, uint64_t *n_tensors, uint64_t *n_kv)
{
    LD_TRY(need(r, 4, "the magic 'GGUF'"));
    if (memcmp(r->p, "GGUF", 4) != 0)
        return LD_FAIL(r->err, LD_ERR_SYNTAX, 0, "not a gguf file: expected the magic 'GGUF' at byte 0");
    r->off = 4;
    uint32_t v;
    LD_TRY(rd_u32(r, "the version", &v));
    if (v != 0 && (v & 0xffffu) == 0) { /* written on a big-endian machine */
        r->be = 1;
        v = bswap32(v);
    }
    g->big_endian = r->be;
    g->version = v;
    if (v == 1)
        return LD_FAIL(r->err, LD_ERR_UNSUPPORTED, 4, "gguf version 1 is not supported (only 2 and 3)");
    if (v != 2 && v != 3)
        return LD_FAIL(r->err, LD_ERR_UNSUPPORTED, 4,
                       "gguf version %" PRIu32 " at byte 4 is not supported (only 2 and 3)", v);
    LD_TRY(rd_u64(r, "the tensor count", n_tensors));
    LD_TRY(rd_u64(r, "the key/value count", n_kv));
    if (*n_kv > LD_GGUF_MAX_COUNT)
        return LD_FAIL(r->err, LD_ERR_LIMIT, 16, "gguf key/value count %" PRIu64
                       " at byte 16 is over the limit of %u", *n_kv, LD_GGUF_MAX_COUNT);
    if (*n_tensors > LD_GGUF_MAX_COUNT)
        return LD_FAIL(r->err, LD_ERR_LIMIT, 8, "gguf tensor count %" PRIu64
                       " at byte 8 is over the limit of %u", *n_tensors, LD_GGUF_MAX_COUNT);
    /* a key/value takes at least 8 + 4 + 1 bytes, a tensor info at least
     * 8 + 1 + 4 + 4 + 8 */
    if (*n_kv > left(r) / 13)
        return LD_FAIL(r->err, LD_ERR_TRUNCATED, 16, "gguf key/value count %" PRIu64
                       " at byte 16 needs at least %" PRIu64 " bytes, %zu left",
                       *n_kv, *n_kv * 13, left(r));
    if (*n_tensors > (left(r) - *n_kv * 13) / 25)
        return LD_FAIL(r->err, LD_ERR_TRUNCATED, 8, "gguf tensor count %" PRIu64
                       " at byte 8 needs at least %" PRIu64 " bytes after the key/values",
                       *n_tensors, *n_tensors * 25);
    return LD_OK;
}

static ld_status rd_kvs(rd *r, ld_gguf *g, uint64_t n)
{
    g->kv = calloc(n ? (size_t)n : 1, sizeof *g->kv);
    g->kv_cap_ = table_cap(n);
    g->kv_hash_ = calloc((size_t)g->kv_cap_, sizeof *g->kv_hash_);
    if (!g->kv || !g->kv_hash_) return LD_FAIL(r->err, LD_ERR_NOMEM, r->off, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        ld_gguf_kv *kv = &g->kv[i];
        kv->offset = r->off;
        LD_TRY(rd_str(r, "key", LD_GGUF_MAX_KEY, 1, &kv->key));
        if (kv->key.len == 0)
            return LD_FAIL(r->err, LD_ERR_SYNTAX, kv->offset, "gguf key at byte %" PRIu64 " is empty",
                           kv->offset);
        g->n_kv = i + 1;
        int64_t dup = table_add(g, g->kv_hash_, g->kv_cap_, kv_name, i);
        if (dup >= 0)
            return LD_FAIL(r->err, LD_ERR_MISMATCH, kv->offset,
                           "gguf key '%.*s' at byte %" PRIu64 " was already set at byte %" PRIu64,
                           (int)(kv->key.len > 100 ? 100 : kv->key.len), kv->key.ptr,
                           kv->offset, g->kv[dup].offset);
        size_t at = r->off;
        uint32_t t;
        LD_TRY(rd_u32(r, "value type", &t));
        LD_TRY(value_type(r, at, t, "value type"));
        LD_TRY(rd_value(r, (ld_gguf_type)t, 0, &kv->value));
    }
    return LD_OK;
}

static ld_status rd_alignment(rd *r, ld_gguf *g)
{
    g->alignment = LD_GGUF_DEFAULT_ALIGNMENT;
    const ld_gguf_kv *a = ld_gguf_find(g, "general.alignment");
    if (!a) return LD_OK;
    if (a->value.type != LD_GGUF_UINT32)
        return LD_FAIL(r->err, LD_ERR_SYNTAX, a->offset,
                       "gguf 'general.alignment' at byte %" PRIu64 " is a %s, expected uint32",
                       a->offset, ld_gguf_type_name(a->value.type));
    uint64_t al = a->value.v.u;
    if (al == 0 || (al & (al - 1)))
        return LD_FAIL(r->err, LD_ERR_SYNTAX, a->offset,
                       "gguf 'general.alignment' at byte %" PRIu64 " is %" PRIu64
                       ", expected a power of two", a->offset, al);
    g->alignment = (uint32_t)al;
    return LD_OK;
}

static ld_status rd_tensor(rd *r, ld_gguf_tensor *t)
{
    t->info_offset = r->off;
    LD_TRY(rd_str(r, "tensor name", LD_GGUF_MAX_TENSOR_NAME, 1, &t->name));
    size_t at = r->off;
    LD_TRY(rd_u32(r, "tensor n_dims", &t->n_dims));
    int nl = (int)t->name.len;
    if (t->n_dims > LD_GGUF_MAX_DIMS)
        return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                       "gguf tensor '%.*s': n_dims at byte %zu is %" PRIu32 ", at most %d",
                       nl, t->name.ptr, at, t->n_dims, LD_GGUF_MAX_DIMS);
    uint64_t n = 1;
    for (uint32_t d = 0; d < LD_GGUF_MAX_DIMS; d++) t->dims[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        at = r->off;
        LD_TRY(rd_u64(r, "tensor dimension", &t->dims[d]));
        if (t->dims[d] > (uint64_t)INT64_MAX)
            return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                           "gguf tensor '%.*s': dimension at byte %zu is negative", nl,
                           t->name.ptr, at);
        if (t->dims[d] && n > (uint64_t)INT64_MAX / t->dims[d])
            return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                           "gguf tensor '%.*s': %" PRIu32 " dimensions overflow 64 bits",
                           nl, t->name.ptr, t->n_dims);
        n *= t->dims[d];
    }
    t->n_elements = n;
    at = r->off;
    LD_TRY(rd_u32(r, "tensor type", &t->type));
    uint32_t block, bytes;
    if (!ld_gguf_ggml_type(t->type, &block, &bytes))
        return LD_FAIL(r->err, LD_ERR_UNSUPPORTED, at,
                       "gguf tensor '%.*s': unknown ggml type %" PRIu32 " at byte %zu",
                       nl, t->name.ptr, t->type, at);
    if (t->dims[0] % block)
        return LD_FAIL(r->err, LD_ERR_SYNTAX, at,
                       "gguf tensor '%.*s': first dimension %" PRIu64
                       " is not a multiple of %s's block of %" PRIu32,
                       nl, t->name.ptr, t->dims[0], ggml_types[t->type].name, block);
    uint64_t blocks = n / block;
    if (blocks > UINT64_MAX / bytes)
        return LD_FAIL(r->err, LD_ERR_SYNTAX, at, "gguf tensor '%.*s': size overflows 64 bits",
                       nl, t->name.ptr);
    t->n_bytes = blocks * bytes;
    return rd_u64(r, "tensor offset", &t->offset);
}

/* Tensors by where their data starts, then by size, then in file order
 * (so that which of two equal ranges is named first does not depend on
 * qsort). */
static int cmp_data(const void *a, const void *b)
{
    const ld_gguf_tensor *x = *(const ld_gguf_tensor *const *)a;
    const ld_gguf_tensor *y = *(const ld_gguf_tensor *const *)b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    if (x->n_bytes != y->n_bytes) return x->n_bytes < y->n_bytes ? -1 : 1;
    return (x > y) - (x < y);
}

/* No two tensors' data overlap (zero-size ones never do), as the
 * safetensors reader requires: a weight that aliases another's bytes is a
 * damaged or hostile file, not a layout a writer produces.  Sorted by
 * offset, each range is checked against the one before it. */
static ld_status check_overlap(rd *r, const ld_gguf *g)
{
    uint64_t n = g->n_tensors;
    const ld_gguf_tensor **by = malloc((n ? (size_t)n : 1) * sizeof *by);
    if (!by) return LD_FAIL(r->err, LD_ERR_NOMEM, r->off, "out of memory");
    for (uint64_t i = 0; i < n; i++) by[i] = &g->tensors[i];
    qsort(by, (size_t)n, sizeof *by, cmp_data);
    const ld_gguf_tensor *prev = NULL;
    ld_status st = LD_OK;
    for (uint64_t i = 0; i < n && st == LD_OK; i++) {
        const ld_gguf_tensor *t = by[i];
        if (!t->n_bytes) continue;
        if (prev && t->offset < prev->offset + prev->n_bytes)
            st = LD_FAIL(r->err, LD_ERR_MISMATCH, t->info_offset,
                         "gguf tensor '%.*s' (info at byte %" PRIu64 "): data at %" PRIu64 " + %" PRIu64
                         " bytes overlaps tensor '%.*s' (info at byte %" PRIu64 "): data at %" PRIu64
                         " + %" PRIu64 " bytes",
                         (int)t->name.len, t->name.ptr, t->info_offset, g->data_offset + t->offset, t->n_bytes,
                         (int)prev->name.len, prev->name.ptr, prev->info_offset, g->data_offset + prev->offset,
                         prev->n_bytes);
        prev = t;
    }
    free(by);
    return st;
}

static ld_status rd_tensors(rd *r, ld_gguf *g, uint64_t n)
{
    g->tensors = calloc(n ? (size_t)n : 1, sizeof *g->tensors);
    g->tensor_cap_ = table_cap(n);
    g->tensor_hash_ = calloc((size_t)g->tensor_cap_, sizeof *g->tensor_hash_);
    if (!g->tensors || !g->tensor_hash_) return LD_FAIL(r->err, LD_ERR_NOMEM, r->off, "out of memory");
    for (uint64_t i = 0; i < n; i++) {
        ld_gguf_tensor *t = &g->tensors[i];
        LD_TRY(rd_tensor(r, t));
        g->n_tensors = i + 1;
        int64_t dup = table_add(g, g->tensor_hash_, g->tensor_cap_, tensor_name, i);
        if (dup >= 0)
            return LD_FAIL(r->err, LD_ERR_MISMATCH, t->info_offset,
                           "gguf tensor '%.*s' at byte %" PRIu64 " is already described at byte %" PRIu64,
                           (int)t->name.len, t->name.ptr, t->info_offset,
                           g->tensors[dup].info_offset);
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - r->off % g->alignment) % g->alignment;
    g->data_offset = (uint64_t)r->off + pad;
    if (n == 0) return LD_OK;
    if (g->data_offset > r->len)
        return LD_FAIL(r->err, LD_ERR_TRUNCATED, r->off,
                       "gguf truncated at byte %zu: expected the data section at byte %" PRIu64,
                       r->off, g->data_offset);
    uint64_t room = r->len - g->data_offset;
    for (uint64_t i = 0; i < n; i++) {
        const ld_gguf_tensor *t = &g->tensors[i];
        int nl = (int)t->name.len;
        if (t->offset % g->alignment)
            return LD_FAIL(r->err, LD_ERR_SYNTAX, t->info_offset,
                           "gguf tensor '%.*s' (info at byte %" PRIu64 "): data offset %" PRIu64
                           " is not a multiple of the alignment %" PRIu32,
                           nl, t->name.ptr, t->info_offset, t->offset, g->alignment);
        if (t->offset > room || t->n_bytes > room - t->offset)
            return LD_FAIL(r->err, LD_ERR_TRUNCATED, t->info_offset,
                           "gguf tensor '%.*s' (info at byte %" PRIu64 "): data at %" PRIu64
                           " + %" PRIu64 " bytes ends past the file's %zu bytes",
                           nl, t->name.ptr, t->info_offset, g->data_offset + t->offset,
                           t->n_bytes, r->len);
    }
    return check_overlap(r, g);
}

ld_status ld_gguf_parse(const void *buf, size_t len, ld_gguf **out, ld_error *err)
{
    *out = NULL;
    ld_gguf *g = calloc(1, sizeof *g);
    if (!g) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    g->base = buf;
    g->size = len;
    rd r = { buf, len, 0, 0, 0, g, err };
    uint64_t n_tensors = 0, n_kv = 0;
    ld_status st = rd_header(&r, g, &n_tensors, &n_kv);
    if (st == LD_OK) st = rd_kvs(&r, g, n_kv);
    if (st == LD_OK) st = rd_alignment(&r, g);
    if (st == LD_OK) st = rd_tensors(&r, g, n_tensors);
    if (st != LD_OK) {
        ld_gguf_close(g);
        return st;
    }
    *out = g;
    return LD_OK;
}

ld_status ld_gguf_open(const char *path, ld_gguf **out, ld_error *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        ld_status st = LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%s': %s", path, strerror(errno));
        if (err) err->path = path;
        return st;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "'%s' is not a regular file", path);
        if (err) err->path = path;
        return s;
    }
    size_t size = (size_t)st.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            ld_status s = LD_FAIL(err, LD_ERR_IO, 0, "cannot map '%s': %s", path, strerror(errno));
            close(fd);
            if (err) err->path = path;
            return s;
        }
    }
    close(fd);
    static const uint8_t empty[1];
    ld_status s = ld_gguf_parse(map ? map : empty, size, out, err);
    if (s != LD_OK) {
        if (map) munmap(map, size);
        if (err) err->path = path;
        return s;
    }
    (*out)->map_ = map;
    return LD_OK;
}

void ld_gguf_close(ld_gguf *g)
{
    if (!g) return;
    for (blk *b = g->alloc_; b;) {
        blk *next = b->next;
        free(b);
        b = next;
    }
    free(g->kv);
    free(g->tensors);
    free(g->kv_hash_);
    free(g->tensor_hash_);
    if (g->map_) munmap(g->map_, g->size);
    free(g);
}

/* ------------------------------------------------------------ lookups */

const ld_gguf_kv *ld_gguf_find(const ld_gguf *g, const char *key)
{
    int64_t i = table_find(g, g->kv_hash_, g->kv_cap_, kv_name, key, strlen(key));
    return i < 0 ? NULL : &g->kv[i];
}

const ld_gguf_tensor *ld_gguf_find_tensor(const ld_gguf *g, const char *name)
{
    int64_t i = table_find(g, g->tensor_hash_, g->tensor_cap_, tensor_name, name, strlen(name));
    return i < 0 ? NULL : &g->tensors[i];
}

static ld_status find_typed(const ld_gguf *g, const char *key, ld_gguf_type t,
                            const char *want, const ld_gguf_kv **out, ld_error *err)
{
    const ld_gguf_kv *kv = ld_gguf_find(g, key);
    if (!kv) return LD_FAIL(err, LD_ERR_MISMATCH, 0, "gguf has no key '%s'", key);
    int ok = kv->value.type == t;
    if (t == LD_GGUF_ARRAY) ok = ok && kv->value.v.a.type == LD_GGUF_STRING;
    if (t == LD_GGUF_INT64)
        ok = kv->value.type <= LD_GGUF_INT32 || kv->value.type == LD_GGUF_UINT64 ||
             kv->value.type == LD_GGUF_INT64;
    if (!ok) {
        const char *sub = kv->value.type == LD_GGUF_ARRAY ? ld_gguf_type_name(kv->value.v.a.type) : "";
        return LD_FAIL(err, LD_ERR_MISMATCH, kv->offset,
                       "gguf key '%s' at byte %" PRIu64 " is a%s %s%s%s, expected %s", key,
                       kv->offset, kv->value.type == LD_GGUF_ARRAY || kv->value.type == LD_GGUF_INT8 ||
                                   kv->value.type == LD_GGUF_INT16 || kv->value.type == LD_GGUF_INT32 ||
                                   kv->value.type == LD_GGUF_INT64 ? "n" : "",
                       ld_gguf_type_name(kv->value.type), *sub ? " of " : "", sub, want);
    }
    *out = kv;
    return LD_OK;
}

ld_status ld_gguf_get_str(const ld_gguf *g, const char *key, ld_gguf_str *out, ld_error *err)
{
    const ld_gguf_kv *kv = NULL;
    LD_TRY(find_typed(g, key, LD_GGUF_STRING, "a string", &kv, err));
    *out = kv->value.v.s;
    return LD_OK;
}

ld_status ld_gguf_get_int(const ld_gguf *g, const char *key, int64_t *out, ld_error *err)
{
    const ld_gguf_kv *kv = NULL;
    LD_TRY(find_typed(g, key, LD_GGUF_INT64, "an integer", &kv, err));
    switch (kv->value.type) {
    case LD_GGUF_INT8: case LD_GGUF_INT16: case LD_GGUF_INT32: case LD_GGUF_INT64:
        *out = kv->value.v.i;
        return LD_OK;
    default:
        if (kv->value.v.u > (uint64_t)INT64_MAX)
            return LD_FAIL(err, LD_ERR_NUMERIC, kv->offset,
                           "gguf key '%s' at byte %" PRIu64 " is %" PRIu64 ", over int64",
                           key, kv->offset, kv->value.v.u);
        *out = (int64_t)kv->value.v.u;
        return LD_OK;
    }
}

ld_status ld_gguf_get_str_array(const ld_gguf *g, const char *key, const ld_gguf_str **items,
                                uint64_t *n, ld_error *err)
{
    const ld_gguf_kv *kv = NULL;
    LD_TRY(find_typed(g, key, LD_GGUF_ARRAY, "an array of string", &kv, err));
    *items = kv->value.v.a.strs;
    *n = kv->value.v.a.n;
    return LD_OK;
}

static int is_scalar(ld_gguf_type t)
{
    return t < LD_GGUF_NTYPES && t != LD_GGUF_STRING && t != LD_GGUF_ARRAY;
}

static uint64_t item_bits(const ld_gguf *g, const ld_gguf_array *a, uint64_t i)
{
    size_t size = value_types[a->type].size;
    return load(a->raw + i * size, size, g->big_endian);
}

int ld_gguf_array_int(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, int64_t *out)
{
    if (!is_scalar(a->type) || i >= a->n || a->type == LD_GGUF_FLOAT32 ||
        a->type == LD_GGUF_FLOAT64)
        return 0;
    uint64_t bits = item_bits(g, a, i);
    switch (a->type) {
    case LD_GGUF_INT8: case LD_GGUF_INT16: case LD_GGUF_INT32: case LD_GGUF_INT64:
        *out = (int64_t)sign_extend(bits, value_types[a->type].size);
        return 1;
    default:
        if (bits > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)bits;
        return 1;
    }
}

int ld_gguf_array_uint(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, uint64_t *out)
{
    if (!is_scalar(a->type) || i >= a->n || a->type == LD_GGUF_FLOAT32 ||
        a->type == LD_GGUF_FLOAT64)
        return 0;
    uint64_t bits = item_bits(g, a, i);
    switch (a->type) {
    case LD_GGUF_INT8: case LD_GGUF_INT16: case LD_GGUF_INT32: case LD_GGUF_INT64: {
        int64_t v = (int64_t)sign_extend(bits, value_types[a->type].size);
        if (v < 0) return 0;
        *out = (uint64_t)v;
        return 1;
    }
    default:
        *out = bits;
        return 1;
    }
}

int ld_gguf_array_float(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, double *out)
{
    if ((a->type != LD_GGUF_FLOAT32 && a->type != LD_GGUF_FLOAT64) || i >= a->n) return 0;
    *out = as_float(item_bits(g, a, i), value_types[a->type].size);
    return 1;
}

const void *ld_gguf_tensor_data(const ld_gguf *g, const ld_gguf_tensor *t)
{
    return g->base + g->data_offset + t->offset;
}

char *ld_gguf_strdup(ld_gguf_str s)
{
    if (s.len >= SIZE_MAX) return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (!p) return NULL;
    if (s.len) memcpy(p, s.ptr, (size_t)s.len);
    p[s.len] = 0;
    return p;
}

int ld_gguf_str_eq(ld_gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && memcmp(s.ptr, c, n) == 0;
}
