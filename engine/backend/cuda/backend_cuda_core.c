/* backend_cuda_core.c - what every file of the CUDA backend calls: CUDA's
 * errors as ld_error records, the small constants kept on the device
 * between calls, the zeroed sync ints.  The leaf of engine/backend/cuda/
 * (backend_cuda_internal.h says how the backend is cut). */
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

ld_status ld_cuda_fail(ld_error *err, const char *what, int code)
{
    return LD_FAIL(err, ld_cu_is_oom(code) ? LD_ERR_NOMEM : LD_ERR_CUDA, 0, "cuda %s: %s (%s)", what,
                   ld_cu_error_string(code), ld_cu_error_name(code));
}

/* ---------------------------------------------------------------- constants
 * Small host arrays an op uploads at every call although they rarely change
 * (hc_pre's base and scale, the V4 route's bias and expert table: 6 of a
 * V4 decode layer's 8 uploads; ds4_hc_head's base, the V3 router's bias)
 * kept on the device between calls.  A slot is
 * keyed by the host address and size and holds a host copy: a call whose
 * bytes still equal the copy (a memcmp of at most a few KB, against a few
 * µs an upload through the ring costs the host) uses the device copy; any
 * other call uploads and refreshes the slot.  So the cache is never stale,
 * whatever the caller does with its memory.  Open addressing over the
 * address's hash; a full probe run evicts its first slot. */
#define CONST_SLOTS 1024
#define CONST_PROBES 8
#define CONST_MAX_BYTES ((size_t)64 << 10) /* a call's constants, at most */

typedef struct const_slot {
    const void *key;
    size_t bytes;
    unsigned char *host; /* the bytes last uploaded */
    void *dev;
} const_slot;

static void const_drop(const_slot *c)
{
    ld_cu_free(c->dev);
    free(c->host);
    *c = (const_slot){0};
}

/* the slot of key: its own, else an empty one, else the run's first */
static const_slot *const_find(cuda_backend *cb, const void *key, size_t bytes)
{
    size_t h = (size_t)(((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull >> 32) % CONST_SLOTS;
    const_slot *empty = NULL;
    for (int i = 0; i < CONST_PROBES; i++) {
        const_slot *c = &cb->consts[(h + (size_t)i) % CONST_SLOTS];
        if (c->key == key && c->bytes == bytes) return c;
        if (!c->key && !empty) empty = c;
    }
    return empty ? empty : &cb->consts[h];
}

/* a device copy of a (na bytes), then b (nb bytes; none when NULL: two
 * arrays an op passes together share a slot), in the slot of `key` (the
 * address the caller keeps them at); *dev the device copy */
ld_status ld_cuda_const_dev(cuda_backend *cb, const void *key, const void *a, size_t na, const void *b, size_t nb,
                            void **dev, const char *what, ld_error *err)
{
    size_t n = na + (b ? nb : 0);
    if (n > CONST_MAX_BYTES) return LD_FAIL(err, LD_ERR_USAGE, 0, "cuda %s: %zu bytes to keep", what, n);
    if (!cb->consts) cb->consts = calloc(CONST_SLOTS, sizeof *cb->consts);
    if (!cb->consts) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    const_slot *c = const_find(cb, key, n);
    int mine = c->key == key && c->bytes == n;
    if (mine && !memcmp(c->host, a, na) && (!b || !memcmp(c->host + na, b, nb))) {
        *dev = c->dev;
        return LD_OK;
    }
    if (!mine) {
        const_drop(c);
        c->host = malloc(n);
        if (!c->host) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        int e = ld_cu_malloc(&c->dev, n);
        if (e) {
            const_drop(c);
            CU(what, e);
        }
        c->key = key;
        c->bytes = n;
    }
    memcpy(c->host, a, na);
    if (b) memcpy(c->host + na, b, nb);
    int e = ld_cu_h2d(c->dev, c->host, n);
    if (e) {
        const_drop(c); /* its device bytes are not its host copy's */
        CU(what, e);
    }
    *dev = c->dev;
    return LD_OK;
}

/* const_dev of one array, keyed by its own address */
ld_status ld_cuda_const_one(cuda_backend *cb, const void *a, size_t na, void **dev, const char *what, ld_error *err)
{
    return ld_cuda_const_dev(cb, a, a, na, NULL, 0, dev, what, err);
}

/* every thread's work on the device (ld_cu_sync: cudaDeviceSynchronize
 * waits for all of the device's streams) */

/* at least n zero ints of device memory (cb->sync) for the kernels whose
 * last block to finish does the rest of the work (ld_cu_hc_pre_norm's
 * sync): zeroed when allocated, and each such kernel leaves them zero */
ld_status ld_cuda_sync_ints(cuda_backend *cb, size_t n, int32_t **out, const char *what, ld_error *err)
{
    size_t had = cb->sync_cap;
    LD_TRY(scratch((void **)&cb->sync, &cb->sync_cap, n * sizeof(int32_t), what, err));
    if (cb->sync_cap != had) { /* a new allocation */
        int e = ld_cu_memset0(cb->sync, cb->sync_cap);
        if (e) cb->sync_cap = 0; /* not zero: the next call allocates again */
        CU(what, e);
    }
    *out = cb->sync;
    return LD_OK;
}

void ld_cuda_consts_free(cuda_backend *cb)
{
    for (int i = 0; cb->consts && i < CONST_SLOTS; i++) const_drop(&cb->consts[i]);
    free(cb->consts);
    cb->consts = NULL;
}

#endif /* LD_CUDA_BACKEND */
