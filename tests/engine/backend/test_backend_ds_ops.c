/* test_backend_ds_ops.c - the DeepSeek and DeepSeek-V4 entries of the op table
 * (backend.h) on every backend of this build against the plain-C kernels
 * they stand for, and their refusals; tests/support/backend_ops_check.h says
 * how.
 *
 *   test_backend_ds_ops [case-filter] */
#include "tests/support/backend_ops_check.h"

/* ---------------------------------------------------------------- DeepSeek */

/* The DeepSeek ops (mla_latent, mla_absorb_q / _out, ds_route, index_topk)
 * on random inputs
 * against the plain-C kernels they stand for (kernels/ref/ref_ds.h,
 * ref_ds_variants.h), called directly: the CPU backends bitwise, whatever
 * their thread count; CUDA to a tolerance (its expf; the custom kernels'
 * orders), the chosen experts and positions exactly.  Every case also runs
 * its rows one call each, which must give the batch's bits (backend.h's
 * contract), and the guards after every output stay as written. */

typedef struct mla_case {
    int T, pos0, H, dn, dr, c, k, split; /* k 0: dense */
} mla_case;

static const mla_case mla_cases[] = {
    {1, 0, 4, 16, 8, 32, 0, 0},      {1, 100, 4, 16, 8, 32, 0, 0},   {1, 100, 4, 16, 8, 32, 0, 64},
    {7, 60, 3, 8, 4, 20, 0, 64},     {5, 70, 4, 16, 8, 32, 16, 0},   {5, 70, 4, 16, 8, 32, 16, 64},
    {9, 0, 2, 8, 8, 24, 4, 0},       {3, 150, 5, 8, 4, 36, 80, 64},  {2, 130, 16, 128, 64, 512, 0, 64},
    {2, 130, 16, 128, 64, 512, 0, 0}, {1, 200, 16, 128, 64, 512, 64, 0},
};

typedef struct route_case {
    int T, E, n_group, topk_group, top_k, norm, bias;
    float scale;
} route_case;

static const route_case route_cases[] = {
    {3, 64, 8, 4, 8, 1, 1, 2.5f}, {1, 256, 8, 4, 8, 1, 1, 2.5f}, {5, 16, 1, 1, 4, 0, 0, 1.0f},
    {4, 8, 4, 2, 3, 1, 1, 1.5f},  {7, 160, 8, 3, 6, 0, 1, 16.0f},
};

typedef struct index_case {
    int T, pos0, H, dim, k;
} index_case;

static const index_case index_cases[] = {
    {1, 40, 4, 32, 8}, {6, 0, 4, 32, 8}, {3, 90, 8, 64, 16}, {1, 200, 64, 128, 64}, {4, 10, 2, 16, 64},
};

/* positions sel [T][k] for queries at pos0 + t: min(k, pos0 + t + 1) of
 * the visible ones, ascending (selection sampling), then -1 */
static void rand_sel(int32_t *sel, int T, int pos0, int k)
{
    for (int t = 0; t < T; t++) {
        int vis = pos0 + t + 1, want = k < vis ? k : vis, j = 0;
        int32_t *row = sel + (size_t)t * (size_t)k;
        for (int p = 0; p < vis && j < want; p++)
            if ((int)(next_u32() % (uint32_t)(vis - p)) < want - j) row[j++] = p;
        for (; j < k; j++) row[j] = -1;
    }
}

typedef struct mla_in {
    float *q_abs, *q, *ckv, *kpe;
    int32_t *sel;
} mla_in;

static int mla_make(const mla_case *c, mla_in *in)
{
    size_t rows = (size_t)c->T * (size_t)c->H, S = (size_t)(c->pos0 + c->T);
    in->q_abs = malloc(rows * (size_t)c->c * sizeof(float));
    in->q = malloc(rows * (size_t)(c->dn + c->dr) * sizeof(float));
    in->ckv = malloc(S * (size_t)c->c * sizeof(float));
    in->kpe = malloc(S * (size_t)c->dr * sizeof(float));
    in->sel = c->k ? malloc((size_t)c->T * (size_t)c->k * sizeof(int32_t)) : NULL;
    if (!in->q_abs || !in->q || !in->ckv || !in->kpe || (c->k && !in->sel)) return 1;
    fill(in->q_abs, rows * (size_t)c->c, 1.0f);
    fill(in->q, rows * (size_t)(c->dn + c->dr), 1.0f);
    fill(in->ckv, S * (size_t)c->c, 1.0f);
    fill(in->kpe, S * (size_t)c->dr, 1.0f);
    if (c->k) rand_sel(in->sel, c->T, c->pos0, c->k);
    return 0;
}

static void mla_free(mla_in *in)
{
    free(in->q_abs);
    free(in->q);
    free(in->ckv);
    free(in->kpe);
    free(in->sel);
}

static float mla_scale(const mla_case *c)
{
    return 1.0f / sqrtf((float)(c->dn + c->dr));
}

/* the kernel the session's host path runs */
static int mla_expect(const mla_case *c, const mla_in *in, float *out)
{
    size_t S = (size_t)(c->pos0 + c->T), items = (size_t)c->T * (size_t)c->H;
    float *scores = malloc(S * sizeof *scores), *part = malloc((size_t)c->c * sizeof *part);
    if (!scores || !part) return 1;
    float sc = mla_scale(c);
    if (c->split)
        ld_dsv_mla_latent_attention_splitk(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c,
                                           c->pos0, sc, scores, part, in->sel, c->k, c->split, 0, items);
    else if (c->k)
        ld_ref_mla_latent_attention_sparse(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c,
                                           c->pos0, sc, scores, in->sel, c->k, 0, items);
    else
        ld_ref_mla_latent_attention(out, in->q_abs, in->q, in->ckv, in->kpe, c->H, c->dn, c->dr, c->c, c->pos0, sc,
                                    scores, 0, items);
    free(scores);
    free(part);
    return 0;
}

