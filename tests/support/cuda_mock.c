/* cuda_mock.c - kernels/cuda/cuda_ops.h on the CPU: a mock device so that the
 * CUDA backend's host code (engine/backend_cuda*.c, compiled a second time
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

#include "cuda_mock.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "replay/run/replay_sample.h"

/* the CUDA runtime's codes this mock returns */
#define E_INVAL 1      /* cudaErrorInvalidValue */
#define E_NOMEM 2      /* cudaErrorMemoryAllocation */
#define E_MISALIGN 716 /* cudaErrorMisalignedAddress */

/* ---------------------------------------------------------------- registry */

#define MOCK_DEVICE_BYTES ((size_t)64 << 30) /* 64 GiB: a larger allocation fails */

typedef struct alloc {
    unsigned char *p;
    size_t n;
} alloc;

static alloc *allocs;
static size_t n_allocs, cap_allocs;
/* the registry and the call counts: a split replay's ranks call the mock
 * from threads of their own */
static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;

/* the allocation holding [p, p + bytes), or NULL (under mock_mu) */
static const alloc *find(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n_allocs; i++)
        if (b >= allocs[i].p && b < allocs[i].p + allocs[i].n && bytes <= (size_t)(allocs[i].p + allocs[i].n - b))
            return &allocs[i];
    return NULL;
}

static void die(const char *fn, const char *what, const void *p, size_t bytes, const char *why)
{
    fprintf(stderr, "cuda mock: %s: %s [%p, +%zu bytes) %s\n", fn, what, p, bytes, why);
    abort();
}

/* `bytes` of device memory at p (none when bytes is 0) */
static void dev(const char *fn, const char *what, const void *p, size_t bytes)
{
    if (!bytes) return;
    if (!p) die(fn, what, p, bytes, "is NULL");
    pthread_mutex_lock(&mock_mu);
    int in = find(p, 1) != NULL, whole = find(p, bytes) != NULL;
    pthread_mutex_unlock(&mock_mu);
    if (!in) die(fn, what, p, bytes, "is not device memory");
    if (!whole) die(fn, what, p, bytes, "runs past the end of its device allocation");
}

/* `bytes` of host memory at p: never inside a device allocation */
static void host(const char *fn, const char *what, const void *p, size_t bytes)
{
    if (!bytes) return;
    if (!p) die(fn, what, p, bytes, "is NULL");
    pthread_mutex_lock(&mock_mu);
    int in = find(p, 1) != NULL;
    pthread_mutex_unlock(&mock_mu);
    if (in) die(fn, what, p, bytes, "is device memory where a host array is expected");
}

/* ---------------------------------------------------------------- call counts */

#define MAX_NAMES 64
static struct {
    const char *name;
    long n;
} calls[MAX_NAMES];

static void count(const char *fn)
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
    count(__func__);
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
    die("ld_cu_free", "p", p, 0, "is not the start of a device allocation");
    return E_INVAL;
}

int ld_cu_memset0(void *p, size_t bytes)
{
    count(__func__);
    dev("ld_cu_memset0", "p", p, bytes);
    if (bytes) memset(p, 0, bytes);
    return 0;
}

