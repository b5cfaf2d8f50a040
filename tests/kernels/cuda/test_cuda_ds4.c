/* test_cuda_ds4.c - the GPU-only checks of DeepSeek-V4's attention, RoPE, clamped SwiGLU, head, FP4
 * GEMV, compressor and V3.2's indexer LayerNorm, and every DeepSeek
 * launcher's refusals (kernels/cuda/cuda_ds4_*.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

/* ---------------------------------------------------------------- DeepSeek-V4 (cuda_ds4.cu) */

/* ld_cu_ds4_attention_rope against the custom attention's output (`out`,
 * copied) then the custom inverse RoPE of each head's last rd values:
 * bitwise (rd 64, or hd when smaller; the bf16 table every other case) */
static int attention_rope_same(const char *shape, const float *out, const float *dq, int T, int H, int hd,
                               const float *dkv, int kv_rows, int win, const float *dent, int ratio,
                               const int32_t *dpicks, int kpick, const float *dsinks, int pos0, float *dwork,
                               size_t wn, int ci)
{
    int rd = hd < 64 ? hd : 64;
    size_t n = (size_t)T * H * hd;
    float freq[32], *dfreq, *dfused, *dplain, *plain = dget(out, n);
    CHECK(plain);
    DPUT(dplain, plain, sizeof(float) * n);
    free(plain);
    for (int i = 0; i < rd / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
    DPUT(dfreq, freq, sizeof(float) * (size_t)(rd / 2));
    DPUT(dfused, NULL, sizeof(float) * (n + 1));
    ld_cu_rot rot = {dfreq, 0.875f, rd, ci % 2};
    CU(ld_cu_ds_rope(LD_CU_CUSTOM, dplain, T, (size_t)H * hd, (size_t)(hd - rd), H, (size_t)hd, rd, dfreq, rot.af, 1,
                     pos0, 1, rot.bf16_table));
    size_t ns = ld_cu_ds4_attention_sync(T, H);
    int32_t *dsync, *counts = malloc(sizeof(int32_t) * ns);
    CHECK(counts);
    DPUT(dsync, NULL, sizeof(int32_t) * ns);
    float *want = dget(dplain, n);
    CHECK(want);
    for (int one = 0; one < 2; one++) { /* the merge its own launch; in the split's */
        CU(ld_cu_memset0(dfused, sizeof(float) * n));
        CU(ld_cu_ds4_attention_rope(dfused, dq, T, H, hd, dkv, kv_rows, win, dent, ratio, dpicks, kpick, dsinks,
                                    1.0f / sqrtf((float)hd), pos0, dwork, wn, rot, one ? dsync : NULL));
        float *got = dget(dfused, n);
        CHECK(got);
        CU(ld_cu_d2h(counts, dsync, sizeof(int32_t) * ns));
        int same = !memcmp(want, got, sizeof(float) * n), zero = 1;
        for (size_t i = 0; i < ns; i++) zero = zero && counts[i] == 0;
        printf("  %-15s %-6s %-34s vs attention, then rope%s: %s\n", "ds4_att_rope", "custom", shape,
               one ? " (one launch)" : "", same ? "bitwise" : "DIFFER");
        free(got);
        CHECK_MSG(same, "ds4_attention_rope %s%s: not bitwise the attention and the rope", shape,
                  one ? " (one launch)" : "");
        CHECK_MSG(zero, "ds4_attention_rope %s: counts left nonzero", shape);
    }
    free(want);
    free(counts);
    return 0;
}

static int test_cuda_ds4_attention(void)
{
    NEED_GPU();
    /* picks: 0 every valid entry, 1 an ascending random subset of at most
     * kpick (some rows shorter, -1 filled); ratio 0: no entries */
    struct { int T, H, hd, window, pos0, ratio, kpick, picks, sinks; } sh[] = {
        {1, 64, 512, 128, 700, 4, 64, 1, 1}, {5, 8, 128, 16, 40, 8, 0, 0, 1}, {3, 12, 96, 32, 0, 0, 0, 0, 0},
        {2, 9, 200, 8, 100, 4, 16, 1, 1},    {1, 16, 512, 128, 4095, 128, 0, 0, 1}, {4, 3, 64, 5, 2, 2, 0, 0, 1},
        {2, 8, 64, 128, 3000, 4, 0, 0, 1}, /* 878 keys: 14 splits */
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, win = sh[ci].window, pos0 = sh[ci].pos0;
        int ratio = sh[ci].ratio, kpick = sh[ci].picks ? sh[ci].kpick : 0;
        int kv_rows = win + T - 1, npos = pos0 + T, nent = ratio ? npos / ratio : 0;
        size_t QH = (size_t)H * hd;
        float *q = malloc(sizeof(float) * T * QH), *kv = malloc(sizeof(float) * kv_rows * hd);
        float *ent = malloc(sizeof(float) * (nent + 1) * hd), *sinks = malloc(sizeof(float) * H);
        float *ref = malloc(sizeof(float) * T * QH), *scores = malloc(sizeof(float) * (win + nent + kpick + 1));
        const float **keys = malloc(sizeof(float *) * (win + nent + kpick + 1));
        int32_t *picks = malloc(sizeof(int32_t) * (T * kpick + 1));
        CHECK(q && kv && ent && sinks && ref && scores && keys && picks);
        fill(q, (size_t)T * QH, -2, 2);
        fill(ent, (size_t)(nent + 1) * hd, -2, 2);
        fill(sinks, (size_t)H, -1, 3);
        for (int p = 0; p < npos; p++) fill(kv + (size_t)(p % kv_rows) * hd, (size_t)hd, -2, 2);
        for (int t = 0; t < T; t++) {
            int p = pos0 + t, nk = 0, lo = p - win + 1 > 0 ? p - win + 1 : 0;
            for (int j = lo; j <= p; j++) keys[nk++] = kv + (size_t)(j % kv_rows) * hd;
            int nvalid = ratio ? (p + 1) / ratio : 0;
            if (kpick) {
                int32_t *pr = picks + (size_t)t * kpick;
                int want = nvalid < kpick ? nvalid : kpick, m = 0;
                if (t % 2 && want > 2) want -= 2; /* a shorter row */
                /* an ascending random subset of [0, nvalid) of `want` */
                for (int w = 0; w < nvalid && m < want; w++)
                    if ((int)(next_u32() % (uint32_t)(nvalid - w)) < want - m) pr[m++] = w;
                for (int i = m; i < kpick; i++) pr[i] = -1;
                for (int i = 0; i < m; i++) keys[nk++] = ent + (size_t)pr[i] * hd;
            } else {
                for (int w = 0; w < nvalid; w++) keys[nk++] = ent + (size_t)w * hd;
            }
            ld_ref_ds4_attention(ref + (size_t)t * QH, q + (size_t)t * QH, H, hd, keys, nk,
                                 sh[ci].sinks ? sinks : NULL, 1.0f / sqrtf((float)hd), scores);
        }
        float *dq, *dkv, *dent, *dsinks, *dout;
        int32_t *dpicks;
        DPUT(dq, q, sizeof(float) * T * QH);
        DPUT(dkv, kv, sizeof(float) * kv_rows * hd);
        DPUT(dent, ent, sizeof(float) * (nent + 1) * hd);
        DPUT(dsinks, sinks, sizeof(float) * H);
        DPUT(dpicks, picks, sizeof(int32_t) * (T * kpick + 1));
        DPUT(dout, NULL, sizeof(float) * T * QH);
        char shape[80];
        snprintf(shape, sizeof shape, "T %d H %d hd %d win %d p0 %d r %d k %d%s", T, H, hd, win, pos0, ratio, kpick,
                 sh[ci].sinks ? " sink" : "");
        for (int v = 0; v < 2; v++) {
            size_t wn = ld_cu_ds4_attention_work(v, T, H, hd, pos0, win, ratio, kpick, ratio > 0);
            float *dwork;
            DPUT(dwork, NULL, sizeof(float) * (wn + 1));
            CU(ld_cu_memset0(dout, sizeof(float) * T * QH));
            CU(ld_cu_ds4_attention(v, dout, dq, T, H, hd, dkv, kv_rows, win, ratio ? dent : NULL, ratio,
                                   kpick ? dpicks : NULL, kpick, sh[ci].sinks ? dsinks : NULL,
                                   1.0f / sqrtf((float)hd), pos0, dwork, wn));
            if (compare("ds4_attention", v, shape, dout, ref, (size_t)T * QH, v ? 1e-10 : 1e-12)) return 1;
            if (v == LD_CU_CUSTOM && attention_rope_same(shape, dout, dq, T, H, hd, dkv, kv_rows, win,
                                                         ratio ? dent : NULL, ratio, kpick ? dpicks : NULL, kpick,
                                                         sh[ci].sinks ? dsinks : NULL, pos0, dwork, wn, (int)ci))
                return 1;
            /* the last row alone (T = 1 at its position): the batch's bits */
            float *rows = dget(dout, (size_t)T * QH), *alone;
            CHECK(rows);
            size_t w1 = ld_cu_ds4_attention_work(v, 1, H, hd, pos0 + T - 1, win, ratio, kpick, ratio > 0);
            CHECK(w1 <= wn);
            DPUT(alone, NULL, sizeof(float) * QH);
            CU(ld_cu_ds4_attention(v, alone, dq + (size_t)(T - 1) * QH, 1, H, hd, dkv, kv_rows, win,
                                   ratio ? dent : NULL, ratio, kpick ? dpicks + (size_t)(T - 1) * kpick : NULL, kpick,
                                   sh[ci].sinks ? dsinks : NULL, 1.0f / sqrtf((float)hd), pos0 + T - 1, dwork, w1));
            int bad = compare("ds4_att alone", v, shape, alone, rows + (size_t)(T - 1) * QH, QH, -1);
            free(rows);
            if (bad) return 1;
        }
        free(q);
        free(kv);
        free(ent);
        free(sinks);
        free(ref);
        free(scores);
        free(keys);
        free(picks);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds4_swiglu(void)
{
    NEED_GPU();
    /* fused: g and u the halves of one [T][2F] row (the float4 path);
     * else separate [T][F] arrays with F odd (the scalar path) */
    struct { int T, F, fused; } sh[] = {{3, 2048, 1}, {5, 1001, 0}, {1, 64, 1}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, F = sh[ci].F, fused = sh[ci].fused;
        size_t ld = fused ? 2 * (size_t)F : (size_t)F, n = (size_t)T * F;
        float *gu = malloc(sizeof(float) * T * ld * 2), *ref = malloc(sizeof(float) * n);
        CHECK(gu && ref);
        fill(gu, (size_t)T * ld * 2, -15, 15); /* beyond the limit 10 both ways */
        const float *g = gu, *u = fused ? gu + F : gu + (size_t)T * ld;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_clamped_swiglu(ref + (size_t)t * F, g + (size_t)t * ld, u + (size_t)t * ld, 10.0f, (size_t)F);
        float *dgu, *dout, *rk = NULL;
        DPUT(dgu, gu, sizeof(float) * T * ld * 2);
        DPUT(dout, NULL, sizeof(float) * n);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d F %d %s", T, F, fused ? "fused" : "split");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * n));
            CU(ld_cu_ds4_clamped_swiglu(v, dout, dgu, fused ? dgu + F : dgu + (size_t)T * ld, T, F, ld, 10.0f));
            if (compare("clamped_swiglu", v, shape, dout, ref, n, 1e-12)) return 1;
            if (!v) CHECK(rk = dget(dout, n));
            else if (compare("swiglu cu=ref", v, shape, dout, rk, n, -1)) return 1;
        }
        free(rk);
        free(gu);
        free(ref);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds_rope(void)
{
    NEED_GPU();
    /* v4: heads of hd, the last dim rotated, interleaved (queries, the
     * output's inverse); v3.2: the indexer's key rows (one head at off 0),
     * both pair layouts */
    struct { int v4, T, H, hd, dim, interleave, pos0, inverse, bf16; } sh[] = {
        {1, 2, 64, 512, 64, 1, 1000, 0, 0}, {1, 3, 8, 128, 64, 1, 7, 1, 0},  {1, 2, 4, 512, 64, 1, 4095, 1, 1},
        {0, 5, 1, 128, 64, 0, 300, 0, 0},   {0, 4, 2, 192, 64, 1, 0, 0, 1},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, dim = sh[ci].dim, il = sh[ci].interleave;
        int pos0 = sh[ci].pos0, inv = sh[ci].inverse, bf = sh[ci].bf16;
        size_t rs = (size_t)H * hd + 3, n = (size_t)T * rs, off = sh[ci].v4 ? (size_t)(hd - dim) : 0;
        float *x = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n), freq[512];
        CHECK(x && ref);
        fill(x, n, -2, 2);
        for (int i = 0; i < dim / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)dim);
        memcpy(ref, x, sizeof(float) * n);
        float af = 1.25f;
        for (int t = 0; t < T; t++) {
            if (sh[ci].v4) ld_ref_ds4_rope_ex(ref + (size_t)t * rs, H, hd, dim, freq, af, pos0 + t, inv, bf);
            else ld_ref_ds_rope_ex(ref, rs, off, H, (size_t)hd, dim, freq, af, il, pos0, bf, (size_t)t, (size_t)t + 1);
        }
        float *dx, *dfreq, *rk = NULL;
        DPUT(dx, NULL, sizeof(float) * n);
        DPUT(dfreq, freq, sizeof(float) * dim / 2);
        char shape[80];
        snprintf(shape, sizeof shape, "%s T %d H %d hd %d dim %d p0 %d%s%s", sh[ci].v4 ? "v4" : "v3.2", T, H, hd,
                 dim, pos0, inv ? " inv" : "", bf ? " bf16" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dx, x, sizeof(float) * n));
            CU(ld_cu_ds_rope(v, dx, T, rs, off, H, (size_t)hd, dim, dfreq, af, il, pos0, inv, bf));
            /* cosf / sinf ulps; with the bf16 table one may cross a bf16
             * rounding boundary (rare) */
            if (compare("rope", v, shape, dx, ref, n, bf ? 1e-5 : 1e-12)) return 1;
            if (!v) CHECK(rk = dget(dx, n));
            else if (compare("rope cu=ref", v, shape, dx, rk, n, -1)) return 1;
        }
        free(rk);
        free(x);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ld_cu_ds4_qkv (one launch) against the launches it replaces, custom:
 * the unit RMSNorm of q's heads (ld_cu_rmsnorm by ones), their RoPE
 * (ld_cu_ds_rope), kv's rows copied into the ring and rotated there:
 * q and the whole ring bitwise equal (the ring wrapping in the first
 * shape, the bf16 table in the third) */
static int test_cuda_ds4_qkv(void)
{
    NEED_GPU();
    struct { int T, H, hd, rd, rows, pos0, bf16; } sh[] = {
        {3, 4, 64, 16, 4, 2, 0}, {1, 2, 512, 64, 8, 7, 0}, {5, 3, 96, 32, 6, 40, 1}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, hd = sh[ci].hd, rd = sh[ci].rd, rows = sh[ci].rows, pos0 = sh[ci].pos0;
        int bf = sh[ci].bf16;
        size_t nq = (size_t)T * H * hd, nk = (size_t)T * hd, nr = (size_t)rows * hd;
        float *q = malloc(sizeof(float) * nq), *kv = malloc(sizeof(float) * nk), *ring = malloc(sizeof(float) * nr);
        float *ones = malloc(sizeof(float) * hd), freq[256];
        CHECK(q && kv && ring && ones);
        fill(q, nq, -2, 2);
        fill(kv, nk, -2, 2);
        fill(ring, nr, -1, 1);
        for (int i = 0; i < hd; i++) ones[i] = 1.0f;
        for (int i = 0; i < rd / 2; i++) freq[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
        float *dq, *dkv, *dring, *dq2, *dring2, *dones, *dfreq, *want_q, *want_ring;
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dq2, q, sizeof(float) * nq);
        DPUT(dkv, kv, sizeof(float) * nk);
        DPUT(dring, ring, sizeof(float) * nr);
        DPUT(dring2, ring, sizeof(float) * nr);
        DPUT(dones, ones, sizeof(float) * hd);
        DPUT(dfreq, freq, sizeof(float) * rd / 2);
        const float eps = 1e-6f, af = 1.0f;
        size_t off = (size_t)(hd - rd);
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dq, dq, dones, LD_KDT_F32, hd, eps, T * H));
        CU(ld_cu_ds_rope(LD_CU_CUSTOM, dq, T, (size_t)H * hd, off, H, (size_t)hd, rd, dfreq, af, 1, pos0, 0, bf));
        for (int t = 0; t < T; t++) {
            float *row = dring + (size_t)((pos0 + t) % rows) * hd;
            CU(ld_cu_d2d(row, dkv + (size_t)t * hd, sizeof(float) * hd));
            CU(ld_cu_ds_rope(LD_CU_CUSTOM, row, 1, (size_t)hd, off, 1, (size_t)hd, rd, dfreq, af, 1, pos0 + t, 0, bf));
        }
        CHECK((want_q = dget(dq, nq)) && (want_ring = dget(dring, nr)));
        CU(ld_cu_ds4_qkv(dq2, dring2, dkv, T, H, hd, rows, pos0, eps, dfreq, af, rd, bf));
        char shape[80];
        snprintf(shape, sizeof shape, "T %d H %d hd %d rd %d ring %d p0 %d%s", T, H, hd, rd, rows, pos0,
                 bf ? " bf16" : "");
        if (compare("ds4_qkv q", LD_CU_CUSTOM, shape, dq2, want_q, nq, -1)) return 1;
        if (compare("ds4_qkv ring", LD_CU_CUSTOM, shape, dring2, want_ring, nr, -1)) return 1;
        free(want_q);
        free(want_ring);
        free(q);
        free(kv);
        free(ring);
        free(ones);
        dfree_all();
    }
    CHECK(ld_cu_ds4_qkv(NULL, NULL, NULL, 2, 1, 64, 1, 0, 1e-6f, NULL, 1.0f, 16, 0) != 0); /* ring < T */
    CHECK(ld_cu_ds4_qkv(NULL, NULL, NULL, 1, 1, 64, 1, 0, 1e-6f, NULL, 1.0f, 15, 0) != 0); /* odd rd */
    return 0;
}

