/* gguf.h - reading GGUF files (versions 2 and 3): the header, every metadata
 * key/value (all value types, arrays nested to LD_GGUF_MAX_DEPTH) and the
 * tensor-info table, with the data section's offset and alignment, so that
 * weights can be located and mapped later.
 *
 * Layout (little-endian unless the file is big-endian, which v3 allows):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv x   { string key, u32 type, value }
 *   n_tensors x { string name, u32 n_dims, u64 dims[n_dims], u32 ggml_type,
 *                 u64 offset (relative to the data section) }
 *   padding to `general.alignment` (u32 power of two, default 32), then data.
 * A string is u64 length + bytes (no NUL); an array is u32 item type, u64
 * count, then the items (items may themselves be arrays).
 *
 * Validation is strict: a malformed file is refused with LD_ERR_TRUNCATED
 * (ends inside a value) or LD_ERR_SYNTAX (a value that the format does not
 * allow), LD_ERR_LIMIT (a limit below), LD_ERR_UNSUPPORTED (GGUF v1, a
 * version after 3, an unknown tensor type) or LD_ERR_MISMATCH (duplicate key
 * or tensor name; two tensors whose data overlap, both named with their
 * byte ranges); err->offset is the byte offset of the offending field and
 * err->msg says what was expected there.  Counts and lengths are checked
 * against the bytes left before anything is allocated, so memory use stays
 * within a small multiple of the file size whatever the header claims.
 *
 * Zero-copy: strings and scalar arrays point into the caller's buffer (or the
 * mapping), which must outlive the ld_gguf.  Strings are NOT NUL-terminated.
 * Multi-byte values in arrays are read through the accessors below, which
 * handle alignment and byte order.
 *
 * Ownership: an ld_gguf is owned by whoever opened it and released with
 * ld_gguf_close.  Read-only after opening, so it may be shared by threads.
 */
#ifndef LD_GGUF_H
#define LD_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

#define LD_GGUF_MAX_DEPTH 8          /* nesting of arrays in arrays */
#define LD_GGUF_MAX_DIMS 4           /* tensor dimensions (as ggml) */
#define LD_GGUF_MAX_KEY 65535        /* bytes in a key (the spec's limit) */
#define LD_GGUF_MAX_TENSOR_NAME 64   /* bytes in a tensor name (the spec's) */
#define LD_GGUF_DEFAULT_ALIGNMENT 32
#define LD_GGUF_MAX_COUNT (1u << 20)  /* key/values, tensors */
#define LD_GGUF_MAX_ITEMS (1u << 24)  /* string and nested-array items, all arrays together */

/* Value types, numbered as in the file. */
typedef enum ld_gguf_type {
    LD_GGUF_UINT8 = 0,
    LD_GGUF_INT8 = 1,
    LD_GGUF_UINT16 = 2,
    LD_GGUF_INT16 = 3,
    LD_GGUF_UINT32 = 4,
    LD_GGUF_INT32 = 5,
    LD_GGUF_FLOAT32 = 6,
    LD_GGUF_BOOL = 7,
    LD_GGUF_STRING = 8,
    LD_GGUF_ARRAY = 9,
    LD_GGUF_UINT64 = 10,
    LD_GGUF_INT64 = 11,
    LD_GGUF_FLOAT64 = 12
} ld_gguf_type;

#define LD_GGUF_NTYPES 13

/* A string inside the file: `len` bytes at `ptr`, not NUL-terminated. */
typedef struct ld_gguf_str {
    const char *ptr;
    uint64_t len;
} ld_gguf_str;

typedef struct ld_gguf_value ld_gguf_value;

/* An array: `n` items of `type`.  Scalars lie packed at `raw` (use the
 * accessors), strings are indexed by `strs`, nested arrays by `items`. */
typedef struct ld_gguf_array {
    ld_gguf_type type;
    uint64_t n;
    const uint8_t *raw;          /* scalar items, in the file's byte order */
    const ld_gguf_str *strs;     /* type STRING: n strings (owned) */
    const ld_gguf_value *items;  /* type ARRAY: n values (owned) */
} ld_gguf_array;

struct ld_gguf_value {
    ld_gguf_type type;
    union {
        uint64_t u;      /* UINT8/16/32/64, BOOL (0 or 1) */
        int64_t i;       /* INT8/16/32/64 */
        double f;        /* FLOAT32 (exactly widened), FLOAT64 */
        ld_gguf_str s;   /* STRING */
        ld_gguf_array a; /* ARRAY */
    } v;
};

typedef struct ld_gguf_kv {
    ld_gguf_str key;
    uint64_t offset;     /* byte offset of the key/value in the file */
    ld_gguf_value value;
} ld_gguf_kv;

