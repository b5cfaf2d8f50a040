/* backend_cuda_moe.c - the CUDA backend's routed experts: the moe entry,
 * V4's router (ds4_route), the route and the experts on the device
 * (ds4_route_moe), and the epilogues writing the new streams
 * (ds4_route_moe_post, matmul_hc_post).  backend.h's ops over
 * kernels/cuda/cuda_ops.h; backend_cuda_internal.h says how the backend is
 * cut. */
#include "backend_cuda_internal.h"

#if LD_CUDA_BACKEND

ld_status ld_cuda_ds4_route(ld_backend *be, int32_t *idx, float *w, const ld_buf *logits, const float *bias,
                            const int32_t *hash, int T, int E, int K, float scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
    if (!T) return LD_OK;
    size_t nk = (size_t)T * (size_t)K, ni = nk + (hash ? nk + (size_t)T : 0);
    CU("ds4_route", ld_cu_set_device(cb->device));
    LD_TRY(scratch((void **)&cb->ds_i, &cb->ds_i_cap, ni * sizeof(int32_t), "ds4_route", err));
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, nk * sizeof(float), "ds4_route", err));
    float *dbias = NULL; /* kept on the device between calls (const_dev) */
    if (bias)
        LD_TRY(ld_cuda_const_one(cb, bias, (size_t)E * sizeof *bias, (void **)&dbias, "ds4_route", err));
    int32_t *table = NULL, *rows = NULL;
    if (hash) { /* the rows as the table, row t for token t */
        table = cb->ds_i + nk;
        rows = table + nk;
        int32_t *iota = malloc((size_t)T * sizeof *iota);
        if (!iota) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        for (int t = 0; t < T; t++) iota[t] = t;
        int e1 = ld_cu_h2d(table, hash, nk * sizeof(int32_t));
        int e2 = e1 ? 0 : ld_cu_h2d(rows, iota, (size_t)T * sizeof *iota);
        free(iota);
        CU("ds4_route", e1 ? e1 : e2);
    }
    CU("ds4_route", ld_cu_ds4_route(variant(cb, LD_CUDA_OP_ROUTE), cb->ds_i, cb->ds_f, logits->d, dbias, table, rows,
                                    T, E, K, scale));
    CU("ds4_route", ld_cu_d2h(idx, cb->ds_i, nk * sizeof(int32_t)));
    CU("ds4_route", ld_cu_d2h(w, cb->ds_f, nk * sizeof(float)));
    return LD_OK;
}

/* ---------------------------------------------------------------- MoE */

static void moe_dims(const ld_weight *w, int64_t dims[2])
{
    dims[0] = w->rows;
    dims[1] = w->cols;
}

/* floats rounded up to whole 256-byte pieces, so that every scratch array
 * starts aligned for the 16-byte accesses of the custom kernels */
static size_t moe_pad(size_t n)
{
    return (n + 63) / 64 * 64;
}

/* The plan of T tokens' K choices on the host (idx is a host array): the
 * grouped rows by expert in ascending id, then in token order
 * (ld_ref_moe_gather's), rows [T*K] the token of each grouped row, row_of
 * [T*K] the grouped row of choice (t, k), off [E + 1] each expert's first
 * grouped row; next [E] scratch. */
static void moe_plan(int32_t *off, int32_t *rows, int32_t *row_of, int32_t *next, const int32_t *idx, int T, int K,
                     int E)
{
    size_t nk = (size_t)T * (size_t)K;
    memset(off, 0, ((size_t)E + 1) * sizeof *off);
    for (size_t i = 0; i < nk; i++) off[idx[i] + 1]++;
    for (int e = 0; e < E; e++) off[e + 1] += off[e];
    memcpy(next, off, (size_t)E * sizeof *next);
    for (size_t i = 0; i < nk; i++) { /* token order: t = i / K ascending */
        int32_t r = next[idx[i]]++;
        rows[r] = (int32_t)(i / (size_t)K);
        row_of[i] = r;
    }
}

/* the device scratch of one moe call: the rows and their products in
 * cb->ds_f, the plan, the route's weights and the grouped launches'
 * tables in cb->moe_up (one upload) */
typedef struct moe_dev {
    float *xe, *eo, *g, *u, *yt;
    float *es; /* the shared expert's output [T][D] */
    float *sg; /* the shared expert's activation [T][Is] beside the routed ones' (moe_mixed_post) */
    float *w, *srow;
    int32_t *rows, *row_of;
    ld_cu_mm_group *tab; /* [2 n] gate and up, then [n] down (n active experts) */
} moe_dev;

/* What one moe call runs: n experts with rows, and how their matmuls go.
 * dt LD_KDT_F8B / F4B: one grouped launch for every gate and up, one for
 * every down (all three weights of every active expert of that type, gate
 * and up of one block shape, down of one; the custom matmul); else
 * (LD_KDT_F32) the backend's matmul per expert and projection. */
typedef struct moe_how {
    int n;
    ld_kdt dt;
} moe_how;

/* a weight of the grouped launch's type and shape: rows x cols in blocks
 * br x bc as `first`'s */
static int moe_same(const ld_weight *w, const ld_weight *first)
{
    return w->dt == first->dt && w->rows == first->rows && w->cols == first->cols && w->br == first->br &&
           w->bc == first->bc;
}

/* off NULL: every expert (a route not seen on the host; all are there,
 * ld_moe_args_all checked it) */
