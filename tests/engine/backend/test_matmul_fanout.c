/* test_matmul_fanout.c - the CPU backends' matmul_fanout (backend.h): n
 * products of one input in one run of the pool, the bits of the n matmul
 * calls (and, with norms, of rmsnorm after each) on the same backend:
 * the reference, the "cpu" backend's default (i24 on Q4_0 / Q4_1 / Q8_0, the
 * fast kernels on the others), the fast kernels, q8's and i24's, on 1, 2
 * and 3 threads;
 * decode (a step's ranges) and prefill (pieces); F32, F16, Q4_0, Q4_1,
 * Q8_0 and Q4_K weights, a rope-ordered one among them, row counts that
 * are and are not multiples of the fast kernels' groups of sixteen.  What
 * it does not group (weights of two types or two widths, more weights
 * than it takes) refused with LD_ERR_UNSUPPORTED and what matmul refuses
 * with LD_ERR_USAGE, nothing written either way.  And a decode step's
 * matmuls on 2 and 3 threads, each thread preparing x for itself, the bits
 * of 1 thread's.
 *
 *   test_matmul_fanout [case-filter] */
#include "tests/support/backend_ops_check.h"

#define MAX_W 4

/* a CPU backend of a kernel set on some threads */
typedef struct cpu_run {
    int threads, fast;
    const char *kernels, *name;
} cpu_run;

static const cpu_run runs[] = {
    {1, 0, NULL, "ref-1t"},        {3, 0, NULL, "ref-3t"}, {1, 1, NULL, "cpu-1t"},
    {2, 1, NULL, "cpu-2t"},        {3, 1, NULL, "cpu-3t"}, {1, 1, "matmul=fast", "cpu+fast-1t"},
    {2, 1, "matmul=fast", "cpu+fast-2t"}, {3, 1, "matmul=fast", "cpu+fast-3t"}, {2, 1, "matmul=q8", "cpu+q8-2t"},
    {3, 1, "matmul=q8", "cpu+q8-3t"},  {2, 1, "matmul=i24", "cpu+i24-2t"}, {3, 1, "matmul=i24", "cpu+i24-3t"},
};

/* one fanout: n weights of kind k, K columns, rows[i] rows (rope_hd on
 * weight 0 where rope), T tokens; with norms or not */
typedef struct fan_case {
    int kind, K, n, rows[MAX_W], T, rope, norms;
} fan_case;

static const fan_case fan_cases[] = {
    {0, 64, 3, {48, 16, 16}, 1, 0, 0},   {1, 64, 2, {40, 24}, 3, 0, 0},     {3, 128, 3, {64, 32, 32}, 1, 1, 0},
    {4, 128, 3, {64, 32, 32}, 1, 1, 0},  {4, 96, 2, {72, 40}, 1, 0, 0},     {4, 128, 2, {96, 96}, 5, 0, 0},
    {4, 256, 4, {48, 8, 16, 33}, 9, 0, 0}, {5, 64, 3, {32, 16, 17}, 1, 0, 0}, {5, 128, 2, {64, 64}, 4, 0, 1},
    {6, 256, 2, {32, 16}, 2, 0, 0},      {4, 64, 2, {32, 16}, 1, 0, 1},     {4, 64, 1, {48}, 1, 0, 0},
};

/* the weights, the input and the norms of a case (weights loaded on be) */
typedef struct fan_in {
    void *wd[MAX_W];
    ld_weight *w[MAX_W], *nw[MAX_W];
    float *x, *norm[MAX_W];
} fan_in;

static void fan_free(ld_backend *be, fan_in *in)
{
    for (int i = 0; i < MAX_W; i++) {
        if (in->w[i]) be->ops->weight_free(be, in->w[i]);
        if (in->nw[i]) be->ops->weight_free(be, in->nw[i]);
        free(in->wd[i]);
        free(in->norm[i]);
    }
    free(in->x);
}

