/* test_slice.c - a layer slice of a model (forward.h's
 * ld_session_create_slice, its DeepSeek twins, engine.h's
 * ld_lm_session_create_slice): the session logdiff replay --check-layers
 * runs on a CPU for a few layers of a model too large for it.
 *  - bitwise: ref.json's first sequence through a whole forward pass with
 *    its hidden planes and (ld_lm_eval_state) the state entering layer
 *    `first`, then every slice [first, last) fed that state and the tokens
 *    (in two calls, the first of 5 rows in chunks of 3) gives bitwise the
 *    planes first + 1 .. last, on the ref and cpu backends, for qwen3
 *    (q/k norms), mistral (a sliding window), llama3-bf16, DeepSeek V3
 *    (MLA, dense and MoE layers), V3 FP8, V3.2 (the indexer), and
 *    DeepSeek V4 and V4 FP4 (hc_mult streams fed, hash-routed layers that
 *    need the tokens, CSA and HCA compressors, the indexer);
 *  - the state: one stream (hidden plane `first`), or V4's streams, whose
 *    mean is plane `first` (each the embedding at layer 0); asking for it
 *    leaves the planes as they were;
 *  - only its layers: a slice loads the weights of its layers and nothing
 *    else (no embeddings, final norm or head), counted through the
 *    backend's weight_load;
 *  - refusals: a range outside the model, tokens into a slice, rows into
 *    a whole session, a sibling of a slice; for V4 a slice without its
 *    tokens, a batch of a slice, a state past the last layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "tests/support/fixtures.h"
#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/engine.h"
#include "engine/models/dense/model.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_TOKENS 64

static ld_status open_backend(int cpu, ld_backend **be, ld_error *err)
{
    return ld_backend_cpu_create_ex(1, cpu, NULL, be, err);
}

/* the state entering layer `first` (W floats a row) against the planes
 * of the whole pass: one stream is plane `first`; V4's N streams average
 * (as its planes do: summed in stream order, divided by N) to plane
 * `first`, and each is the embedding at layer 0 */
static int check_state(const float *state, const float *hidden, int first, int T, size_t D, size_t W)
{
    size_t N = W / D;
    const float *plane = hidden + (size_t)first * (size_t)T * D;
    for (size_t t = 0; t < (size_t)T; t++)
        for (size_t d = 0; d < D; d++) {
            const float *x = state + t * W + d;
            float acc = 0.0f;
            for (size_t j = 0; j < N; j++) {
                acc += x[j * D];
                if (first == 0) CHECK_MSG(x[j * D] == plane[t * D + d], "stream %zu of row %zu at layer 0", j, t);
            }
            CHECK_MSG(acc / (float)N == plane[t * D + d], "row %zu: the state entering layer %d is not plane %d", t,
                      first, first);
        }
    return 0;
}

/* a slice [first, last) fed `state` and the tokens against the whole
 * pass's planes */