static moe_how moe_choose(const cuda_backend *cb, const int32_t *off, const ld_moe_expert *experts, int E)
{
    moe_how h = {0, LD_KDT_F32};
    const ld_moe_expert *first = NULL;
    int same = variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM;
    for (int e = 0; e < E; e++) {
        if (off && off[e + 1] == off[e]) continue;
        h.n++;
        const ld_moe_expert *x = &experts[e];
        if (!first) first = x;
        same = same && ld_ref_kdt_is_scaled(x->gate->dt) && moe_same(x->gate, first->gate) &&
               moe_same(x->up, first->gate) && moe_same(x->down, first->down) && x->down->dt == x->gate->dt;
    }
    /* FP4's grouped kernel takes whole blocks (as its matmul does) */
    if (same && first && first->gate->dt == LD_KDT_F4B)
        same = first->gate->rows % first->gate->br == 0 && first->gate->cols % first->gate->bc == 0 &&
               first->down->rows % first->down->br == 0 && first->down->cols % first->down->bc == 0;
    if (same && first && h.n <= 32767) h.dt = first->gate->dt;
    return h;
}

/* act(g, u) into g over `rows` rows of width F (the backend's swiglu
 * kernel, or V4's clamped one) */
static ld_status moe_act(cuda_backend *cb, float *g, const float *u, int rows, int64_t F, int act, float limit,
                         ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_SWIGLU);
    if (act == LD_MOE_ACT_CLAMPED)
        CU("moe", ld_cu_ds4_clamped_swiglu(v, g, g, u, rows, (int)F, (size_t)F, limit));
    else
        CU("moe", ld_cu_swiglu(v, g, g, u, (size_t)rows * (size_t)F));
    return LD_OK;
}

/* the activation goes into the grouped gate/up launch: V4's clamped one
 * with the custom swiglu kernel (swiglu=ref keeps its own kernel, the A/B
 * of --compare-kernels) */
static int fuse_act(const cuda_backend *cb, int act)
{
    return act == LD_MOE_ACT_CLAMPED && variant(cb, LD_CUDA_OP_SWIGLU) == LD_CU_CUSTOM;
}

/* the grouped launches' tables on the host (device pointers into m): for
 * the k-th active expert, entry k its gate (xe rows into g), n + k its up
 * (into u), 2 n + k its down (g rows into eo) */
static void moe_tables(ld_cu_mm_group *tab, const moe_dev *m, const int32_t *off, const ld_moe_expert *experts,
                       int E, int n, int64_t D, int64_t I)
{
    size_t d = (size_t)D, i = (size_t)I;
    int k = 0;
    for (int e = 0; e < E; e++) {
        int cnt = off[e + 1] - off[e];
        if (!cnt) continue;
        size_t r0 = (size_t)off[e];
        const ld_moe_expert *x = &experts[e];
        ld_cuda_mm_group(&tab[k], x->gate, m->xe + r0 * d, m->g + r0 * i, cnt, 0, 0);
        ld_cuda_mm_group(&tab[n + k], x->up, m->xe + r0 * d, m->u + r0 * i, cnt, 0, 0);
        ld_cuda_mm_group(&tab[2 * n + k], x->down, m->g + r0 * i, m->eo + r0 * d, cnt, 0, 0);
        k++;
    }
}

/* one grouped launch of the type's kernel: G groups (a table on the
 * device) of at most max_rows rows, weights [N][K] in blocks br x bc */
static int moe_grouped(ld_kdt dt, const ld_cu_mm_group *tab, int G, int max_rows, int64_t K, int64_t N, int br,
                       int bc)
{
    if (dt == LD_KDT_F4B) return ld_cu_grouped_fp4_matmul(tab, G, max_rows, (int)K, (int)N, br, bc);
    return ld_cu_grouped_fp8_matmul(tab, G, max_rows, (int)K, (int)N, br, bc);
}

/* the grouped launches over m->tab ([G] gates, [G] ups, [G] downs, as
 * moe_tables or ld_cu_moe_tables lay them out): gate and up in one, the
 * activation over the R rows, down; `x` an expert whose blocks all share */
static ld_status moe_grouped_all(cuda_backend *cb, const moe_dev *m, ld_kdt dt, int G, int max_rows, int R,
                                 const ld_moe_expert *x, int64_t D, int64_t I, int act, float limit, ld_error *err)
{
    if (fuse_act(cb, act)) { /* gate, up and the activation in one launch */
        if (dt == LD_KDT_F4B)
            CU("moe", ld_cu_grouped_fp4_glu(m->tab, G, max_rows, (int)D, (int)I, x->gate->br, x->gate->bc, limit));
        else
            CU("moe", ld_cu_grouped_fp8_glu(m->tab, G, max_rows, (int)D, (int)I, x->gate->br, x->gate->bc, limit));
    } else {
        CU("moe", moe_grouped(dt, m->tab, 2 * G, max_rows, D, I, x->gate->br, x->gate->bc));
        LD_TRY(moe_act(cb, m->g, m->u, R, I, act, limit, err));
    }
    CU("moe", moe_grouped(dt, m->tab + 2 * G, G, max_rows, I, D, x->down->br, x->down->bc));
    return LD_OK;
}

/* the routed experts over the grouped rows: gate and up, the activation
 * over all rows at once, down into eo; grouped (the table uploaded in
 * m->tab) or a matmul per expert */
