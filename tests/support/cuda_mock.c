/* cuda_mock.c - kernels/cuda/cuda_ops.h on the CPU: a mock device so that the
 * CUDA backend's host code (engine/backend/cuda/backend_cuda*.c, compiled a second time
 * with LD_CUDA_MOCK) runs in CI, under the sanitizers, without a GPU.
 *
 * "Device" memory is host malloc, and every live allocation is kept in a
 * registry with its size: a launcher or a copy handed a pointer outside
 * every allocation, or a range running past its end, aborts with the
 * launcher's name (the bugs this is for: arguments in the wrong order,
 * scratch too small, copies in the wrong direction, a host pointer given
 * as a device one).  Each launcher computes its result with the plain-C
 * reference leaves its CUDA twin is documented to match (cuda_ops.h's
 * comments are the contract), both variants (ref, custom) alike, and makes
 * the argument checks the .cu launcher makes (cudaErrorInvalidValue).
 * ld_cu_mock_calls() counts the launches of each launcher by name (and the
 * ld_cu_malloc calls and the copies and memsets); ld_cu_mock_fail_malloc() makes a later allocation
 * fail as out of memory, for the error paths. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_mock_internal.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "replay/run/replay_sample.h"

/* ---------------------------------------------------------------- registry */

#define MOCK_DEVICE_BYTES ((size_t)64 << 30) /* 64 GiB: a larger allocation fails */


static alloc *allocs;
static size_t n_allocs, cap_allocs;
/* the registry and the call counts: a split replay's ranks call the mock
 * from threads of their own */
static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;

/* the allocation holding [p, p + bytes), or NULL (under mock_mu) */
const alloc *ld_mock_find(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n_allocs; i++)
        if (b >= allocs[i].p && b < allocs[i].p + allocs[i].n && bytes <= (size_t)(allocs[i].p + allocs[i].n - b))
            return &allocs[i];
    return NULL;
}

void ld_mock_die(const char *fn, const char *what, const void *p, size_t bytes, const char *why)
{
    fprintf(stderr, "cuda mock: %s: %s [%p, +%zu bytes) %s\n", fn, what, p, bytes, why);
    abort();
}

/* `bytes` of device memory at p (none when bytes is 0) */
void ld_mock_dev(const char *fn, const char *what, const void *p, size_t bytes)
{
    if (!bytes) return;
    if (!p) ld_mock_die(fn, what, p, bytes, "is NULL");
    pthread_mutex_lock(&mock_mu);
    int in = ld_mock_find(p, 1) != NULL, whole = ld_mock_find(p, bytes) != NULL;
    pthread_mutex_unlock(&mock_mu);
    if (!in) ld_mock_die(fn, what, p, bytes, "is not device memory");
    if (!whole) ld_mock_die(fn, what, p, bytes, "runs past the end of its device allocation");
}

/* `bytes` of host memory at p: never inside a device allocation */
void ld_mock_host(const char *fn, const char *what, const void *p, size_t bytes)
{
    if (!bytes) return;
    if (!p) ld_mock_die(fn, what, p, bytes, "is NULL");
    pthread_mutex_lock(&mock_mu);
    int in = ld_mock_find(p, 1) != NULL;
    pthread_mutex_unlock(&mock_mu);
    if (in) ld_mock_die(fn, what, p, bytes, "is device memory where a host array is expected");
}

/* ---------------------------------------------------------------- call counts */

#define MAX_NAMES 64
static struct {
    const char *name;
    long n;
} calls[MAX_NAMES];

void ld_mock_count(const char *fn)
{
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < MAX_NAMES; i++) {
        if (calls[i].name && strcmp(calls[i].name, fn) == 0) {
            calls[i].n++;
            break;
        }
        if (!calls[i].name) {
            calls[i].name = fn;
            calls[i].n = 1;
            break;
        }
    }
    pthread_mutex_unlock(&mock_mu);
}

