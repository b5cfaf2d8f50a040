/* test_cuda_ops.c - the GPU-only checks of the CUDA backend (ctest label
 * gpu; every case skips, 77, with the reason when CUDA is not built or no
 * device is present):
 *  - every op and shape of test_backend_ops.c (its checks in
 *    tests/support/backend_ops_check.h) on cuda-ref and cuda-custom
 *    against the reference backend, and the batch-split invariance;
 *  - the "ref" kernels equal the C reference bitwise where no
 *    transcendental is involved (embed, matmul of every type, rmsnorm,
 *    kv_store, add), and the custom kernels where the arithmetic is the
 *    same (embed, kv_store, add; rope and swiglu equal to the CUDA ref);
 *  - errors: ranges, token ids, an unsupported head_dim, an allocation
 *    the device cannot make, each naming the op;
 *  - the forward pass (forward.h) of the tiny models (safetensors and
 *    quantized GGUF) on both kernel sets: logits near the reference
 *    backend's, and prefill, chunks of 3 and token-by-token bitwise
 *    equal;
 *  - matmul=tc, the tensor-core GEMM (sm_80+; see its section below);
 *  - the TP all-reduce's ordered sum (kernels/cuda/cuda_tp.cu) bitwise against
 *    engine/tp/comm_sim.c's (not over the mock, which has no such kernel). */
#include "tests/support/backend_ops_check.h"

#include "engine/models/dense/forward.h"
#include "engine/models/dense/model.h"

/* the two CUDA backends (b[1], b[2]) or a skip */
#define OPEN_CUDA(b, n)                                                    \
    bk b[3];                                                               \
    int n = 0;                                                             \
    CHECK(!open_backends(b, &n));                                          \
    if (!b[1].be) {                                                        \
        char why_[300];                                                    \
        snprintf(why_, sizeof why_, "%s", b[1].skip);                      \
        close_backends(b, n);                                              \
        SKIP("%s", why_);                                                  \
    }

static int test_cuda_ops_table(void)
{
    OPEN_CUDA(b, n);
    int rc = check_backend(&b[1]);
    if (!rc) rc = check_backend(&b[2]);
    close_backends(b, n);
    return rc;
}

static int test_cuda_split(void)
{
    OPEN_CUDA(b, n);
    int rc = check_split(&b[1]);
    if (!rc) rc = check_split(&b[2]);
    close_backends(b, n);
    return rc;
}

/* 1 when the case's output on `x` equals that on `y` bitwise */
static int same_bits(ld_backend *x, ld_backend *y, const ocase *c, uint64_t seed, char *name, size_t cap)
{
    float *a = NULL, *r = NULL;
    size_t na = 0, nr = 0;
    case_name(c, name, cap);
    int ok = !run_case(x, c, seed, &a, &na) && !run_case(y, c, seed, &r, &nr) && na == nr &&
             !memcmp(a, r, na * sizeof *a);
    free(a);
    free(r);
    return ok;
}

static int test_cuda_bitwise(void)
{
    OPEN_CUDA(b, n);
    build_cases();
    int bad = 0, checked = 0;
    for (int i = 0; i < n_cases; i++) {
        const ocase *c = &cases[i];
        uint64_t seed = 0xC0FFEEull + (uint64_t)i;
        char name[160];
        int ref_exact = c->op == OP_EMBED || c->op == OP_MATMUL || c->op == OP_RMSNORM || c->op == OP_KV ||
                        c->op == OP_ADD;
        if (ref_exact) {
            checked++;
            if (!same_bits(b[1].be, ref_be, c, seed, name, sizeof name)) {
                printf("  cuda-ref    %s: not bitwise equal to the reference\n", name);
                bad++;
            }
        }
        if (c->op == OP_EMBED || c->op == OP_KV || c->op == OP_ADD) {
            checked++;
            if (!same_bits(b[2].be, ref_be, c, seed, name, sizeof name)) {
                printf("  cuda-custom %s: not bitwise equal to the reference\n", name);
                bad++;
            }
        }
        if (c->op == OP_ROPE || c->op == OP_SWIGLU) {
            checked++;
            if (!same_bits(b[2].be, b[1].be, c, seed, name, sizeof name)) {
                printf("  cuda-custom %s: not bitwise equal to cuda-ref\n", name);
                bad++;
            }
        }
    }
    printf("  %d bitwise comparisons, %d differ\n", checked, bad);
    free(cases);
    cases = NULL;
    cap_cases = 0;
    close_backends(b, n);
    CHECK(!bad);
    return 0;
}

