/* test_tp_ds4.c - tensor parallelism for DeepSeek-V4 (engine/tp/tp_ds4_shard.h,
 * tp_forward.h's ld_tp_ds4_session_create) on simulated ranks over the tiny
 * HF models of testdata/models (written with transformers by
 * tools/gen_tiny_deepseek_v4.py; deepseek-v4-fp4: DeepSeek's released
 * format, FP8 linears in 16x16 blocks, FP4 experts in 1x32 blocks): TP = 2
 * within the same 1e-5 of transformers' logits and hidden planes as the
 * single-rank session; bitwise equal over reruns, threads per rank, node
 * groupings and chunkings; TP = 1 bitwise the plain session; the session
 * variants combine=fused and mhc=bf16; the shard's views and K-slices; the
 * reduce points (also on the host leaves); the reduce in place in the
 * backends' memory, bitwise the staging path's; the refusals; the
 * residual streams a layer slice is fed (TP = 1 the plain ones). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "engine/backend/host_tensor.h"
#include "tests/support/ld_test.h"
#include "engine/engine.h"
#include "engine/models/dense/model.h"
#include "engine/tp/tp_ds4_shard.h"
#include "engine/tp/tp_forward.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_T 64

static const char *const models[] = {"deepseek-v4", "deepseek-v4-fp4"};
#define N_MODELS 2

/* ------------------------------------------------------------ helpers */

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

static int open_model(const char *name, ld_ds4_model **m)
{
    ld_error err;
    ld_error_clear(&err);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    CHECK_MSG(ld_ds4_model_open(dir, m, &err) == LD_OK, "%s: %s", name, err.msg);
    return 0;
}

/* One run: a TP session (o != NULL) or a plain one on `plain_be`
 * ("cpu"/"ref", 2 threads), the variants of `kspec`, chunks of `batch`,
 * calls of `call` tokens (0: one call); logits [T][V] and hidden [P][T][D]
 * (NULL: not wanted). */
typedef struct run_spec {
    const ld_tp_opts *o;
    const char *plain_be;
    const char *kspec;
    int batch, call;
} run_spec;

static ld_status eval_calls(ld_tp_session *tp, ld_ds4_session *ds, const ld_ds4_model *m, int call,
                            const int32_t *toks, int T, float *logits, float *hidden, ld_error *err)
{
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    ld_status st = LD_OK;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL; /* per call: scattered */
        if (hidden && !h) return LD_ERR_NOMEM;
        float *l = logits ? logits + (size_t)t0 * V : NULL;
        st = tp ? ld_tp_session_eval(tp, toks + t0, n, l, h, err) : ld_ds4_session_eval(ds, toks + t0, n, l, h, NULL, err);
        for (size_t p = 0; h && st == LD_OK && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        free(h);
        t0 += n;
    }
    return st;
}

static ld_status run(const ld_ds4_model *m, const run_spec *r, const int32_t *toks, int T, float *logits,
                     float *hidden, ld_error *err)
{
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    LD_TRY(ld_cpu_kernels_parse(r->kspec, &k, err));
    ld_tp_session *tp = NULL;
    ld_ds4_session *ds = NULL;
    ld_backend *be = NULL;
    ld_status st;
    if (r->o) {
        st = ld_tp_ds4_session_create(m, r->o, &k, MAX_T, r->batch, &tp, err);
    } else {
        st = ld_backend_cpu_create_ex(2, strcmp(r->plain_be, "cpu") == 0, NULL, &be, err);
        if (st == LD_OK) st = ld_ds4_session_create(m, be, MAX_T, r->batch, &ds, err);
        if (st == LD_OK) ld_ds4_session_set_kernels(ds, &k);
    }
    if (st == LD_OK) st = eval_calls(tp, ds, m, r->call, toks, T, logits, hidden, err);
    if (st == LD_OK && (tp ? ld_tp_session_pos(tp) : ld_ds4_session_pos(ds)) != T) st = LD_ERR_MISMATCH;
    ld_tp_session_destroy(tp);
    ld_ds4_session_destroy(ds);
    ld_backend_destroy(be);
    return st;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double mx = 0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i] - (double)b[i]) > mx) mx = fabs((double)a[i] - (double)b[i]);
    return mx;
}

/* ------------------------------------------------------------ against transformers */

/* Both sequences of `name` over `n` ranks on `be`: logits and every hidden
 * plane within `tol` normalised error of transformers'; the worst logits
 * error into *worst (max). */