long ld_cu_mock_calls(const char *launcher)
{
    long n = 0;
    pthread_mutex_lock(&mock_mu);
    for (int i = 0; i < MAX_NAMES && calls[i].name; i++)
        if (strcmp(calls[i].name, launcher) == 0) n = calls[i].n;
    pthread_mutex_unlock(&mock_mu);
    return n;
}

size_t ld_cu_mock_live(void)
{
    pthread_mutex_lock(&mock_mu);
    size_t n = n_allocs;
    pthread_mutex_unlock(&mock_mu);
    return n;
}

/* ---------------------------------------------------------------- runtime */

const char *ld_cu_error_string(int code)
{
    switch (code) {
    case 0: return "no error";
    case E_INVAL: return "invalid argument";
    case E_NOMEM: return "out of memory";
    case E_MISALIGN: return "misaligned address";
    default: return "unknown error";
    }
}

const char *ld_cu_error_name(int code)
{
    switch (code) {
    case 0: return "cudaSuccess";
    case E_INVAL: return "cudaErrorInvalidValue";
    case E_NOMEM: return "cudaErrorMemoryAllocation";
    case E_MISALIGN: return "cudaErrorMisalignedAddress";
    default: return "cudaErrorUnknown";
    }
}

int ld_cu_is_oom(int code)
{
    return code == E_NOMEM;
}

int ld_cu_device_count(int *n)
{
    *n = 1;
    return 0;
}

int ld_cu_set_device(int d)
{
    return d == 0 ? 0 : E_INVAL;
}

int ld_cu_device_info(int d, char *name, size_t cap, int *major, int *minor, int *sms)
{
    if (d != 0) return E_INVAL;
    if (name && cap) snprintf(name, cap, "mock");
    if (major) *major = 9;
    if (minor) *minor = 0;
    if (sms) *sms = 1;
    return 0;
}

/* the allocation that fails next: -1 none, else that many succeed first */
static long fail_in = -1;

void ld_cu_mock_fail_malloc(long n)
{
    fail_in = n;
}

int ld_cu_malloc(void **p, size_t bytes)
{
    *p = NULL;
    ld_mock_count(__func__);
    pthread_mutex_lock(&mock_mu);
    int fail = fail_in == 0;
    fail_in = fail ? -1 : fail_in > 0 ? fail_in - 1 : fail_in;
    pthread_mutex_unlock(&mock_mu);
    if (fail) return E_NOMEM;
    /* the mock device's memory: what a test asks beyond it is out of memory
     * as on a GPU (not an abort of the sanitizers' allocator) */
    if (bytes > MOCK_DEVICE_BYTES) return E_NOMEM;
    /* 256-byte aligned as cudaMalloc's; filled with NaN-ish garbage so that
     * reading what was never written shows */
    size_t n = bytes ? bytes : 1;
    void *m = aligned_alloc(256, (n + 255) / 256 * 256);
    if (!m) return E_NOMEM;
    memset(m, 0xff, n);
    pthread_mutex_lock(&mock_mu);
    if (n_allocs == cap_allocs) {
        size_t nc = cap_allocs ? 2 * cap_allocs : 256;
        alloc *na = realloc(allocs, nc * sizeof *na);
        if (!na) {
            pthread_mutex_unlock(&mock_mu);
            free(m);
            return E_NOMEM;
        }
        allocs = na;
        cap_allocs = nc;
    }
    allocs[n_allocs++] = (alloc){m, n};
    pthread_mutex_unlock(&mock_mu);
    *p = m;
    return 0;
}

int ld_cu_free(void *p)
{
    if (!p) return 0;
    pthread_mutex_lock(&mock_mu);
    for (size_t i = 0; i < n_allocs; i++)
        if (allocs[i].p == p) {
            allocs[i] = allocs[--n_allocs];
            pthread_mutex_unlock(&mock_mu);
            free(p);
            return 0;
        }
    pthread_mutex_unlock(&mock_mu);
    ld_mock_die("ld_cu_free", "p", p, 0, "is not the start of a device allocation");
    return E_INVAL;
}

