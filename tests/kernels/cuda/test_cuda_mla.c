/* test_cuda_mla.c - the GPU-only checks of MLA's latent attention and absorbed projections, the indexer's
 * scores and top-k, V4's indexer picks (kernels/cuda/cuda_mla.cu,
 * cuda_indexer.cu): each op's reference and custom
 * kernels against the plain-C reference, with the tolerances
 * tests/support/cuda_ds_check.h lists; skips (77) without CUDA or a device. */
#include "tests/support/cuda_ds_check.h"

#if LD_CUDA_DS_CHECKS

/* ---------------------------------------------------------------- MLA */

static int test_cuda_mla_latent(void)
{
    NEED_GPU();
    struct { int T, H, dn, dr, c, pos0, k; } sh[] = {
        {1, 4, 16, 8, 64, 0, 0},   {1, 4, 16, 8, 64, 200, 0}, {3, 4, 16, 16, 96, 70, 0},
        {1, 8, 32, 16, 128, 300, 48}, {4, 4, 16, 8, 64, 40, 32}, {2, 2, 8, 8, 64, 130, 100},
        {1, 12, 16, 16, 64, 150, 0}, {2, 16, 128, 64, 512, 300, 0}, {1, 16, 128, 64, 512, 500, 128},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dn = sh[ci].dn, dr = sh[ci].dr, c = sh[ci].c, pos0 = sh[ci].pos0,
            k = sh[ci].k, S = pos0 + T;
        size_t nq = (size_t)T * H * (dn + dr), na = (size_t)T * H * c;
        float *q = malloc(sizeof(float) * nq), *qa = malloc(sizeof(float) * na);
        float *ckv = malloc(sizeof(float) * S * c), *kpe = malloc(sizeof(float) * S * dr);
        float *ref = malloc(sizeof(float) * na), *scores = malloc(sizeof(float) * S);
        int32_t *sel = k ? malloc(sizeof(int32_t) * T * k) : NULL, *heap = malloc(sizeof(int32_t) * (k + 1));
        CHECK(q && qa && ckv && kpe && ref && scores && heap && (!k || sel));
        fill(q, nq, -1, 1);
        fill(qa, na, -0.5f, 0.5f);
        fill(ckv, (size_t)S * c, -1, 1);
        fill(kpe, (size_t)S * dr, -1, 1);
        float scale = 1.0f / sqrtf((float)(c + dr));
        if (k) { /* each query's selection: the top-k of random scores over its positions */
            for (int t = 0; t < T; t++) {
                fill(scores, (size_t)S, -1, 1);
                int m = ld_ref_ds_topk(sel + (size_t)t * k, scores, pos0 + t + 1, k, heap);
                for (int j = m; j < k; j++) sel[(size_t)t * k + j] = -1;
            }
            ld_ref_mla_latent_attention_sparse(ref, qa, q, ckv, kpe, H, dn, dr, c, pos0, scale, scores, sel, k, 0,
                                               (size_t)T * H);
        } else {
            ld_ref_mla_latent_attention(ref, qa, q, ckv, kpe, H, dn, dr, c, pos0, scale, scores, 0, (size_t)T * H);
        }
        float *dq, *dqa, *dckv, *dkpe, *dout, *dwork;
        int32_t *dsel = NULL;
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dqa, qa, sizeof(float) * na);
        DPUT(dckv, ckv, sizeof(float) * S * c);
        DPUT(dkpe, kpe, sizeof(float) * S * dr);
        DPUT(dout, NULL, sizeof(float) * na);
        if (k) DPUT(dsel, sel, sizeof(int32_t) * T * k);
        size_t wn = ld_cu_mla_latent_work(LD_CU_CUSTOM, T, H, c, pos0, dsel, k);
        DPUT(dwork, NULL, sizeof(float) * (wn ? wn : 1));
        char shape[64];
        snprintf(shape, sizeof shape, "T %d H %d c %d dr %d pos0 %d %s%d", T, H, c, dr, pos0, k ? "k " : "",
                 k ? k : S);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * na));
            CU(ld_cu_mla_latent(v, dout, dqa, dq, dckv, dkpe, T, H, dn, dr, c, pos0, scale, dsel, k, dwork, wn));
            if (compare(k ? "mla_sparse" : "mla_latent", v, shape, dout, ref, na, v ? 1e-10 : 1e-12)) return 1;
        }
        /* batch invariance: each token alone (position pos0 + t) gives its
         * row of the batch bitwise, with both kernels */
        float *batch = malloc(sizeof(float) * na), *alone = malloc(sizeof(float) * H * c);
        CHECK(batch && alone);
        for (int v = 0; v < 2 && T > 1; v++) {
            CU(ld_cu_mla_latent(v, dout, dqa, dq, dckv, dkpe, T, H, dn, dr, c, pos0, scale, dsel, k, dwork, wn));
            CU(ld_cu_d2h(batch, dout, sizeof(float) * na));
            for (int t = 0; t < T; t++) {
                CU(ld_cu_mla_latent(v, dout, dqa + (size_t)t * H * c, dq + (size_t)t * H * (dn + dr), dckv, dkpe, 1, H,
                                    dn, dr, c, pos0 + t, scale, dsel ? dsel + (size_t)t * k : NULL, k, dwork, wn));
                CU(ld_cu_d2h(alone, dout, sizeof(float) * H * c));
                CHECK_MSG(!memcmp(alone, batch + (size_t)t * H * c, sizeof(float) * H * c),
                          "mla %s %s: token %d alone differs from its row of the batch", kname(v), shape, t);
            }
            printf("  %-15s %-6s %-34s each token alone = its batch row\n", "mla", kname(v), shape);
        }
        free(batch);
        free(alone);
        free(q);
        free(qa);
        free(ckv);
        free(kpe);
        free(ref);
        free(scores);
        free(sel);
        free(heap);
        dfree_all();
    }
    return 0;
}

