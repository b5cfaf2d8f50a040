/* test_cuda_route.c - the GPU-only checks of the routers: V3's noaux_tc and V4's sqrt-softplus and hash
 * routing, fused with the plan and tables (kernels/cuda/cuda_route.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

/* ---------------------------------------------------------------- routers */

static int test_cuda_ds_route(void)
{
    NEED_GPU();
    struct { int T, E, ng, tg, k, norm, bias; float scale; } sh[] = {
        {16, 64, 8, 4, 6, 1, 1, 2.5f}, {7, 256, 8, 4, 8, 1, 1, 2.5f}, {5, 32, 4, 2, 3, 0, 0, 1.0f},
        {33, 256, 1, 1, 8, 1, 1, 1.0f},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, E = sh[ci].E, K = sh[ci].k;
        float *lg = malloc(sizeof(float) * T * E), *bias = malloc(sizeof(float) * E);
        float *rw = malloc(sizeof(float) * T * K);
        int32_t *ri = malloc(sizeof(int32_t) * T * K);
        CHECK(lg && bias && rw && ri);
        fill(lg, (size_t)T * E, -4, 4);
        fill(bias, (size_t)E, -0.1f, 0.1f);
        const float *b = sh[ci].bias ? bias : NULL;
        ld_ref_ds_route(ri, rw, lg, b, E, sh[ci].ng, sh[ci].tg, K, sh[ci].norm, sh[ci].scale, 0, (size_t)T);
        float *dl, *db = NULL, *dw;
        int32_t *di;
        DPUT(dl, lg, sizeof(float) * T * E);
        if (b) DPUT(db, bias, sizeof(float) * E);
        DPUT(dw, NULL, sizeof(float) * T * K);
        DPUT(di, NULL, sizeof(int32_t) * T * K);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d E %d groups %d/%d k %d%s", T, E, sh[ci].tg, sh[ci].ng, K,
                 b ? " bias" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_ds_route(v, di, dw, dl, db, T, E, sh[ci].ng, sh[ci].tg, K, sh[ci].norm, sh[ci].scale));
            if (compare_i32("ds_route", v, shape, di, ri, (size_t)T * K)) return 1;
            if (compare("ds_route w", v, shape, dw, rw, (size_t)T * K, 1e-12)) return 1;
        }
        free(lg);
        free(bias);
        free(rw);
        free(ri);
        dfree_all();
    }
    return 0;
}

/* the tables' fields (their padding bytes are not theirs to compare); the
 * picked rows xrows as offsets into each one's rows array ra, rb */
static int same_tables(const ld_cu_mm_group *a, const ld_cu_mm_group *b, int n, const int32_t *ra,
                       const int32_t *rb)
{
    for (int i = 0; i < n; i++) {
        if (a[i].q != b[i].q || a[i].scale != b[i].scale || a[i].x != b[i].x || a[i].out != b[i].out ||
            a[i].rows != b[i].rows || a[i].n != b[i].n || a[i].ldx != b[i].ldx || a[i].ldo != b[i].ldo)
            return 0;
        if (!a[i].xrows != !b[i].xrows || (a[i].xrows && a[i].xrows - ra != b[i].xrows - rb)) return 0;
    }
    return 1;
}

/* a router for route_fused_same: logits = x [T][k] times w [E][k] of
 * type dt (F32 or BF16, as the host bytes), on the device */
typedef struct router_case {
    ld_kdt dt;
    int k;
    const float *x;
    const void *w;
    float *logits[2]; /* the matmul's, the fused launch's: [T][E] */
    int *sync;
} router_case;

/* ld_cu_ds4_route_plan_tables (one launch) against the custom route,
 * plan and tables it stands for: the route, the plan and the tables
 * equal (the weights bitwise); experts' weights at made-up addresses (the
 * tables copy them, nothing reads them).  With rc: the router's matmul
 * (ld_cu_matmul custom) then those three launches against
 * ld_cu_ds4_router_route_plan_tables, the logits bitwise too. */
