/* fuzz_safetensors.c - libFuzzer target for engine/formats/safetensors.c.  Parses
 * the input as a safetensors file, then checks every tensor it accepted:
 * found by its name, its bytes inside the input and of the size its shape
 * and dtype give, no two overlapping.  Must never crash, hang, read outside
 * the input or allocate without bound.  The corpus in
 * tests/fuzz/corpus/safetensors/ (written by tools/gen_tiny_models.py: a
 * tiny valid file, truncated and damaged copies) replays as the plain test
 * fuzz.safetensors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/safetensors.h"

static size_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so reading one byte past the end is caught even
     * when the fuzzer's own buffer is larger */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_safetensors *st = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_st_parse(buf, size, &st, &err) != LD_OK) {
        if (st || err.offset > size || !err.msg[0]) abort();
        free(buf);
        return 0;
    }
    for (size_t i = 0; i < st->n_tensors; i++) {
        const ld_st_tensor *t = &st->tensors[i];
        if (ld_st_find(st, t->name) != t) abort();
        if (i && strcmp(st->tensors[i - 1].name, t->name) >= 0) abort();
        if (t->n_elems * ld_dtype_size(t->dtype) != t->n_bytes) abort();
        if (t->data < buf || t->n_bytes > (uint64_t)(buf + size - t->data)) abort();
        if (t->n_bytes) sink += t->data[0] + t->data[t->n_bytes - 1];
        for (size_t j = 0; j < i; j++) {
            const ld_st_tensor *u = &st->tensors[j];
            if (t->n_bytes && u->n_bytes && t->data < u->data + u->n_bytes && u->data < t->data + t->n_bytes)
                abort();
        }
    }
    ld_st_close(st);
    free(buf);
    return 0;
}