static int test_cuda_mla_absorb(void)
{
    NEED_GPU();
    struct { int T, H, dn, dr, dv, c; ld_kdt dt; } sh[] = {
        {1, 4, 16, 8, 16, 64, LD_KDT_F32}, {3, 4, 16, 8, 16, 96, LD_KDT_BF16}, {11, 2, 32, 16, 32, 128, LD_KDT_F16},
        {1, 16, 128, 64, 128, 512, LD_KDT_BF16},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dn = sh[ci].dn, dr = sh[ci].dr, dv = sh[ci].dv, c = sh[ci].c;
        ld_kdt dt = sh[ci].dt;
        size_t nw = (size_t)H * (dn + dv) * c, nq = (size_t)T * H * (dn + dr), na = (size_t)T * H * c,
               no = (size_t)T * H * dv;
        size_t wbytes = nw * (dt == LD_KDT_F32 ? 4 : 2);
        unsigned char *w = malloc(wbytes);
        float *q = malloc(sizeof(float) * nq), *ol = malloc(sizeof(float) * na);
        float *rq = malloc(sizeof(float) * na), *ro = malloc(sizeof(float) * no);
        CHECK(w && q && ol && rq && ro);
        for (size_t i = 0; i < nw; i++) {
            if (dt == LD_KDT_F32) {
                ((float *)w)[i] = frand(-0.5f, 0.5f);
            } else if (dt == LD_KDT_BF16) {
                float f = frand(-0.5f, 0.5f);
                uint32_t u;
                memcpy(&u, &f, 4);
                ((uint16_t *)w)[i] = (uint16_t)(u >> 16);
            } else { /* f16: sign, exponent 8..16, random mantissa */
                uint32_t r = next_u32();
                ((uint16_t *)w)[i] = (uint16_t)(((r & 1) << 15) | ((8 + (r >> 1) % 9) << 10) | ((r >> 8) & 1023));
            }
        }
        fill(q, nq, -1, 1);
        fill(ol, na, -1, 1);
        ld_ref_mla_absorb_q(rq, q, w, dt, H, dn, dr, dv, c, 0, (size_t)T * H);
        ld_ref_mla_absorb_out(ro, ol, w, dt, H, dn, dv, c, 0, (size_t)T * H);
        void *dw;
        float *dq, *dol, *da, *dout;
        DPUT(dw, w, wbytes);
        DPUT(dq, q, sizeof(float) * nq);
        DPUT(dol, ol, sizeof(float) * na);
        DPUT(da, NULL, sizeof(float) * na);
        DPUT(dout, NULL, sizeof(float) * no);
        char shape[64];
        snprintf(shape, sizeof shape, "%s T %d H %d dn %d dv %d c %d",
                 dt == LD_KDT_F32 ? "f32" : dt == LD_KDT_BF16 ? "bf16" : "f16", T, H, dn, dv, c);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_mla_absorb_q(v, da, dq, dw, dt, T, H, dn, dr, dv, c));
            if (compare("absorb_q", v, shape, da, rq, na, v ? 1e-10 : -1)) return 1;
            CU(ld_cu_mla_absorb_out(v, dout, dol, dw, dt, T, H, dn, dv, c));
            if (compare("absorb_out", v, shape, dout, ro, no, v ? 1e-10 : -1)) return 1;
        }
        free(w);
        free(q);
        free(ol);
        free(rq);
        free(ro);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- indexer */

