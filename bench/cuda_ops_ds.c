/* cuda_ops_ds.c - bench_cuda_ops's DeepSeek sections: the V3 / V3.2 kernels,
 * V4's at V4-Flash sizes and the grouped expert GEMMs, against the
 * device-to-device copy's bandwidth. */
#include "cuda_ops.h"

/* ---------------------------------------------------------------- DeepSeek */

typedef enum ds_op {
    DS_FP8, DS_ABSQ, DS_ABSO, DS_MLA, DS_INDEX, DS_TOPK, DS_ROUTE, DS_ROUTE4, DS_COMBINE, DS_HC_PRE, DS_HC_POST,
    DS_SAMPLE, DS_MOE_PLAN, DS_MOE_GEMM
} ds_op;

/* one call of a DeepSeek op; the fields each op reads */
typedef struct ds_ctx {
    ds_op op;
    int v, T, K, N, H, c, dr, pos0, k, E, form;
    double temp, top_p;
    float *out, *x, *y, *z, *w, *work, *post, *comb;
    void *vwork;
    size_t work_n;
    uint8_t *q;
    int32_t *idx, *sel, *rows, *offs, *row_of;
} ds_ctx;

static int call_ds(void *p)
{
    ds_ctx *c = p;
    switch (c->op) {
    case DS_FP8: return ld_cu_fp8_matmul(c->v, c->out, c->x, c->q, c->w, c->T, c->K, c->N, 128, 128);
    case DS_ABSQ: return ld_cu_mla_absorb_q(c->v, c->out, c->x, c->q, LD_KDT_BF16, c->T, c->H, 128, 64, 128, 512);
    case DS_ABSO: return ld_cu_mla_absorb_out(c->v, c->out, c->x, c->q, LD_KDT_BF16, c->T, c->H, 128, 128, 512);
    case DS_MLA:
        return ld_cu_mla_latent(c->v, c->out, c->x, c->y, c->z, c->w, c->T, c->H, 128, c->dr, c->c, c->pos0,
                                0.07f, c->sel, c->k, c->work, c->work_n);
    case DS_INDEX:
        return ld_cu_index_scores(c->v, c->form, c->out, c->x, c->y, c->z, c->T, c->H, c->c, c->N, 0.088f, 0.125f);
    case DS_TOPK: return ld_cu_topk(c->v, c->idx, c->x, c->T, c->N, c->N, -1, c->k);
    case DS_ROUTE: return ld_cu_ds_route(c->v, c->idx, c->out, c->x, c->y, c->T, c->E, 8, 4, 8, 1, 2.5f);
    case DS_ROUTE4: return ld_cu_ds4_route(c->v, c->idx, c->out, c->x, c->y, NULL, NULL, c->T, c->E, 6, 1.5f);
    case DS_COMBINE: return ld_cu_moe_combine(c->v, c->out, c->x, c->sel, c->y, c->T, c->K, c->N);
    case DS_HC_PRE:
        return ld_cu_hc_pre(c->v, c->post, c->comb, c->out, c->x, c->T, c->K, c->N, c->y, c->z, c->w, 20, 1e-6f,
                            1e-6f, c->work, c->work_n);
    case DS_HC_POST: return ld_cu_hc_post(c->v, c->out, c->x, c->y, c->post, c->comb, c->T, c->K, c->N);
    case DS_MOE_PLAN: return ld_cu_moe_plan(c->v, c->offs, c->rows, c->row_of, c->idx, c->T, c->K, c->E);
    case DS_MOE_GEMM:
        return ld_cu_moe_fp8_matmul(c->v, c->out, c->x, c->rows, c->offs, c->q, c->w, c->E, c->T * c->K, c->T, c->c,
                                    c->N, 128, 128);
    case DS_SAMPLE:
        return ld_cu_sample(c->v, c->idx, c->x, c->T, c->N, c->temp, -1, c->top_p, NAN, 7, 0, c->vwork, c->work_n);
    }
    return 0;
}

static void dline(const char *op, const char *shape, int T, int v, double t, double bytes, double ref_gbps)
{
    double gbps = bytes / t / 1e9;
    printf("%-13s %-26s %4d  %-6s %10.2f %8.1f %6.1f%%\n", op, shape, T, v ? "custom" : "ref", t * 1e6, gbps,
           100.0 * gbps / ref_gbps);
}