static int test_cuda_errors(void)
{
    OPEN_CUDA(b, n);
    int rc = 1;
    ld_backend *be = b[2].be;
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    ld_buf *small = upload(be, NULL, 10), *big = upload(be, NULL, 1000);
    float w1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ld_weight *w = load_weight(be, &kinds[0], w1, 1, 8, 0);
    ld_buf *huge = NULL;
    if (!small || !big || !w) goto done;
    /* ranges */
    if (o->add(be, small, big, 100, &err) != LD_ERR_USAGE || !strstr(err.msg, "outside a buffer")) goto done;
    if (o->buf_read(be, small, 5, w1, 100, &err) != LD_ERR_USAGE) goto done;
    if (o->matmul(be, small, big, w, NULL, 100, &err) != LD_ERR_USAGE) goto done;
    /* token ids */
    int32_t tok = 1;
    if (o->embed(be, big, w, &tok, 1, &err) != LD_ERR_USAGE || !strstr(err.msg, "token id 1")) goto done;
    /* the custom attention's head_dim limit */
    if (o->attention(be, big, big, big, big, 1, 0, 1, 1, 300, 0, 1.0f, &err) != LD_ERR_UNSUPPORTED ||
        !strstr(err.msg, "head_dim 300"))
        goto done;
    /* ... which the ref kernel does not have */
    if (b[1].be->ops->attention(b[1].be, big, big, big, big, 1, 0, 1, 1, 300, 0, 1.0f, &err) != LD_OK) goto done;
    /* an allocation no device makes: an error naming buf_alloc */
    ld_status st = o->buf_alloc(be, (size_t)1 << 45, &huge, &err);
    if (st == LD_OK || huge || !strstr(err.msg, "buf_alloc")) goto done;
    printf("  huge buf_alloc: %s\n", err.msg);
    /* the device still works after it */
    if (o->add(be, big, big, 1000, &err) != LD_OK) goto done;
    float out[4];
    if (o->buf_read(be, big, 0, out, 4, &err) != LD_OK || out[0] != 0.0f) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "  last error: %s\n", err.msg);
    o->buf_free(be, small);
    o->buf_free(be, big);
    if (w) o->weight_free(be, w);
    close_backends(b, n);
    return rc;
}

/* ---------------------------------------------------------------- forward */

#define MDIR LD_TESTDATA_DIR "/models/"
#define QDIR LD_TESTDATA_DIR "/engine/quant/"
#define FT 20 /* tokens */

/* logits [FT][vocab] of `toks` on be in chunks of `batch` (malloc'd) */
static float *forward_on(ld_backend *be, const ld_model *m, const int32_t *toks, int batch, ld_error *err)
{
    ld_session *s = NULL;
    float *logits = malloc((size_t)FT * (size_t)m->cfg.vocab * sizeof *logits);
    ld_status st = ld_session_create(m, be, 64, batch, &s, err);
    for (int t0 = 0; st == LD_OK && t0 < FT; t0 += batch) {
        int nt = FT - t0 < batch ? FT - t0 : batch;
        st = ld_session_eval(s, toks + t0, nt, logits + (size_t)t0 * (size_t)m->cfg.vocab, NULL, err);
    }
    ld_session_destroy(s);
    if (st != LD_OK) {
        free(logits);
        return NULL;
    }
    return logits;
}

static int check_model(bk *b, const char *label, const ld_model *m)
{
    int V = m->cfg.vocab;
    int32_t toks[FT];
    rng = 7;
    for (int t = 0; t < FT; t++) toks[t] = (int32_t)(next_u32() % (uint32_t)V);
    ld_error err = {0};
    float *ref = forward_on(ref_be, m, toks, FT, &err);
    CHECK_MSG(ref, "%s on ref: %s", label, err.msg);
    for (int i = 1; i < 3; i++) {
        float *pre = forward_on(b[i].be, m, toks, FT, &err);
        CHECK_MSG(pre, "%s on %s: %s", label, b[i].name, err.msg);
        double mx, e = nmse(pre, ref, (size_t)FT * (size_t)V, &mx);
        printf("  %-12s %-14s logits nmse %.3g max|d| %.3g\n", b[i].name, label, e, mx);
        CHECK_MSG(e >= 0 && e <= 1e-9, "%s on %s: nmse %g", label, b[i].name, e);
        int batches[] = {3, 1};
        for (int k = 0; k < 2; k++) {
            float *ch = forward_on(b[i].be, m, toks, batches[k], &err);
            CHECK_MSG(ch, "%s on %s: %s", label, b[i].name, err.msg);
            CHECK_MSG(!memcmp(ch, pre, (size_t)FT * (size_t)V * sizeof *ch),
                      "%s on %s: chunks of %d differ from the prefill", label, b[i].name, batches[k]);
            free(ch);
        }
        free(pre);
    }
    free(ref);
    return 0;
}