static int test_cuda_index_scores(void)
{
    NEED_GPU();
    struct { int form, T, H, dim, n; } sh[] = {
        {0, 1, 8, 64, 300}, {0, 3, 16, 128, 129}, {1, 2, 4, 128, 257}, {1, 1, 8, 64, 64},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int form = sh[ci].form, T = sh[ci].T, H = sh[ci].H, dim = sh[ci].dim, n = sh[ci].n;
        float *q = malloc(sizeof(float) * T * H * dim), *w = malloc(sizeof(float) * T * H);
        float *keys = malloc(sizeof(float) * n * dim), *ref = malloc(sizeof(float) * T * n);
        CHECK(q && w && keys && ref);
        fill(q, (size_t)T * H * dim, -1, 1);
        fill(w, (size_t)T * H, -1, 1);
        fill(keys, (size_t)n * dim, -1, 1);
        float qscale = 1.0f / sqrtf((float)dim), wscale = 1.0f / sqrtf((float)H);
        for (int t = 0; t < T; t++) {
            const float *qt = q + (size_t)t * H * dim, *wt = w + (size_t)t * H;
            if (form == 0) ld_ref_ds_index_scores(ref + (size_t)t * n, qt, wt, keys, H, dim, n);
            else ld_ref_ds4_index_scores(ref + (size_t)t * n, qt, wt, keys, n, H, dim, qscale, wscale);
        }
        float *dq, *dw, *dk, *dout;
        DPUT(dq, q, sizeof(float) * T * H * dim);
        DPUT(dw, w, sizeof(float) * T * H);
        DPUT(dk, keys, sizeof(float) * n * dim);
        DPUT(dout, NULL, sizeof(float) * T * n);
        char shape[64];
        snprintf(shape, sizeof shape, "%s T %d H %d dim %d n %d", form ? "v4" : "v3.2", T, H, dim, n);
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(dout, sizeof(float) * T * n));
            CU(ld_cu_index_scores(v, form, dout, dq, dw, dk, T, H, dim, n, qscale, wscale));
            if (compare("index_scores", v, shape, dout, ref, (size_t)T * n, v ? 1e-10 : -1)) return 1;
        }
        free(q);
        free(w);
        free(keys);
        free(ref);
        dfree_all();
    }
    return 0;
}

/* ---------------------------------------------------------------- top-k */

