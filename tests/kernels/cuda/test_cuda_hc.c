/* test_cuda_hc.c - the GPU-only checks of V4's mHC: hc_pre (fused with the RMSNorm too), hc_post, the bf16
 * variants (kernels/cuda/cuda_hc.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

/* ---------------------------------------------------------------- mHC */


/* ld_cu_hc_pre_norm (the custom hc_pre and the RMSNorm after it in two
 * launches, and in one with its sync counts) against the custom
 * ld_cu_hc_pre and ld_cu_rmsnorm it replaces, with an F32, an F16 and a
 * BF16 norm weight: post, comb, the collapse and the normed rows bitwise,
 * the counts left zero */
static int hc_pre_norm_same(const char *shape, const float *dX, int T, int N, int D, const float *dfn,
                            const float *dbase, const float *dscale, int iters, float neps, float heps, float *dwork,
                            size_t wn)
{
    float *dp[2], *dc[2], *du[2], *dn[2];
    const void *dwt[3]; /* by ld_kdt: F32, F16, BF16 */
    if (norm_weights(D, dwt)) return 1;
    int32_t *dsync;
    DPUT(dsync, NULL, sizeof(int32_t) * T);
    for (int k = 0; k < 6; k++) {
        int dt = LD_KDT_F32 + k % 3, one = k >= 3;
        for (int i = 0; i < 2; i++) {
            DPUT(dp[i], NULL, sizeof(float) * T * N);
            DPUT(dc[i], NULL, sizeof(float) * T * N * N);
            DPUT(du[i], NULL, sizeof(float) * T * D);
            DPUT(dn[i], NULL, sizeof(float) * T * D);
        }
        CU(ld_cu_hc_pre(LD_CU_CUSTOM, dp[0], dc[0], du[0], dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork,
                        wn));
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dn[0], du[0], dwt[dt], (ld_kdt)dt, D, 1e-5f, T));
        CU(ld_cu_hc_pre_norm(LD_CU_MHC_F32, dp[1], dc[1], du[1], dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                             dwork, wn, dwt[dt], dt, 1e-5f, dn[1], one ? dsync : NULL));
        float *want[4] = {dget(dp[0], (size_t)T * N), dget(dc[0], (size_t)T * N * N), dget(du[0], (size_t)T * D),
                          dget(dn[0], (size_t)T * D)};
        CHECK(want[0] && want[1] && want[2] && want[3]);
        char sh[96];
        snprintf(sh, sizeof sh, "%s, %s norm%s", shape, dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_F16 ? "f16" : "bf16",
                 one ? ", one launch" : "");
        int bad = compare("hc_pre_norm post", LD_CU_CUSTOM, sh, dp[1], want[0], (size_t)T * N, -1) ||
                  compare("hc_pre_norm comb", LD_CU_CUSTOM, sh, dc[1], want[1], (size_t)T * N * N, -1) ||
                  compare("hc_pre_norm coll", LD_CU_CUSTOM, sh, du[1], want[2], (size_t)T * D, -1) ||
                  compare("hc_pre_norm norm", LD_CU_CUSTOM, sh, dn[1], want[3], (size_t)T * D, -1);
        for (int i = 0; i < 4; i++) free(want[i]);
        if (bad) return 1;
        int32_t *counts = malloc(sizeof(int32_t) * T);
        CHECK(counts);
        CU(ld_cu_d2h(counts, dsync, sizeof(int32_t) * T));
        for (int t = 0; t < T; t++) CHECK_MSG(counts[t] == 0, "hc_pre_norm %s: count %d left at %d", sh, t, counts[t]);
        free(counts);
    }
    return 0;
}