/* times c (custom, then ref when `ref_ok`) and prints the lines */
static void ds_time(ds_ctx *c, const char *op, const char *shape, double bytes, int ref_ok, double cp)
{
    for (int v = 1; v >= 0; v--) {
        if (v == LD_CU_REF && (!ref_ok || quick)) {
            printf("%-13s %-26s %4d  %-6s %10s\n", op, shape, c->T, "ref", "-");
            continue;
        }
        c->v = v;
        dline(op, shape, c->T, v, time_it(call_ds, c, v ? (quick ? 10 : 50) : 2), bytes, cp);
    }
}

static int32_t *dev_i32(const int32_t *h, size_t n)
{
    void *d;
    TRY(ld_cu_malloc(&d, n * sizeof *h));
    TRY(ld_cu_h2d(d, h, n * sizeof *h));
    return d;
}

static void *dev_zero(size_t bytes)
{
    void *d;
    TRY(ld_cu_malloc(&d, bytes));
    TRY(ld_cu_memset0(d, bytes));
    return d;
}

/* ---------------------------------------------------------------- DeepSeek-V4 (cuda_ds4.cu) */

/* V4_ATT_ROPE: the attention and its inverse RoPE as the backend runs
 * them, two launches (sync NULL) or one (the split's last blocks merge):
 * the A/B of the fused form */
typedef enum v4_op { V4_ATT, V4_ATT_ROPE, V4_SWIGLU, V4_ROPE, V4_HC_HEAD, V4_FP4, V4_COMP, V4_LN } v4_op;

/* one call of a V4 op; the fields each op reads */
typedef struct v4_ctx {
    v4_op op;
    int v, T, H, hd, win, pos0, ratio, kpick, N, K, D, r, d, overlap;
    float *out, *x, *y, *z, *w, *work;
    size_t work_n;
    uint8_t *q;
    int32_t *picks, *sync; /* V4_ATT_ROPE: sync NULL, two launches */
    float *freq;
} v4_ctx;

static int call_v4(void *p)
{
    v4_ctx *c = p;
    switch (c->op) {
    case V4_ATT:
        return ld_cu_ds4_attention(c->v, c->out, c->x, c->T, c->H, c->hd, c->y, c->win + c->T - 1, c->win, c->z,
                                   c->ratio, c->picks, c->kpick, c->w, 0.044f, c->pos0, c->work, c->work_n);
    case V4_ATT_ROPE: {
        ld_cu_rot rot = {c->freq, 1.0f, 64, 0};
        return ld_cu_ds4_attention_rope(c->out, c->x, c->T, c->H, c->hd, c->y, c->win + c->T - 1, c->win, c->z,
                                        c->ratio, c->picks, c->kpick, c->w, 0.044f, c->pos0, c->work, c->work_n, rot,
                                        c->sync);
    }
    case V4_SWIGLU:
        return ld_cu_ds4_clamped_swiglu(c->v, c->out, c->x, c->x + c->N, c->T, c->N, 2 * (size_t)c->N, 10.0f);
    case V4_ROPE:
        return ld_cu_ds_rope(c->v, c->x, c->T, (size_t)c->H * (size_t)c->hd, (size_t)(c->hd - 64), c->H,
                             (size_t)c->hd, 64, c->y, 1.0f, 1, c->pos0, 1, 0);
    case V4_HC_HEAD:
        return ld_cu_ds4_hc_head(c->v, c->out, c->x, c->T, c->N, c->D, c->y, c->z, 1.5f, 1e-6f, 1e-6f, c->work,
                                 c->work_n);
    case V4_FP4: return ld_cu_ds4_fp4_matmul(c->v, c->out, c->x, c->q, c->w, 1, c->T, c->K, c->N, c->N, c->K / 32);
    case V4_COMP:
        return ld_cu_ds4_compress(c->v, c->out, c->x, c->y, c->z, c->r, c->d, (size_t)(c->overlap ? 2 * c->d : c->d),
                                  c->overlap, 1, c->T, 0);
    case V4_LN: return ld_cu_ds_layernorm(c->v, c->x, c->T, (size_t)c->d, c->y, c->z, c->d, 1e-6f);
    }
    return 0;
}

/* times c (custom, then ref when `ref_ok`) and prints the lines */
static void v4_time(v4_ctx *c, const char *op, const char *shape, double bytes, int ref_ok, double cp)
{
    for (int v = 1; v >= 0; v--) {
        if (v == LD_CU_REF && (!ref_ok || quick)) {
            printf("%-13s %-26s %4d  %-6s %10s\n", op, shape, c->T, "ref", "-");
            continue;
        }
        c->v = v;
        dline(op, shape, c->T, v, time_it(call_v4, c, v ? (quick ? 10 : 50) : 2), bytes, cp);
    }
}