int ld_cu_h2d(void *dst, const void *src, size_t bytes)
{
    count(__func__);
    dev("ld_cu_h2d", "dst", dst, bytes);
    host("ld_cu_h2d", "src", src, bytes);
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

int ld_cu_d2h(void *dst, const void *src, size_t bytes)
{
    count(__func__);
    host("ld_cu_d2h", "dst", dst, bytes);
    dev("ld_cu_d2h", "src", src, bytes);
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

int ld_cu_d2d(void *dst, const void *src, size_t bytes)
{
    count(__func__);
    dev("ld_cu_d2d", "dst", dst, bytes);
    dev("ld_cu_d2d", "src", src, bytes);
    if (bytes) memmove(dst, src, bytes);
    return 0;
}

int ld_cu_d2d_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows)
{
    count(__func__);
    if (!width || !rows) return 0;
    if (width > dst_pitch || width > src_pitch) return E_INVAL; /* cudaMemcpy2D: an invalid pitch */
    dev("ld_cu_d2d_rows", "dst", dst, (rows - 1) * dst_pitch + width);
    dev("ld_cu_d2d_rows", "src", src, (rows - 1) * src_pitch + width);
    for (size_t i = 0; i < rows; i++) memmove((char *)dst + i * dst_pitch, (const char *)src + i * src_pitch, width);
    return 0;
}

int ld_cu_sync(void)
{
    count("ld_cu_sync");
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

#define FB sizeof(float)  /* bytes of a float, an int32 */
#define IB sizeof(int32_t)
#define Z(a, b) ((size_t)(a) * (size_t)(b))

/* ---------------------------------------------------------------- dense ops */

/* the largest of n device int32 values (checked readable), -1 when none */
static int32_t max_of(const char *fn, const char *what, const int32_t *p, size_t n)
{
    dev(fn, what, p, n * IB);
    int32_t m = -1;
    for (size_t i = 0; i < n; i++)
        if (p[i] > m) m = p[i];
    return m;
}

int ld_cu_embed(int v, float *out, const void *table, ld_kdt dt, int dim, const int32_t *tokens, int T)
{
    (void)v;
    count(__func__);
    if (T <= 0 || dim <= 0) return 0;
    int32_t mx = max_of(__func__, "tokens", tokens, (size_t)T);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0) die(__func__, "tokens", tokens, Z(T, IB), "holds a negative id");
    dev(__func__, "table", table, Z(mx + 1, ld_cu_row_bytes(dt, dim)));
    dev(__func__, "out", out, Z(T, dim) * FB);
    ld_ref_embed(out, table, dt, dim, tokens, 0, (size_t)T);
    return 0;
}

static void norm_rows(const char *fn, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps,
                      int rows)
{
    dev(fn, "out", out, Z(rows, dim) * FB);
    dev(fn, "x", x, Z(rows, dim) * FB);
    dev(fn, "w", w, ld_cu_row_bytes(dt, dim));
    ld_ref_rmsnorm(out, x, w, dt, dim, eps, 0, (size_t)rows);
}

int ld_cu_rmsnorm(int v, float *out, const float *x, const void *w, ld_kdt dt, int dim, float eps, int rows)
{
    (void)v;
    count(__func__);
    if (rows <= 0 || dim <= 0) return 0;
    norm_rows(__func__, out, x, w, dt, dim, eps, rows);
    return 0;
}

int ld_cu_rmsnorm2(ld_cu_norm_arg a, ld_cu_norm_arg b, int rows, float eps)
{
    count(__func__);
    if (rows <= 0) return 0;
    if (a.dim <= 0 || b.dim <= 0) return E_INVAL;
    const char *ao = (const char *)a.out, *bo = (const char *)b.out;
    if (ao < bo + Z(rows, b.dim) * FB && bo < ao + Z(rows, a.dim) * FB)
        die(__func__, "a.out", a.out, Z(rows, a.dim) * FB, "overlaps b.out");
    norm_rows(__func__, a.out, a.x, a.w, a.dt, a.dim, eps, rows);
    norm_rows(__func__, b.out, b.x, b.w, b.dt, b.dim, eps, rows);
    return 0;
}

static size_t bias_bytes(ld_kdt dt, int N)
{
    return dt == LD_KDT_F32 ? Z(N, 4) : Z(N, 2);
}

/* the checks and the operands of a dense matmul; 0 or a code */
static int mm_check(const char *fn, float *out, const float *x, const void *w, ld_kdt dt, const void *bias,
                    ld_kdt bias_dt, int T, int K, int N)
{
    if (ld_cu_row_bytes(dt, K) == 0 && K > 0) return E_INVAL;
    if (bias && bias_dt != LD_KDT_F32 && bias_dt != LD_KDT_F16 && bias_dt != LD_KDT_BF16) return E_INVAL;
    dev(fn, "out", out, Z(T, N) * FB);
    dev(fn, "x", x, Z(T, K) * FB);
    dev(fn, "w", w, Z(N, ld_cu_row_bytes(dt, K)));
    if (bias) dev(fn, "bias", bias, bias_bytes(bias_dt, N));
    return 0;
}

int ld_cu_matmul(int v, float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt,
                 int T, int K, int N, int rope_hd)
{
    (void)v;
    count(__func__);
    if (T <= 0 || N <= 0) return 0;
    int e = mm_check(__func__, out, x, w, dt, bias, bias_dt, T, K, N);
    if (e) return e;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_ref_matmul_ex(out, x, w, dt, bias, bias_dt, T, K, N, rope_hd, row, 0, (size_t)N);
    free(row);
    return 0;
}

/* each weight as ld_cu_matmul without a bias */
int ld_cu_matmul_fanout(const ld_cu_fan *fan, int G, const float *x, ld_kdt dt, int T, int K)
{
    count(__func__);
    if (T <= 0 || G <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || (dt != LD_KDT_F32 && dt != LD_KDT_F16 && dt != LD_KDT_BF16)) return E_INVAL;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    int e = 0;
    for (int i = 0; !e && i < G; i++) {
        if (fan[i].n <= 0) e = E_INVAL;
        if (!e) e = mm_check(__func__, fan[i].out, x, fan[i].w, dt, NULL, LD_KDT_F32, T, K, fan[i].n);
        if (!e)
            ld_ref_matmul_ex(fan[i].out, x, fan[i].w, dt, NULL, LD_KDT_F32, T, K, fan[i].n, 0, row, 0,
                             (size_t)fan[i].n);
    }
    free(row);
    return e;
}

int ld_cu_matmul_tc_supported(ld_kdt dt, int K)
{
    return dt == LD_KDT_BF16 && K > 0 && K % 8 == 0;
}

int ld_cu_matmul_tc(float *out, const float *x, const void *w, ld_kdt dt, const void *bias, ld_kdt bias_dt, int T,
                    int K, int N, int rope_hd)
{
    count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (!ld_cu_matmul_tc_supported(dt, K)) return E_INVAL;
    if (bias && bias_dt != LD_KDT_F32 && bias_dt != LD_KDT_F16 && bias_dt != LD_KDT_BF16) return E_INVAL;
    if (((uintptr_t)x | (uintptr_t)w) & 15) return E_MISALIGN;
    int e = mm_check(__func__, out, x, w, dt, bias, bias_dt, T, K, N);
    if (e) return e;
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_var_matmul_bf16(out, x, w, dt, bias, bias_dt, T, K, N, rope_hd, row, 0, (size_t)N);
    free(row);
    return 0;
}

int ld_cu_rope(int v, float *x, int T, int n_heads, int hd, const float *inv_freq, int pos0)
{
    (void)v;
    count(__func__);
    if (T <= 0 || n_heads <= 0 || hd < 2) return 0;
    dev(__func__, "x", x, Z(T, n_heads) * (size_t)hd * FB);
    dev(__func__, "inv_freq", inv_freq, (size_t)(hd / 2) * FB);
    ld_ref_rope(x, n_heads, hd, inv_freq, pos0, 0, (size_t)T);
    return 0;
}

int ld_cu_copy(int v, float *dst, const float *src, size_t n)
{
    (void)v;
    count(__func__);
    dev(__func__, "dst", dst, n * FB);
    dev(__func__, "src", src, n * FB);
    if (n) memmove(dst, src, n * FB);
    return 0;
}

size_t ld_cu_attention_work(int v, int tile, int n_heads, int hd, int pos0, int T)
{
    if (v == LD_CU_REF || tile <= 0) return 0;
    size_t splits = (size_t)((pos0 + T + LD_CU_ATT_SPLIT - 1) / LD_CU_ATT_SPLIT);
    return Z(tile, n_heads) * splits * (size_t)(hd + 2);
}

int ld_cu_attention(int v, float *out, const float *q, const float *kcache, const float *vcache, int T, int pos0,
                    int n_heads, int n_kv, int hd, int window, float scale, float *work, size_t work_floats)
{
    count(__func__);
    if (T <= 0 || n_heads <= 0 || hd <= 0) return 0;
    if (n_kv <= 0 || n_heads % n_kv) return E_INVAL;
    if (v != LD_CU_REF) {
        if (hd > LD_CU_ATT_MAX_HD || n_heads > 65535) return E_INVAL;
        size_t per = ld_cu_attention_work(v, 1, n_heads, hd, pos0, T);
        if (!per || work_floats / per < 1) return E_INVAL;
        dev(__func__, "work", work, work_floats * FB);
    }
    size_t nq = Z(T, n_heads) * (size_t)hd, nkv = Z(pos0 + T, n_kv) * (size_t)hd;
    dev(__func__, "out", out, nq * FB);
    dev(__func__, "q", q, nq * FB);
    dev(__func__, "kcache", kcache, nkv * FB);
    dev(__func__, "vcache", vcache, nkv * FB);
    float *scores = malloc(((size_t)pos0 + (size_t)T) * FB);
    if (!scores) return E_NOMEM;
    ld_ref_attention(out, q, kcache, vcache, n_heads, n_kv, hd, pos0, window, scale, scores, 0, Z(T, n_heads));
    free(scores);
    return 0;
}

int ld_cu_swiglu(int v, float *out, const float *gate, const float *up, size_t n)
{
    (void)v;
    count(__func__);
    dev(__func__, "out", out, n * FB);
    dev(__func__, "gate", gate, n * FB);
    dev(__func__, "up", up, n * FB);
    if (n) ld_ref_swiglu(out, gate, up, 0, n);
    return 0;
}

int ld_cu_add(int v, float *x, const float *y, size_t n)
{
    (void)v;
    count(__func__);
    dev(__func__, "x", x, n * FB);
    dev(__func__, "y", y, n * FB);
    if (n) ld_ref_add(x, y, 0, n);
    return 0;
}

int ld_cu_softmax(int v, float *out, const float *x, int rows, int n)
{
    (void)v;
    count(__func__);
    if (rows <= 0 || n <= 0) return 0;
    dev(__func__, "out", out, Z(rows, n) * FB);
    dev(__func__, "x", x, Z(rows, n) * FB);
    ld_ref_softmax(out, x, n, 0, (size_t)rows);
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek */

/* a block-scaled weight's scale grid: ceil(N / br) x ceil(K / bc) */
static size_t f8b_grid(int N, int K, int br, int bc)
{
    return Z((N + br - 1) / br, (K + bc - 1) / bc);
}

/* out [T][N] = x . W^T of an ld_f8b-described weight */
static int scaled_mm(float *out, const float *x, const ld_f8b *w, ld_kdt dt, int T, int K, int N)
{
    float *row = malloc(((size_t)K + 1) * FB);
    if (!row) return E_NOMEM;
    ld_ref_matmul(out, x, w, dt, NULL, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
    free(row);
    return 0;
}

int ld_cu_fp8_matmul(int v, float *out, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                     int br, int bc)
{
    count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0) return E_INVAL;
    if (v != LD_CU_REF && (T + 7) / 8 > 65535) return E_INVAL;
    dev(__func__, "out", out, Z(T, N) * FB);
    dev(__func__, "x", x, Z(T, K) * FB);
    dev(__func__, "q", q, Z(N, K));
    dev(__func__, "scale", scale, f8b_grid(N, K, br, bc) * FB);
    ld_f8b w = {q, scale, N, K, br, bc};
    return scaled_mm(out, x, &w, LD_KDT_F8B, T, K, N);
}

int ld_cu_moe_plan(int v, int32_t *offsets, int32_t *rows, int32_t *row_of, const int32_t *idx, int T, int K, int E)
{
    (void)v;
    count(__func__);
    if (E <= 0 || K <= 0 || T < 0) return E_INVAL;
    size_t nk = Z(T, K);
    dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    dev(__func__, "rows", rows, nk * IB);
    dev(__func__, "row_of", row_of, nk * IB);
    dev(__func__, "idx", idx, nk * IB);
    memset(offsets, 0, ((size_t)E + 1) * IB);
    for (size_t i = 0; i < nk; i++) {
        if (idx[i] < 0 || idx[i] >= E) return E_INVAL;
        offsets[idx[i] + 1]++;
    }
    for (int e = 0; e < E; e++) offsets[e + 1] += offsets[e];
    int32_t *next = malloc((size_t)E * IB + 1);
    if (!next) return E_NOMEM;
    memcpy(next, offsets, (size_t)E * IB);
    for (size_t i = 0; i < nk; i++) {
        int32_t r = next[idx[i]]++;
        rows[r] = (int32_t)(i / (size_t)K);
        row_of[i] = r;
    }
    free(next);
    return 0;
}

int ld_cu_moe_fp8_matmul(int v, float *out, const float *x, const int32_t *rows, const int32_t *offsets,
                         const uint8_t *q, const float *scale, int E, int R, int max_rows, int K, int N, int br, int bc)
{
    (void)v;
    count(__func__);
    if (R <= 0 || N <= 0) return 0;
    if (E <= 0 || K <= 0 || br <= 0 || bc <= 0 || max_rows < 0) return E_INVAL;
    dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    int32_t mx = max_of(__func__, "rows", rows, (size_t)R);
    dev(__func__, "out", out, Z(R, N) * FB);
    dev(__func__, "x", x, Z(mx + 1, K) * FB);
    size_t g = f8b_grid(N, K, br, bc);
    dev(__func__, "q", q, Z(E, N) * (size_t)K);
    dev(__func__, "scale", scale, Z(E, g) * FB);
    float *xr = malloc(Z(K, 1) * FB);
    if (!xr) return E_NOMEM;
    int e = 0;
    for (int ex = 0; !e && ex < E; ex++) {
        ld_f8b w = {q + Z(ex, N) * (size_t)K, scale + Z(ex, g), N, K, br, bc};
        for (int r = offsets[ex]; !e && r < offsets[ex + 1] && r < R; r++) {
            memcpy(xr, x + Z(rows[r], K), Z(K, FB));
            e = scaled_mm(out + Z(r, N), xr, &w, LD_KDT_F8B, 1, K, N);
        }
    }
    free(xr);
    return e;
}

/* the custom kernel's split count (cuda_deepseek.cu's mla_nsplit): the
 * longest key list over LD_CU_MLA_SPLIT */
static int mla_nsplit(int T, int pos0, const int32_t *sel, int k)
{
    int n = pos0 + T;
    if (sel && k < n) n = k;
    return (n + LD_CU_MLA_SPLIT - 1) / LD_CU_MLA_SPLIT;
}

size_t ld_cu_mla_latent_work(int v, int T, int n_heads, int c, int pos0, const int32_t *sel, int k)
{
    if (v == LD_CU_REF || T <= 0) return 0;
    return Z(T, n_heads) * (size_t)mla_nsplit(T, pos0, sel, k) * (size_t)(c + 2);
}

int ld_cu_mla_latent(int v, float *o_lat, const float *q_abs, const float *q, const float *ckv, const float *kpe,
                     int T, int n_heads, int dn, int dr, int c, int pos0, float scale, const int32_t *sel, int k,
                     float *work, size_t work_floats)
{
    count(__func__);
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (dn < 0 || dr < 0 || pos0 < 0 || (sel && k < 1)) return E_INVAL;
    if (v != LD_CU_REF) {
        if (mla_nsplit(T, pos0, sel, k) > 65535 || c + dr > 704 || c > 768) return E_INVAL;
        if (work_floats < ld_cu_mla_latent_work(v, T, n_heads, c, pos0, sel, k)) return E_INVAL;
        dev(__func__, "work", work, work_floats * FB);
    }
    size_t rows = Z(T, n_heads), S = (size_t)pos0 + (size_t)T;
    dev(__func__, "o_lat", o_lat, rows * (size_t)c * FB);
    dev(__func__, "q_abs", q_abs, rows * (size_t)c * FB);
    dev(__func__, "q", q, rows * (size_t)(dn + dr) * FB);
    dev(__func__, "ckv", ckv, S * (size_t)c * FB);
    dev(__func__, "kpe", kpe, S * (size_t)dr * FB);
    if (sel) {
        dev(__func__, "sel", sel, Z(T, k) * IB);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < k && i < pos0 + t + 1; i++)
                if (sel[Z(t, k) + (size_t)i] < 0 || sel[Z(t, k) + (size_t)i] > pos0 + t)
                    die(__func__, "sel", sel, Z(T, k) * IB, "selects a position outside 0..pos");
    }
    float *scores = malloc(S * FB);
    if (!scores) return E_NOMEM;
    if (sel)
        ld_ref_mla_latent_attention_sparse(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, sel, k,
                                           0, rows);
    else
        ld_ref_mla_latent_attention(o_lat, q_abs, q, ckv, kpe, n_heads, dn, dr, c, pos0, scale, scores, 0, rows);
    free(scores);
    return 0;
}

static int absorb_dt_ok(ld_kdt dt)
{
    return dt == LD_KDT_F32 || dt == LD_KDT_F16 || dt == LD_KDT_BF16;
}

int ld_cu_mla_absorb_q(int v, float *q_abs, const float *q, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                       int dr, int dv, int c)
{
    (void)v;
    count(__func__);
    if (T <= 0 || n_heads <= 0 || c <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || dr < 0 || dv < 0) return E_INVAL;
    size_t rows = Z(T, n_heads);
    dev(__func__, "q_abs", q_abs, rows * (size_t)c * FB);
    dev(__func__, "q", q, rows * (size_t)(dn + dr) * FB);
    dev(__func__, "w", w, Z(n_heads, dn + dv) * ld_cu_row_bytes(dt, c));
    ld_ref_mla_absorb_q(q_abs, q, w, dt, n_heads, dn, dr, dv, c, 0, rows);
    return 0;
}

int ld_cu_mla_absorb_out(int v, float *out, const float *o_lat, const void *w, ld_kdt dt, int T, int n_heads, int dn,
                         int dv, int c)
{
    (void)v;
    count(__func__);
    if (T <= 0 || n_heads <= 0 || dv <= 0) return 0;
    if (!absorb_dt_ok(dt) || dn < 0 || c < 0) return E_INVAL;
    size_t rows = Z(T, n_heads);
    dev(__func__, "out", out, rows * (size_t)dv * FB);
    dev(__func__, "o_lat", o_lat, rows * (size_t)c * FB);
    dev(__func__, "w", w, Z(n_heads, dn + dv) * ld_cu_row_bytes(dt, c));
    ld_ref_mla_absorb_out(out, o_lat, w, dt, n_heads, dn, dv, c, 0, rows);
    return 0;
}

int ld_cu_index_scores(int v, int form, float *scores, const float *q, const float *w, const float *keys, int T,
                       int n_heads, int dim, int n, float qscale, float wscale)
{
    count(__func__);
    if (T <= 0 || n <= 0) return 0;
    if (n_heads <= 0 || dim <= 0 || (form != 0 && form != 1)) return E_INVAL;
    if (v != LD_CU_REF && (dim > 32 * 8 || Z(n_heads, dim) > 12288 || T > 65535)) return E_INVAL;
    size_t QW = Z(n_heads, dim);
    dev(__func__, "scores", scores, Z(T, n) * FB);
    dev(__func__, "q", q, Z(T, QW) * FB);
    dev(__func__, "w", w, Z(T, n_heads) * FB);
    dev(__func__, "keys", keys, Z(n, dim) * FB);
    for (int t = 0; t < T; t++) {
        const float *qt = q + Z(t, QW), *wt = w + Z(t, n_heads);
        if (form == 0) ld_ref_ds_index_scores(scores + Z(t, n), qt, wt, keys, n_heads, dim, n);
        else ld_ref_ds4_index_scores(scores + Z(t, n), qt, wt, keys, n, n_heads, dim, qscale, wscale);
    }
    return 0;
}

int ld_cu_topk(int v, int32_t *idx, const float *scores, int T, int ld, int n, int pos0, int k)
{
    (void)v;
    count(__func__);
    if (T <= 0 || k <= 0) return 0;
    if (n < 0 || ld < n) return E_INVAL;
    dev(__func__, "idx", idx, Z(T, k) * IB);
    dev(__func__, "scores", scores, (Z(T - 1, ld) + (size_t)n) * FB);
    for (int t = 0; t < T; t++) {
        int nt = pos0 < 0 ? n : (pos0 + t + 1 < n ? pos0 + t + 1 : n);
        int32_t *it = idx + Z(t, k);
        int m = nt > 0 ? ld_ref_ds4_topk(it, scores + Z(t, ld), nt, k) : 0;
        for (int i = m; i < k; i++) it[i] = -1;
    }
    return 0;
}

int ld_cu_ds_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, int T, int E, int n_group,
                   int topk_group, int top_k, int norm, float scale)
{
    (void)v;
    count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > 1024 || n_group <= 0 || n_group > 64 || E % n_group || E / n_group < 2 || topk_group < 1 ||
        topk_group > n_group || top_k < 1 || top_k > 64 || top_k > topk_group * (E / n_group))
        return E_INVAL;
    dev(__func__, "idx", idx, Z(T, top_k) * IB);
    dev(__func__, "w", w, Z(T, top_k) * FB);
    dev(__func__, "logits", logits, Z(T, E) * FB);
    if (bias) dev(__func__, "bias", bias, Z(E, FB));
    ld_ref_ds_route(idx, w, logits, bias, E, n_group, topk_group, top_k, norm, scale, 0, (size_t)T);
    return 0;
}

