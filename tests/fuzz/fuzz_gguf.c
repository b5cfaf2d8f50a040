/* fuzz_gguf.c - libFuzzer target for engine/formats/gguf.c.  Parses the input as a
 * GGUF file, then reads every key/value (through the lookups and the array
 * accessors) and every tensor; must never crash, hang, read outside the input
 * or allocate without bound.  The corpus in tests/fuzz/corpus/gguf/ (written
 * by tools/gen_gguf_fixtures.py: fixtures, truncated and damaged copies)
 * replays as the plain test fuzz.gguf. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/gguf.h"

static size_t sink;

static void walk_array(const ld_gguf *g, const ld_gguf_array *a, int depth)
{
    if (depth > LD_GGUF_MAX_DEPTH) abort(); /* the reader's nesting limit must hold */
    for (uint64_t i = 0; i < a->n; i++) {
        int64_t v;
        uint64_t u;
        double d;
        switch (a->type) {
        case LD_GGUF_STRING:
            sink += a->strs[i].len ? (unsigned char)a->strs[i].ptr[a->strs[i].len - 1] : 0;
            break;
        case LD_GGUF_ARRAY:
            if (a->items[i].type != LD_GGUF_ARRAY) abort();
            walk_array(g, &a->items[i].v.a, depth + 1);
            break;
        case LD_GGUF_FLOAT32:
        case LD_GGUF_FLOAT64:
            if (!ld_gguf_array_float(g, a, i, &d)) abort();
            sink += d == d;
            break;
        default:
            sink += (size_t)ld_gguf_array_int(g, a, i, &v) + (size_t)ld_gguf_array_uint(g, a, i, &u);
            break;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* an exact-size copy, so reading one byte past the end is caught even
     * when the fuzzer's own buffer is larger */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    ld_gguf *g = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_gguf_parse(buf, size, &g, &err) != LD_OK) {
        if (g || err.offset > size) abort(); /* an error offset points into the input */
        free(buf);
        return 0;
    }
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const ld_gguf_kv *kv = &g->kv[i];
        char *key = ld_gguf_strdup(kv->key);
        if (key) {
            if (ld_gguf_find(g, key) != kv) abort(); /* keys are unique and found */
            ld_gguf_str s;
            int64_t v;
            const ld_gguf_str *items;
            uint64_t n;
            (void)ld_gguf_get_str(g, key, &s, &err);
            (void)ld_gguf_get_int(g, key, &v, &err);
            (void)ld_gguf_get_str_array(g, key, &items, &n, &err);
            free(key);
        }
        if (kv->value.type == LD_GGUF_ARRAY) walk_array(g, &kv->value.v.a, 1);
        else if (kv->value.type == LD_GGUF_STRING && kv->value.v.s.len)
            sink += (unsigned char)kv->value.v.s.ptr[kv->value.v.s.len - 1];
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ld_gguf_tensor *t = &g->tensors[i];
        char *name = ld_gguf_strdup(t->name);
        if (name && ld_gguf_find_tensor(g, name) != t) abort();
        free(name);
        const uint8_t *p = ld_gguf_tensor_data(g, t);
        if (p < buf || t->n_bytes > (uint64_t)(buf + size - p)) abort();
        if (t->n_bytes) sink += p[0] + p[t->n_bytes - 1];
    }
    ld_gguf_close(g);
    free(buf);
    return 0;
}