static ld_status moe_routed(ld_backend *be, const moe_dev *m, moe_how how, const int32_t *off,
                            const ld_moe_expert *experts, int E, int64_t D, int64_t I, int act, float limit,
                            ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (how.dt != LD_KDT_F32) {
        const ld_moe_expert *first = NULL; /* the first active expert: the blocks of all */
        int most = 0;
        for (int e = 0; e < E; e++) {
            int cnt = off[e + 1] - off[e];
            if (cnt && !first) first = &experts[e];
            if (cnt > most) most = cnt;
        }
        return moe_grouped_all(cb, m, how.dt, how.n, most, off[E], first, D, I, act, limit, err);
    }
    size_t d = (size_t)D, i = (size_t)I;
    for (int pass = 0; pass < 2; pass++) {
        for (int e = 0; e < E; e++) {
            int cnt = off[e + 1] - off[e];
            if (!cnt) continue;
            size_t r0 = (size_t)off[e], n = (size_t)cnt;
            ld_buf xe = {m->xe + r0 * d, n * d, 1}, g = {m->g + r0 * i, n * i, 1}, u = {m->u + r0 * i, n * i, 1};
            ld_buf eo = {m->eo + r0 * d, n * d, 1};
            if (pass == 0) {
                LD_TRY(ld_cuda_matmul(be, &g, &xe, experts[e].gate, NULL, cnt, err));
                LD_TRY(ld_cuda_matmul(be, &u, &xe, experts[e].up, NULL, cnt, err));
            } else {
                LD_TRY(ld_cuda_matmul(be, &eo, &g, experts[e].down, NULL, cnt, err));
            }
        }
        if (pass == 0) LD_TRY(moe_act(cb, m->g, m->u, off[E], I, act, limit, err));
    }
    return LD_OK;
}

/* an expert's gate and up over the T rows of x, then its activation into
 * g: one grouped launch where both are FP8 of one shape (its table kept on
 * the device, keyed by the expert), the activation in it (fuse_act), else
 * two matmuls and moe_act */
static ld_status gate_up_act(ld_backend *be, ld_buf *g, ld_buf *u, const ld_buf *x, const ld_moe_expert *ex, int T,
                             int act, float limit, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    ld_weight *const pair[2] = {ex->gate, ex->up};
    if (!T || !ld_cuda_fp8_group_ok(cb, pair, 2, T)) {
        LD_TRY(ld_cuda_matmul(be, g, x, ex->gate, NULL, T, err));
        LD_TRY(ld_cuda_matmul(be, u, x, ex->up, NULL, T, err));
        return moe_act(cb, g->d, u->d, T, ex->gate->rows, act, limit, err);
    }
    size_t K = (size_t)ex->gate->cols, N = (size_t)ex->gate->rows;
    LD_TRY(range(g, 0, (size_t)T * N, err));
    LD_TRY(range(u, 0, (size_t)T * N, err));
    LD_TRY(range(x, 0, (size_t)T * K, err));
    ld_cu_mm_group tab[2];
    ld_cuda_mm_group(&tab[0], ex->gate, x->d, g->d, T, 0, 0);
    ld_cuda_mm_group(&tab[1], ex->up, x->d, u->d, T, 0, 0);
    void *dtab = NULL;
    LD_TRY(ld_cuda_const_dev(cb, ex, tab, sizeof tab, NULL, 0, &dtab, "moe", err));
    if (fuse_act(cb, act)) {
        CU("moe", ld_cu_grouped_fp8_glu(dtab, 1, T, (int)K, (int)N, ex->gate->br, ex->gate->bc, limit));
        return LD_OK;
    }
    CU("moe", ld_cu_grouped_fp8_matmul(dtab, 2, T, (int)K, (int)N, ex->gate->br, ex->gate->bc));
    return moe_act(cb, g->d, u->d, T, N, act, limit, err);
}

/* the shared expert of the T rows of x into m->es (after the routed
 * experts, whose gate and up scratch it reuses; moe_sum adds it) */
static ld_status moe_shared(ld_backend *be, const ld_buf *x, const moe_dev *m, const ld_moe_expert *sh, int T,
                            int64_t D, int64_t Is, int act, float limit, ld_error *err)
{
    size_t n = (size_t)T * (size_t)Is, nd = (size_t)T * (size_t)D;
    ld_buf g = {m->g, n, 1}, u = {m->u, n, 1}, es = {m->es, nd, 1};
    LD_TRY(gate_up_act(be, &g, &u, x, sh, T, act, limit, err));
    return ld_cuda_matmul(be, &es, &g, sh->down, NULL, T, err);
}

/* ld_cu_post of a post call */
static ld_cu_post cu_post(const ld_hc_post_call *p)
{
    ld_cu_post c = {p->out->d, p->X->d, p->post->d, p->comb->d, p->N};
    return c;
}

/* the routed and the shared experts in the mixed launches: the custom
 * activation, the shared gate and up FP8 of one shape, its down FP8 */
static int mixed_ok(const cuda_backend *cb, const ld_moe_expert *sh, int act, int T)
{
    ld_weight *const pair[2] = {sh->gate, sh->up};
    return fuse_act(cb, act) && ld_cuda_fp8_group_ok(cb, pair, 2, T) && sh->down->dt == LD_KDT_F8B;
}

/* the MoE after its tables, the routed experts of type dt and the shared
 * one in two launches: every gate/up with the activation
 * (ld_cu_grouped_glu2: the shared one's into m->sg), then every down with
 * the combine and hc_post (ld_cu_moe_down_post); the bits of
 * moe_grouped_all, moe_shared, moe_sum and hc_post (ds4_route_moe_post
 * checked mixed_ok).  ex: the experts' block sizes. */