int ld_cu_ds4_route(int v, int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                    const int32_t *tokens, int T, int E, int K, float scale)
{
    (void)v;
    count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > 1024 || K < 1 || K > E || K > 64 || (tid2eid && !tokens)) return E_INVAL;
    dev(__func__, "idx", idx, Z(T, K) * IB);
    dev(__func__, "w", w, Z(T, K) * FB);
    dev(__func__, "logits", logits, Z(T, E) * FB);
    if (bias) dev(__func__, "bias", bias, Z(E, FB));
    if (tid2eid) {
        int32_t mx = max_of(__func__, "tokens", tokens, (size_t)T);
        dev(__func__, "tid2eid", tid2eid, Z(mx + 1, K) * IB);
    }
    for (int t = 0; t < T; t++) {
        const int32_t *hash = tid2eid ? tid2eid + Z(tokens[t], K) : NULL;
        ld_ref_ds4_route(idx + Z(t, K), w + Z(t, K), logits + Z(t, E), bias, hash, E, K, scale);
    }
    return 0;
}

/* the combine's products into y (K > 0), ranges checked as fn's */
static void combine_into(const char *fn, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K,
                         int D)
{
    size_t nk = Z(T, K);
    int32_t mx = row_of ? max_of(fn, "row_of", row_of, nk) : (int32_t)(nk - 1);
    dev(fn, "eo", eo, Z(mx + 1, D) * FB);
    dev(fn, "w", w, nk * FB);
    for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
            size_t i = Z(t, K) + (size_t)k, r = row_of ? (size_t)row_of[i] : i;
            ld_ref_ds_axpy(y + Z(t, D), eo + Z(r, D), w[i], 0, (size_t)D);
        }
}