static int test_cuda_hc(void)
{
    NEED_GPU();
    struct { int T, N, D, iters; } sh[] = {{3, 4, 64, 20}, {2, 4, 256, 1}, {5, 8, 96, 3}, {4, 3, 100, 5}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, N = sh[ci].N, D = sh[ci].D, iters = sh[ci].iters, ND = N * D, R = (2 + N) * N;
        float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * R * ND);
        float *base = malloc(sizeof(float) * R), scale[3], *f = malloc(sizeof(float) * T * D);
        float *post = malloc(sizeof(float) * T * N), *comb = malloc(sizeof(float) * T * N * N);
        float *col = malloc(sizeof(float) * T * D), *out = malloc(sizeof(float) * T * ND);
        float *scratch = malloc(sizeof(float) * (ND + R));
        CHECK(X && fn && base && f && post && comb && col && out && scratch);
        fill(X, (size_t)T * ND, -2, 2);
        fill(fn, (size_t)R * ND, -0.05f, 0.05f);
        fill(base, (size_t)R, -1, 1);
        fill(scale, 3, 0.5f, 2);
        fill(f, (size_t)T * D, -1, 1);
        const float neps = 1e-6f, heps = 1e-6f;
        for (int t = 0; t < T; t++) {
            ld_ref_ds4_hc_pre(X + (size_t)t * ND, N, D, fn, base, scale, iters, neps, heps, post + (size_t)t * N,
                              comb + (size_t)t * N * N, col + (size_t)t * D, scratch);
            ld_ref_ds4_hc_post(out + (size_t)t * ND, X + (size_t)t * ND, f + (size_t)t * D, post + (size_t)t * N,
                               comb + (size_t)t * N * N, N, D);
        }
        float *dX, *dfn, *dbase, *dscale, *df, *dpost, *dcomb, *dcol, *dout, *dwork, *dpost_r, *dcomb_r;
        size_t wn = ld_cu_hc_work(T, N);
        DPUT(dX, X, sizeof(float) * T * ND);
        DPUT(dfn, fn, sizeof(float) * R * ND);
        DPUT(dbase, base, sizeof(float) * R);
        DPUT(dscale, scale, sizeof scale);
        DPUT(df, f, sizeof(float) * T * D);
        DPUT(dpost, NULL, sizeof(float) * T * N);
        DPUT(dcomb, NULL, sizeof(float) * T * N * N);
        DPUT(dcol, NULL, sizeof(float) * T * D);
        DPUT(dout, NULL, sizeof(float) * T * ND);
        DPUT(dwork, NULL, sizeof(float) * wn);
        /* hc_post from the C reference's post and comb: its own bits */
        DPUT(dpost_r, post, sizeof(float) * T * N);
        DPUT(dcomb_r, comb, sizeof(float) * T * N * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d N %d D %d iters %d", T, N, D, iters);
        for (int v = 0; v < 2; v++) {
            double tol = v ? 1e-10 : 1e-12;
            CU(ld_cu_hc_pre(v, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork, wn));
            if (compare("hc_pre post", v, shape, dpost, post, (size_t)T * N, tol)) return 1;
            if (compare("hc_pre comb", v, shape, dcomb, comb, (size_t)T * N * N, tol)) return 1;
            if (compare("hc_pre coll", v, shape, dcol, col, (size_t)T * D, tol)) return 1;
            CU(ld_cu_hc_post(v, dout, dX, df, dpost_r, dcomb_r, T, N, D));
            if (compare("hc_post", v, shape, dout, out, (size_t)T * ND, -1)) return 1;
        }
        if (hc_pre_norm_same(shape, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps, dwork, wn)) return 1;
        free(X);
        free(fn);
        free(base);
        free(f);
        free(post);
        free(comb);
        free(col);
        free(out);
        free(scratch);
        dfree_all();
    }
    return 0;
}

/* 1 when every value is a bf16 value (its low 16 bits zero) */
static int all_bf16(const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        if (u & 0xffffu) return 0;
    }
    return 1;
}

/* hc_pre's bf16 variants (mhc=bf16, mhc=sinkhorn-bf16) against the C
 * leaves the host path runs (ld_ref_ds4_hc_pre_ex, the bf16 cast of
 * ds4_forward.c's hc_pre_host); the rounded matrices hold bf16
 * values exactly */