/* rows [t0, t0 + T) of the case by the op (the cache: all pos0 + t0 + T
 * positions), into out [T][H][c] */
static int mla_run(ld_backend *be, const mla_case *c, const mla_in *in, int t0, int T, float *out)
{
    const ld_backend_ops *o = be->ops;
    size_t rows = (size_t)T * (size_t)c->H, S = (size_t)(c->pos0 + t0 + T), QW = (size_t)c->H * (size_t)(c->dn + c->dr);
    size_t lat = rows * (size_t)c->c;
    ld_buf *bo = upload(be, NULL, lat), *ba = upload(be, in->q_abs + (size_t)t0 * (size_t)c->H * (size_t)c->c, lat);
    ld_buf *bq = upload(be, in->q + (size_t)t0 * QW, (size_t)T * QW), *bc = upload(be, in->ckv, S * (size_t)c->c);
    ld_buf *bp = upload(be, in->kpe, S * (size_t)c->dr);
    ld_error err = {0};
    int bad = !bo || !ba || !bq || !bc || !bp;
    if (!bad && o->mla_latent(be, bo, ba, bq, bc, bp, T, c->pos0 + t0, c->H, c->dn, c->dr, c->c, mla_scale(c),
                              in->sel ? in->sel + (size_t)t0 * (size_t)c->k : NULL, c->k, c->split, &err) != LD_OK) {
        fprintf(stderr, "  mla_latent: %s\n", err.msg);
        bad = 1;
    }
    float *h = bad ? NULL : download(be, bo, lat);
    if (h) memcpy(out, h, lat * sizeof *out);
    free(h);
    ld_buf *bs[] = {bo, ba, bq, bc, bp};
    for (int i = 0; i < 5; i++)
        if (bs[i]) o->buf_free(be, bs[i]);
    return bad || !h;
}

/* a's n values equal r's bitwise (exact) or to nmse <= tol; prints the line */
static int agree(const char *be_name, const char *what, const float *a, const float *r, size_t n, int exact, double tol)
{
    double mx, e = nmse(a, r, n, &mx);
    int ok = exact ? memcmp(a, r, n * sizeof *a) == 0 : e >= 0 && e <= tol;
    printf("  %-12s %-62s %10.3g %10.3g %8s%s\n", be_name, what, e, mx, exact ? "bitwise" : "tol", ok ? "" : "  FAIL");
    return !ok;
}