int ld_cu_moe_combine(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D)
{
    (void)v;
    count(__func__);
    if (T <= 0 || D <= 0 || K <= 0) return 0;
    dev(__func__, "y", y, Z(T, D) * FB);
    combine_into(__func__, y, eo, row_of, w, T, K, D);
    return 0;
}

int ld_cu_moe_combine_ex(int v, float *y, const float *eo, const int32_t *row_of, const float *w, int T, int K, int D,
                         int from_zero, const float *add)
{
    (void)v;
    count(__func__);
    if (T <= 0 || D <= 0 || K < 0) return 0;
    size_t n = Z(T, D);
    dev(__func__, "y", y, n * FB);
    if (add) dev(__func__, "add", add, n * FB);
    if (from_zero) memset(y, 0, n * FB);
    if (K > 0) combine_into(__func__, y, eo, row_of, w, T, K, D);
    for (size_t i = 0; add && i < n; i++) y[i] = y[i] + add[i];
    return 0;
}

size_t ld_cu_ds4_attention_sync(int T, int H)
{
    return T > 0 && H > 0 ? Z(T, (H + 7) / 8) : 0;
}

size_t ld_cu_hc_work(int T, int N)
{
    return T > 0 && N > 0 ? (size_t)T * (1 + Z(2 + N, N) + (size_t)N) : 0;
}

int ld_cu_hc_pre(int v, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                 const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                 float *work, size_t work_floats)
{
    return ld_cu_hc_pre_ex(v, LD_CU_MHC_F32, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps,
                           hc_eps, work, work_floats);
}

/* ld_cu_hc_pre_ex's checks and C references, as fn */
static int hc_pre_body(const char *fn_name, int variant, float *post, float *comb, float *collapsed, const float *X,
                       int T, int N, int D, const float *fn, const float *base, const float *scale, int iters,
                       float norm_eps, float hc_eps, float *work, size_t work_floats)
{
    if (T <= 0) return 0;
    if (variant < LD_CU_MHC_F32 || variant > LD_CU_MHC_SINKHORN_BF16) return E_INVAL;
    if (N <= 0 || N > 64 || D <= 0 || work_floats < ld_cu_hc_work(T, N)) return E_INVAL;
    size_t n = (size_t)N, d = (size_t)D, hc = (2 + n) * n;
    dev(fn_name, "work", work, work_floats * FB);
    dev(fn_name, "post", post, Z(T, n) * FB);
    dev(fn_name, "comb", comb, Z(T, n * n) * FB);
    dev(fn_name, "collapsed", collapsed, Z(T, d) * FB);
    dev(fn_name, "X", X, Z(T, n * d) * FB);
    dev(fn_name, "fn", fn, hc * n * d * FB);
    dev(fn_name, "base", base, hc * FB);
    dev(fn_name, "scale", scale, 3 * FB);
    float *scratch = malloc((n * d + hc) * FB);
    if (!scratch) return E_NOMEM;
    for (int t = 0; t < T; t++) {
        float *pt = post + Z(t, n), *ct = comb + Z(t, n * n);
        ld_ref_ds4_hc_pre_ex(X + Z(t, n * d), N, D, fn, base, scale, iters, norm_eps, hc_eps,
                             variant == LD_CU_MHC_SINKHORN_BF16, pt, ct, collapsed + Z(t, d), scratch);
        if (variant != LD_CU_MHC_BF16) continue;
        for (size_t i = 0; i < n; i++) pt[i] = ld_var_bf16_round(pt[i]);
        for (size_t i = 0; i < n * n; i++) ct[i] = ld_var_bf16_round(ct[i]);
    }
    free(scratch);
    return 0;
}

int ld_cu_hc_pre_ex(int v, int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N,
                    int D, const float *fn, const float *base, const float *scale, int iters, float norm_eps,
                    float hc_eps, float *work, size_t work_floats)
{
    (void)v;
    count(__func__);
    return hc_pre_body(__func__, variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps,
                       work, work_floats);
}

int ld_cu_hc_pre_norm(int variant, float *post, float *comb, float *collapsed, const float *X, int T, int N, int D,
                      const float *fn, const float *base, const float *scale, int iters, float norm_eps, float hc_eps,
                      float *work, size_t work_floats, const void *w, int w_dt, float eps, float *normed, int *sync)
{
    count(__func__);
    if (T > 65535 || w_dt < LD_KDT_F32 || w_dt > LD_KDT_BF16 || (T > 0 && !normed)) return E_INVAL;
    if (sync && T > 0) { /* the counts: device ints, zero (the kernel leaves them so) */
        dev(__func__, "sync", sync, Z(T, sizeof *sync));
        for (int t = 0; t < T; t++)
            if (sync[t]) die(__func__, "sync", sync, Z(T, sizeof *sync), "holds a nonzero count");
    }
    int e = hc_pre_body(__func__, variant, post, comb, collapsed, X, T, N, D, fn, base, scale, iters, norm_eps, hc_eps,
                        work, work_floats);
    if (e || T <= 0) return e;
    ld_kdt dt = (ld_kdt)w_dt;
    dev(__func__, "w", w, ld_cu_row_bytes(dt, D));
    dev(__func__, "normed", normed, Z(T, D) * FB);
    ld_ref_rmsnorm(normed, collapsed, w, dt, D, eps, 0, (size_t)T);
    return 0;
}

int ld_cu_hc_post(int v, float *out, const float *X, const float *f, const float *post, const float *comb, int T,
                  int N, int D)
{
    (void)v;
    count(__func__);
    if (T <= 0 || N <= 0 || D <= 0) return 0;
    size_t n = (size_t)N, d = (size_t)D;
    dev(__func__, "out", out, Z(T, n * d) * FB);
    dev(__func__, "X", X, Z(T, n * d) * FB);
    dev(__func__, "f", f, Z(T, d) * FB);
    dev(__func__, "post", post, Z(T, n) * FB);
    dev(__func__, "comb", comb, Z(T, n * n) * FB);
    for (int t = 0; t < T; t++)
        ld_ref_ds4_hc_post(out + Z(t, n * d), X + Z(t, n * d), f + Z(t, d), post + Z(t, n), comb + Z(t, n * n), N, D);
    return 0;
}

/* the matmul into a host block f, the combine into it (c: from zero,
 * then f added), the mixing from it */
static int matmul_post(const char *fn, const float *x, const uint8_t *q, const float *scale, int T, int K, int N,
                       int br, int bc, ld_cu_post p, const ld_cu_combine *c)
{
    dev(fn, "x", x, Z(T, K) * FB);
    dev(fn, "q", q, Z(N, K));
    dev(fn, "scale", scale, f8b_grid(N, K, br, bc) * FB);
    size_t n = (size_t)p.N, d = (size_t)N;
    dev(fn, "p.out", p.out, Z(T, n * d) * FB);
    dev(fn, "p.X", p.X, Z(T, n * d) * FB);
    dev(fn, "p.post", p.post, Z(T, n) * FB);
    dev(fn, "p.comb", p.comb, Z(T, n * n) * FB);
    float *f = malloc(Z(T, d) * FB), *y = malloc(Z(T, d) * FB);
    if (!f || !y) {
        free(f);
        free(y);
        return E_NOMEM;
    }
    ld_f8b w = {q, scale, N, K, br, bc};
    int e = scaled_mm(f, x, &w, LD_KDT_F8B, T, K, N);
    if (!e && c) {
        memset(y, 0, Z(T, d) * FB);
        if (c->K > 0) combine_into(fn, y, c->eo, c->row_of, c->w, T, c->K, N);
        for (size_t i = 0; i < Z(T, d); i++) f[i] = y[i] + f[i];
    }
    for (int t = 0; !e && t < T; t++)
        ld_ref_ds4_hc_post(p.out + Z(t, n * d), p.X + Z(t, n * d), f + Z(t, d), p.post + Z(t, n),
                           p.comb + Z(t, n * n), p.N, N);
    free(f);
    free(y);
    return e;
}