static int check_split(const char *name, int n, const char *be, double tol, double *worst)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds4_model *m = NULL;
    if (open_model(name, &m)) return 1;
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    for (int i = 0; i < 2; i++) {
        seq q;
        CHECK(ld_test_load_seq(dir, i, &q));
        size_t T = (size_t)q.T;
        float *ref_l = load_f32(dir, q.logits_file, T * V), *ref_h = load_f32(dir, q.hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h), *pl = malloc(T * V * sizeof *pl);
        CHECK(ref_l && ref_h && l && h && pl);
        ld_error err;
        ld_error_clear(&err);
        ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = be, .kernels = NULL, .threads = 1};
        run_spec r = {&o, NULL, NULL, MAX_T, 0}, rp = {NULL, be, NULL, MAX_T, 0};
        CHECK_MSG(run(m, &r, q.tokens, q.T, l, h, &err) == LD_OK, "%s tp %d: %s", name, n, err.msg);
        CHECK_MSG(run(m, &rp, q.tokens, q.T, pl, NULL, &err) == LD_OK, "%s: %s", name, err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx), eh = 0;
        for (size_t p = 0; p < P; p++) {
            double x = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
            if (!(x <= eh)) eh = x;
        }
        fprintf(stderr,
                "  %-16s tp %d %s seq %c: logits nerr %.3g (max|d| %.3g), worst hidden plane %.3g; max|d| vs tp 1 "
                "%.3g\n",
                name, n, be, 'a' + i, e, mx, eh, max_abs_diff(l, pl, T * V));
        CHECK_MSG(e < tol && eh < tol, "%s tp %d %s: error above %g", name, n, be, tol);
        if (e > *worst) *worst = e;
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
        free(pl);
    }
    ld_ds4_model_close(m);
    return 0;
}

/* (a) TP = 2 within the 1e-5 TP = 1 gets (test_deepseek_v4's bound), both
 * fixtures, both CPU backends */
static int test_tp_ds4_vs_transformers(void)
{
    static const char *const bes[] = {"cpu", "ref"};
    for (size_t i = 0; i < N_MODELS; i++)
        for (size_t b = 0; b < 2; b++) {
            double w1 = 0, w2 = 0;
            if (check_split(models[i], 1, bes[b], 1e-5, &w1)) return 1;
            if (check_split(models[i], 2, bes[b], 1e-5, &w2)) return 1;
            fprintf(stderr, "  %-16s %s worst logits nerr: tp 1 %.3g, tp 2 %.3g\n", models[i], bes[b], w1, w2);
        }
    return 0;
}

/* ------------------------------------------------------------ determinism */

/* (b) bitwise equal over reruns, threads per rank (1, 3), node groupings
 * (1, 2), prefill / chunks of 3 / calls of 1 and 5 tokens, under TP = 2;
 * and in the variants */
static int test_tp_ds4_bitwise_determinism(void)
{
    static const struct { const char *name, *be, *spec; } runs[] = {
        {"deepseek-v4", "cpu", NULL},     {"deepseek-v4", "ref", NULL},
        {"deepseek-v4-fp4", "cpu", NULL}, {"deepseek-v4-fp4", "ref", NULL},
        {"deepseek-v4", "cpu", "combine=fused,mhc=bf16"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_ds4_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", runs[i].name);
        seq q;
        CHECK(ld_test_load_seq(dir, 1, &q));
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q.T * (size_t)m->cfg.hidden;
        float *base = malloc(nl * sizeof *base), *l = malloc(nl * sizeof *l);
        float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
        CHECK(base && l && hbase && h);
        ld_error err;
        ld_error_clear(&err);
        ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = runs[i].be, .kernels = NULL, .threads = 1};
        run_spec r = {&o, NULL, runs[i].spec, MAX_T, 0};
        CHECK_MSG(run(m, &r, q.tokens, q.T, base, hbase, &err) == LD_OK, "%s", err.msg);
        const struct { int threads, nodes, batch, call; } v[] = {
            {1, 1, MAX_T, 0}, {3, 1, MAX_T, 0}, {1, 2, MAX_T, 0}, {3, 2, 3, 0}, {1, 1, MAX_T, 1}, {3, 2, MAX_T, 5}};
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            ld_tp_opts ov = {.n = 2, .n_nodes = v[k].nodes, .backend = runs[i].be, .kernels = NULL, .threads = v[k].threads};
            run_spec rv = {&ov, NULL, runs[i].spec, v[k].batch, v[k].call};
            CHECK_MSG(run(m, &rv, q.tokens, q.T, l, h, &err) == LD_OK, "%s", err.msg);
            CHECK_MSG(memcmp(l, base, nl * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0,
                      "%s tp 2 on %s '%s': threads %d, nodes %d, batch %d, call %d differ from the first run",
                      runs[i].name, runs[i].be, runs[i].spec ? runs[i].spec : "", v[k].threads, v[k].nodes,
                      v[k].batch, v[k].call);
        }
        fprintf(stderr, "  %-16s tp 2 %s %-22s: %zu runs bitwise equal (threads 1/3 per rank, nodes 1/2, chunks)\n",
                runs[i].name, runs[i].be, runs[i].spec ? runs[i].spec : "ref", sizeof v / sizeof v[0] + 1);
        free(base);
        free(l);
        free(hbase);
        free(h);
        ld_ds4_model_close(m);
    }
    return 0;
}