static int check_mla(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof mla_cases / sizeof mla_cases[0]; i++) {
        const mla_case *c = &mla_cases[i];
        rng = 0x5EED0000u + i;
        mla_in in = {0};
        size_t n = (size_t)c->T * (size_t)c->H * (size_t)c->c;
        float *r = malloc(n * sizeof *r), *a = malloc(n * sizeof *a), *one = malloc(n * sizeof *one);
        if (mla_make(c, &in) || !r || !a || !one || mla_expect(c, &in, r) || mla_run(be, c, &in, 0, c->T, a)) {
            bad++;
        } else {
            char what[160];
            snprintf(what, sizeof what, "mla_latent T=%d pos0=%d H=%d dn=%d dr=%d c=%d k=%d split=%d", c->T, c->pos0,
                     c->H, c->dn, c->dr, c->c, c->k, c->split);
            bad += agree(be_name, what, a, r, n, exact, 1e-10);
            size_t per = (size_t)c->H * (size_t)c->c;
            for (int t = 0; t < c->T; t++) bad += mla_run(be, c, &in, t, 1, one + (size_t)t * per);
            if (memcmp(one, a, n * sizeof *a)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        mla_free(&in);
        free(r);
        free(a);
        free(one);
    }
    return bad;
}

typedef struct absorb_case {
    int T, H, dn, dr, dv, c, kind; /* kind: kinds[] 0..2 (f32, f16, bf16) */
} absorb_case;

static const absorb_case absorb_cases[] = {
    {1, 4, 16, 8, 16, 32, 0}, {5, 3, 8, 4, 12, 20, 1}, {9, 2, 8, 8, 8, 24, 2}, {2, 16, 128, 64, 128, 512, 2},
};

/* the case's products by the op into qa [T][H][c] and out [T][H][dv]
 * (from o_lat), rows [t0, t0 + T) */
static int absorb_run(ld_backend *be, const absorb_case *c, const void *wd, const float *q, const float *ol, int t0,
                      int T, float *qa, float *out)
{
    const ld_backend_ops *o = be->ops;
    size_t rows = (size_t)T * (size_t)c->H, hq = (size_t)c->H * (size_t)(c->dn + c->dr);
    size_t hl = (size_t)c->H * (size_t)c->c;
    ld_weight *w = load_weight(be, &kinds[c->kind], wd, c->H * (c->dn + c->dv), c->c, 0);
    ld_buf *bq = upload(be, q + (size_t)t0 * hq, (size_t)T * hq);
    ld_buf *bl = upload(be, ol + (size_t)t0 * hl, (size_t)T * hl);
    ld_buf *ba = upload(be, NULL, rows * (size_t)c->c), *bo = upload(be, NULL, rows * (size_t)c->dv);
    ld_error err = {0};
    int bad = !w || !bq || !bl || !ba || !bo;
    if (!bad && (o->mla_absorb_q(be, ba, bq, w, T, c->H, c->dn, c->dr, c->dv, c->c, &err) != LD_OK ||
                 o->mla_absorb_out(be, bo, bl, w, T, c->H, c->dn, c->dv, c->c, &err) != LD_OK)) {
        fprintf(stderr, "  mla absorb: %s\n", err.msg);
        bad = 1;
    }
    float *ha = bad ? NULL : download(be, ba, rows * (size_t)c->c);
    float *ho = bad ? NULL : download(be, bo, rows * (size_t)c->dv);
    if (ha && ho) {
        memcpy(qa, ha, rows * (size_t)c->c * sizeof *qa);
        memcpy(out, ho, rows * (size_t)c->dv * sizeof *out);
    }
    bad |= !ha || !ho;
    free(ha);
    free(ho);
    ld_buf *bs[] = {bq, bl, ba, bo};
    for (int i = 0; i < 4; i++)
        if (bs[i]) o->buf_free(be, bs[i]);
    if (w) o->weight_free(be, w);
    return bad;
}

static int check_absorb(ld_backend *be, const char *be_name, int exact)
{
    static const ld_kdt kdt[] = {LD_KDT_F32, LD_KDT_F16, LD_KDT_BF16};
    int bad = 0;
    for (size_t i = 0; i < sizeof absorb_cases / sizeof absorb_cases[0]; i++) {
        const absorb_case *c = &absorb_cases[i];
        rng = 0xAB50000u + i;
        size_t rows = (size_t)c->T * (size_t)c->H, nq = rows * (size_t)c->c, no = rows * (size_t)c->dv;
        void *wd = rand_weights(&kinds[c->kind], c->H * (c->dn + c->dv), c->c);
        float *q = malloc(rows * (size_t)(c->dn + c->dr) * sizeof *q), *ol = malloc(nq * sizeof *ol);
        float *rq = malloc(nq * sizeof *rq), *aq = malloc(nq * sizeof *aq), *oq = malloc(nq * sizeof *oq);
        float *ro = malloc(no * sizeof *ro), *ao = malloc(no * sizeof *ao), *oo = malloc(no * sizeof *oo);
        if (!wd || !q || !ol || !rq || !aq || !oq || !ro || !ao || !oo) return 1;
        fill(q, rows * (size_t)(c->dn + c->dr), 1.0f);
        fill(ol, nq, 1.0f);
        ld_ref_mla_absorb_q(rq, q, wd, kdt[c->kind], c->H, c->dn, c->dr, c->dv, c->c, 0, rows);
        ld_ref_mla_absorb_out(ro, ol, wd, kdt[c->kind], c->H, c->dn, c->dv, c->c, 0, rows);
        char what[120], wq[140], wo[140];
        snprintf(what, sizeof what, "T=%d H=%d dn=%d dr=%d dv=%d c=%d %s", c->T, c->H, c->dn, c->dr, c->dv, c->c,
                 kinds[c->kind].name);
        snprintf(wq, sizeof wq, "mla_absorb_q %s", what);
        snprintf(wo, sizeof wo, "mla_absorb_out %s", what);
        if (absorb_run(be, c, wd, q, ol, 0, c->T, aq, ao)) {
            bad++;
        } else {
            bad += agree(be_name, wq, aq, rq, nq, exact, 1e-10) + agree(be_name, wo, ao, ro, no, exact, 1e-10);
            size_t pq = (size_t)c->H * (size_t)c->c, po = (size_t)c->H * (size_t)c->dv;
            for (int t = 0; t < c->T; t++)
                bad += absorb_run(be, c, wd, q, ol, t, 1, oq + (size_t)t * pq, oo + (size_t)t * po);
            if (memcmp(oq, aq, nq * sizeof *oq) || memcmp(oo, ao, no * sizeof *oo)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(wd);
        free(q);
        free(ol);
        free(rq);
        free(aq);
        free(oq);
        free(ro);
        free(ao);
        free(oo);
    }
    return bad;
}

/* rows [t0, t0 + T) of logits [.][E] routed by the op */
static int route_run(ld_backend *be, const route_case *c, const float *logits, const float *bias, int t0, int T,
                     int32_t *idx, float *w)
{
    ld_buf *bl = upload(be, logits + (size_t)t0 * (size_t)c->E, (size_t)T * (size_t)c->E);
    ld_error err = {0};
    int bad = !bl || be->ops->ds_route(be, idx, w, bl, c->bias ? bias : NULL, T, c->E, c->n_group, c->topk_group,
                                       c->top_k, c->norm, c->scale, &err) != LD_OK;
    if (bad && bl) fprintf(stderr, "  ds_route: %s\n", err.msg);
    if (bl) be->ops->buf_free(be, bl);
    return bad;
}

static int check_route(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof route_cases / sizeof route_cases[0]; i++) {
        const route_case *c = &route_cases[i];
        rng = 0x7007E000u + i;
        size_t nl = (size_t)c->T * (size_t)c->E, nk = (size_t)c->T * (size_t)c->top_k;
        float *lg = malloc(nl * sizeof *lg), *bias = malloc((size_t)c->E * sizeof *bias);
        float *rw = malloc(nk * sizeof *rw), *aw = malloc(nk * sizeof *aw), *ow = malloc(nk * sizeof *ow);
        int32_t *ri = malloc(nk * sizeof *ri), *ai = malloc(nk * sizeof *ai), *oi = malloc(nk * sizeof *oi);
        if (!lg || !bias || !rw || !aw || !ow || !ri || !ai || !oi) return 1;
        fill(lg, nl, 4.0f);
        fill(bias, (size_t)c->E, 0.5f);
        for (int t = 0; t < c->T; t++) /* a tie in every row: the lower id first */
            lg[(size_t)t * (size_t)c->E + (size_t)c->E - 1] = lg[(size_t)t * (size_t)c->E + 1];
        ld_ref_ds_route(ri, rw, lg, c->bias ? bias : NULL, c->E, c->n_group, c->topk_group, c->top_k, c->norm,
                        c->scale, 0, (size_t)c->T);
        if (route_run(be, c, lg, bias, 0, c->T, ai, aw)) {
            bad++;
        } else {
            char what[160];
            snprintf(what, sizeof what, "ds_route T=%d E=%d groups=%d/%d top_k=%d norm=%d bias=%d", c->T, c->E,
                     c->topk_group, c->n_group, c->top_k, c->norm, c->bias);
            int ids = memcmp(ai, ri, nk * sizeof *ai) == 0;
            if (!ids) printf("  %-12s %-62s  FAIL (other experts)\n", be_name, what);
            bad += !ids + agree(be_name, what, aw, rw, nk, exact, 1e-12);
            for (int t = 0; t < c->T; t++)
                bad += route_run(be, c, lg, bias, t, 1, oi + (size_t)t * (size_t)c->top_k,
                                 ow + (size_t)t * (size_t)c->top_k);
            if (memcmp(oi, ai, nk * sizeof *oi) || memcmp(ow, aw, nk * sizeof *ow)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(lg);
        free(bias);
        free(rw);
        free(aw);
        free(ow);
        free(ri);
        free(ai);
        free(oi);
    }
    return bad;
}

/* queries [t0, t0 + T) of the case by the op over keys [pos0 + t0 + T] */
static int index_run(ld_backend *be, const index_case *c, const float *q, const float *w, const float *keys, int t0,
                     int T, int32_t *sel)
{
    size_t QW = (size_t)c->H * (size_t)c->dim, S = (size_t)(c->pos0 + t0 + T);
    ld_buf *bq = upload(be, q + (size_t)t0 * QW, (size_t)T * QW);
    ld_buf *bw = upload(be, w + (size_t)t0 * (size_t)c->H, (size_t)T * (size_t)c->H);
    ld_buf *bkeys = upload(be, keys, S * (size_t)c->dim);
    ld_error err = {0};
    int bad = !bq || !bw || !bkeys ||
              be->ops->index_topk(be, sel, bq, bw, bkeys, T, c->pos0 + t0, c->H, c->dim, c->k, &err) != LD_OK;
    if (bad && bq && bw && bkeys) fprintf(stderr, "  index_topk: %s\n", err.msg);
    ld_buf *bs[] = {bq, bw, bkeys};
    for (int i = 0; i < 3; i++)
        if (bs[i]) be->ops->buf_free(be, bs[i]);
    return bad;
}

static int check_index(ld_backend *be, const char *be_name)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof index_cases / sizeof index_cases[0]; i++) {
        const index_case *c = &index_cases[i];
        rng = 0x1D3E0000u + i;
        size_t QW = (size_t)c->H * (size_t)c->dim, S = (size_t)(c->pos0 + c->T), ns = (size_t)c->T * (size_t)c->k;
        float *q = malloc((size_t)c->T * QW * sizeof *q), *w = malloc((size_t)c->T * (size_t)c->H * sizeof *w);
        float *keys = malloc(S * (size_t)c->dim * sizeof *keys), *scores = malloc(S * sizeof *scores);
        int32_t *r = malloc(ns * sizeof *r), *a = malloc(ns * sizeof *a), *one = malloc(ns * sizeof *one);
        int32_t *heap = malloc((size_t)c->k * sizeof *heap);
        if (!q || !w || !keys || !scores || !r || !a || !one || !heap) return 1;
        fill(q, (size_t)c->T * QW, 1.0f);
        fill(w, (size_t)c->T * (size_t)c->H, 1.0f);
        fill(keys, S * (size_t)c->dim, 1.0f);
        for (int t = 0; t < c->T; t++) {
            int vis = c->pos0 + t + 1;
            int32_t *row = r + (size_t)t * (size_t)c->k;
            ld_ref_ds_index_scores(scores, q + (size_t)t * QW, w + (size_t)t * (size_t)c->H, keys, c->H, c->dim, vis);
            for (int j = ld_ref_ds_topk(row, scores, vis, c->k, heap); j < c->k; j++) row[j] = -1;
        }
        char what[160];
        snprintf(what, sizeof what, "index_topk T=%d pos0=%d H=%d dim=%d k=%d", c->T, c->pos0, c->H, c->dim, c->k);
        if (index_run(be, c, q, w, keys, 0, c->T, a)) {
            bad++;
        } else {
            int ok = memcmp(a, r, ns * sizeof *a) == 0;
            printf("  %-12s %-62s %10s %10s %8s%s\n", be_name, what, "-", "-", "exact", ok ? "" : "  FAIL");
            bad += !ok;
            for (int t = 0; t < c->T; t++) bad += index_run(be, c, q, w, keys, t, 1, one + (size_t)t * (size_t)c->k);
            if (memcmp(one, a, ns * sizeof *a)) {
                printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
                bad++;
            }
        }
        free(q);
        free(w);
        free(keys);
        free(scores);
        free(r);
        free(a);
        free(one);
        free(heap);
    }
    return bad;
}

/* every DeepSeek op of backend `be` (all three are there on every backend
 * of this build) */
static int check_ds_ops(ld_backend *be, const char *be_name, int exact)
{
    const ld_backend_ops *o = be->ops;
    CHECK_MSG(o->mla_latent && o->mla_absorb_q && o->mla_absorb_out && o->ds_route && o->index_topk,
              "%s lacks a DeepSeek op", be_name);
    int bad = check_mla(be, be_name, exact) + check_absorb(be, be_name, exact) + check_route(be, be_name, exact) +
              check_index(be, be_name);
    CHECK_MSG(!bad, "%d DeepSeek cases failed on %s", bad, be_name);
    return 0;
}

/* a check of some DeepSeek entries on one backend (exact: bitwise the
 * plain-C kernels, else within the CUDA tolerances) */
typedef int (*ds_check_fn)(ld_backend *be, const char *be_name, int exact);

/* the CPU backends: bitwise the plain-C kernels with 1, 2 (fast) and 3
 * threads */
static int on_cpu_backends(ds_check_fn check)
{
    static const struct {
        int threads, fast;
        const char *name;
    } runs[] = {{1, 0, "ref-1t"}, {3, 0, "ref-3t"}, {2, 1, "cpu-2t"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_backend *be = NULL;
        ld_error err = {0};
        CHECK_MSG(ld_backend_cpu_create_ex(runs[i].threads, runs[i].fast, NULL, &be, &err) == LD_OK, "%s", err.msg);
        int rc = check(be, runs[i].name, 1);
        ld_backend_destroy(be);
        if (rc) return rc;
    }
    return 0;
}

/* backend `which` of open_backends (1 cuda-ref, 2 cuda-custom), or a
 * visible skip without it */
static int on_backend(int which, ds_check_fn check)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = 0;
    if (!b[which].be) {
        fprintf(stderr, "  skipped: %s: %s\n", b[which].name, b[which].skip);
        rc = LD_SKIP;
    } else {
        rc = check(b[which].be, b[which].name, 0);
    }
    close_backends(b, n);
    return rc;
}

static int test_ds_ops_cpu(void) { return on_cpu_backends(check_ds_ops); }
static int test_ds_ops_cuda_ref(void) { return on_backend(1, check_ds_ops); }
static int test_ds_ops_cuda_custom(void) { return on_backend(2, check_ds_ops); }

/* bad shapes, cache ranges and selections are refused (LD_ERR_USAGE) */
static int test_ds_ops_refusals(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK(ld_backend_ref_create(2, &be, &err) == LD_OK);
    const ld_backend_ops *o = be->ops;
    ld_buf *b = upload(be, NULL, 4096);
    CHECK(b);
    int32_t idx[8], sel[4] = {1, -1, -1, -1}; /* position 1 from position 0: not visible */
    float w[8];
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 0, 2, 4, 4, 8, 1.0f, sel, 4, 0, &err) == LD_ERR_USAGE);
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 0, 2, 4, 4, 8, 1.0f, NULL, 0, -1, &err) == LD_ERR_USAGE);
    CHECK(o->mla_latent(be, b, b, b, b, b, 1, 4000, 2, 4, 4, 8, 1.0f, NULL, 0, 0, &err) == LD_ERR_USAGE);
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 10, 4, 2, 2, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 10 % 4 */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 16, 4, 5, 2, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 5 > 4 groups */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 16, 4, 2, 9, 1, 1.0f, &err) == LD_ERR_USAGE);  /* 9 > 2 * 4 */
    CHECK(o->ds_route(be, idx, w, b, NULL, 1, 2048, 8, 2, 2, 1, 1.0f, &err) == LD_ERR_USAGE); /* E > 1024 */
    CHECK(o->index_topk(be, sel, b, b, b, 1, 0, 2, 8, 0, &err) == LD_ERR_USAGE);
    CHECK(o->index_topk(be, sel, b, b, b, 1, 5000, 2, 8, 4, &err) == LD_ERR_USAGE);
    void *wd = rand_weights(&kinds[3], 2 * (4 + 4), 32); /* q4_0: not a plain type */
    ld_weight *wq = wd ? load_weight(be, &kinds[3], wd, 2 * (4 + 4), 32, 0) : NULL;
    CHECK(wq);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 2, 4, 4, 4, 32, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->mla_absorb_out(be, b, b, wq, 1, 2, 4, 4, 32, &err) == LD_ERR_UNSUPPORTED);
    o->weight_free(be, wq);
    free(wd);
    wd = rand_weights(&kinds[0], 2 * (4 + 4), 32);
    wq = wd ? load_weight(be, &kinds[0], wd, 2 * (4 + 4), 32, 0) : NULL;
    CHECK(wq);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 2, 4, 4, 4, 32, &err) == LD_OK);
    CHECK(o->mla_absorb_q(be, b, b, wq, 1, 3, 4, 4, 4, 32, &err) == LD_ERR_USAGE); /* 3 heads: other rows */
    CHECK(o->mla_absorb_out(be, b, b, wq, 1, 2, 4, 4, 16, &err) == LD_ERR_USAGE);  /* c 16: other columns */
    CHECK(o->mla_absorb_q(be, b, b, wq, 300, 2, 4, 4, 4, 32, &err) == LD_ERR_USAGE); /* past the buffer */
    o->weight_free(be, wq);
    free(wd);
    o->buf_free(be, b);
    ld_backend_destroy(be);
    return 0;
}