int ld_cu_fp8_matmul_post(const float *x, const uint8_t *q, const float *scale, int T, int K, int N, int br, int bc,
                          ld_cu_post p)
{
    count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || p.N <= 0) return E_INVAL;
    if ((T + 7) / 8 > 65535) return E_INVAL;
    return matmul_post(__func__, x, q, scale, T, K, N, br, bc, p, NULL);
}

/* ---------------------------------------------------------------- sampling */

int ld_cu_sample_uniforms(uint64_t *hash, double *u, uint64_t seed, uint64_t pos0, int n)
{
    count(__func__);
    if (n <= 0) return 0;
    if (hash) dev(__func__, "hash", hash, (size_t)n * sizeof *hash);
    if (u) dev(__func__, "u", u, (size_t)n * sizeof *u);
    for (int i = 0; i < n; i++) {
        if (hash) hash[i] = ld_sample_hash(seed, pos0 + (uint64_t)i);
        if (u) u[i] = ld_sample_uniform(seed, pos0 + (uint64_t)i);
    }
    return 0;
}

static size_t pow2_at_least(int V)
{
    size_t p = 1;
    while (p < (size_t)V) p <<= 1;
    return p;
}

size_t ld_cu_sample_work(int v, int T, int V)
{
    if (T <= 0 || V <= 0) return 0;
    size_t P = v == LD_CU_REF ? (size_t)V : pow2_at_least(V);
    return (size_t)T * (2 * sizeof(double) + P * (sizeof(double) + sizeof(int32_t)));
}