static int test_cuda_forward(void)
{
    OPEN_CUDA(b, n);
    const char *hf[] = {"smollm", "llama3", "llama3-bf16", "qwen2", "qwen3", "qwen3-f16", "mistral", "qwen2-yarn"};
    const char *gg[] = {"llama-q", "qwen2-q", "qwen3-q"};
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof hf / sizeof hf[0] + sizeof gg / sizeof gg[0]; i++) {
        char path[512];
        ld_model *m = NULL;
        ld_error err = {0};
        ld_status st;
        const char *label;
        if (i < sizeof hf / sizeof hf[0]) {
            label = hf[i];
            snprintf(path, sizeof path, MDIR "%s", label);
            st = ld_model_open(path, &m, &err);
        } else {
            label = gg[i - sizeof hf / sizeof hf[0]];
            snprintf(path, sizeof path, QDIR "%s.gguf", label);
            st = ld_model_open_gguf(path, &m, &err);
        }
        if (st != LD_OK) {
            fprintf(stderr, "  %s: %s\n", path, err.msg);
            rc = 1;
            break;
        }
        rc = check_model(b, label, m);
        ld_model_close(m);
    }
    close_backends(b, n);
    return rc;
}

/* ---------------------------------------------------------------- matmul=tc
 * The tensor-core GEMM (kernels/cuda/cuda_gemm_tc.cu, sm_80+):
 *  - ld_cu_matmul_tc against the C reference of the bf16 variant
 *    (ld_var_matmul_bf16: x and w rounded to bf16, products summed in fp32
 *    in index order), at T 1, 7, 64, 129, N 1, 40, 576 (rope order, F16
 *    bias), 1000 (BF16 bias), 4100 (the 128-wide tile), K 64, 576, 1544
 *    (not a multiple of the 32-wide k slice).  Both sum the same exact
 *    products (bf16 x bf16 fits in fp32) in fp32, in different orders: the
 *    reference's K - 1 rounded additions are within (K - 1) 2^-24 sum|x w|
 *    of the exact sum; the mma's additions may truncate instead of round
 *    (2^-23 each, at most one per product and one per k step of 16), so
 *    within about 2K 2^-24 sum|x w|; with the bias's addition:
 *    |tc - ref| <= (3K + 32) * 2^-24 * (sum_k |x_k w_k| + |bias|);
 *  - batch invariance: rows of a T = 129 call bitwise equal to the same
 *    rows computed with T = 1 and T = 17 (other positions in the tile);
 *  - the backend's `matmul=tc`: the launcher's bits for BF16 weights (and
 *    not the custom kernel's), the custom kernel's bits for other weights
 *    and for BF16 rows whose length is not a multiple of 8; check_split's
 *    batch invariance for every weight kind; a BF16 model's forward pass:
 *    prefill, chunks of 3 and token-by-token bitwise equal. */

#if LD_HAVE_CUDA || defined(LD_CUDA_MOCK) || defined(LD_CUDA_EMU)
#include "engine/tp/comm.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_tp.h"

/* 1 when device 0 runs the tensor-core GEMM; else why not in `why` */
static int tc_device(char *why, size_t cap)
{
    char name[256];
    int major = 0, minor = 0, sms = 0;
    if (ld_cu_device_info(0, name, sizeof name, &major, &minor, &sms)) {
        snprintf(why, cap, "no CUDA device information");
        return 0;
    }
    if (major < 8) {
        snprintf(why, cap, "the tensor-core GEMM needs sm_80+ (%.64s is sm_%d%d)", name, major % 100, minor % 100);
        return 0;
    }
    return 1;
}