/* ---------------------------------------------------------------- DeepSeek-V4 */

/* V4's mHC mixing (hc_pre, hc_post) on random inputs against
 * kernels/ref/ref_ds4.h's leaves called a token at a time (the V4
 * session's host path; mhc=bf16: post and comb then rounded to bf16): the
 * CPU backends bitwise whatever their thread count, CUDA to a tolerance
 * (the fp32 mixing 1e-10; the bf16 variants 1e-4, since an expf ulp may
 * move a value across a bf16 rounding boundary); the rows one call each
 * give the batch's bits; the guards stay. */

typedef struct hc_case {
    int T, N, D, iters;
} hc_case;

static const hc_case hc_cases[] = {{1, 4, 64, 20}, {5, 4, 96, 20}, {3, 4, 32, 1}, {2, 8, 48, 7}, {4, 4, 1024, 20},
                                   {9, 2, 16, 0}};

typedef struct hc_data {
    float *X, *fn, *base, scale[3], *f; /* inputs */
    float *post, *comb, *col, *out;     /* outputs [T]... */
} hc_data;

static size_t hc_rows(const hc_case *c)
{
    return (size_t)(2 + c->N) * (size_t)c->N;
}

static int hc_make(const hc_case *c, hc_data *d)
{
    size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D, HC = hc_rows(c);
    d->X = malloc(T * N * D * sizeof(float));
    d->fn = malloc(HC * N * D * sizeof(float));
    d->base = malloc(HC * sizeof(float));
    d->f = malloc(T * D * sizeof(float));
    d->post = malloc(T * N * sizeof(float));
    d->comb = malloc(T * N * N * sizeof(float));
    d->col = malloc(T * D * sizeof(float));
    d->out = malloc(T * N * D * sizeof(float));
    if (!d->X || !d->fn || !d->base || !d->f || !d->post || !d->comb || !d->col || !d->out) return 1;
    fill(d->X, T * N * D, 2.0f);
    fill(d->fn, HC * N * D, 0.2f);
    fill(d->base, HC, 0.5f);
    fill(d->scale, 3, 1.5f);
    fill(d->f, T * D, 1.0f);
    return 0;
}