static int route_fused_same(const char *shape, const float *dl, const float *db, const int32_t *dtab,
                            const int32_t *dtok, int T, int E, int K, float scale, int pick, const router_case *rc)
{
    int R = T * K, G = E < R ? E : R, D = 64, I = 32;
    ld_cu_moe_w *mw = malloc(sizeof *mw * E);
    CHECK(mw);
    for (int e = 0; e < E; e++) {
        uintptr_t a = (uintptr_t)0x10000 + (uintptr_t)e * 0x100;
        mw[e] = (ld_cu_moe_w){(const uint8_t *)a, (const uint8_t *)(a + 16), (const uint8_t *)(a + 32),
                              (const float *)(a + 48), (const float *)(a + 64), (const float *)(a + 80)};
    }
    ld_cu_moe_w *dmw;
    float *dw[2], *xe, *g, *u, *eo;
    int32_t *di[2], *doff[2], *drows[2], *drow_of[2];
    ld_cu_mm_group *dt[2];
    DPUT(dmw, mw, sizeof *mw * E);
    DPUT(xe, NULL, sizeof(float) * R * D);
    DPUT(g, NULL, sizeof(float) * R * I);
    DPUT(u, NULL, sizeof(float) * R * I);
    DPUT(eo, NULL, sizeof(float) * R * D);
    for (int i = 0; i < 2; i++) {
        DPUT(dw[i], NULL, sizeof(float) * R);
        DPUT(di[i], NULL, sizeof(int32_t) * R);
        DPUT(doff[i], NULL, sizeof(int32_t) * (E + 1));
        DPUT(drows[i], NULL, sizeof(int32_t) * R);
        DPUT(drow_of[i], NULL, sizeof(int32_t) * R);
        DPUT(dt[i], NULL, sizeof(ld_cu_mm_group) * 3 * G);
    }
    if (rc) {
        CU(ld_cu_matmul(LD_CU_CUSTOM, rc->logits[0], rc->x, rc->w, rc->dt, NULL, LD_KDT_F32, T, rc->k, E, 0));
        dl = rc->logits[0];
    }
    CU(ld_cu_ds4_route(LD_CU_CUSTOM, di[0], dw[0], dl, db, dtab, dtok, T, E, K, scale));
    CU(ld_cu_moe_plan(LD_CU_CUSTOM, doff[0], drows[0], drow_of[0], di[0], T, K, E));
    CU(ld_cu_moe_tables(dt[0], G, doff[0], dmw, E, xe, pick ? drows[0] : NULL, g, u, eo, D, I));
    if (rc) {
        ld_cu_router r = {rc->logits[1], rc->x, rc->w, rc->dt, rc->k, rc->sync};
        CU(ld_cu_ds4_router_route_plan_tables(&r, di[1], dw[1], db, dtab, dtok, T, E, K, scale, doff[1], drows[1],
                                              drow_of[1], dt[1], G, dmw, xe, pick, g, u, eo, D, I));
    } else {
        CU(ld_cu_ds4_route_plan_tables(di[1], dw[1], dl, db, dtab, dtok, T, E, K, scale, doff[1], drows[1],
                                       drow_of[1], dt[1], G, dmw, xe, pick, g, u, eo, D, I));
    }
    int32_t *hi[2][4];
    float *hw[2];
    ld_cu_mm_group *ht[2];
    for (int i = 0; i < 2; i++) {
        hi[i][0] = malloc(sizeof(int32_t) * R);
        hi[i][1] = malloc(sizeof(int32_t) * (E + 1));
        hi[i][2] = malloc(sizeof(int32_t) * R);
        hi[i][3] = malloc(sizeof(int32_t) * R);
        hw[i] = malloc(sizeof(float) * R);
        ht[i] = malloc(sizeof(ld_cu_mm_group) * 3 * G);
        CHECK(hi[i][0] && hi[i][1] && hi[i][2] && hi[i][3] && hw[i] && ht[i]);
        CU(ld_cu_d2h(hi[i][0], di[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hi[i][1], doff[i], sizeof(int32_t) * (E + 1)));
        CU(ld_cu_d2h(hi[i][2], drows[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hi[i][3], drow_of[i], sizeof(int32_t) * R));
        CU(ld_cu_d2h(hw[i], dw[i], sizeof(float) * R));
        CU(ld_cu_d2h(ht[i], dt[i], sizeof(ld_cu_mm_group) * 3 * G));
    }
    int same = !memcmp(hi[0][0], hi[1][0], sizeof(int32_t) * R) &&
               !memcmp(hi[0][1], hi[1][1], sizeof(int32_t) * (E + 1)) &&
               !memcmp(hi[0][2], hi[1][2], sizeof(int32_t) * R) && !memcmp(hi[0][3], hi[1][3], sizeof(int32_t) * R) &&
               !memcmp(hw[0], hw[1], sizeof(float) * R) && same_tables(ht[0], ht[1], 3 * G, drows[0], drows[1]);
    for (int k = 0; same && k < 3 * G; k++) /* picked: the gates and ups read x by the plan's rows, the downs not */
        same = ht[1][k].rows == 0 || !ht[1][k].xrows == (!pick || k >= 2 * G);
    if (rc) { /* the logits, and the count left at zero for the next launch */
        float *l[2] = {malloc(sizeof(float) * T * E), malloc(sizeof(float) * T * E)};
        int left = -1;
        CHECK(l[0] && l[1]);
        for (int i = 0; i < 2; i++) CU(ld_cu_d2h(l[i], rc->logits[i], sizeof(float) * T * E));
        CU(ld_cu_d2h(&left, rc->sync, sizeof left));
        same = same && !memcmp(l[0], l[1], sizeof(float) * T * E) && left == 0;
        free(l[0]);
        free(l[1]);
    }
    printf("  ds4_%s+plan+tables one launch %-26s%s%s vs the %s: %s\n", rc ? "router+route" : "route", shape,
           pick ? " picked" : "", rc ? (rc->dt == LD_KDT_BF16 ? " bf16" : " f32") : "",
           rc ? "matmul and three" : "three", same ? "the same" : "DIFFER");
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 4; j++) free(hi[i][j]);
        free(hw[i]);
        free(ht[i]);
    }
    free(mw);
    CHECK_MSG(same, "ds4_route_plan_tables %s: differs from the three launches", shape);
    return 0;
}