int ld_cu_memset0(void *p, size_t bytes)
{
    ld_mock_count(__func__);
    ld_mock_dev("ld_cu_memset0", "p", p, bytes);
    if (bytes) memset(p, 0, bytes);
    return 0;
}

int ld_cu_h2d(void *dst, const void *src, size_t bytes)
{
    ld_mock_count(__func__);
    ld_mock_dev("ld_cu_h2d", "dst", dst, bytes);
    ld_mock_host("ld_cu_h2d", "src", src, bytes);
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

int ld_cu_d2h(void *dst, const void *src, size_t bytes)
{
    ld_mock_count(__func__);
    ld_mock_host("ld_cu_d2h", "dst", dst, bytes);
    ld_mock_dev("ld_cu_d2h", "src", src, bytes);
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

int ld_cu_d2d(void *dst, const void *src, size_t bytes)
{
    ld_mock_count(__func__);
    ld_mock_dev("ld_cu_d2d", "dst", dst, bytes);
    ld_mock_dev("ld_cu_d2d", "src", src, bytes);
    if (bytes) memmove(dst, src, bytes);
    return 0;
}

int ld_cu_d2d_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows)
{
    ld_mock_count(__func__);
    if (!width || !rows) return 0;
    if (width > dst_pitch || width > src_pitch) return E_INVAL; /* cudaMemcpy2D: an invalid pitch */
    ld_mock_dev("ld_cu_d2d_rows", "dst", dst, (rows - 1) * dst_pitch + width);
    ld_mock_dev("ld_cu_d2d_rows", "src", src, (rows - 1) * src_pitch + width);
    for (size_t i = 0; i < rows; i++) memmove((char *)dst + i * dst_pitch, (const char *)src + i * src_pitch, width);
    return 0;
}

int ld_cu_sync(void)
{
    ld_mock_count("ld_cu_sync");
    return 0;
}

/* events: the mock's work is done when a call returns, so a recorded event
 * is (NCCL's watchdog uses them; the mock has no NCCL, but the archive's
 * comm_nccl.o names them) */
int ld_cu_event_create(void **ev)
{
    *ev = malloc(1);
    return *ev ? 0 : E_NOMEM;
}

int ld_cu_event_destroy(void *ev)
{
    free(ev);
    return 0;
}

int ld_cu_event_record_legacy(void *ev)
{
    (void)ev;
    return 0;
}

int ld_cu_event_done(void *ev, int *done)
{
    (void)ev;
    *done = 1;
    return 0;
}

/* graph mode: nothing to capture, the mock runs each call at once (the
 * emulator, tests/support/cuda_emu/emu_graph.c, runs graphs) */
int ld_cu_graphs_begin(int chunk)
{
    (void)chunk;
    return 0;
}

int ld_cu_graphs_end(void)
{
    return 0;
}

int ld_cu_graphs_hold(void)
{
    return 0;
}

int ld_cu_graphs_release(void)
{
    return 0;
}

void ld_cu_graph_stats_get(ld_cu_graph_stats *s)
{
    memset(s, 0, sizeof *s);
}

size_t ld_cu_row_bytes(ld_kdt dt, int64_t cols)
{
    size_t c = (size_t)cols;
    switch (dt) {
    case LD_KDT_F32: return c * 4;
    case LD_KDT_F16:
    case LD_KDT_BF16: return c * 2;
    case LD_KDT_Q4_0: return c / 32 * 18;
    case LD_KDT_Q4_1: return c / 32 * 20;
    case LD_KDT_Q8_0: return c / 32 * 34;
    case LD_KDT_Q4_K: return c / 256 * 144;
    case LD_KDT_Q6_K: return c / 256 * 210;
    default: return 0;
    }
}