static void hc_free(hc_data *d)
{
    float *ps[] = {d->X, d->fn, d->base, d->f, d->post, d->comb, d->col, d->out};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
}

/* the session's host path: the leaves a token at a time into d's outputs */
static int hc_expect(const hc_case *c, int variant, hc_data *d)
{
    size_t N = (size_t)c->N, D = (size_t)c->D;
    float *scratch = malloc((N * D + hc_rows(c)) * sizeof *scratch);
    if (!scratch) return 1;
    for (size_t t = 0; t < (size_t)c->T; t++) {
        float *post = d->post + t * N, *comb = d->comb + t * N * N;
        ld_ref_ds4_hc_pre_ex(d->X + t * N * D, c->N, c->D, d->fn, d->base, d->scale, c->iters, 1e-6f, 1e-6f,
                             variant == LD_DS4_MHC_SINKHORN_BF16, post, comb, d->col + t * D, scratch);
        for (size_t i = 0; variant == LD_DS4_MHC_BF16 && i < N; i++) post[i] = ld_var_bf16_round(post[i]);
        for (size_t i = 0; variant == LD_DS4_MHC_BF16 && i < N * N; i++) comb[i] = ld_var_bf16_round(comb[i]);
        ld_ref_ds4_hc_post(d->out + t * N * D, d->X + t * N * D, d->f + t * D, post, comb, c->N, c->D);
    }
    free(scratch);
    return 0;
}