/* ld_cu_ds4_hc_head_norm against the custom ld_cu_ds4_hc_head and
 * ld_cu_rmsnorm it replaces, with an F32, an F16 and a BF16 norm weight:
 * the collapse and the normed rows bitwise */
static int hc_head_norm_same(const char *shape, const float *dX, int T, int N, int D, const float *dfn,
                             const float *dbase, float scale, float neps, float heps)
{
    float *dout[2], *dn[2];
    const void *dwt[3]; /* by ld_kdt: F32, F16, BF16 */
    if (norm_weights(D, dwt)) return 1;
    for (int dt = LD_KDT_F32; dt <= LD_KDT_BF16; dt++) {
        for (int i = 0; i < 2; i++) {
            DPUT(dout[i], NULL, sizeof(float) * T * D);
            DPUT(dn[i], NULL, sizeof(float) * T * D);
        }
        CU(ld_cu_ds4_hc_head(LD_CU_CUSTOM, dout[0], dX, T, N, D, dfn, dbase, scale, neps, heps, NULL, 0));
        CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dn[0], dout[0], dwt[dt], (ld_kdt)dt, D, 1e-5f, T));
        CU(ld_cu_ds4_hc_head_norm(dout[1], dX, T, N, D, dfn, dbase, scale, neps, heps, dwt[dt], dt, 1e-5f, dn[1]));
        float *want[2] = {dget(dout[0], (size_t)T * D), dget(dn[0], (size_t)T * D)};
        CHECK(want[0] && want[1]);
        char sh[96];
        snprintf(sh, sizeof sh, "%s, %s norm", shape, dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_F16 ? "f16" : "bf16");
        int bad = compare("hc_head_norm head", LD_CU_CUSTOM, sh, dout[1], want[0], (size_t)T * D, -1) ||
                  compare("hc_head_norm norm", LD_CU_CUSTOM, sh, dn[1], want[1], (size_t)T * D, -1);
        free(want[0]);
        free(want[1]);
        if (bad) return 1;
    }
    return 0;
}