static int test_cuda_topk(void)
{
    NEED_GPU();
    struct { int T, ld, n, pos0, k, ties; } sh[] = {
        {4, 1024, 1000, -1, 64, 0}, {4, 1024, 1000, -1, 64, 1}, {5, 64, 64, 30, 16, 1},
        {2, 5000, 5000, -1, 512, 1}, {3, 100, 40, -1, 64, 0},   {6, 2048, 2048, 1000, 2048, 1},
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, ld = sh[ci].ld, n = sh[ci].n, pos0 = sh[ci].pos0, k = sh[ci].k;
        float *sc = malloc(sizeof(float) * T * ld);
        int32_t *ref = malloc(sizeof(int32_t) * T * k), *ref4 = malloc(sizeof(int32_t) * k),
                *heap = malloc(sizeof(int32_t) * k);
        CHECK(sc && ref && ref4 && heap);
        for (size_t i = 0; i < (size_t)T * ld; i++) {
            float x = frand(-4, 4);
            if (sh[ci].ties) x = roundf(x * 2) / 2; /* many equal scores */
            uint32_t r = next_u32() % 64;
            if (sh[ci].ties && r == 0) x = NAN;
            if (sh[ci].ties && r == 1) x = -0.0f;
            if (sh[ci].ties && r == 2) x = 0.0f;
            if (r == 3) x = -INFINITY;
            sc[i] = x;
        }
        for (int t = 0; t < T; t++) {
            int nt = pos0 < 0 || pos0 + t + 1 > n ? n : pos0 + t + 1;
            int m = ld_ref_ds_topk(ref + (size_t)t * k, sc + (size_t)t * ld, nt, k, heap);
            int m4 = ld_ref_ds4_topk(ref4, sc + (size_t)t * ld, nt, k);
            CHECK_EQ_INT(m, m4);
            CHECK_MSG(!memcmp(ref4, ref + (size_t)t * k, (size_t)m * sizeof *ref4),
                      "the two C top-k differ (row %d)", t);
            for (int j = m; j < k; j++) ref[(size_t)t * k + j] = -1;
        }
        float *dsc;
        int32_t *didx;
        DPUT(dsc, sc, sizeof(float) * T * ld);
        DPUT(didx, NULL, sizeof(int32_t) * T * k);
        char shape[64];
        snprintf(shape, sizeof shape, "T %d n %d pos0 %d k %d%s", T, n, pos0, k, sh[ci].ties ? " ties/NaN" : "");
        for (int v = 0; v < 2; v++) {
            CU(ld_cu_memset0(didx, sizeof(int32_t) * T * k));
            CU(ld_cu_topk(v, didx, dsc, T, ld, n, pos0, k));
            if (compare_i32("topk", v, shape, didx, ref, (size_t)T * k)) return 1;
        }
        free(sc);
        free(ref);
        free(ref4);
        free(heap);
        dfree_all();
    }
    return 0;
}

/* `bytes` of device memory at d and at e bitwise equal */
static int dev_bytes_same(const void *d, const void *e, size_t bytes)
{
    unsigned char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
    int same = a && b && !ld_cu_d2h(a, d, bytes) && !ld_cu_d2h(b, e, bytes) && !memcmp(a, b, bytes);
    free(a);
    free(b);
    return same;
}

/* ld_cu_ds4_index_pick (one launch) against the custom RoPE, scores and
 * top-k it stands for: the rotated q, the scores and the picks bitwise,
 * the counts left at zero (a second launch on fresh queries picks the
 * same) */