/* (c) TP = 1 through the TP path is the plain session, bit for bit (logits
 * and every hidden plane), with and without the variants */
static int test_tp_ds4_one_is_plain(void)
{
    static const char *const specs[] = {NULL, "combine=fused,mhc=bf16"};
    for (size_t i = 0; i < N_MODELS; i++) {
        ld_ds4_model *m = NULL;
        if (open_model(models[i], &m)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", models[i]);
        seq q;
        CHECK(ld_test_load_seq(dir, 0, &q));
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q.T * (size_t)m->cfg.hidden;
        float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
        float *ha = malloc(nh * sizeof *ha), *hb = malloc(nh * sizeof *hb);
        CHECK(a && b && ha && hb);
        for (size_t f = 0; f < 2; f++)
            for (int be = 0; be < 2; be++) {
                ld_error err;
                ld_error_clear(&err);
                const char *bn = be ? "ref" : "cpu";
                ld_tp_opts o = {.n = 1, .n_nodes = 1, .backend = bn, .kernels = NULL, .threads = 2};
                run_spec rt = {&o, NULL, specs[f], MAX_T, 0}, rp = {NULL, bn, specs[f], MAX_T, 0};
                CHECK_MSG(run(m, &rt, q.tokens, q.T, a, ha, &err) == LD_OK, "%s", err.msg);
                CHECK_MSG(run(m, &rp, q.tokens, q.T, b, hb, &err) == LD_OK, "%s", err.msg);
                CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0 && memcmp(ha, hb, nh * sizeof *ha) == 0,
                          "%s %s '%s': tp 1 differs from the plain session", models[i], bn, specs[f] ? specs[f] : "");
            }
        fprintf(stderr, "  %-16s tp 1 = the plain session bitwise (cpu, ref; ref and combine=fused,mhc=bf16)\n",
                models[i]);
        free(a);
        free(b);
        free(ha);
        free(hb);
        ld_ds4_model_close(m);
    }
    return 0;
}

/* (d) the variants under TP = 2: combine=fused and mhc=bf16 each move the
 * logits away from TP = 2's ref (they act on every rank), and TP = 2 with
 * the variant stays within rounding of the plain session with it */
static int test_tp_ds4_variants(void)
{
    static const char *const specs[] = {"combine=fused", "mhc=bf16", "combine=fused,mhc=bf16"};
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v4", 1, &q));
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    float *ref = malloc(nl * sizeof *ref), *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    CHECK(ref && a && b);
    ld_error err;
    ld_error_clear(&err);
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 2};
    run_spec r0 = {&o, NULL, NULL, MAX_T, 0};
    CHECK_MSG(run(m, &r0, q.tokens, q.T, ref, NULL, &err) == LD_OK, "%s", err.msg);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        run_spec rt = {&o, NULL, specs[i], MAX_T, 0}, rp = {NULL, "cpu", specs[i], MAX_T, 0};
        CHECK_MSG(run(m, &rt, q.tokens, q.T, a, NULL, &err) == LD_OK, "%s: %s", specs[i], err.msg);
        CHECK_MSG(run(m, &rp, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s: %s", specs[i], err.msg);
        double moved = max_abs_diff(a, ref, nl), e = nerr(a, b, nl, NULL);
        fprintf(stderr, "  deepseek-v4 tp 2 %-22s: max|d| vs tp 2 ref %.3g; vs the plain session nerr %.3g "
                "(max|d| %.3g)\n", specs[i], moved, e, max_abs_diff(a, b, nl));
        CHECK_MSG(moved > 0, "%s changed nothing under tp 2", specs[i]);
        CHECK_MSG(e < 1e-5, "%s: tp 2 is %.3g from the plain session", specs[i], e);
    }
    free(ref);
    free(a);
    free(b);
    ld_ds4_model_close(m);
    return 0;
}

/* ------------------------------------------------------------ the shard */

