/* test_batch.c - several requests in one batch (forward.h's
 * ld_session_eval_batch) on the CPU backends: each request's logits
 * bitwise those it gets alone (batch_check.h), on the reference backend and
 * the fast CPU one with 3 threads, over dense, sliding-window, FP8 and
 * bf16 fixtures, DeepSeek-V3/V3.2 (every MLA form) and V4, with their
 * host paths and variants; split over 2 tensor-parallel ranks (a group
 * and its siblings; two groups refused); the batch's argument errors; a
 * backend without buf_view runs one sequence but refuses several. */
#include <stdio.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/batch.h"
#include "tests/support/batch_check.h"
#include "tests/support/fixtures.h"
#include "engine/models/dense/forward.h"
#include "engine/engine.h"
#include "tests/support/ld_test.h"
#include "engine/models/dense/model.h"

#define MDIR LD_TESTDATA_DIR "/models/"

typedef ld_status (*create_fn)(int n_threads, ld_backend **out, ld_error *err);

/* spec: session variants (cpu_kernels.h syntax), NULL the defaults */
static int check_model_k(const char *name, const char *backend, create_fn create, const char *spec)
{
    char dir[512], label[128];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    snprintf(label, sizeof label, "%s on %s%s%s", name, backend, spec ? " " : "", spec ? spec : "");
    ld_error err = {0};
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    CHECK_MSG(ld_cpu_kernels_parse(spec, &k, &err) == LD_OK, "%s", err.msg);
    ld_backend *be = NULL;
    CHECK_MSG(create(3, &be, &err) == LD_OK, "%s: %s", backend, err.msg);
    int rc = ld_test_check_batch(be, dir, &k, label);
    ld_backend_destroy(be);
    return rc;
}

static int check_model(const char *name, const char *backend, create_fn create)
{
    return check_model_k(name, backend, create, NULL);
}

static int test_batch_qwen3_ref(void) { return check_model("qwen3", "ref", ld_backend_ref_create); }
static int test_batch_qwen3_cpu(void) { return check_model("qwen3", "cpu", ld_backend_cpu_create); }
static int test_batch_mistral_cpu(void) { return check_model("mistral", "cpu", ld_backend_cpu_create); }
static int test_batch_qwen3_fp8_cpu(void) { return check_model("qwen3-fp8", "cpu", ld_backend_cpu_create); }
static int test_batch_llama3_bf16_cpu(void) { return check_model("llama3-bf16", "cpu", ld_backend_cpu_create); }
static int test_batch_v4_ref(void) { return check_model("deepseek-v4", "ref", ld_backend_ref_create); }
static int test_batch_v4_cpu(void) { return check_model("deepseek-v4", "cpu", ld_backend_cpu_create); }
static int test_batch_v4_fp4_cpu(void) { return check_model("deepseek-v4-fp4", "cpu", ld_backend_cpu_create); }
/* the host paths: no mHC, attention, route or MoE entries */
static int test_batch_v4_host(void) { return check_model("deepseek-v4", "host-leaves", ld_test_cpu_host_create); }
/* variants the entries refuse (the host paths again), and the indexer's */
static int test_batch_v4_variants(void)
{
    return check_model_k("deepseek-v4", "cpu", ld_backend_cpu_create, "mhc=bf16,indexer=fp8,rope=bf16,combine=fused");
}

