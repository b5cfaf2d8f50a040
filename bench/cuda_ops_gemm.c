/* cuda_ops_gemm.c - bench_cuda_ops's GEMM section: the tensor-core GEMM and
 * the custom matmul against cuBLAS's bf16 GEMM (dlopen'd) at the same shapes. */
#include "cuda_ops.h"

/* ---------------------------------------------------------------- GEMM
 * The ceiling of the bf16 GEMM: cuBLAS, loaded with dlopen.  Declarations
 * of the few things used, with the values of the headers they come from
 * (CUDA 12/13): cublas_api.h (cublasHandle_t, cublasStatus_t with
 * CUBLAS_STATUS_SUCCESS 0, cublasOperation_t, cublasComputeType_t,
 * cublasGemmAlgo_t, cublasCreate_v2, cublasDestroy_v2, cublasGemmEx) and
 * library_types.h (cudaDataType).  The enums are ints in the C ABI. */
typedef void *cublas_handle; /* cublasHandle_t: struct cublasContext * */
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1 };         /* cublasOperation_t */
enum { CUDA_R_32F_ = 0, CUDA_R_16BF_ = 14 };         /* cudaDataType */
enum { CUBLAS_COMPUTE_32F_ = 68 };                   /* cublasComputeType_t */
enum { CUBLAS_GEMM_DEFAULT_ = -1 };                  /* cublasGemmAlgo_t */
typedef int (*cublas_create_fn)(cublas_handle *);
typedef int (*cublas_destroy_fn)(cublas_handle);
typedef int (*cublas_gemm_ex_fn)(cublas_handle, int transa, int transb, int m, int n, int k, const void *alpha,
                                 const void *A, int Atype, int lda, const void *B, int Btype, int ldb,
                                 const void *beta, void *C, int Ctype, int ldc, int compute, int algo);

typedef struct cublas {
    void *lib;
    cublas_handle h;
    cublas_destroy_fn destroy;
    cublas_gemm_ex_fn gemm;
} cublas;


/* a symbol of lib as a function pointer (POSIX: dlsym's object pointer
 * holds one) */
static int sym(void *lib, const char *name, void *fn, size_t size)
{
    void *p = dlsym(lib, name);
    if (!p) return 1;
    memcpy(fn, &p, size);
    return 0;
}

/* loads cuBLAS and creates a handle; 0, or 1 with the reason in `why` */
static int cublas_open(cublas *cb, char *why, size_t cap)
{
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so"};
    memset(cb, 0, sizeof *cb);
    for (size_t i = 0; !cb->lib && i < sizeof names / sizeof names[0]; i++) cb->lib = dlopen(names[i], RTLD_NOW);
    if (!cb->lib) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "dlopen failed");
        return 1;
    }
    cublas_create_fn create;
    if (sym(cb->lib, "cublasCreate_v2", &create, sizeof create) ||
        sym(cb->lib, "cublasDestroy_v2", &cb->destroy, sizeof cb->destroy) ||
        sym(cb->lib, "cublasGemmEx", &cb->gemm, sizeof cb->gemm)) {
        const char *e = dlerror();
        snprintf(why, cap, "%s", e ? e : "a cuBLAS symbol is missing");
        dlclose(cb->lib);
        return 1;
    }
    int st = create(&cb->h);
    if (st) {
        snprintf(why, cap, "cublasCreate_v2: status %d", st);
        dlclose(cb->lib);
        return 1;
    }
    return 0;
}

static void cublas_close(cublas *cb)
{
    cb->destroy(cb->h);
    dlclose(cb->lib);
}

typedef struct gemm_ctx {
    cublas *cb;
    float *out;
    const void *xb, *w; /* bf16 x [T][K], w [N][K] */
    int T, K, N;
} gemm_ctx;

/* out [T][N] = xb . w^T: column-major, out^T (N x T) = w^T' (op T of the
 * K x N column-major w) times xb^T (K x T) */