static int test_cuda_ds4_hc_head(void)
{
    NEED_GPU();
    struct { int T, N, D; } sh[] = {{3, 4, 64}, {2, 4, 4096}, {5, 8, 96}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, N = sh[ci].N, D = sh[ci].D, ND = N * D;
        float *X = malloc(sizeof(float) * T * ND), *fn = malloc(sizeof(float) * N * ND);
        float *base = malloc(sizeof(float) * N), *ref = malloc(sizeof(float) * T * D);
        float *scratch = malloc(sizeof(float) * (ND + N));
        CHECK(X && fn && base && ref && scratch);
        fill(X, (size_t)T * ND, -2, 2);
        fill(fn, (size_t)N * ND, -0.05f, 0.05f);
        fill(base, (size_t)N, -1, 1);
        const float scale = 1.5f, neps = 1e-6f, heps = 1e-6f;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_hc_head(ref + (size_t)t * D, X + (size_t)t * ND, N, D, fn, base, scale, neps, heps, scratch);
        float *dX, *dfn, *dbase, *dout, *dwork;
        size_t wn = ld_cu_hc_head_work(T, N);
        DPUT(dX, X, sizeof(float) * T * ND);
        DPUT(dfn, fn, sizeof(float) * N * ND);
        DPUT(dbase, base, sizeof(float) * N);
        DPUT(dout, NULL, sizeof(float) * T * D);
        DPUT(dwork, NULL, sizeof(float) * wn);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d N %d D %d", T, N, D);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * D));
            CU(ld_cu_ds4_hc_head(v, dout, dX, T, N, D, dfn, dbase, scale, neps, heps, dwork, wn));
            if (compare("hc_head", v, shape, dout, ref, (size_t)T * D, v ? 1e-10 : 1e-12)) return 1;
        }
        if (hc_head_norm_same(shape, dX, T, N, D, dfn, dbase, scale, neps, heps)) return 1;
        free(X);
        free(fn);
        free(base);
        free(ref);
        free(scratch);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds4_fp4(void)
{
    NEED_GPU();
    /* scale blocks (N/sr) x (K/sc); e8m0: UE8M0 bytes, else fp32 */
    struct { int T, K, N, sr, sc, e8m0; } sh[] = {
        {1, 256, 64, 64, 8, 1}, {5, 512, 96, 3, 4, 0}, {9, 200, 33, 1, 5, 1}, {3, 4096, 70, 70, 128, 1},
        {12, 1024, 40, 5, 8, 0},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, N = sh[ci].N, sr = sh[ci].sr, sc = sh[ci].sc, e8 = sh[ci].e8m0;
        size_t nq = (size_t)N * K / 2, ns = (size_t)sr * sc;
        uint8_t *q = malloc(nq), *s8 = malloc(ns);
        float *sf = malloc(sizeof(float) * ns), *x = malloc(sizeof(float) * T * K);
        float *w = malloc(sizeof(float) * N * K), *ref = malloc(sizeof(float) * T * N);
        CHECK(q && s8 && sf && x && w && ref);
        for (size_t i = 0; i < nq; i++) q[i] = (uint8_t)next_u32();
        for (size_t i = 0; i < ns; i++) {
            s8[i] = (uint8_t)(120 + next_u32() % 12); /* 2^-7 .. 2^4 */
            sf[i] = e8 ? ld_ref_ds4_e8m0_to_f32(s8[i]) : frand(0.001f, 0.1f);
        }
        fill(x, (size_t)T * K, -1, 1);
        ld_ref_ds4_dequant(w, q, 1, sf, (size_t)N, (size_t)K, (size_t)sr, (size_t)sc, 0, (size_t)N);
        for (int t = 0; t < T; t++)
            for (int n = 0; n < N; n++) {
                float acc = 0.0f;
                for (int k = 0; k < K; k++) acc += x[(size_t)t * K + k] * w[(size_t)n * K + k];
                ref[(size_t)t * N + n] = acc;
            }
        uint8_t *dq;
        void *dsc;
        float *dx, *dout;
        DPUT(dq, q, nq);
        if (e8) DPUT(dsc, s8, ns);
        else DPUT(dsc, sf, sizeof(float) * ns);
        DPUT(dx, x, sizeof(float) * T * K);
        DPUT(dout, NULL, sizeof(float) * T * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d %dx%d blk %dx%d %s", T, N, K, N / sr, K / sc, e8 ? "ue8m0" : "f32");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * N));
            CU(ld_cu_ds4_fp4_matmul(v, dout, dx, dq, dsc, e8, T, K, N, sr, sc));
            if (compare("fp4_matmul", v, shape, dout, ref, (size_t)T * N, v ? 1e-10 : -1)) return 1;
            /* the last row alone: the batch's bits */
            float *rows = dget(dout, (size_t)T * N), *alone;
            CHECK(rows);
            DPUT(alone, NULL, sizeof(float) * N);
            CU(ld_cu_ds4_fp4_matmul(v, alone, dx + (size_t)(T - 1) * K, dq, dsc, e8, 1, K, N, sr, sc));
            int bad = compare("fp4 alone", v, shape, alone, rows + (size_t)(T - 1) * N, (size_t)N, -1);
            free(rows);
            if (bad) return 1;
        }
        free(q);
        free(s8);
        free(sf);
        free(x);
        free(w);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* entry w read in place from rings of 2 r rows (ld_cu_ring_put2 of its
 * window's rows, as the backend keeps them): bitwise `want`, the entry
 * the same kernel pooled from rows by position */
static int ring_entry(int v, const char *shape, const float *want, const float *kv, const float *gate,
                      const float *dape, int r, int d, size_t stride, int ov, int w)
{
    size_t p0 = (size_t)(ov && w > 0 ? w - 1 : w) * (size_t)r, n = (size_t)(w + 1) * (size_t)r - p0;
    float *rk, *rg, *dk, *dg, *dent;
    DPUT(rk, NULL, sizeof(float) * 2 * r * stride);
    DPUT(rg, NULL, sizeof(float) * 2 * r * stride);
    DPUT(dk, kv + p0 * stride, sizeof(float) * n * stride);
    DPUT(dg, gate + p0 * stride, sizeof(float) * n * stride);
    DPUT(dent, NULL, sizeof(float) * d);
    /* the window's rows in two puts, as a chunked prefill would */
    size_t half = n / 2;
    CU(ld_cu_ring_put2(rk, rg, dk, dg, stride, 2 * r, (int)p0, (int)half));
    CU(ld_cu_ring_put2(rk, rg, dk + half * stride, dg + half * stride, stride, 2 * r, (int)(p0 + half),
                       (int)(n - half)));
    CU(ld_cu_ds4_compress(v, dent, rk, rg, dape, r, d, stride, ov, w, 1, 2 * r));
    float *got = malloc(sizeof(float) * d), *exp = malloc(sizeof(float) * d);
    CHECK(got && exp);
    CU(ld_cu_d2h(got, dent, sizeof(float) * d));
    CU(ld_cu_d2h(exp, want, sizeof(float) * d));
    int same = !memcmp(got, exp, sizeof(float) * d);
    printf("  ds4_compress    %-6s %-30s entry %d from a ring of %d rows: %s\n", v ? "custom" : "ref", shape, w, 2 * r,
           same ? "bitwise" : "DIFFERS");
    free(got);
    free(exp);
    CHECK_MSG(same, "ds4_compress %s %s: the ring's entry differs", v ? "custom" : "ref", shape);
    return 0;
}

static int test_cuda_ds4_compress(void)
{
    NEED_GPU();
    struct { int r, d, overlap, w0, nw; } sh[] = {
        {4, 64, 1, 0, 5}, {128, 64, 0, 1, 3}, {4, 128, 1, 3, 4}, {8, 48, 0, 0, 2},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int r = sh[ci].r, d = sh[ci].d, ov = sh[ci].overlap, w0 = sh[ci].w0, nw = sh[ci].nw;
        size_t stride = (size_t)(ov ? 2 * d : d) + 1, rows = (size_t)(w0 + nw) * r;
        float *kv = malloc(sizeof(float) * rows * stride), *gate = malloc(sizeof(float) * rows * stride);
        float *ape = malloc(sizeof(float) * r * stride), *ref = malloc(sizeof(float) * nw * d);
        CHECK(kv && gate && ape && ref);
        fill(kv, rows * stride, -2, 2);
        fill(gate, rows * stride, -3, 3);
        fill(ape, (size_t)r * stride, -1, 1);
        for (int e = 0; e < nw; e++) ld_ref_ds4_compress(ref + (size_t)e * d, kv, gate, ape, r, d, stride, ov, w0 + e);
        float *dkv, *dgate, *dape, *dout;
        DPUT(dkv, kv, sizeof(float) * rows * stride);
        DPUT(dgate, gate, sizeof(float) * rows * stride);
        DPUT(dape, ape, sizeof(float) * r * stride);
        DPUT(dout, NULL, sizeof(float) * nw * d);
        char shape[64];
        snprintf(shape, sizeof shape, "%s r %d d %d w %d..%d", ov ? "csa" : "hca", r, d, w0, w0 + nw - 1);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * nw * d));
            CU(ld_cu_ds4_compress(v, dout, dkv, dgate, dape, r, d, stride, ov, w0, nw, 0));
            if (compare("ds4_compress", v, shape, dout, ref, (size_t)nw * d, v ? 1e-10 : 1e-12)) return 1;
            if (ring_entry(v, shape, dout + (size_t)(nw - 1) * d, kv, gate, dape, r, d, stride, ov, w0 + nw - 1))
                return 1;
        }
        free(kv);
        free(gate);
        free(ape);
        free(ref);
        dfree_all();
    }
    return 0;
}

static int test_cuda_ds_layernorm(void)
{
    NEED_GPU();
    struct { int rows, dim, stride; } sh[] = {{7, 128, 160}, {3, 1000, 1000}, {1, 64, 64}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int rows = sh[ci].rows, dim = sh[ci].dim;
        size_t rs = (size_t)sh[ci].stride, n = (size_t)rows * rs;
        float *x = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
        float *w = malloc(sizeof(float) * dim), *b = malloc(sizeof(float) * dim);
        CHECK(x && ref && w && b);
        fill(x, n, -3, 5);
        fill(w, (size_t)dim, 0.5f, 1.5f);
        fill(b, (size_t)dim, -0.5f, 0.5f);
        memcpy(ref, x, sizeof(float) * n);
        ld_ref_ds_layernorm(ref, rs, w, b, dim, 1e-6f, 0, (size_t)rows);
        float *dx, *dw, *db;
        DPUT(dx, NULL, sizeof(float) * n);
        DPUT(dw, w, sizeof(float) * dim);
        DPUT(db, b, sizeof(float) * dim);
        char shape[64];
        snprintf(shape, sizeof shape, "rows %d dim %d stride %zu", rows, dim, rs);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dx, x, sizeof(float) * n));
            CU(ld_cu_ds_layernorm(v, dx, rows, rs, dw, db, dim, 1e-6f));
            if (compare("ds_layernorm", v, shape, dx, ref, n, v ? 1e-10 : -1)) return 1;
        }
        free(x);
        free(ref);
        free(w);
        free(b);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- errors */