static int fan_make(ld_backend *be, const fan_case *c, fan_in *in)
{
    memset(in, 0, sizeof *in);
    rng = 0x5eed0000u + (uint64_t)c->K * 31u + (uint64_t)c->rows[0];
    in->x = malloc((size_t)c->T * (size_t)c->K * sizeof *in->x);
    CHECK(in->x);
    fill(in->x, (size_t)c->T * (size_t)c->K, 1.0f);
    for (int i = 0; i < c->n; i++) {
        in->wd[i] = rand_weights(&kinds[c->kind], c->rows[i], c->K);
        CHECK(in->wd[i]);
        int rope = c->rope && i == 0 ? 16 : 0;
        in->w[i] = load_weight(be, &kinds[c->kind], in->wd[i], c->rows[i], c->K, rope);
        CHECK(in->w[i]);
        if (!c->norms || i == 1) continue; /* weight 1's output not normed: norms[1] NULL */
        in->norm[i] = malloc((size_t)c->rows[i] * sizeof *in->norm[i]);
        CHECK(in->norm[i]);
        fill(in->norm[i], (size_t)c->rows[i], 1.0f);
        in->nw[i] = load_weight(be, &kinds[0], in->norm[i], 1, c->rows[i], 0);
        CHECK(in->nw[i]);
    }
    return 0;
}

/* the case's outputs, each downloaded (malloc'd into got[i]): by one
 * matmul_fanout (fan) or by a matmul each, then rmsnorm where normed */
static int fan_run(ld_backend *be, const fan_case *c, const fan_in *in, int fan, float *got[MAX_W])
{
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    ld_buf *bx = upload(be, in->x, (size_t)c->T * (size_t)c->K), *outs[MAX_W] = {0};
    CHECK(bx);
    for (int i = 0; i < c->n; i++) CHECK((outs[i] = upload(be, NULL, (size_t)c->T * (size_t)c->rows[i])));
    const float eps = 1e-5f;
    if (fan) {
        CHECK_MSG(o->matmul_fanout, "%s: no matmul_fanout", o->name);
        ld_weight *const *norms = c->norms ? in->nw : NULL;
        CHECK_MSG(o->matmul_fanout(be, outs, bx, in->w, c->n, c->T, norms, eps, &err) == LD_OK, "%s", err.msg);
    } else {
        for (int i = 0; i < c->n; i++) {
            CHECK_MSG(o->matmul(be, outs[i], bx, in->w[i], NULL, c->T, &err) == LD_OK, "%s", err.msg);
            if (in->nw[i]) CHECK(o->rmsnorm(be, outs[i], outs[i], in->nw[i], c->T, eps, &err) == LD_OK);
        }
    }
    for (int i = 0; i < c->n; i++) {
        CHECK((got[i] = download(be, outs[i], (size_t)c->T * (size_t)c->rows[i])));
        o->buf_free(be, outs[i]);
    }
    o->buf_free(be, bx);
    return 0;
}

static int check_case(ld_backend *be, const char *be_name, const fan_case *c)
{
    fan_in in;
    float *want[MAX_W] = {0}, *got[MAX_W] = {0};
    int rc = fan_make(be, c, &in) || fan_run(be, c, &in, 0, want) || fan_run(be, c, &in, 1, got);
    for (int i = 0; !rc && i < c->n; i++) {
        size_t n = (size_t)c->T * (size_t)c->rows[i];
        CHECK_MSG(memcmp(want[i], got[i], n * sizeof *got[i]) == 0,
                  "%s: %s K=%d T=%d weight %d of %d rows: fanout not the bits of its matmul", be_name,
                  kinds[c->kind].name, c->K, c->T, i, c->rows[i]);
    }
    for (int i = 0; i < MAX_W; i++) {
        free(want[i]);
        free(got[i]);
    }
    fan_free(be, &in);
    return rc;
}

static int test_fanout_bits_of_matmuls(void)
{
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        ld_backend *be = NULL;
        ld_error err = {0};
        CHECK_MSG(ld_backend_cpu_create_ex(runs[r].threads, runs[r].fast, runs[r].kernels, &be, &err) == LD_OK, "%s",
                  err.msg);
        int rc = 0;
        for (size_t i = 0; !rc && i < sizeof fan_cases / sizeof fan_cases[0]; i++)
            rc = check_case(be, runs[r].name, &fan_cases[i]);
        ld_backend_destroy(be);
        if (rc) return rc;
        printf("  %-10s %zu fanouts: the bits of a matmul each\n", runs[r].name, sizeof fan_cases / sizeof fan_cases[0]);
    }
    return 0;
}