static ld_status moe_mixed_post(cuda_backend *cb, const ld_hc_post_call *p, const ld_buf *x, const moe_dev *m,
                                const ld_moe_expert *ex, const ld_moe_expert *sh, ld_kdt dt, int G, int T, int K,
                                int64_t D, int64_t I, int64_t Is, float limit, ld_error *err)
{
    ld_cu_mm_group tab[2];
    ld_cuda_mm_group(&tab[0], sh->gate, x->d, m->sg, T, 0, 0);
    ld_cuda_mm_group(&tab[1], sh->up, x->d, m->sg, T, 0, 0); /* the GLU writes no up */
    void *dtab = NULL;
    /* keyed by &sh->up: gate_up_act keys its own table (other outputs) by sh */
    LD_TRY(ld_cuda_const_dev(cb, &sh->up, tab, sizeof tab, NULL, 0, &dtab, "moe", err));
    int fp4 = dt == LD_KDT_F4B;
    ld_cu_moe_part a = {m->tab, G, fp4, (int)I, ex->gate->br, ex->gate->bc};
    ld_cu_moe_part b = {dtab, 1, 0, (int)Is, sh->gate->br, sh->gate->bc};
    CU("moe", ld_cu_grouped_glu2(a, b, T, (int)D, limit));
    ld_cu_moe_part r = {m->tab + 2 * G, G, fp4, (int)D, ex->down->br, ex->down->bc};
    ld_cu_combine c = {m->eo, m->row_of, m->w, K};
    const ld_weight *w = sh->down;
    CU("moe", ld_cu_moe_down_post(r, (int)I, m->sg, w->d, w->scale, T, (int)Is, w->br, w->bc, c, cu_post(p)));
    return LD_OK;
}

/* the bytes of the uploaded block for R grouped rows of T tokens and the
 * tables of n experts: [tables 3 n][rows R][row_of R][w R][srow T] */
static size_t moe_up_bytes(size_t R, int T, int n)
{
    return (size_t)3 * (size_t)n * sizeof(ld_cu_mm_group) + 2 * R * sizeof(int32_t) + R * sizeof(float) +
           (size_t)T * sizeof(float);
}

/* the rows and their products for R grouped rows of T tokens in ds_f */
static ld_status moe_floats(cuda_backend *cb, moe_dev *m, int T, int K, int64_t D, int64_t I, int64_t Is,
                            ld_error *err)
{
    size_t R = (size_t)T * (size_t)K, nd = moe_pad(R * (size_t)D), td = moe_pad((size_t)T * (size_t)D);
    size_t gi = moe_pad(R * (size_t)I > (size_t)T * (size_t)Is ? R * (size_t)I : (size_t)T * (size_t)Is);
    size_t si = moe_pad((size_t)T * (size_t)Is);
    LD_TRY(scratch((void **)&cb->ds_f, &cb->ds_f_cap, (2 * nd + 2 * gi + 2 * td + si) * sizeof(float), "moe", err));
    m->xe = cb->ds_f;
    m->eo = m->xe + nd;
    m->g = m->eo + nd;
    m->u = m->g + gi;
    m->yt = m->u + gi;
    m->es = m->yt + td;
    m->sg = m->es + td;
    return LD_OK;
}

/* the device scratch for R grouped rows of T tokens laid out in ds_f and
 * moe_up; *host the host image of moe_up (the caller fills and frees it) */
static ld_status moe_scratch(cuda_backend *cb, moe_dev *m, unsigned char **host, int T, int K, int n, int64_t D,
                             int64_t I, int64_t Is, ld_error *err)
{
    size_t R = (size_t)T * (size_t)K;
    LD_TRY(moe_floats(cb, m, T, K, D, I, Is, err));
    size_t up = moe_up_bytes(R, T, n);
    LD_TRY(scratch((void **)&cb->moe_up, &cb->moe_up_cap, up, "moe", err));
    /* pointers first (their alignment), then the int32 and float arrays */
    m->tab = (ld_cu_mm_group *)cb->moe_up;
    m->rows = (int32_t *)(m->tab + 3 * (size_t)n);
    m->row_of = m->rows + R;
    m->w = (float *)(m->row_of + R);
    m->srow = m->w + R;
    *host = malloc(up);
    if (!*host) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

/* the host image of the uploaded block: tables, plan, weights, the fused
 * scale per token (moe_sum's second combine) */
static void moe_image(unsigned char *host, const moe_dev *m, const int32_t *plan, const int32_t *off,
                      const float *w, float fused_scale, const ld_moe_expert *experts, int E, int n, int T, int K,
                      int64_t D, int64_t I)
{
    size_t R = (size_t)T * (size_t)K;
    ld_cu_mm_group *tab = (ld_cu_mm_group *)host;
    moe_tables(tab, m, off, experts, E, n, D, I);
    int32_t *ip = (int32_t *)(tab + 3 * (size_t)n);
    memcpy(ip, plan, 2 * R * sizeof *ip);
    float *fp = (float *)(ip + 2 * R);
    memcpy(fp, w, R * sizeof *fp);
    for (int t = 0; t < T; t++) fp[R + (size_t)t] = fused_scale;
}

/* the combine in the fixed order: per token its experts' rows in k
 * (ascending id) order from zero (ld_cu_moe_combine: the axpy's two
 * roundings); fused: that sum into yt, then y = 0 + yt * scale (a
 * combine of one choice, the weight the scale: the product, exact + 0) */
static ld_status moe_sum(cuda_backend *cb, ld_buf *y, const moe_dev *m, int fused, int shared, int T, int K,
                         int64_t D, ld_error *err)
{
    int v = variant(cb, LD_CUDA_OP_ADD);
    const float *add = shared ? m->es : NULL;
    /* from zero, the routed sum, then the shared output: one launch (two
     * with the fused scale), the bits of memset, combine and add */
    if (!fused) {
        CU("moe", ld_cu_moe_combine_ex(v, y->d, m->eo, m->row_of, m->w, T, K, (int)D, 1, add));
        return LD_OK;
    }
    CU("moe", ld_cu_moe_combine_ex(v, m->yt, m->eo, m->row_of, m->w, T, K, (int)D, 1, NULL));
    CU("moe", ld_cu_moe_combine_ex(v, y->d, m->yt, NULL, m->srow, T, 1, (int)D, 1, add));
    return LD_OK;
}

/* the plan, scratch and upload, the gather, the routed experts (off the
 * host plan's offsets) */
static ld_status moe_run_routed(ld_backend *be, moe_dev *m, const int32_t *plan, const int32_t *off,
                                const float *w, float fused_scale, const ld_moe_expert *experts, int E,
                                const ld_buf *x, int T, int K, int64_t D, int64_t I, int64_t Is, int act,
                                float limit, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    moe_how how = moe_choose(cb, off, experts, E);
    unsigned char *host = NULL;
    size_t R = (size_t)T * (size_t)K;
    CU("moe", ld_cu_set_device(cb->device));
    ld_status st = moe_scratch(cb, m, &host, T, K, how.n, D, I, Is, err);
    if (st == LD_OK) {
        moe_image(host, m, plan, off, w, fused_scale, experts, E, how.n, T, K, D, I);
        int e = ld_cu_h2d(cb->moe_up, host, moe_up_bytes(R, T, how.n));
        if (!e) e = ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), m->xe, x->d, LD_KDT_F32, (int)D, m->rows, (int)R);
        if (e) st = ld_cuda_fail(err, "moe", e);
    }
    if (st == LD_OK) st = moe_routed(be, m, how, off, experts, E, D, I, act, limit, err);
    free(host);
    return st;
}