/* the batch's argument errors, before anything runs */
static int test_batch_errors(void)
{
    ld_error err = {0};
    ld_model *m = NULL, *m2 = NULL;
    CHECK_MSG(ld_model_open(MDIR "qwen3", &m, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_model_open(MDIR "qwen3", &m2, &err) == LD_OK, "%s", err.msg);
    ld_backend *be = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    ld_session *a = NULL, *b = NULL, *other = NULL;
    CHECK(ld_session_create(m, be, 8, 4, &a, &err) == LD_OK);
    CHECK(ld_session_create_sibling(a, 8, &b, &err) == LD_OK);
    CHECK(ld_session_create(m2, be, 8, 4, &other, &err) == LD_OK);
    int32_t t[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    ld_session_part p[2] = {{a, t, 2, NULL, NULL}, {a, t, 2, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_session_eval_batch(p, 2, &err), LD_ERR_USAGE, &err, "the same session") == 0);
    p[1].s = other;
    CHECK(ld_test_expect_fail(ld_session_eval_batch(p, 2, &err), LD_ERR_USAGE, &err, "first part's model") == 0);
    p[1] = (ld_session_part){b, t, 9, NULL, NULL};
    CHECK(ld_test_expect_fail(ld_session_eval_batch(p, 2, &err), LD_ERR_LIMIT, &err, "batch part 1") == 0);
    CHECK(ld_test_expect_fail(ld_session_eval_batch(p, 0, &err), LD_ERR_USAGE, &err, "at least one") == 0);
    CHECK_EQ_INT(ld_session_pos(a), 0);
    CHECK_EQ_INT(ld_session_pos(b), 0);
    /* a part with no tokens is no part */
    p[1].T = 0;
    CHECK_MSG(ld_session_eval_batch(p, 2, &err) == LD_OK, "%s", err.msg);
    CHECK_EQ_INT(ld_session_pos(a), 2);
    ld_session_destroy(b);
    ld_session_destroy(a);
    ld_session_destroy(other);
    ld_backend_destroy(be);
    ld_model_close(m);
    ld_model_close(m2);
    return 0;
}

/* a backend without buf_view: one sequence runs, two are refused before
 * anything runs */
static int test_batch_needs_views(void)
{
    ld_error err = {0};
    ld_model *m = NULL;
    CHECK_MSG(ld_model_open(MDIR "qwen3", &m, &err) == LD_OK, "%s", err.msg);
    ld_backend *be = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    ld_backend_ops ops = *be->ops;
    ops.buf_view = NULL;
    const ld_backend_ops *saved = be->ops;
    be->ops = &ops;
    ld_session *a = NULL, *b = NULL;
    CHECK(ld_session_create(m, be, 8, 4, &a, &err) == LD_OK);
    CHECK(ld_session_create_sibling(a, 8, &b, &err) == LD_OK);
    int32_t t[2] = {1, 2};
    CHECK_MSG(ld_session_eval(a, t, 2, NULL, NULL, &err) == LD_OK, "%s", err.msg);
    ld_session_part p[2] = {{a, t, 1, NULL, NULL}, {b, t, 2, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_session_eval_batch(p, 2, &err), LD_ERR_UNSUPPORTED, &err, "one sequence") == 0);
    CHECK_EQ_INT(ld_session_pos(a), 2);
    CHECK_EQ_INT(ld_session_pos(b), 0);
    ld_session_destroy(b);
    ld_session_destroy(a);
    be->ops = saved;
    ld_backend_destroy(be);
    ld_model_close(m);
    return 0;
}

/* ld_batch_bind_rows: a part's fields point at views of the lead's rows
 * (reads and writes land there), fields without a width or a lead buffer
 * stay; unbind puts them back; a view refused half way leaves every field
 * as it was (and no view behind: ASan) */
static int test_batch_bind(void)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    const ld_backend_ops *o = be->ops;
    ld_buf *la = NULL, *lb = NULL, *pa = NULL, *pb = NULL, *pc = NULL, *lc = NULL;
    CHECK(o->buf_alloc(be, 12, &la, &err) == LD_OK && o->buf_alloc(be, 8, &lb, &err) == LD_OK);
    CHECK(o->buf_alloc(be, 4, &pa, &err) == LD_OK && o->buf_alloc(be, 4, &pb, &err) == LD_OK);
    CHECK(o->buf_alloc(be, 4, &pc, &err) == LD_OK);
    float h[12];
    for (int i = 0; i < 12; i++) h[i] = (float)i;
    CHECK(o->buf_write(be, la, 0, h, 12, &err) == LD_OK);
    ld_buf **src[3] = {&la, &lb, &lc}, **dst[3] = {&pa, &pb, &pc};
    size_t w[3] = {3, 0, 2}; /* lb: no width; lc: no lead buffer */
    ld_batch_bind b;
    ld_buf *keep_a = pa, *keep_b = pb, *keep_c = pc;
    CHECK_MSG(ld_batch_bind_rows(be, src, dst, w, 3, 2, 2, &b, &err) == LD_OK, "%s", err.msg);
    CHECK(b.n == 1 && pa != keep_a && b.own[0] == keep_a && pb == keep_b && pc == keep_c);
    float r[6], g[6] = {-1, -2, -3, -4, -5, -6};
    CHECK(o->buf_read(be, pa, 0, r, 6, &err) == LD_OK && r[0] == 6.0f && r[5] == 11.0f);
    CHECK(o->buf_write(be, pa, 0, g, 6, &err) == LD_OK);
    CHECK(ld_test_expect_fail(o->buf_read(be, pa, 0, r, 7, &err), LD_ERR_USAGE, &err, "outside") == 0);
    ld_batch_unbind(be, &b);
    CHECK(b.n == 0 && pa == keep_a && pb == keep_b && pc == keep_c);
    CHECK(o->buf_read(be, la, 0, h, 12, &err) == LD_OK && h[5] == 5.0f && h[6] == -1.0f && h[11] == -6.0f);
    CHECK(o->buf_read(be, pa, 0, r, 4, &err) == LD_OK); /* its own again: 4 floats */
    /* the second view out of range: refused, the first undone */
    size_t w2[3] = {3, 5, 0};
    CHECK(ld_test_expect_fail(ld_batch_bind_rows(be, src, dst, w2, 3, 1, 2, &b, &err), LD_ERR_USAGE, &err,
                              "outside") == 0);
    CHECK(pa == keep_a && pb == keep_b && b.n == 0);
    CHECK(ld_test_expect_fail(ld_batch_bind_rows(be, src, dst, w, LD_BATCH_MAX_BUFS + 1, 0, 1, &b, &err),
                              LD_ERR_USAGE, &err, "row buffers") == 0);
    ld_buf *all[] = {la, lb, pa, pb, pc};
    for (int i = 0; i < 5; i++) o->buf_free(be, all[i]);
    ld_backend_destroy(be);
    return 0;
}

static int test_batch_v3_ref(void) { return check_model("deepseek-v3", "ref", ld_backend_ref_create); }
static int test_batch_v3_fp8_cpu(void) { return check_model("deepseek-v3-fp8", "cpu", ld_backend_cpu_create); }
static int test_batch_v32_cpu(void) { return check_model("deepseek-v32", "cpu", ld_backend_cpu_create); }
/* the absorbed and split-K MLA forms, the host paths, the variants */
static int test_batch_v3_absorbed(void)
{
    return check_model_k("deepseek-v3", "cpu", ld_backend_cpu_create, "mla=absorbed,router=bf16,combine=fused");
}
static int test_batch_v32_splitk_host(void)
{
    return check_model_k("deepseek-v32", "host-leaves", ld_test_cpu_host_create, "mla=splitk,indexer=bf16,rope=bf16");
}

/* tensor parallelism: a server splitting the model over ranks batches its
 * requests too; each rank batches its share, the reduces run on the
 * chunk's rows, every request's logits bitwise its alone (split) run's */
static int test_batch_tp(void)
{
    static const char *const models[] = {"qwen3", "mistral", "deepseek-v3", "deepseek-v32", "deepseek-v4",
                                         "deepseek-v4-fp4"};
    static const char *const backends[] = {"ref", "cpu"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int b = 0; b < 2; b++) {
            char dir[256], label[64];
            snprintf(dir, sizeof dir, MDIR "%s", models[i]);
            snprintf(label, sizeof label, "%s %s tp 2", models[i], backends[b]);
            ld_tp_opts o = {.n = 2, .backend = backends[b], .threads = 1};
            if (ld_test_check_batch_tp(NULL, dir, NULL, &o, label)) return 1;
        }
    return 0;
}

/* tensor parallelism: sessions of two groups do not batch (their ranks
 * reduce over other communicators); a group's sibling runs alone through
 * the group's threads */
static int test_batch_tp_groups(void)
{
    ld_error err = {0};
    ld_lm *m = NULL;
    CHECK_MSG(ld_lm_open(MDIR "qwen3", &m, &err) == LD_OK, "%s", err.msg);
    ld_tp_opts o = {.n = 2, .backend = "ref", .threads = 1};
    ld_lm_session *a = NULL, *b = NULL, *sib = NULL, *plain = NULL;
    CHECK_MSG(ld_lm_session_create_tp(m, &o, 8, 4, &a, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_session_create_tp(m, &o, 8, 4, &b, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_session_create_sibling(a, 8, &sib, &err) == LD_OK, "%s", err.msg);
    int32_t t[2] = {1, 2};
    size_t V = (size_t)ld_lm_info_of(m)->vocab;
    float *la = malloc(2 * V * sizeof *la), *ls = malloc(2 * V * sizeof *ls);
    CHECK(la && ls);
    ld_lm_part p[2] = {{a, t, 2, NULL, NULL}, {b, t, 2, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_lm_eval_batch(p, 2, &err), LD_ERR_USAGE, &err, "tensor-parallel group") == 0);
    CHECK_EQ_INT(ld_lm_pos(a), 0);
    CHECK_MSG(ld_lm_eval(a, t, 2, la, NULL, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_eval(sib, t, 2, ls, NULL, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_lm_pos(a) == 2 && ld_lm_pos(sib) == 2 && ld_lm_pos(b) == 0);
    CHECK_MSG(!memcmp(la, ls, 2 * V * sizeof *la), "a sibling alone: not its group's bits");
    /* refused before any rank runs, the group still usable: the same
       session twice, tokens past a session's positions (8), an id outside */
    ld_lm_part d[2] = {{a, t, 1, NULL, NULL}, {a, t, 1, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_lm_eval_batch(d, 2, &err), LD_ERR_USAGE, &err, "the same session") == 0);
    int32_t many[7] = {1, 2, 3, 4, 5, 6, 7}, bad = 100000;
    CHECK(ld_test_expect_fail(ld_lm_eval(sib, many, 7, NULL, NULL, &err), LD_ERR_LIMIT, &err,
                              "7 tokens at position 2 exceed the session's 8 positions") == 0);
    CHECK(ld_test_expect_fail(ld_lm_eval(a, &bad, 1, NULL, NULL, &err), LD_ERR_USAGE, &err, "vocabulary") == 0);
    CHECK_MSG(ld_lm_eval(sib, many, 6, NULL, NULL, &err) == LD_OK, "still usable: %s", err.msg);
    CHECK(ld_lm_pos(sib) == 8 && ld_lm_pos(a) == 2);
    /* a plain session does not batch with a split one */
    ld_backend *be = NULL;
    CHECK_MSG(ld_backend_cpu_create_ex(1, 0, NULL, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_session_create(m, be, NULL, 8, 4, &plain, &err) == LD_OK, "%s", err.msg);
    ld_lm_part q[2] = {{a, t, 2, NULL, NULL}, {plain, t, 2, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_lm_eval_batch(q, 2, &err), LD_ERR_USAGE, &err, "not a tensor-parallel session") == 0);
    ld_lm_session_destroy(plain);
    ld_backend_destroy(be);
    /* the group destroyed before its sibling: closed, not freed; the
       sibling still runs on its ranks (ASan: nothing used after free, nothing leaked) */
    ld_lm_session *sib2 = NULL;
    CHECK_MSG(ld_lm_session_create_sibling(sib, 8, &sib2, &err) == LD_OK, "%s", err.msg);
    ld_lm_session_destroy(a);
    ld_lm_session_destroy(sib);
    CHECK_MSG(ld_lm_eval(sib2, t, 2, ls, NULL, &err) == LD_OK, "a sibling after its group: %s", err.msg);
    CHECK_MSG(!memcmp(la, ls, 2 * V * sizeof *la), "a sibling after its group: not the group's bits");
    ld_lm_session_destroy(sib2);
    ld_lm_session_destroy(b);
    free(la);
    free(ls);
    ld_lm_close(m);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_batch_qwen3_ref),       LD_CASE(test_batch_qwen3_cpu),     LD_CASE(test_batch_mistral_cpu),
    LD_CASE(test_batch_qwen3_fp8_cpu),   LD_CASE(test_batch_llama3_bf16_cpu), LD_CASE(test_batch_errors),
    LD_CASE(test_batch_needs_views),     LD_CASE(test_batch_v4_ref),        LD_CASE(test_batch_v4_cpu),
    LD_CASE(test_batch_v4_fp4_cpu),      LD_CASE(test_batch_v4_host),       LD_CASE(test_batch_v4_variants),
    LD_CASE(test_batch_v3_ref),          LD_CASE(test_batch_v3_fp8_cpu),    LD_CASE(test_batch_v32_cpu),
    LD_CASE(test_batch_v3_absorbed),     LD_CASE(test_batch_v32_splitk_host), LD_CASE(test_batch_tp),          LD_CASE(test_batch_tp_groups),     LD_CASE(test_batch_bind),
};

LD_TEST_MAIN(cases)