/* tokens [t0, t0 + T) by the ops into r's outputs at t0; hc_post mixes
 * the op's own post and comb; LD_ERR_UNSUPPORTED is returned as such */
static ld_status hc_run(ld_backend *be, const hc_case *c, int variant, const hc_data *in, int t0, int T, hc_data *r)
{
    const ld_backend_ops *o = be->ops;
    size_t N = (size_t)c->N, D = (size_t)c->D, t = (size_t)t0, n = (size_t)T, HC = hc_rows(c);
    ld_buf *bx = upload(be, in->X + t * N * D, n * N * D), *bfn = upload(be, in->fn, HC * N * D);
    ld_buf *bf = upload(be, in->f + t * D, n * D), *bp = upload(be, NULL, n * N), *bc = upload(be, NULL, n * N * N);
    ld_buf *bu = upload(be, NULL, n * D), *bo = upload(be, NULL, n * N * D);
    ld_error err = {0};
    ld_status st = !bx || !bfn || !bf || !bp || !bc || !bu || !bo ? LD_ERR_NOMEM : LD_OK;
    if (st == LD_OK)
        st = o->hc_pre(be, bp, bc, bu, bx, bfn, in->base, in->scale, T, c->N, c->D, c->iters, 1e-6f, 1e-6f, variant,
                       &err);
    if (st == LD_OK) st = o->hc_post(be, bo, bx, bf, bp, bc, T, c->N, c->D, &err);
    if (st != LD_OK && st != LD_ERR_UNSUPPORTED) fprintf(stderr, "  hc ops: %s\n", err.msg);
    ld_buf *bs[] = {bp, bc, bu, bo};
    float *dst[] = {r->post + t * N, r->comb + t * N * N, r->col + t * D, r->out + t * N * D};
    size_t len[] = {n * N, n * N * N, n * D, n * N * D};
    for (int i = 0; i < 4 && st == LD_OK; i++) {
        float *h = download(be, bs[i], len[i]);
        if (!h) st = LD_ERR_MISMATCH;
        else memcpy(dst[i], h, len[i] * sizeof *h);
        free(h);
    }
    ld_buf *all[] = {bx, bfn, bf, bp, bc, bu, bo};
    for (int i = 0; i < 7; i++)
        if (all[i]) o->buf_free(be, all[i]);
    return st;
}