int ld_cu_sample(int v, int32_t *tokens, const float *logits, int T, int V, double temperature, int64_t top_k,
                 double top_p, double min_p, uint64_t seed, uint64_t pos0, void *work, size_t work_bytes)
{
    count(__func__);
    if (T <= 0) return 0;
    if (V <= 0) return E_INVAL;
    int greedy = !(temperature >= LD_SAMPLE_EPS) || top_k == 1;
    if (!greedy && work_bytes < ld_cu_sample_work(v, T, V)) return E_INVAL;
    if (!greedy) dev(__func__, "work", work, work_bytes);
    dev(__func__, "tokens", tokens, Z(T, IB));
    dev(__func__, "logits", logits, Z(T, V) * FB);
    ld_sampler *s = NULL;
    ld_error err = {0};
    if (ld_sampler_new(V, &s, &err) != LD_OK) return E_NOMEM;
    ld_sample_params p = {temperature, top_k, top_p, min_p};
    for (int t = 0; t < T; t++) tokens[t] = ld_sampler_token(s, logits + Z(t, V), V, &p, seed, pos0 + (uint64_t)t);
    ld_sampler_free(s);
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek-V4 */

/* cuda_ds4.cu's bound of any token's key count */
static int ds4_nk_max(int T, int pos0, int window, int ratio, int kpick, int has_ent)
{
    long long last = (long long)pos0 + T;
    long long nw = window < last ? window : last;
    if (nw < 0) nw = 0;
    long long nc = 0;
    if (has_ent) nc = kpick > 0 ? kpick : ratio > 0 ? last / ratio : 0;
    long long n = nw + nc;
    return n > 0x3fffffff ? 0x3fffffff : (int)n;
}

size_t ld_cu_ds4_attention_work(int v, int T, int H, int hd, int pos0, int window, int ratio, int kpick,
                                int has_entries)
{
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    int nk = ds4_nk_max(T, pos0, window, ratio, kpick, has_entries);
    if (v == LD_CU_REF) return Z(T, H) * ((size_t)nk + 1);
    return Z(T, H) * (size_t)((nk + 63) / 64) * ((size_t)hd + 2);
}

/* token t's key rows (the window in the ring, then the entries) into keys;
 * their number */
static int ds4_keys(const float **keys, const float *kv, int kv_rows, int window, const float *ent, int ratio,
                    const int32_t *picks, int kpick, int t, int p, int hd)
{
    int lo = p - window + 1 < 0 ? 0 : p - window + 1, n = 0;
    for (int pos = lo; window > 0 && pos <= p; pos++) keys[n++] = kv + Z(pos % kv_rows, hd);
    if (!ent) return n;
    if (picks) {
        const int32_t *pr = picks + Z(t, kpick);
        for (int c = 0; c < kpick && pr[c] >= 0; c++) keys[n++] = ent + Z(pr[c], hd);
    } else if (ratio > 0) {
        for (int c = 0; c < (p + 1) / ratio; c++) keys[n++] = ent + Z(c, hd);
    }
    return n;
}

/* the extent of the entries the picks (or the positions) read */
static size_t ds4_ent_rows(const int32_t *picks, int kpick, int T, int pos0, int ratio)
{
    if (!picks) return ratio > 0 ? ((size_t)pos0 + (size_t)T) / (size_t)ratio : 0;
    int32_t mx = -1;
    for (int t = 0; t < T; t++)
        for (int c = 0; c < kpick && picks[Z(t, kpick) + (size_t)c] >= 0; c++)
            if (picks[Z(t, kpick) + (size_t)c] > mx) mx = picks[Z(t, kpick) + (size_t)c];
    return (size_t)(mx + 1);
}

static int ds4_attention(const char *fn, int v, float *out, const float *q, int T, int H, int hd, const float *kv,
                         int kv_rows, int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                         const float *sinks, float scale, int pos0, float *work, size_t work_floats)
{
    if (T <= 0 || H <= 0) return 0;
    if (hd <= 0 || pos0 < 0 || window < 0 || (window > 0 && (!kv || kv_rows < window)) ||
        (entries && !picks && ratio <= 0) || (picks && (!entries || kpick <= 0)))
        return E_INVAL;
    if (T > 65535 || (v != LD_CU_REF && hd > 512)) return E_INVAL;
    size_t need = ld_cu_ds4_attention_work(v, T, H, hd, pos0, window, ratio, picks ? kpick : 0, entries != NULL);
    if (work_floats < need) return E_INVAL;
    dev(fn, "work", work, need * FB);
    size_t QH = Z(H, hd);
    dev(fn, "out", out, Z(T, QH) * FB);
    dev(fn, "q", q, Z(T, QH) * FB);
    if (window > 0) dev(fn, "kv", kv, Z(kv_rows, hd) * FB);
    if (picks) dev(fn, "picks", picks, Z(T, kpick) * IB);
    if (entries) dev(fn, "entries", entries, ds4_ent_rows(picks, kpick, T, pos0, ratio) * (size_t)hd * FB);
    if (sinks) dev(fn, "sinks", sinks, Z(H, FB));
    int nk = ds4_nk_max(T, pos0, window, ratio, picks ? kpick : 0, entries != NULL);
    const float **keys = malloc(((size_t)nk + 1) * sizeof *keys);
    float *scores = malloc(((size_t)nk + 1) * FB);
    int e = keys && scores ? 0 : E_NOMEM;
    for (int t = 0; !e && t < T; t++) {
        int n = ds4_keys(keys, kv, kv_rows, window, entries, ratio, picks, kpick, t, pos0 + t, hd);
        ld_ref_ds4_attention(out + Z(t, QH), q + Z(t, QH), H, hd, keys, n, sinks, scale, scores);
    }
    free(keys);
    free(scores);
    return e;
}

int ld_cu_ds4_attention(int v, float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                        int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                        const float *sinks, float scale, int pos0, float *work, size_t work_floats)
{
    count(__func__);
    return ds4_attention(__func__, v, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks, kpick, sinks,
                         scale, pos0, work, work_floats);
}

/* the attention, then the inverse RoPE of each head's last rd values */
int ld_cu_ds4_attention_rope(float *out, const float *q, int T, int H, int hd, const float *kv, int kv_rows,
                             int window, const float *entries, int ratio, const int32_t *picks, int kpick,
                             const float *sinks, float scale, int pos0, float *work, size_t work_floats,
                             ld_cu_rot rot, int *sync)
{
    count(__func__);
    if (T > 0 && H > 0 && (rot.rd < 0 || rot.rd % 2 || rot.rd > hd)) return E_INVAL;
    size_t ns = ld_cu_ds4_attention_sync(T, H);
    if (sync && ns) { /* the counts: device ints, zero (the kernel leaves them so) */
        dev(__func__, "sync", sync, ns * sizeof *sync);
        for (size_t i = 0; i < ns; i++)
            if (sync[i]) die(__func__, "sync", sync, ns * sizeof *sync, "holds a nonzero count");
    }
    int e = ds4_attention(__func__, LD_CU_CUSTOM, out, q, T, H, hd, kv, kv_rows, window, entries, ratio, picks,
                          kpick, sinks, scale, pos0, work, work_floats);
    if (e || T <= 0 || H <= 0 || !rot.rd) return e;
    dev(__func__, "rot.inv_freq", rot.inv_freq, (size_t)(rot.rd / 2) * FB);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            ld_ref_ds4_rope_ex(out + Z(t, Z(H, hd)) + Z(h, hd) + (size_t)(hd - rot.rd), 1, rot.rd, rot.rd,
                               rot.inv_freq, rot.af, pos0 + t, 1, rot.bf16_table);
    return 0;
}

int ld_cu_ds4_clamped_swiglu(int v, float *out, const float *g, const float *u, int T, int F, size_t ld, float limit)
{
    (void)v;
    count(__func__);
    if (T <= 0 || F <= 0) return 0;
    if (ld < (size_t)F) return E_INVAL;
    size_t span = Z(T - 1, ld) + (size_t)F;
    dev(__func__, "out", out, Z(T, F) * FB);
    dev(__func__, "g", g, span * FB);
    dev(__func__, "u", u, span * FB);
    for (int t = 0; t < T; t++)
        ld_ref_ds4_clamped_swiglu(out + Z(t, F), g + Z(t, ld), u + Z(t, ld), limit, (size_t)F);
    return 0;
}

int ld_cu_ds_rope(int v, float *x, int T, size_t row_stride, size_t off, int n_heads, size_t head_stride, int dim,
                  const float *inv_freq, float attn_factor, int interleave, int pos0, int inverse, int bf16_table)
{
    (void)v;
    count(__func__);
    if (T <= 0 || n_heads <= 0 || dim <= 0) return 0;
    if (dim % 2 || pos0 < 0) return E_INVAL;
    dev(__func__, "x", x, (Z(T - 1, row_stride) + off + Z(n_heads - 1, head_stride) + (size_t)dim) * FB);
    dev(__func__, "inv_freq", inv_freq, (size_t)(dim / 2) * FB);
    if (!inverse) {
        ld_ref_ds_rope_ex(x, row_stride, off, n_heads, head_stride, dim, inv_freq, attn_factor, interleave, pos0,
                          bf16_table, 0, (size_t)T);
        return 0;
    }
    if (!interleave) die(__func__, "x", x, 0, "inverse RoPE of the rotate_half layout (V4's is interleaved)");
    for (int t = 0; t < T; t++)
        for (int h = 0; h < n_heads; h++)
            ld_ref_ds4_rope_ex(x + Z(t, row_stride) + off + Z(h, head_stride), 1, dim, dim, inv_freq, attn_factor,
                               pos0 + t, 1, bf16_table);
    return 0;
}

size_t ld_cu_hc_head_work(int T, int N)
{
    return T > 0 && N > 0 ? Z(T, 1 + N) : 0;
}

/* the head's checks and collapse (T > 0, N and D checked) */
static int hc_head_body(const char *fn_name, float *out, const float *X, int T, int N, int D, const float *fn,
                        const float *base, float scale, float norm_eps, float hc_eps)
{
    size_t n = (size_t)N, d = (size_t)D;
    dev(fn_name, "out", out, Z(T, d) * FB);
    dev(fn_name, "X", X, Z(T, n * d) * FB);
    dev(fn_name, "fn", fn, n * n * d * FB);
    dev(fn_name, "base", base, n * FB);
    float *scratch = malloc((n * d + n) * FB);
    if (!scratch) return E_NOMEM;
    for (int t = 0; t < T; t++)
        ld_ref_ds4_hc_head(out + Z(t, d), X + Z(t, n * d), N, D, fn, base, scale, norm_eps, hc_eps, scratch);
    free(scratch);
    return 0;
}

int ld_cu_ds4_hc_head(int v, float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                      float scale, float norm_eps, float hc_eps, float *work, size_t work_floats)
{
    count(__func__);
    if (T <= 0) return 0;
    if (N <= 0 || N > 64 || D <= 0) return E_INVAL;
    if (v == LD_CU_REF) {
        if (work_floats < ld_cu_hc_head_work(T, N)) return E_INVAL;
        dev(__func__, "work", work, work_floats * FB);
    }
    return hc_head_body(__func__, out, X, T, N, D, fn, base, scale, norm_eps, hc_eps);
}

int ld_cu_ds4_hc_head_norm(float *out, const float *X, int T, int N, int D, const float *fn, const float *base,
                           float scale, float norm_eps, float hc_eps, const void *w, int w_dt, float eps,
                           float *normed)
{
    count(__func__);
    if (T <= 0) return 0;
    if (N <= 0 || N > 64 || D <= 0 || w_dt < LD_KDT_F32 || w_dt > LD_KDT_BF16 || !normed) return E_INVAL;
    int e = hc_head_body(__func__, out, X, T, N, D, fn, base, scale, norm_eps, hc_eps);
    if (e) return e;
    norm_rows(__func__, normed, out, w, (ld_kdt)w_dt, D, eps, T);
    return 0;
}

int ld_cu_ds4_fp4_matmul(int v, float *out, const float *x, const uint8_t *q, const void *scale, int scale_e8m0,
                         int T, int K, int N, int sr, int sc)
{
    count(__func__);
    if (T <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || sr <= 0 || sc <= 0 || N % sr || K % sc) return E_INVAL;
    if (v != LD_CU_REF && (T + 7) / 8 > 65535) return E_INVAL;
    size_t ns = Z(sr, sc);
    dev(__func__, "out", out, Z(T, N) * FB);
    dev(__func__, "x", x, Z(T, K) * FB);
    dev(__func__, "q", q, Z(N, K / 2));
    dev(__func__, "scale", scale, ns * (scale_e8m0 ? 1 : FB));
    float *s = malloc(ns * FB);
    if (!s) return E_NOMEM;
    for (size_t i = 0; i < ns; i++)
        s[i] = scale_e8m0 ? ld_ref_ds4_e8m0_to_f32(((const uint8_t *)scale)[i]) : ((const float *)scale)[i];
    ld_f8b w = {q, s, N, K, N / sr, K / sc};
    int e = scaled_mm(out, x, &w, LD_KDT_F4B, T, K, N);
    free(s);
    return e;
}

/* one group of a grouped GEMM: its ranges checked, its rows computed
 * into its output (into [rows][N] instead when not NULL) */
static int group_rows(const char *fn, const ld_cu_mm_group *t, int max_rows, int K, int N, int br, int bc, ld_kdt dt,
                      float *into)
{
    if (t->rows > max_rows) die(fn, "tab", t, sizeof *t, "has a group of more rows than max_rows");
    if (t->n < 0 || t->n > N) die(fn, "tab", t, sizeof *t, "has a group wider than N");
    if (t->rows <= 0) return 0;
    if (t->n) N = t->n; /* the group's own columns */
    size_t qrow = dt == LD_KDT_F4B ? (size_t)K / 2 : (size_t)K;
    size_t ldx = t->ldx ? t->ldx : (size_t)K, ldo = t->ldo ? t->ldo : (size_t)N;
    if (ldx < (size_t)K || ldo < (size_t)N) die(fn, "tab", t, sizeof *t, "has a row stride below its row");
    dev(fn, "group out", t->out, (Z(t->rows - 1, 1) * ldo + (size_t)N) * FB);
    if (t->xrows) { /* each picked row inside x's allocation */
        dev(fn, "group xrows", t->xrows, Z(t->rows, IB));
        for (int r = 0; r < t->rows; r++) {
            if (t->xrows[r] < 0) die(fn, "group xrows", t->xrows, Z(t->rows, IB), "holds a negative row");
            dev(fn, "group x", t->x, (Z(t->xrows[r], 1) * ldx + (size_t)K) * FB);
        }
    } else {
        dev(fn, "group x", t->x, (Z(t->rows - 1, 1) * ldx + (size_t)K) * FB);
    }
    dev(fn, "group q", t->q, Z(N, qrow));
    dev(fn, "group scale", t->scale, f8b_grid(N, K, br, bc) * FB);
    ld_f8b w = {t->q, t->scale, N, K, br, bc};
    float *out = into ? into : t->out;
    size_t ld = into ? (size_t)N : ldo;
    for (int r = 0; r < t->rows; r++) { /* a row at a time: the strides */
        const float *xr = t->x + (t->xrows ? (size_t)t->xrows[r] : (size_t)r) * ldx;
        int e = scaled_mm(out + (size_t)r * ld, xr, &w, dt, 1, K, N);
        if (e) return e;
    }
    return 0;
}

/* the grouped GEMMs: the table in device memory, no group over max_rows
 * (the grid would miss its rows: abort), each group's ranges inside
 * allocations, then each group as its own launcher's formula */
static int grouped_mm(const char *fn, const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                      ld_kdt dt)
{
    if (max_rows < 0 || (max_rows + 7) / 8 > 65535) return E_INVAL;
    dev(fn, "tab", tab, Z(G, sizeof *tab));
    for (int g = 0; g < G; g++) {
        int e = group_rows(fn, &tab[g], max_rows, K, N, br, bc, dt, NULL);
        if (e) return e;
    }
    return 0;
}

int ld_cu_grouped_fp8_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || G > 65535) return E_INVAL;
    return grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B);
}