/* a CUDA build with an sm_80+ device, or a skip */
#define NEED_TC()                                                          \
    do {                                                                   \
        OPEN_CUDA(b_, n_);                                                 \
        close_backends(b_, n_);                                            \
        char why_[300];                                                    \
        if (!tc_device(why_, sizeof why_)) SKIP("%s", why_);              \
    } while (0)

static void *tc_put(const void *h, size_t bytes)
{
    void *d = NULL;
    if (ld_cu_malloc(&d, bytes ? bytes : 1)) return NULL;
    if (h ? ld_cu_h2d(d, h, bytes) : ld_cu_memset0(d, bytes ? bytes : 1)) {
        ld_cu_free(d);
        return NULL;
    }
    return d;
}

/* out [T][N] of ld_cu_matmul_tc on fresh device copies (malloc'd), NULL
 * with a message on failure */
static float *tc_run(const float *x, const uint16_t *w, const void *bias, ld_kdt bdt, size_t bias_bytes, int T,
                     int K, int N, int rope_hd)
{
    size_t nx = (size_t)T * (size_t)K, no = (size_t)T * (size_t)N, nw = (size_t)N * (size_t)K;
    float *dx = tc_put(x, nx * 4), *dout = tc_put(NULL, no * 4), *h = malloc(no * sizeof *h);
    void *dw = tc_put(w, nw * 2), *db = bias ? tc_put(bias, bias_bytes) : NULL;
    int e = !dx || !dout || !dw || (bias && !db) || !h ? -1 : 0;
    if (!e) e = ld_cu_matmul_tc(dout, dx, dw, LD_KDT_BF16, db, bdt, T, K, N, rope_hd);
    if (!e) e = ld_cu_d2h(h, dout, no * sizeof *h);
    ld_cu_free(dx);
    ld_cu_free(dout);
    ld_cu_free(dw);
    ld_cu_free(db);
    if (e) {
        fprintf(stderr, "  ld_cu_matmul_tc T %d K %d N %d: %s\n", T, K, N,
                e < 0 ? "no device buffers" : ld_cu_error_string(e));
        free(h);
        return NULL;
    }
    return h;
}

static uint16_t *tc_weights(int N, int K)
{
    uint16_t *w = malloc((size_t)N * (size_t)K * sizeof *w);
    for (size_t i = 0; w && i < (size_t)N * (size_t)K; i++) w[i] = rand_bf16();
    return w;
}

/* 1 when got is within the bound of ref (non-finite values equal) */
static int tc_close(float got, float ref, float mag, int K, double *worst)
{
    if (!isfinite(ref) || !isfinite(got)) return isnan(ref) ? isnan(got) : got == ref;
    double bound = (3.0 * K + 32.0) * ldexp(1.0, -24) * (double)mag, d = fabs((double)got - (double)ref);
    if (mag > 0 && d / mag > *worst) *worst = d / mag;
    return d <= bound;
}

