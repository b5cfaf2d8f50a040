/* safetensors.h - reading HF safetensors checkpoints: one file, or a sharded
 * checkpoint through model.safetensors.index.json, memory-mapped.
 *
 * Format (huggingface/safetensors README):
 *   u64 little-endian N, then N bytes of JSON (an object, maybe padded with
 *   spaces), then the byte buffer.  Each JSON entry other than
 *   "__metadata__" is {"dtype": "F32", "shape": [..], "data_offsets":
 *   [begin, end]} with offsets relative to the buffer, end one past.
 *
 * Validation is strict, so that a bad or hostile file is an error and never
 * an out-of-bounds read: N <= LD_ST_MAX_HEADER and inside the file; the
 * header is a JSON object; each tensor has a known dtype, a shape of at most
 * LD_ST_MAX_DIMS non-negative integers, begin <= end <= buffer length,
 * elements x dtype size == end - begin (without overflow); no two tensors
 * overlap; no name appears twice (in a file, or across the shards).  Errors
 * name the tensor (err->msg) and the file (err->path).
 *
 * Data is used in place: ld_st_tensor.data points into the mapping, which
 * lives as long as the ld_safetensors.  Read-only after opening, so it may
 * be shared by threads.
 */
#ifndef LD_SAFETENSORS_H
#define LD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

#define LD_ST_MAX_HEADER 100000000u /* bytes of JSON header (as the Rust reader) */
#define LD_ST_MAX_DIMS 8
#define LD_ST_MAX_SHARDS 4096

/* Storage types.  Only F32, F16 and BF16 are computed with; the others are
 * recognised (so that a file holding them still validates) and reported as
 * unsupported where a weight of that type is bound. */
typedef enum ld_dtype {
    LD_DT_F32 = 0,
    LD_DT_F16,
    LD_DT_BF16,
    LD_DT_F64,
    LD_DT_I64,
    LD_DT_I32,
    LD_DT_I16,
    LD_DT_I8,
    LD_DT_U64,
    LD_DT_U32,
    LD_DT_U16,
    LD_DT_U8,
    LD_DT_BOOL,
    LD_DT_F8_E4M3,
    LD_DT_F8_E5M2,
    LD_DT_F8_E8M0,
    LD_DT_COUNT
} ld_dtype;

/* "F32", "BF16"... as in the file. */
const char *ld_dtype_name(ld_dtype t);
/* Bytes per element. */
size_t ld_dtype_size(ld_dtype t);

typedef struct ld_st_tensor {
    char *name;                       /* NUL-terminated, owned */
    ld_dtype dtype;
    int n_dims;
    uint64_t shape[LD_ST_MAX_DIMS];
    uint64_t n_elems;
    const uint8_t *data;              /* into the mapping (or parse buffer) */
    uint64_t n_bytes;
    int shard;                        /* index into ld_safetensors.shard_paths */
} ld_st_tensor;

typedef struct ld_safetensors {
    ld_st_tensor *tensors;            /* sorted by name */
    size_t n_tensors;
    size_t n_shards;
    char **shard_paths;               /* NULL entries for ld_st_parse */
    /* private */
    void **maps_;
    size_t *map_sizes_;
} ld_safetensors;

/* Parse one safetensors file held in memory (`buf` must outlive the
 * result).  Offsets in errors are byte offsets in `buf`. */
ld_status ld_st_parse(const void *buf, size_t len, ld_safetensors **out,
                      ld_error *err);

/* Open `path`: a .safetensors file, a model.safetensors.index.json, or a
 * directory holding either model.safetensors.index.json or
 * model.safetensors.  The files are mapped read-only. */
ld_status ld_st_open(const char *path, ld_safetensors **out, ld_error *err);

/* The tensor called `name`, or NULL. */
const ld_st_tensor *ld_st_find(const ld_safetensors *st, const char *name);

void ld_st_close(ld_safetensors *st);

#endif /* LD_SAFETENSORS_H */