/* the grouped launch, then each normed group's rows in place */
int ld_cu_grouped_fp8_matmul_norm(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                                  const ld_cu_norm_w *norms, float eps, int *sync)
{
    count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (G > LD_CU_FAN_MAX || K <= 0 || br <= 0 || bc <= 0 || !sync) return E_INVAL;
    size_t ns = (size_t)(max_rows + 7) / 8;
    if (ns) dev(__func__, "sync", sync, ns * sizeof *sync);
    for (size_t i = 0; i < ns; i++)
        if (sync[i]) die(__func__, "sync", sync, ns * sizeof *sync, "holds a nonzero count");
    int e = grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B);
    for (int g = 0; !e && g < G; g++) {
        const ld_cu_mm_group *t = &tab[g];
        if (!norms[g].w || t->rows <= 0) continue;
        if (norms[g].dt != LD_KDT_F32 && norms[g].dt != LD_KDT_F16 && norms[g].dt != LD_KDT_BF16) return E_INVAL;
        int n = t->n ? t->n : N;
        size_t ldo = t->ldo ? t->ldo : (size_t)n;
        dev(__func__, "norm w", norms[g].w, ld_cu_row_bytes(norms[g].dt, n));
        for (int r = 0; r < t->rows; r++)
            ld_ref_rmsnorm(t->out + (size_t)r * ldo, t->out + (size_t)r * ldo, norms[g].w, norms[g].dt, n, eps, 0, 1);
    }
    return e;
}

int ld_cu_grouped_fp4_matmul(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc)
{
    count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || br <= 0 || bc <= 0 || N % br || K % bc || G > 65535) return E_INVAL;
    return grouped_mm(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F4B);
}

/* each gate/up pair: the gate's rows into its output, the up's into a
 * host row block (the kernel never writes the ups' outputs), then the
 * clamped SwiGLU of the two into the gate's rows */
static int grouped_glu(const char *fn, const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc,
                       ld_kdt dt, float limit)
{
    if (max_rows < 0 || (max_rows + 7) / 8 > 65535) return E_INVAL;
    dev(fn, "tab", tab, Z(2 * G, sizeof *tab));
    for (int k = 0; k < G; k++) {
        const ld_cu_mm_group *g = &tab[k], *u = &tab[G + k];
        if (g->rows <= 0) continue;
        if (u->rows != g->rows || u->x != g->x || u->n != g->n || u->xrows != g->xrows)
            die(fn, "tab", g, sizeof *g, "pairs a gate and an up of other rows or widths");
        int n = g->n > 0 && g->n <= N ? g->n : N;
        float *up = malloc(Z(g->rows, n) * FB);
        if (!up) return E_NOMEM;
        int e = group_rows(fn, g, max_rows, K, N, br, bc, dt, NULL);
        if (!e) e = group_rows(fn, u, max_rows, K, N, br, bc, dt, up);
        size_t lg = g->ldo ? g->ldo : (size_t)n;
        for (int r = 0; !e && r < g->rows; r++)
            ld_ref_ds4_clamped_swiglu(g->out + (size_t)r * lg, g->out + (size_t)r * lg, up + Z(r, n), limit, (size_t)n);
        free(up);
        if (e) return e;
    }
    return 0;
}

int ld_cu_grouped_fp8_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit)
{
    count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || br <= 0 || bc <= 0 || G > 65535) return E_INVAL;
    return grouped_glu(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F8B, limit);
}

int ld_cu_grouped_fp4_glu(const ld_cu_mm_group *tab, int G, int max_rows, int K, int N, int br, int bc, float limit)
{
    count(__func__);
    if (G <= 0 || N <= 0) return 0;
    if (K <= 0 || K % 2 || br <= 0 || bc <= 0 || N % br || K % bc || G > 65535) return E_INVAL;
    return grouped_glu(__func__, tab, G, max_rows, K, N, br, bc, LD_KDT_F4B, limit);
}

/* each part as the grouped GLU of its kind */
int ld_cu_grouped_glu2(ld_cu_moe_part a, ld_cu_moe_part b, int max_rows, int K, float limit)
{
    count(__func__);
    const ld_cu_moe_part *ps[2] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        const ld_cu_moe_part *p = ps[i];
        if (!p->G) continue;
        if (p->G < 0 || p->N <= 0 || K <= 0 || p->br <= 0 || p->bc <= 0 || (p->fp4 && (K % 2 || K % p->bc)))
            return E_INVAL;
        int e = grouped_glu(__func__, p->tab, p->G, max_rows, K, p->N, p->br, p->bc, p->fp4 ? LD_KDT_F4B : LD_KDT_F8B,
                            limit);
        if (e) return e;
    }
    return 0;
}

/* the grouped downs, then the shared down with the combine and hc_post
 * (matmul_post: counted as this launch only) */
int ld_cu_moe_down_post(ld_cu_moe_part r, int Kr, const float *x, const uint8_t *q, const float *scale, int T, int Ks,
                        int br, int bc, ld_cu_combine c, ld_cu_post p)
{
    count(__func__);
    if (T <= 0 || r.N <= 0) return 0;
    if (r.G < 0 || Kr <= 0 || Ks <= 0 || br <= 0 || bc <= 0 || r.br <= 0 || r.bc <= 0 || (r.fp4 && Kr % 2) ||
        p.N <= 0 || c.K < 0 || !c.eo || !c.w)
        return E_INVAL;
    int most = 0; /* the kernel walks every group's rows: no bound of its grid */
    if (r.G) dev(__func__, "r.tab", r.tab, Z(r.G, sizeof *r.tab));
    for (int g = 0; g < r.G; g++) most = r.tab[g].rows > most ? r.tab[g].rows : most;
    int e = r.G ? grouped_mm(__func__, r.tab, r.G, most, Kr, r.N, r.br, r.bc, r.fp4 ? LD_KDT_F4B : LD_KDT_F8B) : 0;
    return e ? e : matmul_post(__func__, x, q, scale, T, Ks, r.N, br, bc, p, &c);
}

int ld_cu_moe_tables(ld_cu_mm_group *tab, int G, const int32_t *offsets, const ld_cu_moe_w *w, int E, const float *xe,
                     const int32_t *xrows, float *g, float *u, float *eo, int D, int I)
{
    count(__func__);
    if (G <= 0) return 0;
    if (E <= 0 || E > 1024 || D <= 0 || I <= 0) return E_INVAL;
    dev(__func__, "tab", tab, Z(3 * G, sizeof *tab));
    dev(__func__, "offsets", offsets, ((size_t)E + 1) * IB);
    dev(__func__, "w", w, Z(E, sizeof *w));
    int k = 0;
    for (int e = 0; e < E; e++) {
        int r0 = offsets[e], cnt = offsets[e + 1] - r0;
        if (cnt <= 0) continue;
        if (k == G) die(__func__, "offsets", offsets, 0, "name more experts with rows than G");
        size_t rd = Z(r0, D), ri = Z(r0, I);
        const float *xg = xrows ? xe : xe + rd; /* picked rows, or gathered */
        const int32_t *xr = xrows ? xrows + r0 : NULL;
        tab[k] = (ld_cu_mm_group){w[e].gate_q, w[e].gate_s, xg, g + ri, cnt, 0, 0, 0, xr};
        tab[G + k] = (ld_cu_mm_group){w[e].up_q, w[e].up_s, xg, u + ri, cnt, 0, 0, 0, xr};
        tab[2 * G + k] = (ld_cu_mm_group){w[e].down_q, w[e].down_s, g + ri, eo + rd, cnt, 0, 0, 0, NULL};
        k++;
    }
    ld_cu_mm_group none = {NULL, NULL, NULL, NULL, 0, 0, 0, 0, NULL};
    for (; k < G; k++) tab[k] = tab[G + k] = tab[2 * G + k] = none;
    return 0;
}

/* a ring's window as the absolute rows the C reference reads: entry w's
 * slots are positions (w - 1) r .. (w + 1) r - 1 at most, copied from the
 * ring into rows [ (w - 1) r, ..) of a scratch array the reference then
 * indexes by position (below those rows: never read) */
static float *ring_window(const float *ring_rows, int ring, int r, size_t stride, int w, size_t width)
{
    size_t rows = Z(w + 1, r);
    float *abs_rows = calloc(rows * stride, FB);
    if (!abs_rows) return NULL;
    size_t p0 = w > 0 ? Z(w - 1, r) : 0;
    for (size_t p = p0; p < rows; p++)
        memcpy(abs_rows + p * stride, ring_rows + (p % (size_t)ring) * stride, width * FB);
    return abs_rows;
}