static int call_cublas(void *p)
{
    gemm_ctx *c = p;
    float one = 1.0f, zero = 0.0f;
    int st = c->cb->gemm(c->cb->h, CUBLAS_OP_T_, CUBLAS_OP_N_, c->N, c->T, c->K, &one, c->w, CUDA_R_16BF_, c->K, c->xb,
                         CUDA_R_16BF_, c->K, &zero, c->out, CUDA_R_32F_, c->N, CUBLAS_COMPUTE_32F_,
                         CUBLAS_GEMM_DEFAULT_);
    if (st) { /* a cublasStatus_t, not a CUDA code: said here */
        fprintf(stderr, "bench_cuda_ops: cublasGemmEx %dx%dx%d: status %d\n", c->T, c->N, c->K, st);
        exit(2);
    }
    return 0;
}

/* seconds per call, the iterations sized to ~20 ms a run */
static double time_gemm(call_fn fn, void *ctx)
{
    TRY(fn(ctx));
    TRY(ld_cu_sync());
    double t0 = now_s();
    TRY(fn(ctx));
    TRY(ld_cu_sync());
    double once = now_s() - t0;
    int iters = once > 0.02 ? 1 : once < 0.0002 ? 100 : (int)(0.02 / once);
    return time_it(fn, ctx, iters);
}

static void gemm_line(const char *shape, int T, const char *var, double t, double flops, double ceiling)
{
    double tf = flops / t / 1e12;
    if (ceiling > 0)
        printf("%-9s %-5s %-12s %4d  %-6s %10.2f %8.1f %7.1f%%\n", "gemm", "bf16", shape, T, var, t * 1e6, tf,
               100.0 * tf / ceiling);
    else
        printf("%-9s %-5s %-12s %4d  %-6s %10.2f %8.1f %8s\n", "gemm", "bf16", shape, T, var, t * 1e6, tf, "-");
}

/* tc and custom against cuBLAS at SmolLM2's and a DeepSeek-ish GEMM,
 * prefill sizes */
void bench_gemm(void)
{
    cublas cb;
    char why[512];
    int have = !cublas_open(&cb, why, sizeof why);
    if (have) printf("cublas: cublasGemmEx (bf16 A and B, fp32 C, CUBLAS_COMPUTE_32F)\n");
    else printf("cublas: unavailable (%s)\n", why);
    printf("%-9s %-5s %-12s %4s  %-6s %10s %8s %8s\n", "op", "type", "N x K", "T", "kernel", "us/call", "TFLOP/s",
           "%cublas");
    struct { int N, K; } shapes[] = {{576, 576}, {1536, 576}, {576, 1536}, {49152, 576}, {7168, 2048}, {2048, 7168}};
    int Ts[] = {64, 512, 2048};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int N = shapes[si].N, K = shapes[si].K;
        if (quick && si != 1 && si != 4) continue;
        void *w = dev_random((size_t)N * (size_t)K * 2);
        void *xb = dev_random((size_t)2048 * (size_t)K * 2);
        float *x = dev_random((size_t)2048 * (size_t)K * 4), *out;
        TRY(ld_cu_malloc((void **)&out, (size_t)2048 * (size_t)N * 4));
        char shape[32];
        snprintf(shape, sizeof shape, "%dx%d", N, K);
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            int T = Ts[ti];
            if (quick && T == 2048) continue;
            double flops = 2.0 * T * (double)N * (double)K, ceiling = 0;
            if (have) {
                gemm_ctx g = {&cb, out, xb, w, T, K, N};
                double t = time_gemm(call_cublas, &g);
                ceiling = flops / t / 1e12;
                gemm_line(shape, T, "cublas", t, flops, 0);
            }
            for (int v = V_TC; v >= LD_CU_CUSTOM; v--) {
                if (v == V_TC && !tc_ok) continue;
                mm_ctx c = {v, out, x, w, LD_KDT_BF16, T, K, N};
                gemm_line(shape, T, v == V_TC ? "tc" : "custom", time_gemm(call_mm, &c), flops, ceiling);
            }
        }
        TRY(ld_cu_free(w));
        TRY(ld_cu_free(xb));
        TRY(ld_cu_free(x));
        TRY(ld_cu_free(out));
    }
    if (have) cublas_close(&cb);
}