/* DeepSeek-V4-Flash sizes: 64 heads of 512 sharing one KV head, window
 * 128, CSA (ratio 4, index_topk 512) and HCA (ratio 128) entries; hidden
 * 4096, experts 2048 x 4096 FP4 with UE8M0 scales per 32 weights; mHC 4
 * streams; the compressor's entries; V3.2's indexer keys (128) for the
 * LayerNorm.  Attention's bytes: every key row once (however many heads
 * read it), q and out. */
static void bench_deepseek_v4(double cp)
{
    char shape[64];

    /* attention decode / short prefill: CSA (window + 512 picked of 2048
     * entries) and HCA (window + all 512 entries) */
    struct { int ratio, kpick, pos0; const char *name; } at[] = {{4, 512, 8191, "csa"}, {128, 0, 65535, "hca"}};
    for (size_t i = 0; i < 2; i++) {
        int Ts[] = {1, 4}, H = 64, hd = 512, win = 128, Tm = 4;
        int nent = (at[i].pos0 + Tm) / at[i].ratio;
        v4_ctx c = {.op = V4_ATT, .H = H, .hd = hd, .win = win, .pos0 = at[i].pos0, .ratio = at[i].ratio,
                    .kpick = at[i].kpick};
        int32_t *hp = malloc((size_t)Tm * 512 * sizeof *hp);
        if (!hp) exit(2);
        for (int t = 0; t < Tm; t++)
            for (int j = 0; j < 512; j++) hp[t * 512 + j] = j * 4; /* ascending, < 2048 */
        c.picks = at[i].kpick ? dev_i32(hp, (size_t)Tm * 512) : NULL;
        free(hp);
        c.x = dev_random((size_t)Tm * H * hd * 4);
        c.y = dev_random((size_t)(win + Tm) * hd * 4);
        c.z = dev_random((size_t)nent * hd * 4);
        c.w = dev_random((size_t)H * 4);
        c.out = dev_zero((size_t)Tm * H * hd * 4);
        size_t w0 = ld_cu_ds4_attention_work(0, Tm, H, hd, c.pos0, win, c.ratio, c.kpick, 1);
        size_t w1 = ld_cu_ds4_attention_work(1, Tm, H, hd, c.pos0, win, c.ratio, c.kpick, 1);
        c.work_n = w0 > w1 ? w0 : w1;
        c.work = dev_zero(c.work_n * 4);
        c.freq = dev_random(32 * 4);
        int32_t *sync = dev_zero(ld_cu_ds4_attention_sync(Tm, H) * 4); /* zero, and left zero by each launch */
        for (int ti = 0; ti < 2; ti++) {
            c.T = Ts[ti];
            int nk = win + (c.kpick ? c.kpick : (c.pos0 + 1) / c.ratio);
            snprintf(shape, sizeof shape, "%s H 64 hd 512 keys %d", at[i].name, nk);
            double bytes = 4.0 * ((double)c.T * nk * hd + 2.0 * c.T * H * hd);
            c.op = V4_ATT;
            v4_time(&c, "ds4_attention", shape, bytes, c.T == 1, cp);
            c.op = V4_ATT_ROPE; /* custom only: the ref lines print "-" */
            c.sync = NULL;
            v4_time(&c, "ds4_att_rope2", shape, bytes, 0, cp);
            c.sync = sync;
            v4_time(&c, "ds4_att_rope1", shape, bytes, 0, cp);
        }
        TRY(ld_cu_free(sync));
        TRY(ld_cu_free(c.freq));
        if (c.picks) TRY(ld_cu_free(c.picks));
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.y));
        TRY(ld_cu_free(c.z));
        TRY(ld_cu_free(c.w));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(c.work));
    }

    int Ts[] = {1, 64};
    for (size_t i = 0; i < 2; i++) {
        int T = Ts[i];
        /* clamped SwiGLU of a fused gate/up row of 2 x 2048 */
        v4_ctx s = {.op = V4_SWIGLU, .T = T, .N = 2048};
        s.x = dev_random((size_t)T * 4096 * 4);
        s.out = dev_zero((size_t)T * 2048 * 4);
        snprintf(shape, sizeof shape, "F 2048 fused");
        v4_time(&s, "ds4_swiglu", shape, (double)T * 2048 * 12.0, 1, cp);
        TRY(ld_cu_free(s.x));
        TRY(ld_cu_free(s.out));

        /* the output's inverse RoPE: 64 heads, the last 64 of 512 */
        v4_ctx r = {.op = V4_ROPE, .T = T, .H = 64, .hd = 512, .pos0 = 1000};
        r.x = dev_random((size_t)T * 64 * 512 * 4);
        r.y = dev_random(32 * 4);
        snprintf(shape, sizeof shape, "H 64 hd 512 dim 64 inverse");
        v4_time(&r, "ds4_rope", shape, (double)T * 64 * 64 * 8.0, 1, cp);
        TRY(ld_cu_free(r.x));
        TRY(ld_cu_free(r.y));

        /* hc_head: 4 streams of 4096 */
        int N = 4, D = 4096, ND = N * D;
        v4_ctx h = {.op = V4_HC_HEAD, .T = T, .N = N, .D = D};
        h.x = dev_random((size_t)T * ND * 4);
        h.y = dev_random((size_t)N * ND * 4);
        h.z = dev_random((size_t)N * 4);
        h.out = dev_zero((size_t)T * D * 4);
        h.work_n = ld_cu_hc_head_work(T, N);
        h.work = dev_zero(h.work_n * 4);
        snprintf(shape, sizeof shape, "N 4 D 4096");
        v4_time(&h, "hc_head", shape, (double)N * ND * 4.0 + (double)T * (ND + D) * 4.0, 1, cp);
        TRY(ld_cu_free(h.x));
        TRY(ld_cu_free(h.y));
        TRY(ld_cu_free(h.z));
        TRY(ld_cu_free(h.out));
        TRY(ld_cu_free(h.work));

        /* V3.2 indexer keys' LayerNorm (128) */
        v4_ctx l = {.op = V4_LN, .T = T, .d = 128};
        l.x = dev_random((size_t)T * 128 * 4);
        l.y = dev_random(128 * 4);
        l.z = dev_random(128 * 4);
        snprintf(shape, sizeof shape, "dim 128");
        v4_time(&l, "ds_layernorm", shape, (double)T * 128 * 8.0 + 1024.0, 1, cp);
        TRY(ld_cu_free(l.x));
        TRY(ld_cu_free(l.y));
        TRY(ld_cu_free(l.z));
    }

    /* FP4 expert GEMV / GEMM (gate or up 2048 x 4096, down 4096 x 2048) */
    struct { int N, K; } f4[] = {{2048, 4096}, {4096, 2048}};
    for (size_t i = 0; i < 2; i++) {
        int N = f4[i].N, K = f4[i].K, fT[] = {1, 8};
        size_t nsc = (size_t)N * (size_t)(K / 32);
        v4_ctx c = {.op = V4_FP4, .N = N, .K = K};
        c.q = dev_random((size_t)N * K / 2);
        c.w = dev_random(nsc);
        c.x = dev_random((size_t)8 * K * 4);
        c.out = dev_zero((size_t)8 * N * 4);
        for (int ti = 0; ti < 2; ti++) {
            c.T = fT[ti];
            snprintf(shape, sizeof shape, "fp4 %dx%d ue8m0/32", N, K);
            double bytes = (double)N * K / 2 + (double)nsc + 4.0 * c.T * ((double)K + N);
            v4_time(&c, "fp4_matmul", shape, bytes, c.T == 1, cp);
        }
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.w));
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.out));
    }

    /* the compressor: CSA (ratio 4, 2 x 512) one entry and 64 (a prefill
     * chunk), HCA (ratio 128, 512) one entry */
    struct { int r, overlap, nw; const char *name; } cp4[] = {{4, 1, 1, "csa"}, {4, 1, 64, "csa"}, {128, 0, 1, "hca"}};
    for (size_t i = 0; i < 3; i++) {
        int r = cp4[i].r, d = 512, ov = cp4[i].overlap, nw = cp4[i].nw;
        size_t stride = (size_t)(ov ? 2 * d : d), rows = (size_t)(nw + 1) * r;
        v4_ctx c = {.op = V4_COMP, .T = nw, .r = r, .d = d, .overlap = ov};
        c.x = dev_random(rows * stride * 4);
        c.y = dev_random(rows * stride * 4);
        c.z = dev_random((size_t)r * stride * 4);
        c.out = dev_zero((size_t)nw * d * 4);
        snprintf(shape, sizeof shape, "%s r %d d %d", cp4[i].name, r, d);
        double bytes = (double)nw * (ov ? 2 : 1) * r * d * 2 * 4.0 + (double)r * stride * 4 + (double)nw * d * 4;
        v4_time(&c, "ds4_compress", shape, bytes, 1, cp);
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.y));
        TRY(ld_cu_free(c.z));
        TRY(ld_cu_free(c.out));
    }
}