int ld_cu_ds4_compress(int v, float *out, const float *kv, const float *gate, const float *ape, int r, int d,
                       size_t stride, int overlap, int w0, int nw, int ring)
{
    (void)v;
    count(__func__);
    if (nw <= 0 || d <= 0) return 0;
    if (r <= 0 || w0 < 0 || stride < (size_t)(overlap ? 2 * d : d) || nw > 65535) return E_INVAL;
    if (ring && (ring < 2 * r || nw > 1)) return E_INVAL;
    size_t width = (size_t)(overlap ? 2 * d : d), rows = Z(w0 + nw, r);
    if (ring) {
        dev(__func__, "out", out, Z(1, d) * FB);
        dev(__func__, "kv ring", kv, (Z(ring - 1, 1) * stride + width) * FB);
        dev(__func__, "gate ring", gate, (Z(ring - 1, 1) * stride + width) * FB);
        dev(__func__, "ape", ape, (Z(r - 1, 1) * stride + width) * FB);
        float *k = ring_window(kv, ring, r, stride, w0, width), *g = ring_window(gate, ring, r, stride, w0, width);
        if (k && g) ld_ref_ds4_compress(out, k, g, ape, r, d, stride, overlap, w0);
        free(k);
        free(g);
        return k && g ? 0 : E_NOMEM;
    }
    dev(__func__, "out", out, Z(nw, d) * FB);
    dev(__func__, "kv", kv, (Z(rows - 1, 1) * stride + width) * FB);
    dev(__func__, "gate", gate, (Z(rows - 1, 1) * stride + width) * FB);
    dev(__func__, "ape", ape, (Z(r - 1, 1) * stride + width) * FB);
    for (int i = 0; i < nw; i++) ld_ref_ds4_compress(out + Z(i, d), kv, gate, ape, r, d, stride, overlap, w0 + i);
    return 0;
}

int ld_cu_ds4_qkv(float *q, float *kvc, const float *kv, int T, int H, int hd, int kv_rows, int pos0, float eps,
                  const float *inv_freq, float attn_factor, int rd, int bf16_table)
{
    count(__func__);
    if (T <= 0 || H <= 0 || hd <= 0) return 0;
    if (rd < 0 || rd % 2 || rd > hd || pos0 < 0 || kv_rows < T) return E_INVAL;
    dev(__func__, "q", q, Z(T, H) * (size_t)hd * FB);
    dev(__func__, "kvc", kvc, Z(kv_rows, hd) * FB);
    dev(__func__, "kv", kv, Z(T, hd) * FB);
    dev(__func__, "inv_freq", inv_freq, (size_t)(rd / 2) * FB);
    float *ones = malloc(Z(hd, FB));
    if (!ones) return E_NOMEM;
    for (int i = 0; i < hd; i++) ones[i] = 1.0f;
    ld_ref_rmsnorm(q, q, ones, LD_KDT_F32, hd, eps, 0, Z(T, H));
    free(ones);
    size_t off = (size_t)(hd - rd);
    ld_ref_ds_rope_ex(q, Z(H, hd), off, H, (size_t)hd, rd, inv_freq, attn_factor, 1, pos0, bf16_table, 0, (size_t)T);
    for (int t = 0; t < T; t++) {
        float *row = kvc + Z((pos0 + t) % kv_rows, hd);
        memcpy(row, kv + Z(t, hd), Z(hd, FB));
        ld_ref_ds_rope_ex(row, (size_t)hd, off, 1, (size_t)hd, rd, inv_freq, attn_factor, 1, pos0 + t, bf16_table, 0,
                          1);
    }
    return 0;
}

int ld_cu_ds4_route_plan_tables(int32_t *idx, float *w, const float *logits, const float *bias, const int32_t *tid2eid,
                                const int32_t *tokens, int T, int E, int K, float scale, int32_t *offsets,
                                int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G, const ld_cu_moe_w *mw,
                                const float *xe, int pick, float *g, float *u, float *eo, int D, int I)
{
    count(__func__);
    if (T <= 0) return 0;
    if (E <= 0 || E > LD_CU_ROUTE_FUSED_E || K < 1 || K > E || K > 64 || (tid2eid && !tokens) ||
        T > LD_CU_ROUTE_FUSED_T || G <= 0 || D <= 0 || I <= 0)
        return E_INVAL;
    /* the three launchers it stands for, in order (each counted too) */
    int e = ld_cu_ds4_route(LD_CU_CUSTOM, idx, w, logits, bias, tid2eid, tokens, T, E, K, scale);
    if (!e) e = ld_cu_moe_plan(LD_CU_CUSTOM, offsets, rows, row_of, idx, T, K, E);
    if (!e) e = ld_cu_moe_tables(tab, G, offsets, mw, E, xe, pick ? rows : NULL, g, u, eo, D, I);
    return e;
}

int ld_cu_ds4_router_route_plan_tables(const ld_cu_router *r, int32_t *idx, float *w, const float *bias,
                                       const int32_t *tid2eid, const int32_t *tokens, int T, int E, int K, float scale,
                                       int32_t *offsets, int32_t *rows, int32_t *row_of, ld_cu_mm_group *tab, int G,
                                       const ld_cu_moe_w *mw, const float *xe, int pick, float *g, float *u,
                                       float *eo, int D, int I)
{
    count(__func__);
    if (T <= 0) return 0;
    if (r->K <= 0 || !r->sync || (r->dt != LD_KDT_F32 && r->dt != LD_KDT_F16 && r->dt != LD_KDT_BF16)) return E_INVAL;
    dev(__func__, "sync", r->sync, sizeof *r->sync);
    /* the two launchers it stands for, in order (each counted too) */
    int e = ld_cu_matmul(LD_CU_CUSTOM, r->logits, r->x, r->w, r->dt, NULL, LD_KDT_F32, T, r->K, E, 0);
    if (!e)
        e = ld_cu_ds4_route_plan_tables(idx, w, r->logits, bias, tid2eid, tokens, T, E, K, scale, offsets, rows,
                                        row_of, tab, G, mw, xe, pick, g, u, eo, D, I);
    return e;
}

int ld_cu_ds4_index_pick(int32_t *sel, float *scores, float *q, const float *w, const float *keys, int T, int H,
                         int dim, int n, int k, float qscale, float wscale, const ld_cu_rot *rot, int pos0, int *sync)
{
    count(__func__);
    if (T <= 0 || k <= 0) return 0;
    if (H <= 0 || dim <= 0 || dim > 256 || (size_t)H * (size_t)dim > LD_CU_INDEX_PICK_QW || n <= 0 || T > 65535 ||
        rot->rd < 0 || rot->rd % 2 || rot->rd > dim || pos0 < 0 || !sync)
        return E_INVAL;
    dev(__func__, "sync", sync, (size_t)T * sizeof *sync);
    /* the three launchers it stands for, in order (each counted too) */
    size_t QW = (size_t)H * (size_t)dim;
    int e = ld_cu_ds_rope(LD_CU_CUSTOM, q, T, QW, (size_t)(dim - rot->rd), H, (size_t)dim, rot->rd, rot->inv_freq,
                          rot->af, 1, pos0, 0, rot->bf16_table);
    if (!e) e = ld_cu_index_scores(LD_CU_CUSTOM, 1, scores, q, w, keys, T, H, dim, n, qscale, wscale);
    if (!e) e = ld_cu_topk(LD_CU_CUSTOM, sel, scores, T, n, n, -1, k);
    return e;
}

int ld_cu_ring_put2(float *ra, float *rb, const float *a, const float *b, size_t W, int ring, int p0, int n)
{
    count(__func__);
    if (n <= 0 || W == 0) return 0;
    if (ring <= 0 || n > ring || p0 < 0) return E_INVAL;
    dev(__func__, "ring a", ra, Z(ring, W) * FB);
    dev(__func__, "ring b", rb, Z(ring, W) * FB);
    dev(__func__, "a", a, Z(n, W) * FB);
    dev(__func__, "b", b, Z(n, W) * FB);
    for (int t = 0; t < n; t++) {
        size_t row = ((size_t)p0 + (size_t)t) % (size_t)ring;
        memcpy(ra + row * W, a + Z(t, W), W * FB);
        memcpy(rb + row * W, b + Z(t, W), W * FB);
    }
    return 0;
}

int ld_cu_ds_layernorm(int v, float *x, int rows, size_t row_stride, const float *w, const float *b, int dim, float eps)
{
    (void)v;
    count(__func__);
    if (rows <= 0 || dim <= 0) return 0;
    if (row_stride < (size_t)dim) return E_INVAL;
    dev(__func__, "x", x, (Z(rows - 1, 1) * row_stride + (size_t)dim) * FB);
    dev(__func__, "w", w, Z(dim, FB));
    dev(__func__, "b", b, Z(dim, FB));
    ld_ref_ds_layernorm(x, row_stride, w, b, dim, eps, 0, (size_t)rows);
    return 0;
}