/* The moe entry on the device: the plan on the host (idx is a host array)
 * and one upload (plan, weights, the grouped launches' tables), the rows
 * gathered per expert by the embed kernel (an F32 "table" of x's rows: an
 * exact copy), the routed experts (grouped launches for FP8 / FP4 experts
 * with the custom matmul, else the backend's own matmul per expert), the
 * activation, the fixed-order combine, the shared expert.  combine=bf16
 * is LD_ERR_UNSUPPORTED. */
ld_status ld_cuda_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const int32_t *idx, const float *w, int T, int K,
                      const ld_moe_expert *experts, int E, const ld_moe_expert *shared, int act, float limit,
                      int combine, float fused_scale, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    int64_t D, I, Is;
    LD_TRY(ld_moe_args_check(idx, T, K, experts, E, shared, act, combine, moe_dims, &D, &I, &Is, err));
    if (combine == LD_MOE_COMBINE_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda moe: combine=bf16 (ref and fused only)");
    if (!T) return LD_OK;
    if ((size_t)T * (size_t)K > 0x7fffffff || D > 0x7fffffff)
        return LD_FAIL(err, LD_ERR_LIMIT, 0, "moe of %d tokens, top %d", T, K);
    size_t nd = (size_t)T * (size_t)D, R = (size_t)T * (size_t)K;
    LD_TRY(range(y, 0, nd, err));
    LD_TRY(range(x, 0, nd, err));
    if (y->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    /* host plan: [rows R][row_of R][E counters], then the offsets [E + 1] */
    int32_t *plan = malloc((2 * R + 2 * (size_t)E + 1) * sizeof *plan);
    if (!plan) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    int32_t *off = plan + 2 * R + (size_t)E;
    moe_plan(off, plan, plan + R, plan + 2 * R, idx, T, K, E);
    moe_dev m = {0};
    ld_status st = moe_run_routed(be, &m, plan, off, w, fused_scale, experts, E, x, T, K, D, I, Is, act, limit, err);
    free(plan);
    LD_TRY(st);
    if (shared) LD_TRY(moe_shared(be, x, &m, shared, T, D, Is, act, limit, err));
    LD_TRY(moe_sum(cb, y, &m, combine == LD_MOE_COMBINE_FUSED, shared != NULL, T, K, D, err));
    return LD_OK;
}

/* ---------------------------------------------------------------- V4 route + MoE
 * backend.h's ds4_route_moe: with the route wanted on the host, or experts
 * the grouped launches do not take, ds4_route then moe as two calls; else
 * the route never leaves the device: the router kernel, the plan
 * (ld_cu_moe_plan), the grouped launches' tables (ld_cu_moe_tables from
 * every expert's weights) and the grouped launches with T as the largest
 * row count (a token chooses an expert once), so the host queues the whole
 * MoE without waiting for the device. */

/* how ds4_route_moe runs: on the device (dev 1: route_moe_dev over
 * experts of type dt, dims D, I, Is), or as ds4_route then moe */
typedef struct route_how {
    int dev;
    ld_kdt dt;
    int64_t D, I, Is;
} route_how;

/* the most tokens a call keeps its route on the device: the grouped
 * launches then take T as every expert's row count, so a prefill chunk's
 * grid would be mostly empty blocks (experts x T / 8 row tiles); a chunk
 * that large waits for its route instead, and its grid fits the counts */
#define ROUTE_DEV_MAX_T 16

/* byte offsets into moe_up of the device route's arrays */
typedef struct route_layout {
    size_t tab, idx, hash, offsets, rows, row_of, w, end;
} route_layout;

static size_t up256(size_t bytes)
{
    return (bytes + 255) / 256 * 256;
}

static route_layout route_lay(size_t T, size_t K, size_t E, size_t G)
{
    size_t R = T * K, o = 0, i4 = sizeof(int32_t);
    route_layout L;
    L.tab = o, o += up256(3 * G * sizeof(ld_cu_mm_group));
    L.idx = o, o += up256(R * i4);
    L.hash = o, o += up256(R * i4);
    L.offsets = o, o += up256((E + 1) * i4);
    L.rows = o, o += up256(R * i4);
    L.row_of = o, o += up256(R * i4);
    L.w = o, o += up256(R * sizeof(float));
    L.end = o;
    return L;
}

/* keys of the constant slots that hold arrays the backend makes itself
 * (const_dev keys a slot by an address that stays put) */
static const char KEY_IOTA, KEY_SROW;

/* the host arrays the device route reads, on the device, each kept
 * between calls in a constant slot (const_dev: uploaded when its bytes
 * change): every expert's weights (*ptrs) and the bias (*dbias, NULL
 * without one), keyed by the layer's experts and bias; the tokens 0..T-1
 * (*diota, hash layers only) and the fused scale per token (*dsrow, with
 * the fused combine only: the only reader), both the same at every layer.
 * The hash rows (the tokens' own) are uploaded. */
static ld_status route_uploads(cuda_backend *cb, const route_layout *L, const ld_moe_expert *experts, int E,
                               const float *bias, const int32_t *hash, int T, int K, int fused, float fused_scale,
                               const ld_cu_moe_w **ptrs, const float **dbias, int32_t **diota, float **dsrow,
                               ld_error *err)
{
    size_t nt = (size_t)T, np = (size_t)E * sizeof(ld_cu_moe_w);
    size_t big = np > nt * sizeof(float) ? np : nt * sizeof(float);
    unsigned char *h = malloc(big);
    if (!h) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_cu_moe_w *p = (ld_cu_moe_w *)h;
    for (int e = 0; e < E; e++) {
        const ld_moe_expert *x = &experts[e];
        p[e] = (ld_cu_moe_w){x->gate->d, x->up->d, x->down->d, x->gate->scale, x->up->scale, x->down->scale};
    }
    ld_status st = ld_cuda_const_dev(cb, experts, p, np, NULL, 0, (void **)ptrs, "ds4_route_moe", err);
    *dbias = NULL, *diota = NULL, *dsrow = NULL;
    if (st == LD_OK && bias)
        st = ld_cuda_const_one(cb, bias, (size_t)E * sizeof *bias, (void **)dbias, "ds4_route_moe", err);
    int32_t *iota = (int32_t *)h;
    float *srow = (float *)h;
    if (st == LD_OK && hash) {
        for (int t = 0; t < T; t++) iota[t] = t;
        st = ld_cuda_const_dev(cb, &KEY_IOTA, iota, nt * sizeof *iota, NULL, 0, (void **)diota, "ds4_route_moe", err);
    }
    for (int t = 0; st == LD_OK && fused && t < T; t++) srow[t] = fused_scale;
    if (st == LD_OK && fused)
        st = ld_cuda_const_dev(cb, &KEY_SROW, srow, nt * sizeof *srow, NULL, 0, (void **)dsrow, "ds4_route_moe", err);
    free(h);
    LD_TRY(st);
    if (hash) CU("ds4_route_moe", ld_cu_h2d(cb->moe_up + L->hash, hash, nt * (size_t)K * sizeof *hash));
    return LD_OK;
}

/* whether the route's one launch can compute the router's logits too:
 * they are then the custom matmul kernel's (cuda_mm_warp.cuh), as the
 * matmul op would compute them (not the tensor-core GEMM, FP8 or a GGML
 * type) */
static int router_fuses(const cuda_backend *cb, const ld_weight *router)
{
    return plain_dt(router->dt) && !ld_cuda_matmul_tc(cb, router) && variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM &&
           router->rope_hd <= 0 && router->cols <= 0x7fffffff;
}

/* the route, plan, tables and the grouped experts on the device (with
 * router, its logits first: in the route's launch where router_fuses);
 * then the fixed-order combine and the shared expert as moe's into y, or
 * with post the mixed launches into the new streams (moe_mixed_post) */
static ld_status route_moe_dev(cuda_backend *cb, ld_buf *y, const ld_hc_post_call *post, const ld_buf *x,
                               ld_buf *logits, const ld_weight *router, const float *bias, const int32_t *hash, int T,
                               int E, int K, float scale, const ld_moe_expert *experts, const ld_moe_expert *shared,
                               int act, float limit, int fused, float fused_scale, const route_how *h, ld_error *err)
{
    ld_kdt dt = h->dt;
    int64_t D = h->D, I = h->I, Is = h->Is;
    size_t R = (size_t)T * (size_t)K;
    int G = (size_t)E < R ? E : (int)R;
    route_layout L = route_lay((size_t)T, (size_t)K, (size_t)E, (size_t)G);
    moe_dev m = {0};
    CU("ds4_route_moe", ld_cu_set_device(cb->device));
    LD_TRY(moe_floats(cb, &m, T, K, D, I, Is, err));
    LD_TRY(scratch((void **)&cb->moe_up, &cb->moe_up_cap, L.end, "ds4_route_moe", err));
    unsigned char *b = cb->moe_up;
    m.tab = (ld_cu_mm_group *)(b + L.tab);
    m.rows = (int32_t *)(b + L.rows);
    m.row_of = (int32_t *)(b + L.row_of);
    m.w = (float *)(b + L.w);
    int32_t *idx = (int32_t *)(b + L.idx), *off = (int32_t *)(b + L.offsets), *diota;
    const ld_cu_moe_w *ptrs;
    const float *dbias;
    LD_TRY(route_uploads(cb, &L, experts, E, bias, hash, T, K, fused, fused_scale, &ptrs, &dbias, &diota, &m.srow,
                         err));
    int vr = variant(cb, LD_CUDA_OP_ROUTE);
    int32_t *dhash = hash ? (int32_t *)(b + L.hash) : NULL;
    /* the experts' gate and up read their tokens' rows of x in place (the
     * tables' xrows), not a gathered copy, where that gives the same bits:
     * the grouped FP4 kernel picks its 16-byte path by x's alignment */
    int pick = (((uintptr_t)x->d & 15) == 0) == (((uintptr_t)m.xe & 15) == 0);
    const float *xe = pick ? x->d : m.xe;
    int one = vr == LD_CU_CUSTOM && T <= LD_CU_ROUTE_FUSED_T && E <= LD_CU_ROUTE_FUSED_E; /* a decode step */
    int fuse = one && router && router_fuses(cb, router); /* the router's matmul in that launch */
    if (router && !fuse) LD_TRY(ld_cuda_matmul(&cb->base, logits, x, router, NULL, T, err));
    if (fuse) {
        int32_t *sync;
        LD_TRY(ld_cuda_sync_ints(cb, 1, &sync, "ds4_route_moe", err));
        ld_cu_router r = {logits->d, x->d, router->d, router->dt, (int)router->cols, sync};
        CU("ds4_route_moe", ld_cu_ds4_router_route_plan_tables(&r, idx, m.w, dbias, dhash, diota, T, E, K, scale, off,
                                                               m.rows, m.row_of, m.tab, G, ptrs, xe, pick, m.g, m.u,
                                                               m.eo, (int)D, (int)I));
    } else if (one) {
        CU("ds4_route_moe", ld_cu_ds4_route_plan_tables(idx, m.w, logits->d, dbias, dhash, diota, T, E, K, scale, off,
                                                        m.rows, m.row_of, m.tab, G, ptrs, xe, pick, m.g, m.u, m.eo,
                                                        (int)D, (int)I));
    } else {
        CU("ds4_route_moe", ld_cu_ds4_route(vr, idx, m.w, logits->d, dbias, dhash, diota, T, E, K, scale));
        CU("ds4_route_moe", ld_cu_moe_plan(vr, off, m.rows, m.row_of, idx, T, K, E));
        CU("ds4_route_moe", ld_cu_moe_tables(m.tab, G, off, ptrs, E, xe, pick ? m.rows : NULL, m.g, m.u, m.eo, (int)D,
                                             (int)I));
    }
    if (!pick)
        CU("ds4_route_moe", ld_cu_embed(variant(cb, LD_CUDA_OP_EMBED), m.xe, x->d, LD_KDT_F32, (int)D, m.rows, (int)R));
    if (post) return moe_mixed_post(cb, post, x, &m, &experts[0], shared, dt, G, T, K, D, I, Is, limit, err);
    LD_TRY(moe_grouped_all(cb, &m, dt, G, T, (int)R, &experts[0], D, I, act, limit, err));
    if (shared) LD_TRY(moe_shared(&cb->base, x, &m, shared, T, D, Is, act, limit, err));
    LD_TRY(moe_sum(cb, y, &m, fused, shared != NULL, T, K, D, err));
    return LD_OK;
}

/* ds4_route into host arrays (the caller's, or scratch when it wants none),
 * then moe over them */
static ld_status route_then_moe(ld_backend *be, ld_buf *y, const ld_buf *x, const ld_buf *logits, const float *bias,
                                const int32_t *hash, int T, int E, int K, float scale, const ld_moe_expert *experts,
                                const ld_moe_expert *shared, int act, float limit, int combine, float fused_scale,
                                int32_t *idx, float *w, ld_error *err)
{
    size_t R = (size_t)T * (size_t)K;
    void *own = NULL;
    if (!idx) {
        own = malloc(R * (sizeof *idx + sizeof *w) + 1);
        if (!own) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        idx = own;
        w = (float *)(idx + R);
    }
    ld_status st = ld_cuda_ds4_route(be, idx, w, logits, bias, hash, T, E, K, scale, err);
    if (st == LD_OK)
        st = ld_cuda_moe(be, y, x, idx, w, T, K, experts, E, shared, act, limit, combine, fused_scale, err);
    free(own);
    return st;
}

/* ds4_route_moe's checks, and how it runs (*h) */
static ld_status route_moe_checks(cuda_backend *cb, const ld_buf *x, const ld_buf *logits, const ld_weight *router,
                                  const int32_t *hash, int T, int E, int K, const ld_moe_expert *experts,
                                  const ld_moe_expert *shared, int act, int combine, int32_t *idx, float *w,
                                  route_how *h, ld_error *err)
{
    LD_TRY(ld_moe_args(T, K, E, act, combine, err));
    if (router) { /* what the matmul op checks, before anything is written */
        if (router->rows != E)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: a router of %lld rows for %d experts",
                           (long long)router->rows, E);
        LD_TRY(range(logits, 0, (size_t)T * (size_t)E, err));
        LD_TRY(range(x, 0, (size_t)T * (size_t)router->cols, err));
        if (x == logits) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: logits alias x");
    }
    if (combine == LD_MOE_COMBINE_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda moe: combine=bf16 (ref and fused only)");
    if (!idx != !w) return LD_FAIL(err, LD_ERR_USAGE, 0, "ds4_route_moe: give both idx and w, or neither");
    LD_TRY(ld_ds_args_ds4_route(T, E, K, hash, err));
    ld_error quiet = {0}; /* an expert missing: the two calls name the chosen one */
    *h = (route_how){0, LD_KDT_F32, 0, 0, 0};
    if (!idx && T &&
        ld_moe_args_all(T, K, experts, E, shared, act, combine, moe_dims, &h->D, &h->I, &h->Is, &quiet) == LD_OK)
        h->dt = moe_choose(cb, NULL, experts, E).dt;
    h->dev = !(h->dt == LD_KDT_F32 || T > ROUTE_DEV_MAX_T || h->D > 0x7fffffff || E > 1024);
    if (!h->dev) return LD_OK;
    LD_TRY(range(x, 0, (size_t)T * (size_t)h->D, err));
    return range(logits, 0, (size_t)T * (size_t)E, err);
}

ld_status ld_cuda_ds4_route_moe(ld_backend *be, ld_buf *y, const ld_buf *x, ld_buf *logits, const ld_weight *router,
                                const float *bias, const int32_t *hash, int T, int E, int K, float scale,
                                const ld_moe_expert *experts, const ld_moe_expert *shared, int act, float limit,
                                int combine, float fused_scale, int32_t *idx, float *w, ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    route_how h = {0}; /* set by the checks; -O3 cannot see that an error returns first */
    LD_TRY(route_moe_checks(cb, x, logits, router, hash, T, E, K, experts, shared, act, combine, idx, w, &h, err));
    if (!h.dev) {
        if (router) LD_TRY(ld_cuda_matmul(be, logits, x, router, NULL, T, err));
        return route_then_moe(be, y, x, logits, bias, hash, T, E, K, scale, experts, shared, act, limit, combine,
                              fused_scale, idx, w, err);
    }
    LD_TRY(range(y, 0, (size_t)T * (size_t)h.D, err));
    if (y->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "moe: y aliases x");
    return route_moe_dev(cb, y, NULL, x, logits, router, bias, hash, T, E, K, scale, experts, shared, act, limit,
                         combine == LD_MOE_COMBINE_FUSED, fused_scale, &h, err);
}

/* the streams of a post call for T tokens of D values: in range, apart
 * from x */
static ld_status post_ranges(const ld_hc_post_call *p, const ld_buf *x, int T, int64_t D, ld_error *err)
{
    size_t tt = (size_t)T, n = (size_t)p->N, d = (size_t)D;
    LD_TRY(range(p->out, 0, tt * n * d, err));
    LD_TRY(range(p->X, 0, tt * n * d, err));
    LD_TRY(range(p->post, 0, tt * n, err));
    LD_TRY(range(p->comb, 0, tt * n * n, err));
    if (p->out->d == p->X->d || p->out->d == x->d) return LD_FAIL(err, LD_ERR_USAGE, 0, "hc_post: out aliases X or x");
    return LD_OK;
}

/* the custom kernels the fused epilogues stand for */
static int post_kernels(const cuda_backend *cb)
{
    return variant(cb, LD_CUDA_OP_MATMUL) == LD_CU_CUSTOM && variant(cb, LD_CUDA_OP_ADD) == LD_CU_CUSTOM &&
           variant(cb, LD_CUDA_OP_HC) == LD_CU_CUSTOM;
}

ld_status ld_cuda_ds4_route_moe_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, ld_buf *logits,
                                     const ld_weight *router, const float *bias, const int32_t *hash, int T, int E,
                                     int K, float scale, const ld_moe_expert *experts, const ld_moe_expert *shared,
                                     int act, float limit, int combine, float fused_scale, int32_t *idx, float *w,
                                     ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    route_how h = {0}; /* set by the checks; -O3 cannot see that an error returns first */
    LD_TRY(route_moe_checks(cb, x, logits, router, hash, T, E, K, experts, shared, act, combine, idx, w, &h, err));
    if (!h.dev || !T || combine != LD_MOE_COMBINE_REF || !shared || !mixed_ok(cb, shared, act, T) ||
        shared->down->rows != h.D || p->N <= 0 || !post_kernels(cb))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda ds4_route_moe_post: not fused here");
    LD_TRY(post_ranges(p, x, T, h.D, err));
    return route_moe_dev(cb, NULL, p, x, logits, router, bias, hash, T, E, K, scale, experts, shared, act, limit, 0,
                         fused_scale, &h, err);
}

ld_status ld_cuda_matmul_hc_post(ld_backend *be, const ld_hc_post_call *p, const ld_buf *x, const ld_weight *w, int T,
                                 ld_error *err)
{
    cuda_backend *cb = (cuda_backend *)be;
    if (T < 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "matmul_hc_post of %d tokens", T);
    if (w->dt != LD_KDT_F8B || !post_kernels(cb) || p->N <= 0 || w->rows > INT_MAX || w->cols > INT_MAX ||
        (T + 7) / 8 > 65535)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "cuda matmul_hc_post: not fused here");
    LD_TRY(range(x, 0, (size_t)T * (size_t)w->cols, err));
    LD_TRY(post_ranges(p, x, T, w->rows, err));
    if (!T) return LD_OK;
    CU("matmul_hc_post", ld_cu_set_device(cb->device));
    CU("matmul_hc_post", ld_cu_fp8_matmul_post(x->d, w->d, w->scale, T, (int)w->cols, (int)w->rows, w->br, w->bc,
                                               cu_post(p)));
    return LD_OK;
}

#endif /* LD_CUDA_BACKEND */