typedef struct ld_gguf_tensor {
    ld_gguf_str name;
    uint32_t n_dims;
    uint64_t dims[LD_GGUF_MAX_DIMS]; /* unused dims are 1; dims[0] varies fastest */
    uint32_t type;       /* ggml type number (ld_gguf_ggml_type_name) */
    uint64_t offset;     /* relative to the data section, a multiple of alignment */
    uint64_t n_elements;
    uint64_t n_bytes;
    uint64_t info_offset; /* byte offset of the tensor info in the file */
} ld_gguf_tensor;

typedef struct ld_gguf {
    uint32_t version;    /* 2 or 3 */
    int big_endian;      /* the file's byte order (tensor data too) */
    uint64_t n_kv;
    ld_gguf_kv *kv;      /* in file order */
    uint64_t n_tensors;
    ld_gguf_tensor *tensors; /* in file order */
    uint32_t alignment;  /* general.alignment or 32 */
    uint64_t data_offset; /* start of the data section (may equal or pass
                             the end of a file without tensors) */
    const uint8_t *base; /* the whole file */
    size_t size;
    /* private */
    void *map_;          /* mmap'd region (ld_gguf_open), else NULL */
    uint64_t *kv_hash_, *tensor_hash_;
    uint64_t kv_cap_, tensor_cap_;
    void *alloc_;        /* allocations for arrays */
} ld_gguf;

/* Parses the GGUF file in `buf[0..len)` (borrowed: it must outlive the
 * result).  Tensor data must lie inside the buffer.  Returns LD_OK and a new
 * reader in *out, or an error as above (or LD_ERR_NOMEM); *out is NULL then. */
ld_status ld_gguf_parse(const void *buf, size_t len, ld_gguf **out, ld_error *err);

/* Maps the file at `path` read-only and parses it; the mapping lives until
 * ld_gguf_close.  LD_ERR_IO when it cannot be opened or mapped (err->path =
 * `path`, borrowed). */
ld_status ld_gguf_open(const char *path, ld_gguf **out, ld_error *err);

/* Frees a reader and unmaps its file (NULL allowed). */
void ld_gguf_close(ld_gguf *g);

/* Lookups by key / tensor name: NULL when absent. */
const ld_gguf_kv *ld_gguf_find(const ld_gguf *g, const char *key);
const ld_gguf_tensor *ld_gguf_find_tensor(const ld_gguf *g, const char *name);

/* Typed lookups: LD_ERR_MISMATCH when `key` is absent or has another type
 * (err->msg names the key and the type found), LD_ERR_NUMERIC when an
 * integer does not fit int64. */
ld_status ld_gguf_get_str(const ld_gguf *g, const char *key, ld_gguf_str *out,
                          ld_error *err);
/* Any integer type (not BOOL) as int64. */
ld_status ld_gguf_get_int(const ld_gguf *g, const char *key, int64_t *out,
                          ld_error *err);
/* An array of strings (e.g. tokenizer.ggml.tokens). */
ld_status ld_gguf_get_str_array(const ld_gguf *g, const char *key,
                                const ld_gguf_str **items, uint64_t *n,
                                ld_error *err);

/* Array items, i < a->n.  _int: integer and BOOL items (uint64 above
 * INT64_MAX fails: returns 0); _uint: unsigned/BOOL items, and signed ones
 * that are >= 0; _float: FLOAT32/FLOAT64 items.  Each returns 1 on success
 * and 0 when the item type does not fit the accessor. */
int ld_gguf_array_int(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, int64_t *out);
int ld_gguf_array_uint(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, uint64_t *out);
int ld_gguf_array_float(const ld_gguf *g, const ld_gguf_array *a, uint64_t i, double *out);

/* The value's type name ("uint32", "array", ...), "?" when unknown. */
const char *ld_gguf_type_name(ld_gguf_type t);
/* Bytes one scalar of type `t` takes in the file; 0 for STRING/ARRAY. */
size_t ld_gguf_type_size(ld_gguf_type t);

/* A ggml tensor type's name ("F32", "Q8_0", ...) and block layout: `block`
 * elements take `bytes` bytes.  Returns NULL (and leaves the outputs) for a
 * type number this reader does not know (or a removed one). */
const char *ld_gguf_ggml_type(uint32_t type, uint32_t *block, uint32_t *bytes);

/* The tensor's bytes (inside the file). */
const void *ld_gguf_tensor_data(const ld_gguf *g, const ld_gguf_tensor *t);

/* A malloc'd NUL-terminated copy of `s` (NULL on no memory). */
char *ld_gguf_strdup(ld_gguf_str s);

/* 1 when `s` equals the C string `c`. */
int ld_gguf_str_eq(ld_gguf_str s, const char *c);

#endif