/* rows [r0, r0 + n) of `w` in bytes: the offset of row r0 in the model's */
static size_t row_offset(const ld_host_tensor *h, int64_t r0)
{
    size_t e, b;
    ld_host_block(h, &e, &b);
    return (size_t)r0 * ((size_t)h->cols / e * b);
}

/* (e) rank 1 of 2 on deepseek-v4-fp4: views of its heads' wq_b rows, its
 * sinks, its groups' wo_a rows and its intermediate rows, wo_b's and the
 * down projections' K-slices copied (checked against the model's FP8 /
 * FP4 codes and scales), the replicated tensors the model's own */
static int test_tp_ds4_shard_layout(void)
{
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4-fp4", &m)) return 1;
    const ld_ds4_config *c = &m->cfg; /* 4 heads of 32, 2 groups of OL 16, I 64 */
    ld_error err;
    ld_error_clear(&err);
    ld_tp_ds4_shard *sh = NULL;
    CHECK_MSG(ld_tp_ds4_shard_create(m, 2, 1, &sh, &err) == LD_OK, "%s", err.msg);
    const ld_ds4_model *s = ld_tp_ds4_shard_model(sh);
    CHECK(s->cfg.n_heads == 2 && s->cfg.o_groups == 1 && s->cfg.moe_intermediate == 32);
    CHECK(s->cfg.index_n_heads == c->index_n_heads && s->cfg.hidden == c->hidden);
    for (int l = 0; l < c->n_layers; l++) {
        const ld_ds4_layer *ml = &m->layers[l], *sl = &s->layers[l];
        /* views: same bytes, the rank's rows */
        CHECK(sl->wq_b.host.rows == 2 * c->head_dim && sl->wq_b.host.quant == LD_WQ_F8B);
        CHECK((const char *)sl->wq_b.host.data ==
              (const char *)ml->wq_b.host.data + row_offset(&ml->wq_b.host, 2 * c->head_dim));
        CHECK(sl->wo_a.host.rows == c->o_lora_rank && sl->wo_a.host.cols == ml->wo_a.host.cols);
        CHECK((const char *)sl->wo_a.host.data ==
              (const char *)ml->wo_a.host.data + row_offset(&ml->wo_a.host, c->o_lora_rank));
        CHECK(sl->sinks.host.cols == 2 &&
              (const char *)sl->sinks.host.data ==
                  (const char *)ml->sinks.host.data + 2 * ld_dtype_size(ml->sinks.host.dtype));
        /* wo_b [D][G*OL]: columns 16..31 of every row, the FP8 codes and
         * the scale column of that block */
        const ld_host_tensor *wb = &ml->wo_b.host, *sb = &sl->wo_b.host;
        CHECK(sb->cols == c->o_lora_rank && sb->rows == wb->rows && sb->data != wb->data);
        for (int64_t r = 0; r < wb->rows; r++) {
            CHECK(memcmp((const char *)sb->data + r * 16, (const char *)wb->data + r * wb->cols + 16, 16) == 0);
            CHECK(sb->scale[(r / 16) * 1] == wb->scale[(r / 16) * 2 + 1]);
        }
        /* replicated */
        CHECK(sl->wq_a.host.data == ml->wq_a.host.data && sl->wkv.host.data == ml->wkv.host.data);
        CHECK(sl->router.host.data == ml->router.host.data && sl->tid2eid == ml->tid2eid);
        CHECK(sl->comp.wkv.host.data == ml->comp.wkv.host.data && sl->iwq_b.host.data == ml->iwq_b.host.data);
        /* an FP4 expert: w1 rows 32..63 a view, w2 [D][I] columns 32..63
         * (16 bytes a row, two codes a byte) copied with their 1x32 scale */
        const ld_ds4_mlp *me = &ml->experts[c->n_routed - 1], *se = &sl->experts[c->n_routed - 1];
        CHECK(se->gate.host.quant == LD_WQ_F4B && se->gate.host.rows == 32);
        CHECK((const char *)se->gate.host.data == (const char *)me->gate.host.data + row_offset(&me->gate.host, 32));
        const ld_host_tensor *wd = &me->down.host, *sd = &se->down.host;
        CHECK(sd->cols == 32 && sd->rows == wd->rows);
        for (int64_t r = 0; r < wd->rows; r++) {
            CHECK(memcmp((const char *)sd->data + r * 16, (const char *)wd->data + r * 32 + 16, 16) == 0);
            CHECK(sd->scale[r] == wd->scale[r * 2 + 1]);
        }
        CHECK(sl->shared.up.host.rows == 32 && sl->shared.down.host.cols == 32);
    }
    CHECK(ld_tp_ds4_shard_copied_bytes(sh) > 0);
    ld_tp_ds4_shard_free(sh);
    /* N = 1: the model's tensors untouched */
    CHECK(ld_tp_ds4_shard_create(m, 1, 0, &sh, &err) == LD_OK);
    s = ld_tp_ds4_shard_model(sh);
    CHECK(s->cfg.n_heads == c->n_heads && s->layers[0].wo_b.host.data == m->layers[0].wo_b.host.data);
    CHECK(ld_tp_ds4_shard_copied_bytes(sh) == 0);
    ld_tp_ds4_shard_free(sh);
    CHECK(ld_tp_ds4_shard_create(m, 2, 2, &sh, &err) == LD_ERR_USAGE && !sh);
    ld_ds4_model_close(m);
    fprintf(stderr, "  deepseek-v4-fp4 rank 1 of 2: views and K-slices (FP8 16x16, FP4 1x32) as expected\n");
    return 0;
}