/* one shape against ld_var_matmul_bf16 */
static int tc_check_shape(int T, int N, int K, double *worst)
{
    int rope_hd = N == 576 ? 64 : 0;
    ld_kdt bdt = N == 40 ? LD_KDT_F32 : N == 576 ? LD_KDT_F16 : LD_KDT_BF16;
    int has_bias = N == 40 || N == 576 || N == 1000;
    size_t nx = (size_t)T * (size_t)K, no = (size_t)T * (size_t)N, nw = (size_t)N * (size_t)K;
    float *x = malloc(nx * sizeof *x), *ax = malloc(nx * sizeof *ax), *ref = malloc(no * sizeof *ref);
    float *mag = malloc(no * sizeof *mag), *row = malloc((size_t)K * sizeof *row), fb[1000], afb[1000];
    uint16_t *w = tc_weights(N, K), *aw = malloc(nw * sizeof *aw), hb[1000], ahb[1000];
    CHECK(x && ax && ref && mag && row && w && aw);
    fill(x, nx, 1.0f);
    for (size_t i = 0; i < nx; i++) ax[i] = fabsf(x[i]);
    for (size_t i = 0; i < nw; i++) aw[i] = w[i] & 0x7fff;
    for (int n = 0; has_bias && n < N; n++) {
        fb[n] = uniform();
        afb[n] = fabsf(fb[n]);
        hb[n] = bdt == LD_KDT_F16 ? rand_f16(-4, 0) : rand_bf16();
        ahb[n] = hb[n] & 0x7fff;
    }
    const void *bias = !has_bias ? NULL : bdt == LD_KDT_F32 ? (const void *)fb : (const void *)hb;
    const void *abias = !has_bias ? NULL : bdt == LD_KDT_F32 ? (const void *)afb : (const void *)ahb;
    size_t bias_bytes = (size_t)N * (bdt == LD_KDT_F32 ? 4 : 2);
    ld_var_matmul_bf16(ref, x, w, LD_KDT_BF16, bias, bdt, T, K, N, rope_hd, row, 0, (size_t)N);
    /* sum_k |x_k w_k| + |bias|: the same call on magnitudes */
    ld_var_matmul_bf16(mag, ax, aw, LD_KDT_BF16, abias, bdt, T, K, N, rope_hd, row, 0, (size_t)N);
    float *got = tc_run(x, w, bias, bdt, bias_bytes, T, K, N, rope_hd);
    CHECK(got);
    int bad = 0;
    for (size_t i = 0; i < no; i++)
        if (!tc_close(got[i], ref[i], mag[i], K, worst) && bad++ < 3)
            printf("  T %d N %d K %d: out[%zu][%zu] %.9g, bf16 reference %.9g (sum|xw| %.4g)\n", T, N, K, i / (size_t)N,
                   i % (size_t)N, got[i], ref[i], mag[i]);
    free(x);
    free(ax);
    free(ref);
    free(mag);
    free(row);
    free(w);
    free(aw);
    free(got);
    CHECK_MSG(!bad, "T %d N %d K %d: %d outputs beyond the bound", T, N, K, bad);
    return 0;
}

static int test_cuda_matmul_tc(void)
{
    NEED_TC();
    rng = 0x7C0DEull;
    int Ts[] = {1, 7, 64, 129}, Ns[] = {1, 40, 576, 1000}, Ks[] = {64, 576, 1544};
    double worst = 0;
    int shapes = 0;
    for (int ti = 0; ti < 4; ti++)
        for (int ni = 0; ni < 4; ni++)
            for (int ki = 0; ki < 3; ki++) {
                int rc = tc_check_shape(Ts[ti], Ns[ni], Ks[ki], &worst);
                if (rc) return rc;
                shapes++;
            }
    for (int ti = 0; ti < 4; ti += 3) { /* the 128-wide tile: T 1 and 129 */
        int rc = tc_check_shape(Ts[ti], 4100, 576, &worst);
        if (rc) return rc;
        shapes++;
    }
    printf("  %d shapes; largest |tc - bf16 reference| / sum|x w|: %.3g\n", shapes, worst);
    return 0;
}

/* rows of a T = 129 call against T = 1 and T = 17 calls of the same rows */
static int tc_check_batch(int N, int K)
{
    const int T = 129;
    size_t nx = (size_t)T * (size_t)K;
    float *x = malloc(nx * sizeof *x);
    uint16_t *w = tc_weights(N, K);
    CHECK(x && w);
    fill(x, nx, 2.0f);
    float *all = tc_run(x, w, NULL, LD_KDT_F32, 0, T, K, N, 0);
    CHECK(all);
    int ones[] = {0, 37, 128}, t0s[] = {5, 112};
    for (int i = 0; i < 3; i++) {
        int t = ones[i];
        float *one = tc_run(x + (size_t)t * (size_t)K, w, NULL, LD_KDT_F32, 0, 1, K, N, 0);
        CHECK(one);
        CHECK_MSG(!memcmp(one, all + (size_t)t * (size_t)N, (size_t)N * sizeof *one),
                  "N %d K %d: row %d alone differs from the T=129 call", N, K, t);
        free(one);
    }
    for (int i = 0; i < 2; i++) {
        int t0 = t0s[i];
        float *part = tc_run(x + (size_t)t0 * (size_t)K, w, NULL, LD_KDT_F32, 0, 17, K, N, 0);
        CHECK(part);
        CHECK_MSG(!memcmp(part, all + (size_t)t0 * (size_t)N, (size_t)17 * (size_t)N * sizeof *part),
                  "N %d K %d: rows %d..%d of a T=17 call differ from the T=129 call", N, K, t0, t0 + 16);
        free(part);
    }
    free(all);
    free(x);
    free(w);
    return 0;
}