/* ---------------------------------------------------------------- grouped experts */

/* a decode step's routed experts: G weights [N][K] (FP4, fp32 scales per
 * 32, or FP8 in 128 x 128 blocks), a row each, through one grouped launch
 * (grouped = 1) or one launch per expert (the per-expert path of the moe
 * entry before the grouped launch) */
typedef struct gr_ctx {
    int fp4, grouped, G, K, N;
    ld_cu_mm_group tab[16];
    ld_cu_mm_group *dtab;
} gr_ctx;

static int call_grouped(void *p)
{
    gr_ctx *c = p;
    int br = c->fp4 ? 1 : 128, bc = c->fp4 ? 32 : 128;
    if (c->grouped)
        return c->fp4 ? ld_cu_grouped_fp4_matmul(c->dtab, c->G, 1, c->K, c->N, br, bc)
                      : ld_cu_grouped_fp8_matmul(c->dtab, c->G, 1, c->K, c->N, br, bc);
    for (int g = 0; g < c->G; g++) {
        const ld_cu_mm_group *t = &c->tab[g];
        int e = c->fp4 ? ld_cu_ds4_fp4_matmul(LD_CU_CUSTOM, t->out, t->x, t->q, t->scale, 0, 1, c->K, c->N, c->N,
                                              c->K / 32)
                       : ld_cu_fp8_matmul(LD_CU_CUSTOM, t->out, t->x, t->q, t->scale, 1, c->K, c->N, 128, 128);
        if (e) return e;
    }
    return 0;
}