static int check_slice(const char *name, int cpu, ld_lm *m, ld_backend *be, const ld_test_seq *q, const float *state,
                       const float *hidden, int first, int last, size_t W)
{
    ld_error err = {0};
    int T = q->T, n = last - first;
    size_t D = (size_t)ld_lm_info_of(m)->hidden, plane = (size_t)T * D;
    float *a = malloc((size_t)n * plane * sizeof *a), *b = malloc((size_t)n * plane * sizeof *b);
    float *out = malloc(plane * sizeof *out);
    CHECK(a && b && out);
    ld_lm_session *s = NULL;
    CHECK_MSG(ld_lm_session_create_slice(m, be, NULL, first, last, MAX_TOKENS, 3, &s, &err) == LD_OK, "%s", err.msg);
    /* rows 0..4, then the rest: each call's out holds its own rows */
    CHECK_MSG(ld_lm_eval_slice(s, q->tokens, state, 5, a, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_eval_slice(s, q->tokens + 5, state + 5 * W, T - 5, b, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_lm_pos(s) == T);
    ld_lm_session_destroy(s);
    for (int p = 0; p < n; p++) {
        const float *want = hidden + (size_t)(first + 1 + p) * plane;
        memcpy(out, a + (size_t)p * 5 * D, 5 * D * sizeof *out);
        memcpy(out + 5 * D, b + (size_t)p * (size_t)(T - 5) * D, (size_t)(T - 5) * D * sizeof *out);
        CHECK_MSG(!memcmp(out, want, plane * sizeof *out),
                  "%s %s: slice [%d, %d): plane %d differs from the whole pass", name, cpu ? "cpu" : "ref", first,
                  last, first + 1 + p);
    }
    free(a);
    free(b);
    free(out);
    return 0;
}

/* every slice of the model of `name` against its whole forward pass
 * (through engine.h: every family alike) */
static int check_model(const char *name, int cpu)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_error err = {0};
    ld_lm *m = NULL;
    ld_backend *be = NULL;
    CHECK_MSG(ld_lm_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    CHECK_MSG(open_backend(cpu, &be, &err) == LD_OK, "%s", err.msg);
    ld_test_seq q;
    CHECK_MSG(ld_test_load_seq(dir, 0, &q) && q.T > 5 && q.T <= MAX_TOKENS, "%s/ref.json", dir);
    int L = ld_lm_info_of(m)->n_layers, T = q.T;
    size_t D = (size_t)ld_lm_info_of(m)->hidden, W = (size_t)ld_lm_info_of(m)->state_width, plane = (size_t)T * D;
    size_t planes = (size_t)(L + 2) * plane;
    float *hidden = malloc(planes * sizeof *hidden), *h2 = malloc(planes * sizeof *h2);
    float *state = malloc((size_t)T * W * sizeof *state);
    CHECK(hidden && h2 && state);
    ld_lm_session *s = NULL;
    CHECK_MSG(ld_lm_session_create(m, be, NULL, MAX_TOKENS, MAX_TOKENS, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_eval(s, q.tokens, T, NULL, hidden, &err) == LD_OK, "%s", err.msg);
    ld_lm_session_destroy(s);
    int slices = 0;
    for (int first = 0; first < L; first++) {
        /* the state entering `first`, from a pass whose planes must not move */
        CHECK_MSG(ld_lm_session_create(m, be, NULL, MAX_TOKENS, 7, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_lm_eval_state(s, q.tokens, T, NULL, h2, first, state, &err) == LD_OK, "%s", err.msg);
        ld_lm_session_destroy(s);
        CHECK_MSG(!memcmp(h2, hidden, planes * sizeof *h2), "%s: asking for the state moved the planes", name);
        if (check_state(state, hidden, first, T, D, W)) return 1;
        for (int last = first + 1; last <= L; last++, slices++)
            if (check_slice(name, cpu, m, be, &q, state, hidden, first, last, W)) return 1;
    }
    printf("  %-12s %-3s %d slices of %d layers, %d rows: bitwise the whole pass's planes\n", name, cpu ? "cpu" : "ref",
           slices, L, T);
    free(hidden);
    free(h2);
    free(state);
    ld_backend_destroy(be);
    ld_lm_close(m);
    return 0;
}

static int test_slice_bitwise(void)
{
    const char *models[] = {"qwen3",        "mistral",      "llama3-bf16",    "deepseek-v3",
                            "deepseek-v3-fp8", "deepseek-v32", "deepseek-v4", "deepseek-v4-fp4"};
    for (size_t i = 0; i < sizeof models / sizeof *models; i++)
        for (int cpu = 0; cpu < 2; cpu++)
            if (check_model(models[i], cpu)) return 1;
    return 0;
}

/* the backend's weight_load, counted */
static ld_backend_ops counted_ops;
static const ld_backend_ops *real_ops;
static int loads;

static ld_status counted_load(ld_backend *be, const ld_host_tensor *t, ld_weight **w, ld_error *err)
{
    loads++;
    return real_ops->weight_load(be, t, w, err);
}

/* the loads of a session over [first, last) (first < 0: a whole one) */
static int loads_of(const ld_model *m, ld_backend *be, int first, int last)
{
    ld_error err = {0};
    ld_session *s = NULL;
    loads = 0;
    ld_status st = first < 0 ? ld_session_create(m, be, 8, 8, &s, &err)
                             : ld_session_create_slice(m, be, first, last, 8, 8, &s, &err);
    ld_session_destroy(s);
    return st == LD_OK ? loads : -1;
}

static int test_slice_loads_only_its_layers(void)
{
    ld_error err = {0};
    ld_model *m = NULL;
    ld_backend *be = NULL;
    CHECK_MSG(ld_model_open(MDIR "qwen3", &m, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(open_backend(0, &be, &err) == LD_OK, "%s", err.msg);
    real_ops = be->ops;
    counted_ops = *be->ops;
    counted_ops.weight_load = counted_load;
    be->ops = &counted_ops;
    int whole = loads_of(m, be, -1, 0), first = loads_of(m, be, 0, 1), second = loads_of(m, be, 1, 2);
    int both = loads_of(m, be, 0, 2);
    be->ops = real_ops;
    printf("  qwen3: weights loaded: whole %d, layer 0 %d, layer 1 %d, layers 0-1 %d\n", whole, first, second, both);
    CHECK(first > 0 && second == first && both == 2 * first);
    /* the whole session's extra loads: embeddings and final norm (qwen3's head is tied or its own) */
    CHECK_MSG(whole - both >= 2 && whole - both <= 3, "whole %d, both layers %d", whole, both);
    ld_backend_destroy(be);
    ld_model_close(m);
    return 0;
}

/* DeepSeek V4's slice: its tokens, no batch, sibling or whole pass */
static int test_v4_slice_refusals(ld_backend *be)
{
    ld_error err = {0};
    ld_lm *lm = NULL;
    ld_lm_session *ls = NULL, *t = NULL;
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v4", &lm, &err) == LD_OK, "%s", err.msg);
    int W = ld_lm_info_of(lm)->state_width;
    CHECK(W == 4 * ld_lm_info_of(lm)->hidden);
    float *x = calloc(2 * (size_t)W, sizeof *x), out[2 * 48];
    int32_t tok[2] = {1, 2};
    CHECK(x);
    CHECK_MSG(ld_lm_session_create_slice(lm, be, NULL, 0, 1, 8, 8, &ls, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_lm_eval_slice(ls, NULL, x, 2, out, &err), LD_ERR_USAGE, &err, "tokens") == 0);
    CHECK(ld_test_expect_fail(ld_lm_eval(ls, tok, 2, NULL, NULL, &err), LD_ERR_USAGE, &err, "not a whole pass") == 0);
    CHECK(ld_test_expect_fail(ld_lm_session_create_sibling(ls, 8, &t, &err), LD_ERR_USAGE, &err, "no siblings") == 0);
    ld_lm_part parts[2] = {{ls, tok, 2, NULL, NULL}, {ls, tok, 2, NULL, NULL}};
    CHECK(ld_test_expect_fail(ld_lm_eval_batch(parts, 2, &err), LD_ERR_USAGE, &err, "not a batch") == 0);
    CHECK(ld_lm_eval_slice(ls, tok, x, 2, out, &err) == LD_OK && ld_lm_pos(ls) == 2);
    ld_lm_session_destroy(ls);
    CHECK_MSG(ld_lm_session_create(lm, be, NULL, 8, 8, &ls, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_lm_eval_slice(ls, tok, x, 2, out, &err), LD_ERR_USAGE, &err, "not a layer") == 0);
    CHECK(ld_test_expect_fail(ld_lm_eval_state(ls, tok, 2, NULL, NULL, 5, x, &err), LD_ERR_USAGE, &err,
                              "the model has 4 layers") == 0);
    ld_lm_session_destroy(ls);
    ld_lm_close(lm);
    free(x);
    return 0;
}

static int test_slice_refusals(void)
{
    ld_error err = {0};
    ld_model *m = NULL;
    ld_backend *be = NULL;
    ld_session *s = NULL, *t = NULL;
    CHECK_MSG(ld_model_open(MDIR "qwen3", &m, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(open_backend(1, &be, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_session_create_slice(m, be, 1, 1, 8, 8, &s, &err), LD_ERR_USAGE, &err,
                              "0 <= first < last <= 2") == 0 && !s);
    CHECK(ld_test_expect_fail(ld_session_create_slice(m, be, 0, 3, 8, 8, &s, &err), LD_ERR_USAGE, &err,
                              "layers [0, 3)") == 0 && !s);
    CHECK(ld_test_expect_fail(ld_session_create_slice(m, be, -1, 1, 8, 8, &s, &err), LD_ERR_USAGE, &err,
                              "layers [-1, 1)") == 0);
    CHECK_MSG(ld_session_create_slice(m, be, 0, 1, 8, 8, &s, &err) == LD_OK, "%s", err.msg);
    int32_t tok[2] = {1, 2};
    float x[2 * 64] = {0}, out[2 * 64];
    CHECK(ld_test_expect_fail(ld_session_eval(s, tok, 2, NULL, NULL, &err), LD_ERR_USAGE, &err, "hidden rows") == 0);
    CHECK(ld_test_expect_fail(ld_session_create_sibling(s, 8, &t, &err), LD_ERR_USAGE, &err, "no siblings") == 0);
    CHECK(ld_test_expect_fail(ld_session_eval_slice(s, x, 9, out, &err), LD_ERR_USAGE, &err, "holds 8") == 0);
    CHECK(ld_session_eval_slice(s, x, 2, out, &err) == LD_OK && ld_session_pos(s) == 2);
    ld_session_destroy(s);
    CHECK_MSG(ld_session_create(m, be, 8, 8, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_session_eval_slice(s, x, 2, out, &err), LD_ERR_USAGE, &err, "not a layer") == 0);
    ld_session_destroy(s);
    ld_model_close(m);
    /* through lm.h: a dense slice takes no tokens */
    ld_lm *lm = NULL;
    ld_lm_session *ls = NULL;
    CHECK_MSG(ld_lm_open(MDIR "qwen3", &lm, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_lm_session_create_slice(lm, be, NULL, 1, 2, 8, 8, &ls, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_lm_eval_slice(ls, NULL, x, 2, out, &err) == LD_OK && ld_lm_pos(ls) == 2);
    ld_lm_session_destroy(ls);
    CHECK_MSG(ld_lm_session_create(lm, be, NULL, 8, 8, &ls, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_test_expect_fail(ld_lm_eval_state(ls, tok, 2, NULL, NULL, 3, out, &err), LD_ERR_USAGE, &err,
                              "the model has 2 layers") == 0);
    ld_lm_session_destroy(ls);
    ld_lm_close(lm);
    int rc = test_v4_slice_refusals(be);
    ld_backend_destroy(be);
    return rc;
}

static const ld_test_case tests[] = {LD_CASE(test_slice_bitwise), LD_CASE(test_slice_loads_only_its_layers),
                                     LD_CASE(test_slice_refusals)};

LD_TEST_MAIN(tests)