static int test_cuda_matmul_tc_batch(void)
{
    NEED_TC();
    rng = 129;
    int rc = tc_check_batch(1000, 1544);
    if (!rc) rc = tc_check_batch(4100, 576);
    return rc;
}

/* out [T][N] of be's matmul of weight kind k (malloc'd) */
static float *be_matmul(ld_backend *be, const kind *k, const void *wd, const float *x, int T, int K, int N, int rope_hd)
{
    ld_error err = {0};
    ld_weight *w = load_weight(be, k, wd, N, K, rope_hd);
    ld_buf *bx = upload(be, x, (size_t)T * (size_t)K), *bo = upload(be, NULL, (size_t)T * (size_t)N);
    float *out = NULL;
    if (w && bx && bo && be->ops->matmul(be, bo, bx, w, NULL, T, &err) == LD_OK)
        out = download(be, bo, (size_t)T * (size_t)N);
    else
        fprintf(stderr, "  matmul %s: %s\n", k->name, err.msg);
    if (bx) be->ops->buf_free(be, bx);
    if (bo) be->ops->buf_free(be, bo);
    if (w) be->ops->weight_free(be, w);
    return out;
}

/* the backend's matmul=tc: which kernel runs, and its batch invariance */
static int test_cuda_matmul_tc_backend(void)
{
    NEED_TC();
    OPEN_CUDA(b, n);
    ld_error err = {0};
    bk tc = {.name = "cuda-tc"};
    CHECK_MSG(ld_backend_cuda_create(0, "matmul=tc", &tc.be, &err) == LD_OK, "%s", err.msg);
    int rc = check_split(&tc);
    rng = 11;
    const int T = 9, N = 80, rope_hd = 16;
    int Ks[] = {96, 12}; /* tensor cores; K % 8 != 0: the custom kernel */
    for (int ki = 0; !rc && ki < 2; ki++) {
        int K = Ks[ki];
        float *x = malloc((size_t)T * (size_t)K * sizeof *x);
        fill(x, (size_t)T * (size_t)K, 1.0f);
        for (int k = 0; !rc && k < 3; k++) { /* f32, f16, bf16 */
            void *wd = rand_weights(&kinds[k], N, K);
            float *got = be_matmul(tc.be, &kinds[k], wd, x, T, K, N, rope_hd);
            float *cus = be_matmul(b[2].be, &kinds[k], wd, x, T, K, N, rope_hd);
            float *dir = k == 2 && K % 8 == 0 ? tc_run(x, wd, NULL, LD_KDT_F32, 0, T, K, N, rope_hd) : NULL;
            size_t bytes = (size_t)T * (size_t)N * sizeof(float);
            if (!got || !cus || (k == 2 && K % 8 == 0 && !dir)) rc = 1;
            else if (dir) { /* the launcher's bits, which are not the custom kernel's */
                if (memcmp(got, dir, bytes) || !memcmp(got, cus, bytes)) {
                    fprintf(stderr, "  matmul=tc bf16 K %d: not the tensor-core kernel's output\n", K);
                    rc = 1;
                }
            } else if (memcmp(got, cus, bytes)) {
                fprintf(stderr, "  matmul=tc %s K %d: not the custom kernel's output\n", kinds[k].name, K);
                rc = 1;
            }
            free(got);
            free(cus);
            free(dir);
            free(wd);
        }
        free(x);
    }
    /* a BF16 model end to end: prefill, chunks of 3 and token by token */
    ld_model *m = NULL;
    if (!rc && ld_model_open(MDIR "llama3-bf16", &m, &err) != LD_OK) {
        fprintf(stderr, "  llama3-bf16: %s\n", err.msg);
        rc = 1;
    }
    if (!rc) {
        size_t nl = (size_t)FT * (size_t)m->cfg.vocab;
        int32_t toks[FT];
        rng = 7;
        for (int t = 0; t < FT; t++) toks[t] = (int32_t)(next_u32() % (uint32_t)m->cfg.vocab);
        float *ref = forward_on(ref_be, m, toks, FT, &err);
        float *pre = forward_on(tc.be, m, toks, FT, &err);
        float *ch3 = forward_on(tc.be, m, toks, 3, &err), *ch1 = forward_on(tc.be, m, toks, 1, &err);
        if (!ref || !pre || !ch3 || !ch1) {
            fprintf(stderr, "  forward: %s\n", err.msg);
            rc = 1;
        } else {
            double mx, e = nmse(pre, ref, nl, &mx);
            printf("  cuda-tc llama3-bf16 logits nmse %.3g max|d| %.3g (bf16 activations)\n", e, mx);
            if (!(e >= 0 && e <= 1e-2) || memcmp(pre, ch3, nl * sizeof *pre) || memcmp(pre, ch1, nl * sizeof *pre)) {
                fprintf(stderr, "  cuda-tc llama3-bf16: nmse %g, or chunks differ from the prefill\n", e);
                rc = 1;
            }
        }
        free(ref);
        free(pre);
        free(ch3);
        free(ch1);
    }
    ld_model_close(m);
    ld_backend_destroy(tc.be);
    close_backends(b, n);
    return rc;
}