/* a's outputs equal r's (bitwise, or to tol) */
static int hc_agree(const char *be_name, const char *what, const hc_case *c, const hc_data *a, const hc_data *r,
                    int exact, double tol)
{
    size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D;
    char w[4][200];
    const char *part[] = {"post", "comb", "collapsed", "hc_post"};
    for (int i = 0; i < 4; i++) snprintf(w[i], sizeof w[i], "%s %s", what, part[i]);
    return agree(be_name, w[0], a->post, r->post, T * N, exact, tol) +
           agree(be_name, w[1], a->comb, r->comb, T * N * N, exact, tol) +
           agree(be_name, w[2], a->col, r->col, T * D, exact, tol) +
           agree(be_name, w[3], a->out, r->out, T * N * D, exact, tol);
}

/* one case, one variant: the batch, then its rows one call each */
static int check_hc_case(ld_backend *be, const char *be_name, int exact, const hc_case *c, int variant)
{
    hc_data in = {0}, a = {0}, one = {0};
    int bad = hc_make(c, &in) || hc_make(c, &a) || hc_make(c, &one) || hc_expect(c, variant, &in);
    char what[120];
    snprintf(what, sizeof what, "hc T=%d N=%d D=%d iters=%d variant=%d", c->T, c->N, c->D, c->iters, variant);
    ld_status st = bad ? LD_ERR_NOMEM : hc_run(be, c, variant, &in, 0, c->T, &a);
    if (!bad) {
        double tol = variant == LD_DS4_MHC_F32 ? 1e-10 : 1e-4;
        bad = st != LD_OK || hc_agree(be_name, what, c, &a, &in, exact, tol);
        for (int t = 0; t < c->T && !bad; t++) bad = hc_run(be, c, variant, &in, t, 1, &one) != LD_OK;
        size_t T = (size_t)c->T, N = (size_t)c->N, D = (size_t)c->D;
        if (!bad && (memcmp(one.post, a.post, T * N * sizeof(float)) ||
                     memcmp(one.comb, a.comb, T * N * N * sizeof(float)) ||
                     memcmp(one.col, a.col, T * D * sizeof(float)) ||
                     memcmp(one.out, a.out, T * N * D * sizeof(float)))) {
            printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
            bad = 1;
        }
    }
    hc_free(&in);
    hc_free(&a);
    hc_free(&one);
    return bad;
}

/* V4's router (ds4_route) against ld_ref_ds4_route a row at a time: the
 * CPU backends bitwise, CUDA's ids exactly and weights to a tolerance;
 * rows one call each give the batch's results */

typedef struct ds4_route_case {
    int T, E, K, bias, hash;
    float scale;
} ds4_route_case;

static const ds4_route_case ds4_route_cases[] = {
    {3, 64, 6, 1, 0, 2.5f}, {1, 256, 8, 0, 0, 1.0f}, {5, 16, 4, 1, 1, 1.5f}, {7, 384, 6, 1, 1, 16.0f},
    {2, 1024, 64, 1, 0, 1.0f}, {64, 256, 8, 1, 1, 2.0f}, {48, 256, 8, 0, 0, 1.0f},
};

/* rows [t0, t0 + T) by the op */
static int ds4_route_run(ld_backend *be, const ds4_route_case *c, const float *lg, const float *bias,
                         const int32_t *hash, int t0, int T, int32_t *idx, float *w)
{
    size_t K = (size_t)c->K;
    ld_buf *bl = upload(be, lg + (size_t)t0 * (size_t)c->E, (size_t)T * (size_t)c->E);
    ld_error err = {0};
    int bad = !bl || be->ops->ds4_route(be, idx, w, bl, c->bias ? bias : NULL, c->hash ? hash + (size_t)t0 * K : NULL,
                                        T, c->E, c->K, c->scale, &err) != LD_OK;
    if (bad && bl) fprintf(stderr, "  ds4_route: %s\n", err.msg);
    if (bl) be->ops->buf_free(be, bl);
    return bad;
}

static int check_one_ds4_route(ld_backend *be, const char *be_name, int exact, const ds4_route_case *c)
{
    size_t nl = (size_t)c->T * (size_t)c->E, nk = (size_t)c->T * (size_t)c->K, K = (size_t)c->K;
    float *lg = malloc(nl * sizeof *lg), *bias = malloc((size_t)c->E * sizeof *bias);
    float *rw = malloc(nk * sizeof *rw), *aw = malloc(nk * sizeof *aw), *ow = malloc(nk * sizeof *ow);
    int32_t *ri = malloc(nk * sizeof *ri), *ai = malloc(nk * sizeof *ai), *oi = malloc(nk * sizeof *oi);
    int32_t *hash = malloc(nk * sizeof *hash);
    int bad = !lg || !bias || !rw || !aw || !ow || !ri || !ai || !oi || !hash;
    if (!bad) {
        fill(lg, nl, 6.0f);
        fill(bias, (size_t)c->E, 0.5f);
        for (int t = 0; t < c->T; t++) { /* a tie in every row; hash rows of distinct ids, not sorted */
            lg[(size_t)t * (size_t)c->E + (size_t)c->E - 1] = lg[(size_t)t * (size_t)c->E + 1];
            for (size_t k = 0; k < K; k++)
                hash[(size_t)t * K + k] = (int32_t)((k * 7 + (size_t)t * 3 + 5) % (size_t)c->E);
        }
        for (size_t t = 0; t < (size_t)c->T; t++)
            ld_ref_ds4_route(ri + t * K, rw + t * K, lg + t * (size_t)c->E, c->bias ? bias : NULL,
                             c->hash ? hash + t * K : NULL, c->E, c->K, c->scale);
        bad = ds4_route_run(be, c, lg, bias, hash, 0, c->T, ai, aw);
    }
    if (!bad) {
        char what[160];
        snprintf(what, sizeof what, "ds4_route T=%d E=%d K=%d bias=%d hash=%d", c->T, c->E, c->K, c->bias, c->hash);
        int ids = memcmp(ai, ri, nk * sizeof *ai) == 0;
        if (!ids) printf("  %-12s %-62s  FAIL (other experts)\n", be_name, what);
        bad = !ids + agree(be_name, what, aw, rw, nk, exact, 1e-12);
        for (int t = 0; t < c->T; t++)
            bad += ds4_route_run(be, c, lg, bias, hash, t, 1, oi + (size_t)t * K, ow + (size_t)t * K);
        if (memcmp(oi, ai, nk * sizeof *oi) || memcmp(ow, aw, nk * sizeof *ow)) {
            printf("  %-12s %-62s  FAIL (rows one call each differ from the batch)\n", be_name, what);
            bad++;
        }
    }
    void *ps[] = {lg, bias, rw, aw, ow, ri, ai, oi, hash};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    return bad;
}