/* what matmul_fanout refuses, before anything is written: the outputs
 * still hold their zeros */
static int check_refusals(ld_backend *be)
{
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    void *a = rand_weights(&kinds[4], 32, 64), *b = rand_weights(&kinds[5], 32, 64), *c = rand_weights(&kinds[4], 32, 32);
    ld_weight *wa = load_weight(be, &kinds[4], a, 32, 64, 0), *wb = load_weight(be, &kinds[5], b, 32, 64, 0);
    ld_weight *wc = load_weight(be, &kinds[4], c, 32, 32, 0);
    ld_buf *x = upload(be, NULL, 64), *o1 = upload(be, NULL, 32), *o2 = upload(be, NULL, 32);
    CHECK(a && b && c && wa && wb && wc && x && o1 && o2);
    float one[64];
    for (int i = 0; i < 64; i++) one[i] = 1.0f;
    CHECK(o->buf_write(be, x, 0, one, 64, &err) == LD_OK);
    ld_buf *outs[2] = {o1, o2}, *inplace[2] = {o1, x}, *many[9];
    ld_weight *mixed[2] = {wa, wb}, *widths[2] = {wa, wc}, *same[2] = {wa, wa}, *nine[9];
    for (int i = 0; i < 9; i++) many[i] = o1, nine[i] = wa;
    CHECK(o->matmul_fanout(be, outs, x, mixed, 2, 1, NULL, 0.0f, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->matmul_fanout(be, outs, x, widths, 2, 1, NULL, 0.0f, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->matmul_fanout(be, many, x, nine, 9, 1, NULL, 0.0f, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->matmul_fanout(be, outs, x, same, 0, 1, NULL, 0.0f, &err) == LD_ERR_UNSUPPORTED);
    CHECK(o->matmul_fanout(be, inplace, x, same, 2, 1, NULL, 0.0f, &err) == LD_ERR_USAGE);
    CHECK(o->matmul_fanout(be, outs, x, same, 2, 3, NULL, 0.0f, &err) == LD_ERR_USAGE); /* x holds one row */
    ld_weight *block_norms[2] = {wa, NULL};
    CHECK(o->matmul_fanout(be, outs, x, same, 2, 1, block_norms, 1e-5f, &err) == LD_ERR_USAGE);
    float *g1 = download(be, o1, 32), *g2 = download(be, o2, 32);
    CHECK(g1 && g2);
    for (int i = 0; i < 32; i++) CHECK_MSG(g1[i] == 0.0f && g2[i] == 0.0f, "%s: written before a refusal", o->name);
    /* and the same weights go out together */
    CHECK_MSG(o->matmul_fanout(be, outs, x, same, 2, 1, NULL, 0.0f, &err) == LD_OK, "%s", err.msg);
    free(g1);
    free(g2);
    ld_buf *bufs[] = {x, o1, o2};
    for (int i = 0; i < 3; i++) o->buf_free(be, bufs[i]);
    ld_weight *ws[] = {wa, wb, wc};
    for (int i = 0; i < 3; i++) o->weight_free(be, ws[i]);
    free(a);
    free(b);
    free(c);
    return 0;
}

static int test_fanout_refusals(void)
{
    for (int fast = 0; fast <= 1; fast++) {
        ld_backend *be = NULL;
        ld_error err = {0};
        CHECK_MSG(ld_backend_cpu_create_ex(2, fast, NULL, &be, &err) == LD_OK, "%s", err.msg);
        int rc = check_refusals(be);
        ld_backend_destroy(be);
        if (rc) return rc;
    }
    printf("  ref, cpu: two types, two widths, nine weights, none, in place, x too short, a block-type norm: "
           "refused, nothing written\n");
    return 0;
}

/* A decode step's matmuls on threads threads of the fast kernels, kind k,
 * one after the other, x rewritten in place between two of them (a
 * thread that kept its prepared x for the same buffer would be caught):
 * wa by x1, wa by x2, the fanout of wa and wb by x2, wb by x2, each
 * output downloaded into out[0..4] (malloc'd) */
enum { DEC_K = 256, DEC_A = 48, DEC_B = 40, DEC_OUTS = 5 };

static int decode_steps(int threads, int k, const void *da, const void *db, const float *x1, const float *x2,
                        float *out[DEC_OUTS])
{
    ld_backend *be = NULL;
    ld_error err = {0};
    CHECK_MSG(ld_backend_cpu_create_ex(threads, 1, "matmul=fast", &be, &err) == LD_OK, "%s", err.msg);
    const ld_backend_ops *o = be->ops;
    ld_weight *wa = load_weight(be, &kinds[k], da, DEC_A, DEC_K, 0), *wb = load_weight(be, &kinds[k], db, DEC_B, DEC_K, 0);
    ld_buf *bx = upload(be, x1, DEC_K), *ob[DEC_OUTS];
    CHECK(wa && wb && bx);
    const int rows[DEC_OUTS] = {DEC_A, DEC_A, DEC_A, DEC_B, DEC_B};
    for (int i = 0; i < DEC_OUTS; i++) CHECK((ob[i] = upload(be, NULL, (size_t)rows[i])));
    CHECK(o->matmul(be, ob[0], bx, wa, NULL, 1, &err) == LD_OK);
    CHECK(o->buf_write(be, bx, 0, x2, DEC_K, &err) == LD_OK);
    CHECK(o->matmul(be, ob[1], bx, wa, NULL, 1, &err) == LD_OK);
    ld_buf *fo[2] = {ob[2], ob[3]};
    ld_weight *fw[2] = {wa, wb};
    CHECK_MSG(o->matmul_fanout(be, fo, bx, fw, 2, 1, NULL, 0.0f, &err) == LD_OK, "%s", err.msg);
    CHECK(o->matmul(be, ob[4], bx, wb, NULL, 1, &err) == LD_OK);
    for (int i = 0; i < DEC_OUTS; i++) {
        CHECK((out[i] = download(be, ob[i], (size_t)rows[i])));
        o->buf_free(be, ob[i]);
    }
    o->buf_free(be, bx);
    o->weight_free(be, wa);
    o->weight_free(be, wb);
    ld_backend_destroy(be);
    return 0;
}

/* A decode step's matmul on 2 and 3 threads, where each thread prepares x
 * for itself (backend_ref_dense.c, matmul_prepare), gives the bits of 1
 * thread, where the caller prepares it once: every weight type of the fast
 * kernels, call after call, x rewritten in place between them. */
static int test_decode_threads_bits(void)
{
    static const int ks[] = {0, 1, 3, 4, 5, 6};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        int k = ks[i];
        rng = 0xdec0de00u + (uint64_t)k;
        void *da = rand_weights(&kinds[k], DEC_A, DEC_K), *db = rand_weights(&kinds[k], DEC_B, DEC_K);
        float x1[DEC_K], x2[DEC_K];
        fill(x1, DEC_K, 1.0f);
        fill(x2, DEC_K, 1.0f);
        CHECK(da && db);
        float *want[DEC_OUTS] = {0};
        CHECK(decode_steps(1, k, da, db, x1, x2, want) == 0);
        CHECK_MSG(memcmp(want[0], want[1], DEC_A * sizeof *want[0]) != 0, "%s: x2 gave x1's outputs",
                  kinds[k].name);
        for (int threads = 2; threads <= 3; threads++) {
            float *got[DEC_OUTS] = {0};
            CHECK(decode_steps(threads, k, da, db, x1, x2, got) == 0);
            const int rows[DEC_OUTS] = {DEC_A, DEC_A, DEC_A, DEC_B, DEC_B};
            for (int j = 0; j < DEC_OUTS; j++) {
                CHECK_MSG(memcmp(want[j], got[j], (size_t)rows[j] * sizeof *got[j]) == 0,
                          "%s, %d threads: step %d differs from 1 thread", kinds[k].name, threads, j);
                free(got[j]);
            }
        }
        for (int j = 0; j < DEC_OUTS; j++) free(want[j]);
        free(da);
        free(db);
    }
    printf("  f32, f16, q4_0, q4_1, q8_0, q4_k: decode matmuls on 2 and 3 threads the bits of 1, x rewritten between\n");
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_fanout_bits_of_matmuls),
    LD_CASE(test_fanout_refusals),
    LD_CASE(test_decode_threads_bits),
};

LD_TEST_MAIN(tests)