/* the router fused with the route (route_fused_same with a router): F32
 * and BF16 weights, a hidden width of whole 16-byte chunks (the matmul's
 * chunked path) and one that is not (its element path) */
static int router_cases(const char *shape, const float *db, const int32_t *dtab, const int32_t *dtok, int T, int E,
                        int K, float scale)
{
    static const int widths[] = {96, 70};
    for (int wi = 0; wi < 2; wi++)
        for (int bf = 0; bf < 2; bf++) {
            int k = widths[wi];
            size_t nw = (size_t)E * (size_t)k;
            float *x = malloc(sizeof(float) * (size_t)T * (size_t)k), *wf = malloc(sizeof(float) * nw);
            uint16_t *wb = malloc(sizeof(uint16_t) * nw);
            CHECK(x && wf && wb);
            fill(x, (size_t)T * (size_t)k, -1, 1);
            fill(wf, nw, -0.5f, 0.5f);
            for (size_t i = 0; i < nw; i++) { /* bf16: the top half of the float */
                uint32_t u;
                memcpy(&u, &wf[i], sizeof u);
                wb[i] = (uint16_t)(u >> 16);
            }
            router_case rc = {bf ? LD_KDT_BF16 : LD_KDT_F32, k, NULL, NULL, {NULL, NULL}, NULL};
            float *dx;
            void *dw;
            DPUT(dx, x, sizeof(float) * (size_t)T * (size_t)k);
            if (bf) DPUT(dw, wb, sizeof(uint16_t) * nw);
            else DPUT(dw, wf, sizeof(float) * nw);
            DPUT(rc.logits[0], NULL, sizeof(float) * (size_t)T * (size_t)E);
            DPUT(rc.logits[1], NULL, sizeof(float) * (size_t)T * (size_t)E);
            DPUT(rc.sync, NULL, sizeof(int)); /* zero */
            rc.x = dx;
            rc.w = dw;
            char sh[96];
            snprintf(sh, sizeof sh, "%s x%d", shape, k);
            for (int pick = 0; pick < 2; pick++)
                if (route_fused_same(sh, NULL, db, dtab, dtok, T, E, K, scale, pick, &rc)) return 1;
            free(x);
            free(wf);
            free(wb);
        }
    return 0;
}