/* ---------------------------------------------------------------- TP sum
 * kernels/cuda/cuda_tp.cu's ordered sum, the last step of the NCCL all-reduce
 * (engine/tp/comm_nccl.c), against engine/tp/comm_sim.c's ld_comm_ordered_sum:
 * bitwise, 1 to 4 parts, n 1, 257 and 4096, into a separate output and in
 * place (out = parts, as comm_nccl.c's in-place reduce). */
#ifndef LD_CUDA_MOCK
static int tp_sum_case(int parts, size_t n, int in_place)
{
    size_t all = (size_t)parts * n;
    float *h = malloc(all * sizeof *h), *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    CHECK(h && want && got);
    for (size_t i = 0; i < all; i++) h[i] = ((float)(next_u32() & 0xffffff) / 16777216.0f - 0.5f) * 1e3f;
    ld_comm_ordered_sum(h, parts, n, want);
    float *d = tc_put(h, all * sizeof *h), *o = in_place ? d : tc_put(NULL, n * sizeof *o);
    CHECK(d && o);
    int e = ld_cu_tp_ordered_sum(d, parts, n, o);
    if (!e) e = ld_cu_d2h(got, o, n * sizeof *got);
    CHECK_MSG(!e, "ld_cu_tp_ordered_sum: CUDA error %d", e);
    int same = memcmp(got, want, n * sizeof *got) == 0;
    printf("  tp_ordered_sum %d parts, n %zu%s: %s\n", parts, n, in_place ? ", in place" : "",
           same ? "bitwise" : "DIFFER");
    if (o != d) ld_cu_free(o);
    ld_cu_free(d);
    free(h);
    free(want);
    free(got);
    CHECK_MSG(same, "tp_ordered_sum %d parts, n %zu: not bitwise ld_comm_ordered_sum", parts, n);
    return 0;
}
#endif

static int test_cuda_tp_ordered_sum(void)
{
#ifdef LD_CUDA_MOCK
    SKIP("the mock has no ordered-sum kernel (the emulator and a GPU run it)");
#else
    OPEN_CUDA(b, n);
    close_backends(b, n);
    static const size_t ns[] = {1, 257, 4096};
    for (int parts = 1; parts <= 4; parts++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
            for (int in_place = 0; in_place < 2; in_place++)
                if (tp_sum_case(parts, ns[i], in_place)) return 1;
    return 0;
#endif
}

#else /* !LD_HAVE_CUDA && !LD_CUDA_MOCK && !LD_CUDA_EMU */

static int tc_skip(void)
{
    OPEN_CUDA(b, n);
    close_backends(b, n);
    return 0;
}
static int test_cuda_matmul_tc(void) { return tc_skip(); }
static int test_cuda_matmul_tc_batch(void) { return tc_skip(); }
static int test_cuda_matmul_tc_backend(void) { return tc_skip(); }
static int test_cuda_tp_ordered_sum(void) { return tc_skip(); }

#endif /* LD_HAVE_CUDA */

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_ops_table),       LD_CASE(test_cuda_split),           LD_CASE(test_cuda_bitwise),
    LD_CASE(test_cuda_errors),          LD_CASE(test_cuda_forward),         LD_CASE(test_cuda_matmul_tc),
    LD_CASE(test_cuda_matmul_tc_batch), LD_CASE(test_cuda_matmul_tc_backend), LD_CASE(test_cuda_tp_ordered_sum),
};

LD_TEST_MAIN(tests)