static int test_cuda_ds4_index_pick(void)
{
    NEED_GPU();
    struct { int T, H, dim, rd, n, k, bf16; } sh[] = {
        {1, 8, 64, 32, 300, 64, 0}, {3, 4, 128, 64, 129, 16, 1}, {2, 16, 128, 64, 5000, 512, 0},
        {1, 64, 128, 64, 70, 128, 0}, /* k beyond the keys: -1 after them */
    };
    for (size_t ci = 0; ci < sizeof sh / sizeof sh[0]; ci++) {
        int T = sh[ci].T, H = sh[ci].H, dim = sh[ci].dim, rd = sh[ci].rd, n = sh[ci].n, k = sh[ci].k, pos0 = 37;
        size_t QW = (size_t)H * (size_t)dim, nq = (size_t)T * QW;
        float *q = malloc(sizeof(float) * nq), *w = malloc(sizeof(float) * T * H);
        float *keys = malloc(sizeof(float) * (size_t)n * dim), *invf = malloc(sizeof(float) * (size_t)(rd / 2));
        CHECK(q && w && keys && invf);
        fill(q, nq, -1, 1);
        fill(w, (size_t)T * H, -1, 1);
        fill(keys, (size_t)n * dim, -1, 1);
        for (int i = 0; i < rd / 2; i++) invf[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
        float *dq[3], *dsc[2], *dw, *dk, *dinv;
        int32_t *dsel[3];
        int *sync;
        for (int i = 0; i < 3; i++) DPUT(dq[i], q, sizeof(float) * nq);
        for (int i = 0; i < 2; i++) DPUT(dsc[i], NULL, sizeof(float) * T * n);
        for (int i = 0; i < 3; i++) DPUT(dsel[i], NULL, sizeof(int32_t) * T * k);
        DPUT(dw, w, sizeof(float) * T * H);
        DPUT(dk, keys, sizeof(float) * (size_t)n * dim);
        DPUT(dinv, invf, sizeof(float) * (size_t)(rd / 2));
        DPUT(sync, NULL, sizeof(int) * T);
        float qs = 1.0f / sqrtf((float)dim), ws = 1.0f / sqrtf((float)H), af = 1.25f;
        CU(ld_cu_ds_rope(LD_CU_CUSTOM, dq[0], T, QW, (size_t)(dim - rd), H, (size_t)dim, rd, dinv, af, 1, pos0, 0,
                         sh[ci].bf16));
        CU(ld_cu_index_scores(LD_CU_CUSTOM, 1, dsc[0], dq[0], dw, dk, T, H, dim, n, qs, ws));
        CU(ld_cu_topk(LD_CU_CUSTOM, dsel[0], dsc[0], T, n, n, -1, k));
        ld_cu_rot rot = {dinv, af, rd, sh[ci].bf16};
        CU(ld_cu_ds4_index_pick(dsel[1], dsc[1], dq[1], dw, dk, T, H, dim, n, k, qs, ws, &rot, pos0, sync));
        CU(ld_cu_ds4_index_pick(dsel[2], dsc[1], dq[2], dw, dk, T, H, dim, n, k, qs, ws, &rot, pos0, sync));
        size_t nsel = sizeof(int32_t) * (size_t)T * (size_t)k;
        int sq = dev_bytes_same(dq[0], dq[1], sizeof(float) * nq);
        int ss = dev_bytes_same(dsc[0], dsc[1], sizeof(float) * (size_t)T * (size_t)n);
        int sp = dev_bytes_same(dsel[0], dsel[1], nsel), s2 = dev_bytes_same(dsel[0], dsel[2], nsel);
        const char *v[2] = {"DIFFER", "same"};
        printf("  ds4_index_pick one launch T %d H %d dim %d rd %d n %d k %d%s vs the three: q %s, scores %s, "
               "picks %s, again %s\n", T, H, dim, rd, n, k, sh[ci].bf16 ? " bf16 table" : "", v[sq], v[ss], v[sp],
               v[s2]);
        CHECK_MSG(sq && ss && sp && s2, "ds4_index_pick: differs from the rope, scores and top-k launches");
        free(q);
        free(w);
        free(keys);
        free(invf);
        dfree_all();
    }
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_mla_latent), LD_CASE(test_cuda_mla_absorb), LD_CASE(test_cuda_index_scores),
    LD_CASE(test_cuda_topk), LD_CASE(test_cuda_ds4_index_pick),
};

#else /* built without CUDA, its mock or its emulator */

static int test_cuda_mla(void)
{
    NEED_GPU(); /* "built without CUDA" */
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_cuda_mla)};

#endif

LD_TEST_MAIN(tests)