static int test_cuda_ds4_route(void)
{
    NEED_GPU();
    struct { int T, E, K, hash, bias; float scale; } sh[] = {
        {16, 256, 6, 0, 1, 1.5f}, {9, 64, 8, 0, 0, 1.0f}, {12, 256, 6, 1, 0, 1.5f}, {40, 128, 4, 0, 1, 2.0f},
    };
    const int vocab = 50;
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, E = sh[ci].E, K = sh[ci].K;
        float *lg = malloc(sizeof(float) * T * E), *bias = malloc(sizeof(float) * E);
        float *rw = malloc(sizeof(float) * T * K);
        int32_t *ri = malloc(sizeof(int32_t) * T * K), *tab = malloc(sizeof(int32_t) * vocab * K),
                *tok = malloc(sizeof(int32_t) * T);
        CHECK(lg && bias && rw && ri && tab && tok);
        fill(lg, (size_t)T * E, -6, 6);
        fill(bias, (size_t)E, -0.2f, 0.2f);
        for (int r = 0; r < vocab; r++) /* K distinct experts per token id, in table order */
            for (int j = 0; j < K; j++) {
                int e, dup;
                do {
                    e = (int)(next_u32() % (uint32_t)E);
                    dup = 0;
                    for (int i = 0; i < j; i++) dup |= tab[r * K + i] == e;
                } while (dup);
                tab[r * K + j] = e;
            }
        for (int t = 0; t < T; t++) tok[t] = (int32_t)(next_u32() % (uint32_t)vocab);
        const float *b = sh[ci].bias ? bias : NULL;
        for (int t = 0; t < T; t++)
            ld_ref_ds4_route(ri + (size_t)t * K, rw + (size_t)t * K, lg + (size_t)t * E, b,
                             sh[ci].hash ? tab + (size_t)tok[t] * K : NULL, E, K, sh[ci].scale);
        float *dl, *db = NULL, *dw;
        int32_t *di, *dtab = NULL, *dtok = NULL;
        DPUT(dl, lg, sizeof(float) * T * E);
        if (b) DPUT(db, bias, sizeof(float) * E);
        if (sh[ci].hash) {
            DPUT(dtab, tab, sizeof(int32_t) * vocab * K);
            DPUT(dtok, tok, sizeof(int32_t) * T);
        }
        DPUT(dw, NULL, sizeof(float) * T * K);
        DPUT(di, NULL, sizeof(int32_t) * T * K);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d E %d K %d%s%s", T, E, K, sh[ci].hash ? " hash" : "", b ? " bias" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_ds4_route(v, di, dw, dl, db, dtab, dtok, T, E, K, sh[ci].scale));
            if (compare_i32("ds4_route", v, shape, di, ri, (size_t)T * K)) return 1;
            if (compare("ds4_route w", v, shape, dw, rw, (size_t)T * K, 1e-12)) return 1;
        }
        for (int pick = 0; pick < 2 && T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E; pick++)
            if (route_fused_same(shape, dl, db, dtab, dtok, T, E, K, sh[ci].scale, pick, NULL)) return 1;
        if (T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E && router_cases(shape, db, dtab, dtok, T, E, K,
                                                                               sh[ci].scale))
            return 1;
        free(lg);
        free(bias);
        free(rw);
        free(ri);
        free(tab);
        free(tok);
        dfree_all();
    }
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_ds_route), LD_CASE(test_cuda_ds4_route),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_route(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_route)};

#endif

LD_TEST_MAIN(tests)