/* V4-Flash's decode experts: 6 routed, gate and up in one launch (12
 * weights 2048 x 4096), down (6 weights 4096 x 2048); FP4 and, as V3's
 * experts, FP8 */
static void bench_grouped(double cp)
{
    struct { int fp4, G, N, K; const char *name; } sh[] = {
        {1, 12, 2048, 4096, "fp4 gate+up 12x2048x4096"}, {1, 6, 4096, 2048, "fp4 down 6x4096x2048"},
        {0, 12, 2048, 4096, "fp8 gate+up 12x2048x4096"}, {0, 6, 4096, 2048, "fp8 down 6x4096x2048"},
    };
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        gr_ctx c = {.fp4 = sh[i].fp4, .G = sh[i].G, .K = sh[i].K, .N = sh[i].N};
        size_t qb = c.fp4 ? (size_t)c.N * c.K / 2 : (size_t)c.N * c.K;
        size_t ns = c.fp4 ? (size_t)c.N * (c.K / 32) : (size_t)((c.N + 127) / 128) * ((c.K + 127) / 128);
        float *x = dev_random((size_t)c.G * c.K * 4), *out = dev_zero((size_t)c.G * c.N * 4);
        for (int g = 0; g < c.G; g++) {
            float *sc = dev_zero(ns * 4); /* zero scales: the bytes are what is timed */
            c.tab[g] = (ld_cu_mm_group){dev_random(qb), sc, x + (size_t)g * c.K, out + (size_t)g * c.N, 1, 0, 0, 0, NULL};
        }
        c.dtab = dev_zero(sizeof c.tab[0] * (size_t)c.G);
        TRY(ld_cu_h2d(c.dtab, c.tab, sizeof c.tab[0] * (size_t)c.G));
        double bytes = (double)c.G * ((double)qb + 4.0 * ns + 4.0 * (c.K + c.N));
        for (c.grouped = 1; c.grouped >= 0; c.grouped--) {
            double t = time_it(call_grouped, &c, quick ? 10 : 50), gbps = bytes / t / 1e9;
            printf("%-13s %-26s %4d  %-6s %10.2f %8.1f %6.1f%%\n", c.grouped ? "moe_grouped" : "moe_per_expert",
                   sh[i].name, 1, "custom", t * 1e6, gbps, 100.0 * gbps / cp);
        }
        for (int g = 0; g < c.G; g++) {
            TRY(ld_cu_free((void *)c.tab[g].q));
            TRY(ld_cu_free((void *)c.tab[g].scale));
        }
        TRY(ld_cu_free(c.dtab));
        TRY(ld_cu_free(x));
        TRY(ld_cu_free(out));
    }
}