static int check_ds4_route(ld_backend *be, const char *be_name, int exact)
{
    int bad = 0;
    for (size_t i = 0; i < sizeof ds4_route_cases / sizeof ds4_route_cases[0]; i++) {
        rng = 0xD4700000u + i;
        bad += check_one_ds4_route(be, be_name, exact, &ds4_route_cases[i]);
    }
    return bad;
}

/* every V4 op of backend `be` on every case and variant */
static int check_ds4_ops(ld_backend *be, const char *be_name, int exact)
{
    CHECK_MSG(be->ops->hc_pre && be->ops->hc_post && be->ops->ds4_route, "%s lacks a V4 op", be_name);
    int bad = 0;
    for (size_t i = 0; i < sizeof hc_cases / sizeof hc_cases[0]; i++)
        for (int v = LD_DS4_MHC_F32; v <= LD_DS4_MHC_SINKHORN_BF16; v++) {
            rng = 0x4C000000u + i;
            bad += check_hc_case(be, be_name, exact, &hc_cases[i], v);
        }
    bad += check_ds4_route(be, be_name, exact);
    CHECK_MSG(!bad, "%d V4 cases failed on %s", bad, be_name);
    return 0;
}

static int test_ds4_ops_cpu(void) { return on_cpu_backends(check_ds4_ops); }
static int test_ds4_ops_cuda_ref(void) { return on_backend(1, check_ds4_ops); }
static int test_ds4_ops_cuda_custom(void) { return on_backend(2, check_ds4_ops); }

/* bad shapes and variants, buffers too short, an aliased hc_post, hash
 * rows naming no expert */
static int test_ds4_ops_refusals(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    const ld_backend_ops *o = be->ops;
    ld_buf *b = upload(be, NULL, 256), *b2 = upload(be, NULL, 256);
    CHECK(b && b2);
    float base[24] = {0}, scale[3] = {1, 1, 1};
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, 1, 1e-6f, 1e-6f, LD_DS4_MHC_F32, &err) == LD_OK);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, 1, 1e-6f, 1e-6f, 3, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 0, 4, 1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 2, 4, -1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE);
    CHECK(o->hc_pre(be, b, b, b2, b, b, base, scale, 1, 4, 64, 1, 1e-6f, 1e-6f, 0, &err) == LD_ERR_USAGE); /* fn */
    CHECK(o->hc_post(be, b2, b, b, b, b, 1, 2, 4, &err) == LD_OK);
    CHECK(o->hc_post(be, b, b, b, b, b, 1, 2, 4, &err) == LD_ERR_USAGE);   /* out aliases X */
    CHECK(o->hc_post(be, b2, b, b, b, b, 1, 2, 0, &err) == LD_ERR_USAGE);  /* D 0 */
    CHECK(o->hc_post(be, b2, b, b, b, b, 100, 2, 4, &err) == LD_ERR_USAGE); /* past the buffer */
    int32_t idx[8], hash[8] = {0, 1, 2, 3, 0, 1, 2, 16};
    float w[8];
    CHECK(o->ds4_route(be, idx, w, b, NULL, hash, 2, 16, 4, 1.0f, &err) == LD_ERR_USAGE); /* expert 16 of 16 */
    CHECK(o->ds4_route(be, idx, w, b, NULL, hash, 1, 16, 4, 1.0f, &err) == LD_OK);
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 1, 16, 17, 1.0f, &err) == LD_ERR_USAGE); /* K > E */
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 1, 2048, 4, 1.0f, &err) == LD_ERR_USAGE); /* E > 1024 */
    CHECK(o->ds4_route(be, idx, w, b, NULL, NULL, 40, 16, 4, 1.0f, &err) == LD_ERR_USAGE); /* past the buffer */
    o->buf_free(be, b);
    o->buf_free(be, b2);
    ld_backend_destroy(be);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_ds_ops_cpu), LD_CASE(test_ds_ops_cuda_ref), LD_CASE(test_ds_ops_cuda_custom),
    LD_CASE(test_ds_ops_refusals), LD_CASE(test_ds4_ops_cpu), LD_CASE(test_ds4_ops_cuda_ref),
    LD_CASE(test_ds4_ops_cuda_custom), LD_CASE(test_ds4_ops_refusals),
};

LD_TEST_MAIN(tests)