static int test_cuda_hc_bf16(void)
{
    NEED_GPU();
    int T = 3, N = 4, D = 64, iters = 20, ND = N * D, R = (2 + N) * N;
    float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * R * ND);
    float *base = malloc(sizeof(float) * R), scale[3], *scratch = malloc(sizeof(float) * (ND + R));
    float *post = malloc(sizeof(float) * T * N), *comb = malloc(sizeof(float) * T * N * N);
    float *col = malloc(sizeof(float) * T * D);
    CHECK(X && fn && base && scratch && post && comb && col);
    fill(X, (size_t)T * ND, -2, 2);
    fill(fn, (size_t)R * ND, -0.05f, 0.05f);
    fill(base, (size_t)R, -1, 1);
    fill(scale, 3, 0.5f, 2);
    const float neps = 1e-6f, heps = 1e-6f;
    float *dX, *dfn, *dbase, *dscale, *dpost, *dcomb, *dcol, *dwork;
    size_t wn = ld_cu_hc_work(T, N);
    DPUT(dX, X, sizeof(float) * T * ND);
    DPUT(dfn, fn, sizeof(float) * R * ND);
    DPUT(dbase, base, sizeof(float) * R);
    DPUT(dscale, scale, sizeof scale);
    DPUT(dpost, NULL, sizeof(float) * T * N);
    DPUT(dcomb, NULL, sizeof(float) * T * N * N);
    DPUT(dcol, NULL, sizeof(float) * T * D);
    DPUT(dwork, NULL, sizeof(float) * wn);
    for (int variant = LD_CU_MHC_BF16; variant <= LD_CU_MHC_SINKHORN_BF16; variant++) {
        for (int t = 0; t < T; t++) {
            float *p = post + (size_t)t * N, *c = comb + (size_t)t * N * N;
            ld_ref_ds4_hc_pre_ex(X + (size_t)t * ND, N, D, fn, base, scale, iters, neps, heps,
                                 variant == LD_CU_MHC_SINKHORN_BF16, p, c, col + (size_t)t * D, scratch);
            if (variant != LD_CU_MHC_BF16) continue;
            for (int i = 0; i < N; i++) p[i] = ld_var_bf16_round(p[i]);
            for (int i = 0; i < N * N; i++) c[i] = ld_var_bf16_round(c[i]);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "variant %d T %d N %d D %d", variant, T, N, D);
        for (int v = 0; v < 2; v++) {
            /* an expf ulp may move a value across a bf16 rounding boundary:
             * one bf16 ulp (2^-8 relative) in an element of N*N */
            double tol = 1e-4;
            CU(ld_cu_hc_pre_ex(v, variant, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                               dwork, wn));
            if (compare("hc_pre_ex post", v, shape, dpost, post, (size_t)T * N, tol)) return 1;
            if (compare("hc_pre_ex comb", v, shape, dcomb, comb, (size_t)T * N * N, tol)) return 1;
            if (compare("hc_pre_ex coll", v, shape, dcol, col, (size_t)T * D, v ? 1e-10 : 1e-12)) return 1;
            float *hp = dget(dpost, (size_t)T * N), *hc = dget(dcomb, (size_t)T * N * N);
            CHECK(hp && hc);
            CHECK(all_bf16(hc, (size_t)T * N * N));
            if (variant == LD_CU_MHC_BF16) CHECK(all_bf16(hp, (size_t)T * N));
            free(hp);
            free(hc);
        }
    }
    CHECK(ld_cu_hc_pre_ex(LD_CU_REF, 3, dpost, dcomb, dcol, dX, T, N, D, dfn, dbase, dscale, iters, neps, heps,
                          dwork, wn) != 0);
    free(X);
    free(fn);
    free(base);
    free(scratch);
    free(post);
    free(comb);
    free(col);
    dfree_all();
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_hc), LD_CASE(test_cuda_hc_bf16),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_hc(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_hc)};

#endif

LD_TEST_MAIN(tests)