/* ------------------------------------------------------------ the reduce points */

/* A hook that records what it is given: (layer, which) in order and the
 * partials, [calls][T][D] */
typedef struct rec {
    int calls, layer[64], which[64];
    float *data;
    size_t D, cap;
} rec;

static ld_status record(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which, ld_error *err)
{
    rec *r = ctx;
    if (r->calls == 64 || (size_t)T * r->D > r->cap) return LD_FAIL(err, LD_ERR_USAGE, 0, "recorder full");
    r->layer[r->calls] = layer;
    r->which[r->calls] = which;
    LD_TRY(be->ops->buf_read(be, x, 0, r->data + (size_t)r->calls * r->cap, (size_t)T * r->D, err));
    r->calls++;
    return LD_OK;
}

/* One prefill of `q` on `be` (just made) with the recorder as the hook: its
 * logits into `l` */
static int run_recorded(const ld_ds4_model *m, ld_backend *be, const seq *q, rec *r, float *l)
{
    ld_error err;
    ld_error_clear(&err);
    ld_ds4_session *s = NULL;
    CHECK_MSG(ld_ds4_session_create(m, be, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
    ld_ds4_session_set_reduce(s, record, r);
    CHECK_MSG(ld_ds4_session_eval(s, q->tokens, q->T, l, NULL, NULL, &err) == LD_OK, "%s", err.msg);
    ld_ds4_session_destroy(s);
    return 0;
}

/* (f) the hook sees wo_b's output then the MoE's, per layer, once, and
 * writing nothing changes nothing; the host leaves (attention, mHC and
 * MoE on the host) hand it the same partials as the op-table entries, and
 * the same logits */
static int test_tp_ds4_reduce_points(void)
{
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v4", 0, &q));
    size_t D = (size_t)m->cfg.hidden, nl = (size_t)q.T * (size_t)m->cfg.vocab, cap = (size_t)q.T * D;
    int L = m->cfg.n_layers;
    rec a = {.D = D, .cap = cap}, b = {.D = D, .cap = cap};
    a.data = malloc(64 * cap * sizeof *a.data);
    b.data = malloc(64 * cap * sizeof *b.data);
    float *la = malloc(nl * sizeof *la), *lb = malloc(nl * sizeof *lb), *lp = malloc(nl * sizeof *lp);
    CHECK(a.data && b.data && la && lb && lp);
    ld_error err;
    ld_error_clear(&err);
    ld_backend *be = NULL;
    CHECK(ld_backend_cpu_create(2, &be, &err) == LD_OK);
    if (run_recorded(m, be, &q, &a, la)) return 1;
    ld_backend_destroy(be);
    CHECK(ld_test_cpu_host_create(2, &be, &err) == LD_OK);
    if (run_recorded(m, be, &q, &b, lb)) return 1;
    ld_backend_destroy(be);
    run_spec rp = {NULL, "cpu", NULL, MAX_T, 0};
    CHECK(run(m, &rp, q.tokens, q.T, lp, NULL, &err) == LD_OK);
    CHECK_MSG(a.calls == 2 * L && b.calls == 2 * L, "%d and %d calls for %d layers", a.calls, b.calls, L);
    for (int i = 0; i < 2 * L; i++) CHECK(a.layer[i] == i / 2 && a.which[i] == i % 2 && b.layer[i] == i / 2 && b.which[i] == i % 2);
    for (int i = 0; i < 2 * L; i++)
        CHECK_MSG(memcmp(a.data + (size_t)i * cap, b.data + (size_t)i * cap, cap * sizeof *a.data) == 0,
                  "call %d (layer %d, which %d): the entries' partial differs from the host leaves'", i, i / 2, i % 2);
    CHECK(memcmp(la, lp, nl * sizeof *la) == 0 && memcmp(lb, lp, nl * sizeof *lb) == 0);
    fprintf(stderr, "  deepseek-v4: %d reduce calls (wo_b, MoE per layer), entries = host leaves bitwise\n", a.calls);
    free(a.data);
    free(b.data);
    free(la);
    free(lb);
    free(lp);
    ld_ds4_model_close(m);
    return 0;
}

/* One run of q through a TP session of m over 2 ranks on `be`, calls of 3
 * tokens; staged: every rank's backend without buf_mem (tp_forward.h), the
 * reduce through the host stage.  Logits and hidden [P][T][D]; the group's
 * in-place and buffer all-reduces. */
static int run_path(const ld_ds4_model *m, const char *be, int staged, const seq *q, float *logits, float *hidden,
                    uint64_t *n_in_place, uint64_t *n_buffer)
{
    static ld_backend_ops staged_ops[2];
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = be, .kernels = NULL, .threads = 1};
    ld_tp_session *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tp_ds4_session_create(m, &o, NULL, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
    if (staged && ld_test_tp_staged(s, 2, staged_ops)) return 1;
    CHECK_MSG(eval_calls(s, NULL, m, 3, q->tokens, q->T, logits, hidden, &err) == LD_OK, "%s", err.msg);
    ld_comm_sim_reduces(ld_tp_session_comm(s, 0), n_in_place, n_buffer);
    ld_tp_session_destroy(s);
    return 0;
}

/* (f2) the reduce made in place (the CPU backends' buf_mem, the simulated
 * communicator's host memory) gives the staging path's logits and hidden
 * planes bit for bit on both CPU backends; each path counted: 2 reduces
 * per layer, rank and call, all of one kind. */
static int test_tp_ds4_reduce_in_place(void)
{
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v4", 1, &q));
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q.T * (size_t)m->cfg.hidden;
    float *l[2] = {malloc(nl * sizeof(float)), malloc(nl * sizeof(float))};
    float *h[2] = {malloc(nh * sizeof(float)), malloc(nh * sizeof(float))};
    CHECK(l[0] && l[1] && h[0] && h[1]);
    static const char *const bes[] = {"cpu", "ref"};
    for (int b = 0; b < 2; b++) {
        uint64_t in_place[2], buffer[2];
        for (int staged = 0; staged < 2; staged++)
            if (run_path(m, bes[b], staged, &q, l[staged], h[staged], &in_place[staged], &buffer[staged])) return 1;
        uint64_t want = 2u * (uint64_t)m->cfg.n_layers * 2u * (uint64_t)((q.T + 2) / 3);
        fprintf(stderr, "  deepseek-v4 tp 2 %s: %llu reduces in place, %llu staged: the same bits\n", bes[b],
                (unsigned long long)in_place[0], (unsigned long long)buffer[1]);
        CHECK_MSG(in_place[0] == want && buffer[0] == 0 && in_place[1] == 0 && buffer[1] == want,
                  "in place %llu/%llu, staged %llu/%llu, want %llu", (unsigned long long)in_place[0],
                  (unsigned long long)buffer[0], (unsigned long long)in_place[1], (unsigned long long)buffer[1],
                  (unsigned long long)want);
        CHECK_MSG(memcmp(l[0], l[1], nl * sizeof(float)) == 0 && memcmp(h[0], h[1], nh * sizeof(float)) == 0,
                  "deepseek-v4 on %s: in place and staged differ", bes[b]);
    }
    for (int k = 0; k < 2; k++) {
        free(l[k]);
        free(h[k]);
    }
    ld_ds4_model_close(m);
    return 0;
}

/* ------------------------------------------------------------ lm and errors */

/* (g) through lm.h: the variants from the kernels spec, the same bits as
 * the TP session made directly */
static int test_tp_ds4_lm(void)
{
    ld_lm *lm = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v4", &lm, &err) == LD_OK, "%s", err.msg);
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v4", 0, &q));
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    CHECK(a && b);
    CHECK(ld_lm_tp_check(lm, 2, &err) == LD_OK && ld_lm_tp_check(lm, 3, &err) == LD_ERR_USAGE);
    static const char *const specs[] = {NULL, "combine=fused,mhc=bf16"};
    for (size_t i = 0; i < 2; i++) {
        ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cpu", .kernels = specs[i], .threads = 2};
        ld_lm_session *s = NULL;
        CHECK_MSG(ld_lm_session_create_tp(lm, &o, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_lm_eval(s, q.tokens, q.T, a, NULL, &err) == LD_OK, "%s", err.msg);
        CHECK(ld_lm_pos(s) == q.T);
        ld_lm_session_destroy(s);
        o.kernels = NULL;
        run_spec r = {&o, NULL, specs[i], MAX_T, 0};
        CHECK_MSG(run(m, &r, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "lm tp 2 with '%s' differs", specs[i] ? specs[i] : "");
    }
    free(a);
    free(b);
    ld_ds4_model_close(m);
    ld_lm_close(lm);
    return 0;
}

/* (i) the residual streams (lm.h's ld_lm_eval_state, what a layer slice
 * of logdiff replay --tp N --check-layers is fed): TP = 1 gives the plain
 * session's streams bit for bit at every layer, TP = 2 the same bits run
 * after run and its streams average to its own hidden plane; a dense TP
 * session's state is its hidden plane; a layer past the model refused
 * before any rank runs (the session stays usable) */
static int test_tp_ds4_streams(void)
{
    ld_lm *lm = NULL;
    ld_backend *be = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v4", &lm, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_backend_cpu_create(1, &be, &err) == LD_OK, "%s", err.msg);
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v4", 0, &q));
    const ld_lm_info *in = ld_lm_info_of(lm);
    size_t W = (size_t)in->state_width, D = (size_t)in->hidden, T = (size_t)q.T, N = W / D;
    size_t planes = ((size_t)in->n_layers + 2) * T * D;
    float *plain = malloc(T * W * sizeof *plain), *a = malloc(T * W * sizeof *a), *b = malloc(T * W * sizeof *b);
    float *h = malloc(planes * sizeof *h);
    CHECK(plain && a && b && h && N == 4);
    for (int layer = 0; layer <= in->n_layers; layer++) {
        ld_lm_session *s = NULL;
        CHECK_MSG(ld_lm_session_create(lm, be, NULL, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_lm_eval_state(s, q.tokens, q.T, NULL, NULL, layer, plain, &err) == LD_OK, "%s", err.msg);
        ld_lm_session_destroy(s);
        for (int n = 1; n <= 2; n++) {
            ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
            for (int rep = 0; rep < 2; rep++) {
                float *dst = rep ? b : a;
                CHECK_MSG(ld_lm_session_create_tp(lm, &o, MAX_T, 5, &s, &err) == LD_OK, "%s", err.msg);
                CHECK_MSG(ld_lm_eval_state(s, q.tokens, q.T, NULL, h, layer, dst, &err) == LD_OK, "%s", err.msg);
                ld_lm_session_destroy(s);
            }
            CHECK_MSG(!memcmp(a, b, T * W * sizeof *a), "tp %d, layer %d: streams differ run to run", n, layer);
            if (n == 1)
                CHECK_MSG(!memcmp(a, plain, T * W * sizeof *a), "tp 1, layer %d: not the plain streams", layer);
            for (size_t t = 0; t < T; t++) /* their mean: the split's own plane `layer` (layer > 0) */
                for (size_t d = 0; layer > 0 && d < D; d++) {
                    float acc = 0.0f;
                    for (size_t j = 0; j < N; j++) acc += a[t * W + j * D + d];
                    CHECK_MSG(acc / (float)N == h[((size_t)layer * T + t) * D + d], "tp %d layer %d row %zu", n,
                              layer, t);
                }
        }
    }
    ld_lm_session *s = NULL;
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
    CHECK_MSG(ld_lm_session_create_tp(lm, &o, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_lm_eval_state(s, q.tokens, 3, NULL, NULL, 5, a, &err), LD_ERR_USAGE, &err,
                              "the model has 4 layers") == 0);
    CHECK_MSG(ld_lm_eval_state(s, q.tokens, 3, NULL, NULL, 4, a, &err) == LD_OK, "still usable: %s", err.msg);
    ld_lm_session_destroy(s);
    ld_lm_close(lm);
    /* a dense TP session: its state is its hidden plane; the V4 entry refuses it */
    CHECK_MSG(ld_lm_open(MDIR "qwen3", &lm, &err) == LD_OK, "%s", err.msg);
    in = ld_lm_info_of(lm);
    CHECK(in->state_width == in->hidden);
    D = (size_t)in->hidden;
    CHECK_MSG(ld_lm_session_create_tp(lm, &o, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_eval_state(s, q.tokens, q.T, NULL, h, 1, a, &err) == LD_OK, "%s", err.msg);
    CHECK(!memcmp(a, h + T * D, T * D * sizeof *a));
    ld_lm_session_destroy(s);
    ld_tp_session *tp = NULL;
    ld_model *dm = NULL;
    CHECK_MSG(ld_model_open(MDIR "qwen3", &dm, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_tp_session_create(dm, &o, MAX_T, MAX_T, &tp, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_tp_session_eval_streams(tp, q.tokens, 2, NULL, NULL, 0, a, &err), LD_ERR_USAGE, &err,
                              "DeepSeek-V4 sessions only") == 0);
    ld_tp_session_destroy(tp);
    ld_model_close(dm);
    /* V4's TP session itself: a layer past the model refused before any rank runs */
    ld_ds4_model *m4 = NULL;
    if (open_model("deepseek-v4", &m4)) return 1;
    CHECK_MSG(ld_tp_ds4_session_create(m4, &o, NULL, MAX_T, MAX_T, &tp, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_tp_session_eval_streams(tp, q.tokens, 2, NULL, NULL, 5, a, &err), LD_ERR_USAGE, &err,
                              "the model has 4 layers") == 0);
    CHECK_MSG(ld_tp_session_eval_streams(tp, q.tokens, 2, NULL, NULL, 4, a, &err) == LD_OK, "%s", err.msg);
    ld_tp_session_destroy(tp);
    ld_ds4_model_close(m4);
    ld_lm_close(lm);
    ld_backend_destroy(be);
    free(plain);
    free(a);
    free(b);
    free(h);
    return 0;
}

/* (h) the refusals: a size not dividing each field (naming it), out of
 * range, an FP4 scale block cut */
static int test_tp_ds4_errors(void)
{
    ld_error err;
    ld_error_clear(&err);
    ld_ds4_model *m = NULL;
    if (open_model("deepseek-v4-fp4", &m)) return 1;
    ld_tp_session *s = NULL;
    ld_tp_opts o = {.n = 3, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
    if (ld_test_expect_fail(ld_tp_ds4_session_create(m, &o, NULL, 16, 16, &s, &err), LD_ERR_USAGE, &err,
                    "tensor parallel size 3 does not divide the model's num_attention_heads (4)"))
        return 1;
    CHECK(!s);
    o.n = 4; /* the heads divide, the 2 groups do not */
    if (ld_test_expect_fail(ld_tp_ds4_session_create(m, &o, NULL, 16, 16, &s, &err), LD_ERR_USAGE, &err, "o_groups (2)"))
        return 1;
    ld_ds4_config c = m->cfg;
    c.o_groups = 4;
    c.moe_intermediate = 66;
    if (ld_test_expect_fail(ld_tp_ds4_check_config(&c, 4, &err), LD_ERR_USAGE, &err, "moe_intermediate_size (66)")) return 1;
    c.moe_intermediate = 64;
    CHECK(ld_tp_ds4_check_config(&c, 4, &err) == LD_OK);
    CHECK(ld_tp_ds4_check_config(&m->cfg, 0, &err) == LD_ERR_USAGE);
    CHECK(ld_tp_ds4_check_config(&m->cfg, 1025, &err) == LD_ERR_USAGE);
    /* 4 ranks over a (pretend) 4 groups: the FP4 experts' w2 [32][64] in
     * 1x32 scale blocks, 16 columns a rank */
    ld_ds4_model q = *m; /* a shallow copy: only the check reads it */
    q.cfg.o_groups = 4;
    if (ld_test_expect_fail(ld_tp_ds4_check(&q, 4, &err), LD_ERR_UNSUPPORTED, &err,
                    "'layers.0.ffn.experts.0.w2.weight' is FP4 with scale blocks of 1x32"))
        return 1;
    CHECK_MSG(strstr(err.msg, "16 columns") && strstr(err.msg, "multiple of 32 columns"), "%s", err.msg);
    CHECK(ld_tp_ds4_check(m, 2, &err) == LD_OK && ld_tp_ds4_check(m, 1, &err) == LD_OK);
    o.n = 2;
    o.n_nodes = 3;
    CHECK(ld_tp_ds4_session_create(m, &o, NULL, 16, 16, &s, &err) == LD_ERR_USAGE && !s);
    ld_ds4_model_close(m);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tp_ds4_vs_transformers), LD_CASE(test_tp_ds4_bitwise_determinism), LD_CASE(test_tp_ds4_one_is_plain),
    LD_CASE(test_tp_ds4_variants),        LD_CASE(test_tp_ds4_shard_layout),        LD_CASE(test_tp_ds4_reduce_points),
    LD_CASE(test_tp_ds4_reduce_in_place), LD_CASE(test_tp_ds4_lm),              LD_CASE(test_tp_ds4_errors),
    LD_CASE(test_tp_ds4_streams),
};

LD_TEST_MAIN(cases)