void bench_deepseek(double cp)
{
    char shape[64];
    printf("%-13s %-26s %4s  %-6s %10s %8s %7s\n", "op", "shape", "T", "kernel", "us/call", "GB/s", "%copy");

    /* FP8 block-scaled GEMV / GEMM at DeepSeek-V3 sizes (N x K) */
    struct { int N, K; } f8[] = {{1536, 7168}, {576, 7168}, {7168, 2048}, {24576, 1536}};
    for (size_t i = 0; i < sizeof f8 / sizeof f8[0]; i++) {
        int N = f8[i].N, K = f8[i].K, Ts[] = {1, 8, 64};
        size_t nsc = (size_t)((N + 127) / 128) * (size_t)((K + 127) / 128);
        ds_ctx c = {.op = DS_FP8, .N = N, .K = K};
        c.q = dev_random((size_t)N * (size_t)K);
        c.w = dev_random(nsc * 4);
        c.x = dev_random((size_t)64 * (size_t)K * 4);
        c.out = dev_zero((size_t)64 * (size_t)N * 4);
        for (int ti = 0; ti < 3; ti++) {
            c.T = Ts[ti];
            snprintf(shape, sizeof shape, "fp8 %dx%d", N, K);
            double bytes = (double)N * K + 4.0 * (double)nsc + 4.0 * c.T * ((double)K + N);
            ds_time(&c, "fp8_matmul", shape, bytes, c.T == 1, cp);
        }
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.w));
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.out));
    }

    /* MoE: the plan and the grouped FP8 expert GEMM (16 experts of
     * 2048 x 7168, 8 chosen per token; bytes: the chosen experts' weights) */
    int mT[] = {1, 16};
    for (size_t i = 0; i < 2; i++) {
        int T = mT[i], E = 16, K = 8, D = 7168, N = 2048, used = 0;
        int32_t *hidx = malloc((size_t)T * K * sizeof *hidx);
        int seen[16] = {0};
        if (!hidx) exit(2);
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++) hidx[t * K + k] = (int32_t)((t * 3 + k * 2) % E); /* distinct per token */
        for (int j = 0; j < T * K; j++) used += !seen[hidx[j]]++;
        size_t nsc = (size_t)E * ((N + 127) / 128) * ((D + 127) / 128);
        ds_ctx c = {.op = DS_MOE_PLAN, .T = T, .K = K, .E = E, .N = N, .c = D};
        c.idx = dev_i32(hidx, (size_t)T * K);
        c.offs = dev_zero((size_t)(E + 1) * 4);
        c.rows = dev_zero((size_t)T * K * 4);
        c.row_of = dev_zero((size_t)T * K * 4);
        c.q = dev_random((size_t)E * N * D);
        c.w = dev_random(nsc * 4);
        c.x = dev_random((size_t)T * D * 4);
        c.out = dev_zero((size_t)T * K * N * 4);
        snprintf(shape, sizeof shape, "E %d K %d", E, K);
        ds_time(&c, "moe_plan", shape, (double)T * K * 4.0 * 3, 1, cp);
        c.v = LD_CU_CUSTOM;
        TRY(call_ds(&c)); /* the plan the GEMM reads */
        c.op = DS_MOE_GEMM;
        snprintf(shape, sizeof shape, "fp8 %d experts %dx%d", used, N, D);
        ds_time(&c, "moe_fp8_gemm", shape, (double)used * N * D + 4.0 * T * (D + (double)K * N), T == 1, cp);
        free(hidx);
        TRY(ld_cu_free(c.idx));
        TRY(ld_cu_free(c.offs));
        TRY(ld_cu_free(c.rows));
        TRY(ld_cu_free(c.row_of));
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.w));
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.out));
    }

    /* MLA absorption (kv_b_proj bf16 [H*256][512]): W_UK^T q, W_UV o_lat */
    int aH[] = {16, 128};
    for (size_t i = 0; i < 2; i++) {
        int H = aH[i], aT[] = {1, 8};
        size_t wb = (size_t)H * 256 * 512 * 2;
        ds_ctx c = {.H = H};
        c.q = dev_random(wb);
        c.x = dev_random((size_t)8 * H * 512 * 4);
        c.out = dev_zero((size_t)8 * H * 512 * 4);
        for (int ti = 0; ti < 2; ti++) {
            c.T = aT[ti];
            snprintf(shape, sizeof shape, "bf16 H %d 128->512", H);
            c.op = DS_ABSQ;
            ds_time(&c, "absorb_q", shape, (double)wb / 2 + 4.0 * c.T * H * (192 + 512), c.T == 1, cp);
            snprintf(shape, sizeof shape, "bf16 H %d 512->128", H);
            c.op = DS_ABSO;
            ds_time(&c, "absorb_out", shape, (double)wb / 2 + 4.0 * c.T * H * (512 + 128), c.T == 1, cp);
        }
        TRY(ld_cu_free(c.q));
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.out));
    }

    /* MLA absorbed decode: 128 heads (16 per rank at TP 8), latent 512 +
     * rope 64, dense over ctx and sparse over 2048 selected */
    struct { int H, ctx, k; } ml[] = {{16, 4096, 0}, {128, 4096, 0}, {128, 32768, 0}, {128, 32768, 2048}};
    for (size_t i = 0; i < sizeof ml / sizeof ml[0]; i++) {
        int H = ml[i].H, ctx = ml[i].ctx, k = ml[i].k, c_ = 512, dr = 64;
        ds_ctx c = {.op = DS_MLA, .T = 1, .H = H, .c = c_, .dr = dr, .pos0 = ctx - 1, .k = k};
        c.x = dev_random((size_t)H * c_ * 4);
        c.y = dev_random((size_t)H * (128 + dr) * 4);
        c.z = dev_random((size_t)ctx * c_ * 4);
        c.w = dev_random((size_t)ctx * dr * 4);
        c.out = dev_zero((size_t)H * c_ * 4);
        if (k) {
            int32_t *h = malloc((size_t)k * sizeof *h);
            if (!h) exit(2);
            for (int j = 0; j < k; j++) h[j] = (int32_t)((int64_t)j * ctx / k); /* ascending, spread */
            c.sel = dev_i32(h, (size_t)k);
            free(h);
        }
        c.work_n = ld_cu_mla_latent_work(LD_CU_CUSTOM, 1, H, c_, c.pos0, c.sel, k);
        c.work = dev_zero(c.work_n * 4);
        int keys = k ? k : ctx;
        if (k) snprintf(shape, sizeof shape, "H %d ctx %d sel %d", H, ctx, k);
        else snprintf(shape, sizeof shape, "H %d ctx %d", H, ctx);
        double bytes = (double)keys * (c_ + dr) * 4.0 + (double)H * (2 * c_ + 128 + dr) * 4.0;
        ds_time(&c, k ? "mla_sparse" : "mla_latent", shape, bytes, 0, cp);
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.y));
        TRY(ld_cu_free(c.z));
        TRY(ld_cu_free(c.w));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(c.sel));
        TRY(ld_cu_free(c.work));
    }

    /* the V3.2 indexer (64 heads of 128) and its top-2048 */
    int ns[] = {4096, 32768};
    for (size_t i = 0; i < 2; i++) {
        int n = ns[i];
        ds_ctx c = {.op = DS_INDEX, .T = 1, .H = 64, .c = 128, .N = n, .form = 0};
        c.x = dev_random((size_t)64 * 128 * 4);
        c.y = dev_random(64 * 4);
        c.z = dev_random((size_t)n * 128 * 4);
        c.out = dev_zero((size_t)n * 4);
        snprintf(shape, sizeof shape, "v3.2 H 64 dim 128 n %d", n);
        ds_time(&c, "index_scores", shape, (double)n * 128 * 4.0 + (double)n * 4.0, n <= 4096, cp);
        ds_ctx t = {.op = DS_TOPK, .T = 1, .N = n, .k = 2048, .x = c.out};
        t.idx = dev_zero((size_t)2048 * 4);
        snprintf(shape, sizeof shape, "n %d k 2048", n);
        ds_time(&t, "topk", shape, (double)n * 4.0 + 2048 * 4.0, 0, cp); /* ref: O(n k) in one thread */
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.y));
        TRY(ld_cu_free(c.z));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(t.idx));
    }

    /* routers over 256 experts, expert combine of 8 choices at hidden 7168 */
    int rT[] = {1, 64};
    for (size_t i = 0; i < 2; i++) {
        int T = rT[i];
        ds_ctx c = {.op = DS_ROUTE, .T = T, .E = 256};
        c.x = dev_random((size_t)T * 256 * 4);
        c.y = dev_random(256 * 4);
        c.out = dev_zero((size_t)T * 8 * 4);
        c.idx = dev_zero((size_t)T * 8 * 4);
        snprintf(shape, sizeof shape, "E 256 groups 4/8 k 8");
        ds_time(&c, "ds_route", shape, (double)T * 256 * 4.0, 1, cp);
        c.op = DS_ROUTE4;
        snprintf(shape, sizeof shape, "E 256 k 6 sqrt-softplus");
        ds_time(&c, "ds4_route", shape, (double)T * 256 * 4.0, 1, cp);
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.y));
        TRY(ld_cu_free(c.out));
        TRY(ld_cu_free(c.idx));

        ds_ctx m = {.op = DS_COMBINE, .T = T, .K = 8, .N = 7168};
        m.x = dev_random((size_t)T * 8 * 7168 * 4);
        m.y = dev_random((size_t)T * 8 * 4);
        m.out = dev_random((size_t)T * 7168 * 4);
        snprintf(shape, sizeof shape, "K 8 D 7168");
        ds_time(&m, "moe_combine", shape, (double)T * 7168 * 4.0 * 10, 1, cp);
        TRY(ld_cu_free(m.x));
        TRY(ld_cu_free(m.y));
        TRY(ld_cu_free(m.out));

        /* mHC with 4 streams of 4096 */
        int N = 4, D = 4096, ND = N * D, R = (2 + N) * N;
        ds_ctx h = {.op = DS_HC_PRE, .T = T, .K = N, .N = D};
        h.x = dev_random((size_t)T * ND * 4);
        h.y = dev_random((size_t)R * ND * 4);
        h.z = dev_random((size_t)R * 4);
        h.w = dev_random(3 * 4);
        h.post = dev_zero((size_t)T * N * 4);
        h.comb = dev_zero((size_t)T * N * N * 4);
        h.out = dev_zero((size_t)T * ND * 4);
        h.work_n = ld_cu_hc_work(T, N);
        h.work = dev_zero(h.work_n * 4);
        snprintf(shape, sizeof shape, "N 4 D 4096 sinkhorn 20");
        ds_time(&h, "hc_pre", shape, (double)R * ND * 4.0 + (double)T * (ND + D) * 4.0, 1, cp);
        h.op = DS_HC_POST;
        TRY(ld_cu_free(h.y)); /* fn; f in its place */
        h.y = dev_random((size_t)T * D * 4);
        snprintf(shape, sizeof shape, "N 4 D 4096");
        ds_time(&h, "hc_post", shape, (double)T * (2.0 * ND + D) * 4.0, 1, cp);
        TRY(ld_cu_free(h.x));
        TRY(ld_cu_free(h.y));
        TRY(ld_cu_free(h.z));
        TRY(ld_cu_free(h.w));
        TRY(ld_cu_free(h.post));
        TRY(ld_cu_free(h.comb));
        TRY(ld_cu_free(h.out));
        TRY(ld_cu_free(h.work));
    }

    /* sampling over DeepSeek's vocabulary: greedy and top_p 0.9 */
    int sT[] = {1, 8};
    for (size_t i = 0; i < 2; i++) {
        int T = sT[i], V = 129280;
        ds_ctx c = {.op = DS_SAMPLE, .T = T, .N = V, .temp = 0.0, .top_p = NAN};
        c.x = dev_random((size_t)T * V * 4);
        c.idx = dev_zero((size_t)T * 4);
        c.work_n = ld_cu_sample_work(LD_CU_CUSTOM, T, V);
        c.vwork = dev_zero(c.work_n);
        snprintf(shape, sizeof shape, "V %d greedy", V);
        ds_time(&c, "sample", shape, (double)T * V * 4.0, 1, cp);
        c.temp = 0.7;
        c.top_p = 0.9;
        snprintf(shape, sizeof shape, "V %d t 0.7 top_p 0.9", V);
        ds_time(&c, "sample", shape, (double)T * V * 4.0, 0, cp);
        TRY(ld_cu_free(c.x));
        TRY(ld_cu_free(c.idx));
        TRY(ld_cu_free(c.vwork));
    }

    bench_deepseek_v4(cp);
    bench_grouped(cp);
}