static int test_cuda_deepseek_errors(void)
{
    NEED_GPU();
    /* shapes the launchers refuse, before any launch */
    CHECK(ld_cu_ds_route(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, 1, 2048, 8, 4, 8, 1, 1.0f) != 0);
    CHECK(ld_cu_ds_route(LD_CU_REF, NULL, NULL, NULL, NULL, 1, 64, 7, 4, 8, 1, 1.0f) != 0);
    CHECK(ld_cu_ds4_route(LD_CU_REF, NULL, NULL, NULL, NULL, NULL, NULL, 1, 64, 65, 1.0f) != 0);
    CHECK(ld_cu_hc_pre(LD_CU_REF, NULL, NULL, NULL, NULL, 1, 65, 8, NULL, NULL, NULL, 1, 1e-6f, 1e-6f, NULL, 0) != 0);
    CHECK(ld_cu_index_scores(LD_CU_CUSTOM, 0, NULL, NULL, NULL, NULL, 1, 64, 512, 10, 1, 1) != 0);
    CHECK(ld_cu_mla_latent(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, NULL, 1, 4, 16, 8, 64, 10, 1.0f, NULL, 0, NULL, 0) !=
          0);
    CHECK(ld_cu_sample(LD_CU_CUSTOM, NULL, NULL, 1, 100, 1.0, -1, NAN, NAN, 0, 0, NULL, 0) != 0);
    CHECK(ld_cu_ds4_attention(LD_CU_CUSTOM, NULL, NULL, 1, 4, 576, NULL, 0, 0, NULL, 0, NULL, 0, NULL, 1.0f, 0, NULL,
                              (size_t)1 << 20) != 0); /* hd > 512 */
    CHECK(ld_cu_ds4_attention(LD_CU_REF, NULL, NULL, 1, 4, 64, NULL, 0, 0, NULL, 4, NULL, 0, NULL, 1.0f, 10, NULL,
                              0) != 0); /* no workspace */
    CHECK(ld_cu_ds4_hc_head(LD_CU_CUSTOM, NULL, NULL, 1, 65, 8, NULL, NULL, 1.0f, 1e-6f, 1e-6f, NULL, 0) != 0);
    CHECK(ld_cu_ds4_hc_head_norm(NULL, NULL, 1, 4, 8, NULL, NULL, 1.0f, 1e-6f, 1e-6f, NULL, 3, 1e-6f, NULL) != 0);
    CHECK(ld_cu_ds4_fp4_matmul(LD_CU_REF, NULL, NULL, NULL, NULL, 0, 1, 63, 8, 1, 1) != 0); /* K odd */
    CHECK(ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, NULL, NULL, NULL, NULL, 1, 1, 64, 8, 3, 1) != 0); /* 3 !| 8 */
    CHECK(ld_cu_ds_rope(LD_CU_REF, NULL, 1, 64, 0, 1, 64, 63, NULL, 1.0f, 1, 0, 0, 0) != 0);    /* dim odd */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 64, 1, 0, 1, 0) != 0);    /* stride < 2d */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 128, 1, 0, 1, 7) != 0);   /* ring < 2r */
    CHECK(ld_cu_ds4_compress(LD_CU_REF, NULL, NULL, NULL, NULL, 4, 64, 128, 1, 0, 2, 8) != 0);   /* ring, 2 entries */
    CHECK(ld_cu_ds_layernorm(LD_CU_CUSTOM, NULL, 2, 10, NULL, NULL, 64, 1e-6f) != 0);            /* stride < dim */
    /* the device still works after them */
    CHECK(ld_cu_sync() == 0);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_ds4_attention), LD_CASE(test_cuda_ds4_swiglu), LD_CASE(test_cuda_ds_rope),
    LD_CASE(test_cuda_ds4_qkv), LD_CASE(test_cuda_ds4_hc_head), LD_CASE(test_cuda_ds4_fp4),
    LD_CASE(test_cuda_ds4_compress), LD_CASE(test_cuda_ds_layernorm), LD_CASE(test_cuda_deepseek_errors),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_ds4(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_ds4)};

#endif

LD_TEST_MAIN(tests)
