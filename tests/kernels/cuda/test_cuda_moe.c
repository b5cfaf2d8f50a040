/* test_cuda_moe.c - the GPU-only checks of the FP8 GEMM, the MoE plan, the grouped FP8 and FP4 GEMMs (tables,
 * fan-outs, the mixed launches) and the combine (kernels/cuda/cuda_fp8.cu,
 * cuda_moe.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

/* ---------------------------------------------------------------- FP8 GEMM */

static int test_cuda_fp8_matmul(void)
{
    NEED_GPU();
    struct { int T, K, N, br, bc; } sh[] = {
        {1, 256, 96, 128, 128}, {5, 384, 130, 128, 128}, {3, 200, 33, 64, 64}, {9, 512, 70, 128, 128},
    };
    for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
        int T = sh[c].T, K = sh[c].K, N = sh[c].N, br = sh[c].br, bc = sh[c].bc;
        int nbr = (N + br - 1) / br, nbc = (K + bc - 1) / bc;
        uint8_t *q = malloc((size_t)N * K);
        float *sc = malloc(sizeof(float) * nbr * nbc), *x = malloc(sizeof(float) * T * K);
        float *ref = malloc(sizeof(float) * T * N), *row = malloc(sizeof(float) * K);
        CHECK(q && sc && x && ref && row);
        for (size_t i = 0; i < (size_t)N * K; i++) q[i] = rand_e4m3();
        for (int i = 0; i < nbr * nbc; i++) sc[i] = ldexpf(frand(1, 2), -8 + (int)(next_u32() % 3));
        fill(x, (size_t)T * K, -1, 1);
        ld_f8b f = {q, sc, N, K, br, bc};
        ld_ref_matmul(ref, x, &f, LD_KDT_F8B, NULL, LD_KDT_F32, T, K, N, row, 0, (size_t)N);
        uint8_t *dq;
        float *dsc, *dx, *dout;
        DPUT(dq, q, (size_t)N * K);
        DPUT(dsc, sc, sizeof(float) * nbr * nbc);
        DPUT(dx, x, sizeof(float) * T * K);
        DPUT(dout, NULL, sizeof(float) * T * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d N %d blk %dx%d", T, K, N, br, bc);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * N));
            CU(ld_cu_fp8_matmul(v, dout, dx, dq, dsc, T, K, N, br, bc));
            if (compare("fp8_matmul", v, shape, dout, ref, (size_t)T * N, v ? 1e-10 : -1)) return 1;
            /* the last row alone equals its row of the batch bitwise */
            float *batch = malloc(sizeof(float) * T * N), *alone = malloc(sizeof(float) * N);
            CHECK(batch && alone);
            CU(ld_cu_d2h(batch, dout, sizeof(float) * T * N));
            CU(ld_cu_fp8_matmul(v, dout, dx + (size_t)(T - 1) * K, dq, dsc, 1, K, N, br, bc));
            CU(ld_cu_d2h(alone, dout, sizeof(float) * N));
            int same = !memcmp(alone, batch + (size_t)(T - 1) * N, sizeof(float) * N);
            free(batch);
            free(alone);
            CHECK_MSG(same, "fp8_matmul %s %s: the last row alone differs from the batch", kname(v), shape);
        }
        free(q);
        free(sc);
        free(x);
        free(ref);
        free(row);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- MoE */

/* the plan (offsets, rows, row_of: exact) and the grouped FP8 GEMM of
 * random routes against ld_ref_moe_gather + ld_ref_matmul per expert */
static int test_cuda_moe_grouped(void)
{
    NEED_GPU();
    struct { int T, K, E, D, N; } sh[] = {{7, 4, 16, 256, 96}, {1, 8, 256, 512, 64}, {33, 6, 64, 200, 130}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, E = sh[ci].E, D = sh[ci].D, N = sh[ci].N, R = T * K, br = 128, bc = 128;
        int nbr = (N + br - 1) / br, nbc = (D + bc - 1) / bc;
        int32_t *idx = malloc(sizeof(int32_t) * R), *off = malloc(sizeof(int32_t) * (E + 1));
        int32_t *rows = malloc(sizeof(int32_t) * R), *row_of = malloc(sizeof(int32_t) * R);
        int *grows = malloc(sizeof(int) * T);
        float *x = malloc(sizeof(float) * T * D), *wts = malloc(sizeof(float) * R), *gw = malloc(sizeof(float) * T);
        float *xe = malloc(sizeof(float) * T * D), *ref = malloc(sizeof(float) * R * N);
        float *row = malloc(sizeof(float) * D);
        uint8_t *q = malloc((size_t)E * N * D);
        float *sc = malloc(sizeof(float) * E * nbr * nbc);
        CHECK(idx && off && rows && row_of && grows && x && wts && gw && xe && ref && row && q && sc);
        for (int t = 0; t < T; t++) /* K distinct experts, ascending */
            for (int k = 0; k < K; k++) {
                int e, dup;
                do {
                    e = (int)(next_u32() % (uint32_t)E);
                    dup = 0;
                    for (int j = 0; j < k; j++) dup |= idx[t * K + j] == e;
                } while (dup);
                int j = k;
                while (j > 0 && idx[t * K + j - 1] > e) {
                    idx[t * K + j] = idx[t * K + j - 1];
                    j--;
                }
                idx[t * K + j] = e;
            }
        fill(x, (size_t)T * D, -1, 1);
        fill(wts, (size_t)R, 0, 1);
        for (size_t i = 0; i < (size_t)E * N * D; i++) q[i] = rand_e4m3();
        for (int i = 0; i < E * nbr * nbc; i++) sc[i] = ldexpf(frand(1, 2), -8);
        off[0] = 0;
        for (int e = 0; e < E; e++) {
            int cnt = ld_ref_moe_gather(grows, gw, xe, x, idx, wts, (size_t)T, (size_t)K, (size_t)D, e);
            ld_f8b f = {q + (size_t)e * N * D, sc + (size_t)e * nbr * nbc, N, D, br, bc};
            if (cnt) ld_ref_matmul(ref + (size_t)off[e] * N, xe, &f, LD_KDT_F8B, NULL, LD_KDT_F32, cnt, D, N, row, 0,
                                   (size_t)N);
            for (int i = 0; i < cnt; i++) {
                rows[off[e] + i] = grows[i];
                for (int k = 0; k < K; k++)
                    if (idx[grows[i] * K + k] == e) row_of[grows[i] * K + k] = off[e] + i;
            }
            off[e + 1] = off[e] + cnt;
        }
        int32_t *didx, *doff, *drows, *drow_of;
        float *dx, *dsc, *dout;
        uint8_t *dq;
        DPUT(didx, idx, sizeof(int32_t) * R);
        DPUT(doff, NULL, sizeof(int32_t) * (E + 1));
        DPUT(drows, NULL, sizeof(int32_t) * R);
        DPUT(drow_of, NULL, sizeof(int32_t) * R);
        DPUT(dx, x, sizeof(float) * T * D);
        DPUT(dq, q, (size_t)E * N * D);
        DPUT(dsc, sc, sizeof(float) * E * nbr * nbc);
        DPUT(dout, NULL, sizeof(float) * R * N);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d E %d D %d N %d", T, K, E, D, N);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(drows, sizeof(int32_t) * R));
            CU(ld_cu_moe_plan(v, doff, drows, drow_of, didx, T, K, E));
            if (compare_i32("moe_plan off", v, shape, doff, off, (size_t)E + 1)) return 1;
            if (compare_i32("moe_plan rows", v, shape, drows, rows, (size_t)R)) return 1;
            if (compare_i32("moe_plan row_of", v, shape, drow_of, row_of, (size_t)R)) return 1;
            CU(ld_cu_memset0(dout, sizeof(float) * R * N));
            CU(ld_cu_moe_fp8_matmul(v, dout, dx, drows, doff, dq, dsc, E, R, T, D, N, br, bc));
            if (compare("moe_fp8_gemm", v, shape, dout, ref, (size_t)R * N, v ? 1e-10 : -1)) return 1;
        }
        free(idx);
        free(off);
        free(rows);
        free(row_of);
        free(grows);
        free(x);
        free(wts);
        free(gw);
        free(xe);
        free(ref);
        free(row);
        free(q);
        free(sc);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- MoE combine */

static int test_cuda_moe_combine(void)
{
    NEED_GPU();
    struct { int T, K, D, perm; } sh[] = {{5, 6, 68, 1}, {3, 8, 70, 1}, {16, 8, 256, 0}};
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, K = sh[ci].K, D = sh[ci].D, R = T * K;
        float *y = malloc(sizeof(float) * T * D), *ref = malloc(sizeof(float) * T * D);
        float *eo = malloc(sizeof(float) * R * D), *w = malloc(sizeof(float) * R);
        int32_t *row_of = malloc(sizeof(int32_t) * R);
        CHECK(y && ref && eo && w && row_of);
        fill(y, (size_t)T * D, -1, 1);
        fill(eo, (size_t)R * D, -2, 2);
        fill(w, (size_t)R, 0, 1);
        for (int i = 0; i < R; i++) row_of[i] = i;
        for (int i = R - 1; sh[ci].perm && i > 0; i--) { /* the grouped GEMM's row order */
            int j = (int)(next_u32() % (uint32_t)(i + 1)), x = row_of[i];
            row_of[i] = row_of[j];
            row_of[j] = x;
        }
        memcpy(ref, y, sizeof(float) * T * D);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                ld_ref_ds_axpy(ref + (size_t)t * D, eo + (size_t)row_of[t * K + k] * D, w[t * K + k], 0, (size_t)D);
        float *dy, *deo, *dw;
        int32_t *drow = NULL;
        DPUT(dy, NULL, sizeof(float) * T * D);
        DPUT(deo, eo, sizeof(float) * R * D);
        DPUT(dw, w, sizeof(float) * R);
        if (sh[ci].perm) DPUT(drow, row_of, sizeof(int32_t) * R);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d K %d D %d%s", T, K, D, sh[ci].perm ? " permuted" : "");
        /* _ex: from zero (y's garbage unread), then + add: the memset, the
         * combine and the shared expert's add of the backend, one launch */
        float *add = malloc(sizeof(float) * T * D), *ref0 = calloc((size_t)T * D, sizeof(float)), *dadd;
        CHECK(add && ref0);
        fill(add, (size_t)T * D, -1, 1);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                ld_ref_ds_axpy(ref0 + (size_t)t * D, eo + (size_t)row_of[t * K + k] * D, w[t * K + k], 0, (size_t)D);
        for (size_t i = 0; i < (size_t)T * D; i++) ref0[i] = ref0[i] + add[i];
        DPUT(dadd, add, sizeof(float) * T * D);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_h2d(dy, y, sizeof(float) * T * D));
            CU(ld_cu_moe_combine(v, dy, deo, drow, dw, T, K, D));
            if (compare("moe_combine", v, shape, dy, ref, (size_t)T * D, -1)) return 1;
            CU(ld_cu_h2d(dy, y, sizeof(float) * T * D));
            CU(ld_cu_moe_combine_ex(v, dy, deo, drow, dw, T, K, D, 1, dadd));
            if (compare("moe_combine 0+add", v, shape, dy, ref0, (size_t)T * D, -1)) return 1;
        }
        free(add);
        free(ref0);
        free(y);
        free(ref);
        free(eo);
        free(w);
        free(row_of);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- grouped GEMMs */

/* the rows of G groups: their sum and the most of one */
static void row_counts(const int *rows, int G, int *R, int *most)
{
    *R = *most = 0;
    for (int g = 0; g < G; g++) {
        *R += rows[g];
        if (rows[g] > *most) *most = rows[g];
    }
}

/* a random weight [N][K] on the device: FP8 (scale blocks br x bc) or FP4
 * (fp32 scales, blocks dividing), codes *dq, scales *ds */
static int rand_weight(int fp4, int K, int N, int br, int bc, uint8_t **dq, float **ds)
{
    size_t nq = fp4 ? (size_t)N * K / 2 : (size_t)N * K;
    size_t ns = fp4 ? (size_t)(N / br) * (K / bc) : (size_t)((N + br - 1) / br) * ((K + bc - 1) / bc);
    uint8_t *q = malloc(nq);
    float *s = malloc(sizeof(float) * ns);
    CHECK(q && s);
    for (size_t i = 0; i < nq; i++) q[i] = fp4 ? (uint8_t)next_u32() : rand_e4m3();
    for (size_t i = 0; i < ns; i++) s[i] = frand(0.001f, 0.1f);
    DPUT(*dq, q, nq);
    DPUT(*ds, s, sizeof(float) * ns);
    free(q);
    free(s);
    return 0;
}

/* R random rows of K floats on the device (one float more: a kernel that
 * reads past them shows under the sanitizers, not as a crash) */
static int rand_rows(int R, int K, float **dx)
{
    float *x = malloc(sizeof(float) * ((size_t)R * K + 1));
    CHECK(x);
    fill(x, (size_t)R * K, -1, 1);
    DPUT(*dx, x, sizeof(float) * ((size_t)R * K + 1));
    free(x);
    return 0;
}

/* the R rows [K] of dx scattered over 2 R + 1 rows of *dtok (row i of dx at
 * row (*dperm)[i], a made-up order, the others NaN), as tokens' rows that
 * a group reads through xrows */
static int pick_rows(const float *dx, int R, int K, float **dtok, int32_t **dperm)
{
    size_t nt = 2 * (size_t)R + 1;
    float *x = dget(dx, (size_t)R * K), *tok = malloc(sizeof(float) * nt * K);
    int32_t *perm = malloc(sizeof(int32_t) * (size_t)(R + 1));
    CHECK(x && tok && perm);
    for (size_t i = 0; i < nt * K; i++) tok[i] = NAN;
    for (int i = 0; i < R; i++) {
        perm[i] = (int32_t)((2 * (size_t)(R - 1 - i) + (size_t)(i % 2)) % nt);
        memcpy(tok + (size_t)perm[i] * K, x + (size_t)i * K, sizeof(float) * K);
    }
    DPUT(*dtok, tok, sizeof(float) * nt * K);
    DPUT(*dperm, perm, sizeof(int32_t) * (size_t)(R + 1));
    free(x);
    free(tok);
    free(perm);
    return 0;
}

/* one grouped case: G groups of `rows[g]` rows, each its own random
 * weight [N][K] (FP8: blocks br x bc; FP4: fp32 scales, blocks br x bc
 * dividing), through the grouped launcher, each group's rows bitwise what
 * the per-weight custom launcher gives for them alone; a group of 0 rows
 * writes nothing (its neighbours' rows are checked, the buffer's tail
 * stays zero) */
static int grouped_case(int fp4, const int *rows, int G, int K, int N, int br, int bc, int pick)
{
    int R, most;
    row_counts(rows, G, &R, &most);
    ld_cu_mm_group tab[8];
    CHECK(G <= 8);
    float *dx, *dout, *dalone, *dtok = NULL;
    int32_t *dperm = NULL;
    if (rand_rows(R, K, &dx)) return 1;
    if (pick && pick_rows(dx, R, K, &dtok, &dperm)) return 1;
    DPUT(dout, NULL, sizeof(float) * ((size_t)R * N + 64)); /* a zero tail: nothing may land there */
    DPUT(dalone, NULL, sizeof(float) * ((size_t)R * N + 1));
    int r0 = 0;
    for (int g = 0; g < G; g++) { /* each group its own weight */
        uint8_t *dq;
        float *ds;
        if (rand_weight(fp4, K, N, br, bc, &dq, &ds)) return 1;
        tab[g] = (ld_cu_mm_group){dq, ds, dx + (size_t)r0 * K, dout + (size_t)r0 * N, rows[g], 0, 0, 0, NULL};
        float *a = dalone + (size_t)r0 * N;
        if (pick) tab[g].x = dtok, tab[g].xrows = dperm + r0; /* the same rows, read where they lie */
        if (rows[g])
            CU(fp4 ? ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, a, dx + (size_t)r0 * K, dq, ds, 0, rows[g], K, N, N / br,
                                          K / bc)
                   : ld_cu_fp8_matmul(LD_CU_CUSTOM, a, dx + (size_t)r0 * K, dq, ds, rows[g], K, N, br, bc));
        r0 += rows[g];
    }
    ld_cu_mm_group *dtab;
    DPUT(dtab, tab, sizeof tab[0] * (size_t)G);
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dtab, G, most, K, N, br, bc)
           : ld_cu_grouped_fp8_matmul(dtab, G, most, K, N, br, bc));
    float *alone = dget(dalone, (size_t)R * N), *got = dget(dout, (size_t)R * N + 64);
    CHECK(alone && got);
    char shape[80];
    snprintf(shape, sizeof shape, "%d groups, %d rows%s, %dx%d blk %dx%d", G, R, pick ? " picked" : "", N, K, br, bc);
    double mx, e = nmse(got, alone, (size_t)R * N, &mx);
    int same = !memcmp(got, alone, sizeof(float) * (size_t)R * N), tail = 1;
    for (int i = 0; i < 64; i++) tail = tail && got[(size_t)R * N + i] == 0.0f;
    printf("  %-15s %-6s %-34s nmse %-9.3g vs one launch a group: %s%s\n", fp4 ? "grouped_fp4" : "grouped_fp8",
           "custom", shape, e, same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its rows");
    free(alone);
    free(got);
    dfree_all();
    CHECK_MSG(same, "grouped %s %s: not bitwise the per-group launches", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(tail, "grouped %s %s: wrote past the last group's rows", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* the gate/up pairs with the activation in one launch (ld_cu_grouped_*_glu)
 * against the grouped launch of the 2 G groups and the custom clamped
 * SwiGLU over their rows: the gates' rows bitwise; the ups' rows
 * untouched */
static int glu_case(int fp4, const int *rows, int G, int K, int N, int br, int bc, float limit)
{
    int R, most;
    row_counts(rows, G, &R, &most);
    ld_cu_mm_group tab[2][16];
    CHECK(G <= 8);
    float *dx, *dg[2], *du[2];
    if (rand_rows(R, K, &dx)) return 1;
    for (int i = 0; i < 2; i++) {
        DPUT(dg[i], NULL, sizeof(float) * ((size_t)R * N + 1));
        DPUT(du[i], NULL, sizeof(float) * ((size_t)R * N + 1));
    }
    for (int j = 0; j < 2 * G; j++) { /* gates, then ups: each its own weight */
        int g = j % G, r0 = 0;
        for (int i = 0; i < g; i++) r0 += rows[i];
        uint8_t *dq;
        float *ds;
        if (rand_weight(fp4, K, N, br, bc, &dq, &ds)) return 1;
        for (int i = 0; i < 2; i++) {
            float *out = (j < G ? dg[i] : du[i]) + (size_t)r0 * N;
            tab[i][j] = (ld_cu_mm_group){dq, ds, dx + (size_t)r0 * K, out, rows[g], 0, 0, 0, NULL};
        }
    }
    ld_cu_mm_group *dt[2];
    for (int i = 0; i < 2; i++) DPUT(dt[i], tab[i], sizeof tab[i][0] * (size_t)(2 * G));
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dt[0], 2 * G, most, K, N, br, bc)
           : ld_cu_grouped_fp8_matmul(dt[0], 2 * G, most, K, N, br, bc));
    CU(ld_cu_ds4_clamped_swiglu(LD_CU_CUSTOM, dg[0], dg[0], du[0], R, N, (size_t)N, limit));
    CU(fp4 ? ld_cu_grouped_fp4_glu(dt[1], G, most, K, N, br, bc, limit)
           : ld_cu_grouped_fp8_glu(dt[1], G, most, K, N, br, bc, limit));
    float *want = dget(dg[0], (size_t)R * N), *got = dget(dg[1], (size_t)R * N), *ups = dget(du[1], (size_t)R * N);
    CHECK(want && got && ups);
    int same = !memcmp(got, want, sizeof(float) * (size_t)R * N), untouched = 1, clamped = 0;
    for (size_t i = 0; i < (size_t)R * N; i++) untouched = untouched && ups[i] == 0.0f;
    float *g0 = dget(du[0], (size_t)R * N); /* the ups' values: how many the limit clamps */
    CHECK(g0);
    for (size_t i = 0; i < (size_t)R * N; i++) clamped += fabsf(g0[i]) > limit;
    char shape[80];
    snprintf(shape, sizeof shape, "%d pairs, %d rows, %dx%d blk %dx%d", G, R, N, K, br, bc);
    printf("  %-15s %-6s %-34s limit %g (%d ups clamped): vs gate+up, then swiglu: %s\n",
           fp4 ? "grouped_fp4_glu" : "grouped_fp8_glu", "custom", shape, limit, clamped,
           same ? "bitwise" : "DIFFER");
    free(want);
    free(got);
    free(ups);
    free(g0);
    dfree_all();
    CHECK_MSG(same, "grouped glu %s %s: not bitwise the grouped launch and the activation", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(untouched, "grouped glu %s %s: wrote the ups' rows", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* G outputs [T][n[g]] on the device against the per-weight ones: *same
 * when all are bitwise equal, *tail when the 64 floats after each (zeroed)
 * are still zero */
static int fan_compare(float *const *dout, float *const *dalone, int T, const int *n, int G, int *same, int *tail)
{
    *same = *tail = 1;
    for (int g = 0; g < G; g++) {
        size_t m = (size_t)T * n[g];
        float *alone = dget(dalone[g], m), *got = dget(dout[g], m + 64);
        CHECK(alone && got);
        *same = *same && !memcmp(got, alone, sizeof(float) * m);
        for (int i = 0; i < 64; i++) *tail = *tail && got[m + i] == 0.0f;
        free(alone);
        free(got);
    }
    return 0;
}

/* projections that share an input in one grouped launch: G weights of
 * their own widths n[g] over the same T rows of x (V4's wq_a and wkv),
 * each group's own output [T][n[g]] bitwise the per-weight custom
 * launcher's; nothing written past a group's columns */
static int fanout_case(int fp4, int T, int K, const int *n, int G, int br, int bc)
{
    ld_cu_mm_group tab[4];
    CHECK(G <= 4);
    float *dx, *dout[4], *dalone[4];
    int N = 0;
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        uint8_t *dq;
        float *ds;
        N = n[g] > N ? n[g] : N;
        if (rand_weight(fp4, K, n[g], br, bc, &dq, &ds)) return 1;
        DPUT(dout[g], NULL, sizeof(float) * ((size_t)T * n[g] + 64)); /* a zero tail */
        DPUT(dalone[g], NULL, sizeof(float) * (size_t)T * n[g]);
        tab[g] = (ld_cu_mm_group){dq, ds, dx, dout[g], T, n[g], 0, 0, NULL};
        CU(fp4 ? ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, dalone[g], dx, dq, ds, 0, T, K, n[g], n[g] / br, K / bc)
               : ld_cu_fp8_matmul(LD_CU_CUSTOM, dalone[g], dx, dq, ds, T, K, n[g], br, bc));
    }
    ld_cu_mm_group *dtab;
    DPUT(dtab, tab, sizeof tab[0] * (size_t)G);
    CU(fp4 ? ld_cu_grouped_fp4_matmul(dtab, G, T, K, N, br, bc) : ld_cu_grouped_fp8_matmul(dtab, G, T, K, N, br, bc));
    int same, tail;
    if (fan_compare(dout, dalone, T, n, G, &same, &tail)) return 1;
    char shape[80];
    snprintf(shape, sizeof shape, "%d rows of %d, widths %d..%d (%d)", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-34s vs one launch a weight: %s%s\n", fp4 ? "fanout_fp4" : "fanout_fp8", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its columns");
    dfree_all();
    CHECK_MSG(same, "fanout %s %s: not bitwise the per-weight launches", fp4 ? "fp4" : "fp8", shape);
    CHECK_MSG(tail, "fanout %s %s: wrote past a group's columns", fp4 ? "fp4" : "fp8", shape);
    return 0;
}

/* ld_cu_fp8_matmul_post against the two launches it stands for: the
 * custom FP8 matmul into f, the custom hc_post from it; the new streams
 * bitwise, nothing written past them */
static int matmul_post_case(int T, int K, int D, int br, int bc, int N)
{
    size_t nd = (size_t)T * D, nn = (size_t)T * N * D;
    uint8_t *dq;
    float *ds, *dx, *dX, *dpost, *dcomb, *df, *dwant, *dgot;
    if (rand_weight(0, K, D, br, bc, &dq, &ds) || rand_rows(T, K, &dx) || rand_rows(T * N, D, &dX) ||
        rand_rows(T, N, &dpost) || rand_rows(T * N, N, &dcomb))
        return 1;
    DPUT(df, NULL, sizeof(float) * nd);
    DPUT(dwant, NULL, sizeof(float) * nn);
    DPUT(dgot, NULL, sizeof(float) * (nn + 64)); /* a zero tail */
    CU(ld_cu_fp8_matmul(LD_CU_CUSTOM, df, dx, dq, ds, T, K, D, br, bc));
    CU(ld_cu_hc_post(LD_CU_CUSTOM, dwant, dX, df, dpost, dcomb, T, N, D));
    ld_cu_post p = {dgot, dX, dpost, dcomb, N};
    CU(ld_cu_fp8_matmul_post(dx, dq, ds, T, K, D, br, bc, p));
    float *want = dget(dwant, nn), *got = dget(dgot, nn + 64);
    CHECK(want && got);
    int same = !memcmp(want, got, sizeof(float) * nn), tail = 1;
    for (int i = 0; i < 64; i++) tail = tail && got[nn + (size_t)i] == 0.0f;
    char shape[80];
    snprintf(shape, sizeof shape, "T %d %dx%d blk %dx%d, %d streams", T, D, K, br, bc, N);
    printf("  %-15s %-6s %-40s vs matmul, hc_post: %s%s\n", "fp8_mm_post", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past the streams");
    free(want);
    free(got);
    dfree_all();
    CHECK_MSG(same, "fp8_matmul_post %s: not bitwise the launches it replaces", shape);
    CHECK_MSG(tail, "fp8_matmul_post %s: wrote past the streams", shape);
    return 0;
}

/* a random plain-type weight [N][K] on the device: F32 in [-1, 1], BF16
 * the top halves of such floats, F16 of exponents 8..20 (no specials) */
static int rand_plain(ld_kdt dt, int N, int K, void **dw)
{
    size_t n = (size_t)N * K, es = dt == LD_KDT_F32 ? 4 : 2;
    float *f = malloc(sizeof(float) * n);
    uint16_t *h = malloc(2 * n);
    CHECK(f && h);
    fill(f, n, -1, 1);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        uint32_t r = next_u32();
        h[i] = dt == LD_KDT_BF16 ? (uint16_t)(u >> 16) : (uint16_t)((r & 0x83ffu) | ((8u + r % 13u) << 10));
    }
    DPUT(*dw, dt == LD_KDT_F32 ? (void *)f : (void *)h, es * n);
    free(f);
    free(h);
    return 0;
}

/* ld_cu_matmul_fanout against ld_cu_matmul (custom) a weight: G weights of
 * their own widths n[g] over the same T rows, each output bitwise, nothing
 * written past it */
static int plain_fan_case(ld_kdt dt, int T, int K, const int *n, int G)
{
    ld_cu_fan fan[4];
    float *dx, *dalone[4];
    CHECK(G <= 4);
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        void *dw;
        if (rand_plain(dt, n[g], K, &dw)) return 1;
        DPUT(fan[g].out, NULL, sizeof(float) * ((size_t)T * n[g] + 64)); /* a zero tail */
        DPUT(dalone[g], NULL, sizeof(float) * (size_t)T * n[g]);
        fan[g].w = dw;
        fan[g].n = n[g];
        CU(ld_cu_matmul(LD_CU_CUSTOM, dalone[g], dx, dw, dt, NULL, LD_KDT_F32, T, K, n[g], 0));
    }
    CU(ld_cu_matmul_fanout(fan, G, dx, dt, T, K));
    float *dout[4];
    for (int g = 0; g < G; g++) dout[g] = fan[g].out;
    int same, tail;
    if (fan_compare(dout, dalone, T, n, G, &same, &tail)) return 1;
    char shape[80];
    snprintf(shape, sizeof shape, "%s, %d rows of %d, widths %d..%d (%d)",
             dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_BF16 ? "bf16" : "f16", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-40s vs one launch a weight: %s%s\n", "matmul_fanout", "custom", shape,
           same ? "bitwise" : "DIFFER", tail ? "" : ", wrote past its columns");
    dfree_all();
    CHECK_MSG(same, "matmul_fanout %s: not bitwise the per-weight launches", shape);
    CHECK_MSG(tail, "matmul_fanout %s: wrote past a weight's columns", shape);
    return 0;
}

/* V4's compressors' kv and gate and the indexer's weights in small: the
 * 16-byte path (K = 64), the element path (K = 37), two token tiles */
static int test_cuda_matmul_fanout(void)
{
    NEED_GPU();
    const int comp[4] = {64, 64, 32, 32}, odd[3] = {8, 40, 3};
    const ld_kdt dts[3] = {LD_KDT_F32, LD_KDT_BF16, LD_KDT_F16};
    for (int i = 0; i < 3; i++)
        if (plain_fan_case(dts[i], 1, 64, comp, 4) || plain_fan_case(dts[i], 9, 37, odd, 3) ||
            plain_fan_case(dts[i], 3, 64, odd, 3))
            return 1;
    return 0;
}

/* two device arrays of n floats bitwise equal */
static int dev_same(const float *a, const float *b, size_t n)
{
    float *x = dget(a, n), *y = dget(b, n);
    CHECK(x && y);
    int same = !memcmp(x, y, sizeof(float) * n);
    free(x);
    free(y);
    return same;
}

/* the MoE's mixed launches against the launches they stand for, G routed
 * experts (FP4 or FP8, rows[g] each, a made-up plan over T tokens of K
 * choices) and the shared one (FP8, T rows): ld_cu_grouped_glu2 against
 * the grouped GLU of each part, ld_cu_moe_down_post against the grouped
 * downs, then the shared down, the combine and hc_post (the routed
 * outputs and the streams bitwise) */
static int moe_mixed_case(int fp4, int T, int K, const int *rows, int G, int D, int I, int Is)
{
    int R = 0, rbr = fp4 ? 1 : 16, rbc = fp4 ? 32 : 32;
    for (int g = 0; g < G; g++) R += rows[g];
    CHECK(R == T * K && G <= 8);
    float *dx, *dg[2], *du, *dsg[2], *dsu, *deo[2], *dw, *dX, *dpost, *dcomb, *dout[2];
    int32_t *row_of = malloc(sizeof(int32_t) * R), *tok = malloc(sizeof(int32_t) * R), *drow_of, *dtok;
    CHECK(row_of && tok);
    for (int i = 0; i < R; i++) {
        row_of[i] = (int32_t)((i * 5 + 1) % R); /* a permutation: 5 and R coprime */
        tok[i] = (int32_t)((i * 3) % T);        /* routed row i's token (the plan's rows) */
    }
    if (rand_rows(T, D, &dx) || rand_rows(R, 1, &dw) || rand_rows(T * 4, D, &dX) || rand_rows(T, 4, &dpost) ||
        rand_rows(T * 4, 4, &dcomb))
        return 1;
    DPUT(drow_of, row_of, sizeof(int32_t) * R);
    DPUT(dtok, tok, sizeof(int32_t) * R);
    for (int i = 0; i < 2; i++) {
        DPUT(dg[i], NULL, sizeof(float) * (size_t)R * I);
        DPUT(dsg[i], NULL, sizeof(float) * (size_t)T * Is);
        DPUT(deo[i], NULL, sizeof(float) * (size_t)R * D);
        DPUT(dout[i], NULL, sizeof(float) * (size_t)T * 4 * D);
    }
    DPUT(du, NULL, sizeof(float) * (size_t)R * I);
    DPUT(dsu, NULL, sizeof(float) * (size_t)T * Is);
    ld_cu_mm_group rt[2][24], st[2][2]; /* [copy][gates, ups, downs] */
    int r0 = 0;
    for (int g = 0; g < G; g++) {
        uint8_t *q[3];
        float *s[3];
        if (rand_weight(fp4, D, I, rbr, rbc, &q[0], &s[0]) || rand_weight(fp4, D, I, rbr, rbc, &q[1], &s[1]) ||
            rand_weight(fp4, I, D, rbr, rbc, &q[2], &s[2]))
            return 1;
        for (int c = 0; c < 2; c++) {
            rt[c][g] = (ld_cu_mm_group){q[0], s[0], dx, dg[c] + (size_t)r0 * I, rows[g], 0, 0, 0, dtok + r0};
            rt[c][G + g] = (ld_cu_mm_group){q[1], s[1], dx, du + (size_t)r0 * I, rows[g], 0, 0, 0, dtok + r0};
            rt[c][2 * G + g] = (ld_cu_mm_group){q[2], s[2], dg[c] + (size_t)r0 * I, deo[c] + (size_t)r0 * D,
                                                rows[g], 0, 0, 0, NULL};
        }
        r0 += rows[g];
    }
    uint8_t *sq[3];
    float *ss[3];
    if (rand_weight(0, D, Is, 16, 32, &sq[0], &ss[0]) || rand_weight(0, D, Is, 16, 32, &sq[1], &ss[1]) ||
        rand_weight(0, Is, D, 16, 32, &sq[2], &ss[2]))
        return 1;
    for (int c = 0; c < 2; c++) {
        st[c][0] = (ld_cu_mm_group){sq[0], ss[0], dx, dsg[c], T, 0, 0, 0, NULL};
        st[c][1] = (ld_cu_mm_group){sq[1], ss[1], dx, dsu, T, 0, 0, 0, NULL};
    }
    ld_cu_mm_group *drt[2], *dst[2];
    for (int c = 0; c < 2; c++) {
        DPUT(drt[c], rt[c], sizeof rt[c][0] * (size_t)(3 * G));
        DPUT(dst[c], st[c], sizeof st[c][0] * 2);
    }
    /* the launches replaced: each part's GLU, the downs, the shared down's post */
    CU(fp4 ? ld_cu_grouped_fp4_glu(drt[0], G, T, D, I, rbr, rbc, 0.75f)
           : ld_cu_grouped_fp8_glu(drt[0], G, T, D, I, rbr, rbc, 0.75f));
    CU(ld_cu_grouped_fp8_glu(dst[0], 1, T, D, Is, 16, 32, 0.75f));
    CU(fp4 ? ld_cu_grouped_fp4_matmul(drt[0] + 2 * G, G, T, I, D, rbr, rbc)
           : ld_cu_grouped_fp8_matmul(drt[0] + 2 * G, G, T, I, D, rbr, rbc));
    float *des, *dy; /* the shared output, the MoE's */
    DPUT(des, NULL, sizeof(float) * (size_t)T * D);
    DPUT(dy, NULL, sizeof(float) * (size_t)T * D);
    CU(ld_cu_fp8_matmul(LD_CU_CUSTOM, des, dsg[0], sq[2], ss[2], T, Is, D, 16, 32));
    CU(ld_cu_moe_combine_ex(LD_CU_CUSTOM, dy, deo[0], drow_of, dw, T, K, D, 1, des));
    CU(ld_cu_hc_post(LD_CU_CUSTOM, dout[0], dX, dy, dpost, dcomb, T, 4, D));
    ld_cu_combine cmb = {deo[1], drow_of, dw, K};
    ld_cu_post pp = {dout[1], dX, dpost, dcomb, 4};
    /* the mixed ones */
    ld_cu_moe_part a = {drt[1], G, fp4, I, rbr, rbc}, b = {dst[1], 1, 0, Is, 16, 32};
    CU(ld_cu_grouped_glu2(a, b, T, D, 0.75f));
    ld_cu_moe_part r = {drt[1] + 2 * G, G, fp4, D, rbr, rbc};
    CU(ld_cu_moe_down_post(r, I, dsg[1], sq[2], ss[2], T, Is, 16, 32, cmb, pp));
    int same = dev_same(dg[0], dg[1], (size_t)R * I) && dev_same(dsg[0], dsg[1], (size_t)T * Is) &&
               dev_same(deo[0], deo[1], (size_t)R * D) && dev_same(dout[0], dout[1], (size_t)T * 4 * D);
    char shape[80];
    snprintf(shape, sizeof shape, "%s T %d K %d, %d experts, D %d I %d Is %d", fp4 ? "fp4" : "fp8", T, K, G, D, I,
             Is);
    printf("  %-15s %-6s %-44s vs the grouped launches: %s\n", "moe_mixed", "custom", shape,
           same ? "bitwise" : "DIFFER");
    free(row_of);
    free(tok);
    dfree_all();
    CHECK_MSG(same, "moe mixed %s: not bitwise the launches it replaces", shape);
    return 0;
}

static int test_cuda_moe_mixed(void)
{
    NEED_GPU();
    const int one[6] = {1, 1, 1, 1, 1, 1}, three[5] = {3, 1, 2, 4, 2};
    for (int fp4 = 0; fp4 < 2; fp4++)
        if (moe_mixed_case(fp4, 1, 6, one, 6, 128, 64, 64) || moe_mixed_case(fp4, 4, 3, three, 5, 96, 64, 32))
            return 1;
    return 0;
}

/* ld_cu_grouped_fp8_matmul_norm against the grouped launch, then the
 * custom ld_cu_rmsnorm of each normed group's rows in place: widths n[g],
 * group 1 without a norm, the others by an F32, BF16 or F16 weight
 * (dt = g % 3); T rows (9: two row tiles); the counts left zero */
static int fanout_norm_case(int T, int K, const int *n, int G)
{
    ld_cu_mm_group tab[2][4];
    ld_cu_norm_w nw[4];
    float *dx, *dout[2][4];
    int N = 0;
    CHECK(G <= 4);
    if (rand_rows(T, K, &dx)) return 1;
    for (int g = 0; g < G; g++) {
        uint8_t *dq;
        float *ds;
        void *dw = NULL;
        ld_kdt dt = (ld_kdt)(LD_KDT_F32 + g % 3);
        N = n[g] > N ? n[g] : N;
        if (rand_weight(0, K, n[g], 16, 32, &dq, &ds) || (g != 1 && rand_plain(dt, 1, n[g], &dw))) return 1;
        nw[g] = (ld_cu_norm_w){dw, dt};
        for (int c = 0; c < 2; c++) {
            DPUT(dout[c][g], NULL, sizeof(float) * (size_t)T * n[g]);
            tab[c][g] = (ld_cu_mm_group){dq, ds, dx, dout[c][g], T, n[g], 0, 0, NULL};
        }
    }
    ld_cu_mm_group *dtab[2];
    int32_t *dsync, counts[2];
    DPUT(dtab[0], tab[0], sizeof tab[0][0] * (size_t)G);
    DPUT(dtab[1], tab[1], sizeof tab[1][0] * (size_t)G);
    DPUT(dsync, NULL, sizeof(int32_t) * 2);
    CU(ld_cu_grouped_fp8_matmul(dtab[0], G, T, K, N, 16, 32));
    for (int g = 0; g < G; g++)
        if (nw[g].w) CU(ld_cu_rmsnorm(LD_CU_CUSTOM, dout[0][g], dout[0][g], nw[g].w, nw[g].dt, n[g], 1e-6f, T));
    CU(ld_cu_grouped_fp8_matmul_norm(dtab[1], G, T, K, N, 16, 32, nw, 1e-6f, dsync));
    int same = 1;
    for (int g = 0; g < G; g++) same = same && dev_same(dout[0][g], dout[1][g], (size_t)T * n[g]);
    CU(ld_cu_d2h(counts, dsync, sizeof counts));
    char shape[80];
    snprintf(shape, sizeof shape, "%d rows of %d, widths %d..%d (%d)", T, K, n[0], n[G - 1], G);
    printf("  %-15s %-6s %-40s vs grouped, then rmsnorm: %s\n", "fanout_norm", "custom", shape,
           same ? "bitwise" : "DIFFER");
    dfree_all();
    CHECK_MSG(same, "fanout_norm %s: not bitwise the grouped launch and the norms", shape);
    CHECK_MSG(counts[0] == 0 && counts[1] == 0, "fanout_norm %s: counts left nonzero", shape);
    return 0;
}

static int test_cuda_fanout_norm(void)
{
    NEED_GPU();
    const int qkv[3] = {96, 40, 64}, two[2] = {48, 32};
    if (fanout_norm_case(1, 256, qkv, 3) || fanout_norm_case(9, 128, qkv, 3) || fanout_norm_case(3, 64, two, 2))
        return 1;
    return 0;
}

static int test_cuda_matmul_post(void)
{
    NEED_GPU();
    /* V4's wo_b in small (hc_mult 4), 9 rows over two row tiles, K off
     * the 16-byte path, one stream */
    if (matmul_post_case(1, 512, 256, 128, 128, 4) || matmul_post_case(9, 200, 96, 3, 48, 4) ||
        matmul_post_case(3, 256, 64, 16, 128, 1))
        return 1;
    return 0;
}

static int test_cuda_grouped(void)
{
    NEED_GPU();
    const int dec[6] = {1, 1, 1, 1, 1, 1}, mixed[5] = {1, 0, 3, 9, 17};
    /* V4-Flash decode (6 experts, a row each) in small; mixed rows; K not a multiple of the 16-byte path */
    for (int fp4 = 0; fp4 < 2; fp4++) {
        if (grouped_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 0)) return 1;
        if (grouped_case(fp4, mixed, 5, 256, 96, fp4 ? 1 : 128, fp4 ? 32 : 128, 0)) return 1;
        if (grouped_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 0)) return 1;
        /* the MoE's gate and up reading their tokens' rows in place (xrows) */
        if (grouped_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 1)) return 1;
        if (grouped_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 1)) return 1;
        if (glu_case(fp4, dec, 6, 512, 256, fp4 ? 1 : 128, fp4 ? 32 : 128, 0.5f)) return 1;
        if (glu_case(fp4, mixed, 5, 200, 40, fp4 ? 8 : 3, fp4 ? 40 : 48, 0.5f)) return 1;
    }
    /* wq_a and wkv (q_lora_rank 1024, head_dim 512) in small; the narrow one first; three widths, 9 rows */
    const int qkv[2] = {96, 48}, kvq[2] = {48, 96}, three[3] = {40, 16, 64};
    for (int fp4 = 0; fp4 < 2; fp4++) {
        if (fanout_case(fp4, 1, 256, qkv, 2, fp4 ? 1 : 16, fp4 ? 32 : 128)) return 1;
        if (fanout_case(fp4, 3, 256, kvq, 2, fp4 ? 16 : 16, fp4 ? 32 : 128)) return 1;
        if (fanout_case(fp4, 9, 200, three, 3, fp4 ? 8 : 3, fp4 ? 40 : 48)) return 1;
    }
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_fp8_matmul), LD_CASE(test_cuda_moe_grouped), LD_CASE(test_cuda_moe_combine),
    LD_CASE(test_cuda_matmul_fanout), LD_CASE(test_cuda_moe_mixed), LD_CASE(test_cuda_fanout_norm),
    LD_CASE(test_cuda_matmul_post), LD_CASE(test_cuda_grouped),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_moe(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_moe)};

#endif

LD_TEST_MAIN(tests)
