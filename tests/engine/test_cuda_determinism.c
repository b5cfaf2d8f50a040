/* test_cuda_determinism.c - the determinism of the CUDA backend (issue 9),
 * through the session API (forward.h) on the tiny models qwen3 (fp32) and
 * qwen3-fp8 (FP8 block-scaled weights, 16x16 blocks: backend_cuda.c's
 * LD_WQ_F8B path end to end), each with every op on its ref kernel
 * ("all=ref") and every op custom:
 *  - replays: one request (ref.json's sequence a as the prompt, then
 *    greedy decode steps) run 100 times, in fresh sessions on four
 *    backend instances, gives the same tokens and bitwise the same logits;
 *  - chunks: the request's tokens run as one prefill, in chunks of 3 and
 *    token by token give bitwise the same logits per position, which are
 *    also the replay's;
 *  - transformers: the logits of ref.json's sequences are within 1e-5
 *    (normalised, as test_forward.c) of the committed transformers
 *    reference logits.
 * Label gpu: every case skips (77) with the reason when CUDA is not built
 * or no device is present. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_cuda.h"
#include "fixtures.h"
#include "forward.h"
#include "ld_test.h"
#include "model.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_TOKENS 64
#define DECODE_STEPS 4
#define REPLAYS 100
#define BACKENDS 4 /* instances the replays are spread over */
#define TOL 1e-5   /* normalised logits error against transformers */

/* the kernel sets: backend_cuda.h specs (NULL: every op custom) */
static const char *const ksets[] = {"all=ref", NULL};
#define N_KSETS 2

static const char *kset_name(int k)
{
    return ksets[k] ? ksets[k] : "all=custom";
}

/* ---------------------------------------------------------------- fixtures */

typedef struct seq {
    int32_t tokens[MAX_TOKENS];
    int T;
    char logits_file[64];
} seq;

/* up to `max` sequences of the model's ref.json (tokens, logits file) */
static int load_seqs(const char *dir, seq *seqs, int max)
{
    char path[512];
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "sequences"))
    {
        if (n == max) break;
        const cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits"), "file"), *t;
        if (!cJSON_IsString(f)) break;
        seq *s = &seqs[n++];
        s->T = 0;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tokens"))
        {
            if (s->T < MAX_TOKENS) s->tokens[s->T++] = (int32_t)t->valueint;
        }
        snprintf(s->logits_file, sizeof s->logits_file, "%s", f->valuestring);
    }
    cJSON_Delete(j);
    return n;
}

/* the CUDA backend with kernel set k; LD_ERR_UNSUPPORTED (no CUDA, no
 * device) is the caller's to skip on */
static ld_status open_cuda(int k, ld_backend **be, ld_error *err)
{
    return ld_backend_cuda_create(0, ksets[k], be, err);
}

/* ---------------------------------------------------------------- runs */

/* the first index of the largest of n values */
static int32_t argmax(const float *v, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = (int32_t)i;
    return best;
}

/* `toks` [T] through a fresh session on `be` in calls of `call` tokens
 * (also its max_batch): logits [T][vocab] */
static ld_status run_tokens(ld_backend *be, const ld_model *m, const int32_t *toks, int T, int call, float *logits,
                            ld_error *err)
{
    ld_session *s = NULL;
    size_t V = (size_t)m->cfg.vocab;
    ld_status st = ld_session_create(m, be, MAX_TOKENS, call, &s, err);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_session_eval(s, toks + t0, n, logits + (size_t)t0 * V, NULL, err);
    }
    ld_session_destroy(s);
    return st;
}

/* One request on a fresh session: the prompt (q) in one prefill, then
 * DECODE_STEPS greedy steps, each feeding the argmax of the last logits.
 * toks [q->T + DECODE_STEPS] (the prompt, then the chosen tokens), logits
 * [q->T + DECODE_STEPS][vocab]. */
static ld_status run_request(ld_backend *be, const ld_model *m, const seq *q, int32_t *toks, float *logits,
                             ld_error *err)
{
    ld_session *s = NULL;
    int V = m->cfg.vocab, T = q->T;
    memcpy(toks, q->tokens, (size_t)T * sizeof *toks);
    ld_status st = ld_session_create(m, be, MAX_TOKENS, T, &s, err);
    if (st == LD_OK) st = ld_session_eval(s, toks, T, logits, NULL, err);
    for (int i = 0; st == LD_OK && i < DECODE_STEPS; i++) {
        int p = T + i;
        toks[p] = argmax(logits + (size_t)(p - 1) * (size_t)V, V);
        st = ld_session_eval(s, toks + p, 1, logits + (size_t)p * (size_t)V, NULL, err);
    }
    ld_session_destroy(s);
    return st;
}

/* ---------------------------------------------------------------- checks */

typedef int (*model_check)(int k, const ld_model *m, const char *name, const char *dir);

/* `fn` for each kernel set on model `name`, or a skip without a device */
static int with_model(const char *name, model_check fn)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = open_cuda(0, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    ld_backend_destroy(be);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    CHECK_MSG(ld_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    int rc = 0;
    for (int k = 0; !rc && k < N_KSETS; k++) rc = fn(k, m, name, dir);
    ld_model_close(m);
    return rc;
}

/* REPLAYS runs of one request, spread over BACKENDS backend instances:
 * the same tokens and bitwise the same logits as the first */
static int check_replays(int k, const ld_model *m, const char *name, const char *dir)
{
    seq q;
    CHECK_MSG(load_seqs(dir, &q, 1) == 1, "%s/ref.json", dir);
    CHECK(q.T + DECODE_STEPS <= MAX_TOKENS);
    int P = q.T + DECODE_STEPS;
    size_t n = (size_t)P * (size_t)m->cfg.vocab;
    int32_t first_t[MAX_TOKENS], toks[MAX_TOKENS];
    float *first = malloc(n * sizeof *first), *l = malloc(n * sizeof *l);
    CHECK(first && l);
    ld_error err = {0};
    ld_backend *be = NULL;
    int differ = 0;
    for (int r = 0; r < REPLAYS; r++) {
        if (r % (REPLAYS / BACKENDS) == 0) {
            ld_backend_destroy(be);
            be = NULL;
            CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
        }
        CHECK_MSG(run_request(be, m, &q, r ? toks : first_t, r ? l : first, &err) == LD_OK, "%s replay %d: %s",
                  kset_name(k), r, err.msg);
        if (r && (memcmp(toks, first_t, (size_t)P * sizeof *toks) || memcmp(l, first, n * sizeof *l))) {
            if (!differ) fprintf(stderr, "  %s: replay %d differs from replay 0\n", kset_name(k), r);
            differ++;
        }
    }
    ld_backend_destroy(be);
    printf("  %-10s %-10s %d replays of %d + %d tokens: %d differ (decoded", name, kset_name(k),
           REPLAYS, q.T, DECODE_STEPS, differ);
    for (int i = q.T; i < P; i++) printf(" %d", (int)first_t[i]);
    printf(")\n");
    free(first);
    free(l);
    CHECK_MSG(!differ, "%s: %d of %d replays differ", kset_name(k), differ, REPLAYS);
    return 0;
}

/* the request's tokens as one prefill, in chunks of 3 and token by token:
 * bitwise the same logits per position, and the same as the request's
 * (prefill, then decode steps) */
static int check_chunks(int k, const ld_model *m, const char *name, const char *dir)
{
    seq q;
    CHECK_MSG(load_seqs(dir, &q, 1) == 1, "%s/ref.json", dir);
    CHECK(q.T + DECODE_STEPS <= MAX_TOKENS);
    int P = q.T + DECODE_STEPS, V = m->cfg.vocab;
    size_t n = (size_t)P * (size_t)V;
    int32_t toks[MAX_TOKENS];
    float *req = malloc(n * sizeof *req), *l = malloc(n * sizeof *l);
    CHECK(req && l);
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(run_request(be, m, &q, toks, req, &err) == LD_OK, "%s: %s", kset_name(k), err.msg);
    const int calls[] = {P, 3, 1};
    for (int c = 0; c < 3; c++) {
        CHECK_MSG(run_tokens(be, m, toks, P, calls[c], l, &err) == LD_OK, "%s: %s", kset_name(k), err.msg);
        int bad = -1;
        for (int p = P - 1; p >= 0; p--)
            if (memcmp(l + (size_t)p * (size_t)V, req + (size_t)p * (size_t)V, (size_t)V * sizeof *l)) bad = p;
        printf("  %-10s %-10s %d tokens in calls of %2d: %s\n", name, kset_name(k), P, calls[c],
               bad < 0 ? "bitwise equal" : "differ");
        CHECK_MSG(bad < 0, "%s: calls of %d: position %d differs from the request's", kset_name(k), calls[c], bad);
    }
    ld_backend_destroy(be);
    free(req);
    free(l);
    return 0;
}

/* ref.json's sequences in one prefill: within TOL of transformers */
static int check_transformers(int k, const ld_model *m, const char *name, const char *dir)
{
    seq seqs[4];
    int ns = load_seqs(dir, seqs, 4);
    CHECK_MSG(ns == 2, "%s/ref.json: %d sequences", dir, ns);
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    size_t V = (size_t)m->cfg.vocab;
    int bad = 0;
    for (int i = 0; i < ns; i++) {
        size_t n = (size_t)seqs[i].T * V;
        float *ref = load_f32(dir, seqs[i].logits_file, n), *l = malloc(n * sizeof *l);
        CHECK_MSG(ref && l, "%s/%s", dir, seqs[i].logits_file);
        CHECK_MSG(run_tokens(be, m, seqs[i].tokens, seqs[i].T, seqs[i].T, l, &err) == LD_OK, "%s: %s",
                  kset_name(k), err.msg);
        double mx, e = nerr(l, ref, n, &mx);
        printf("  %-10s %-10s seq %d (%2d tokens): logits nerr %.3g max|d| %.3g (tol %.0e)\n", name,
               kset_name(k), i, seqs[i].T, e, mx, TOL);
        if (!(e < TOL)) bad++;
        free(ref);
        free(l);
    }
    ld_backend_destroy(be);
    CHECK_MSG(!bad, "%s: %d sequences above %g", kset_name(k), bad, TOL);
    return 0;
}

static int test_cuda_replays_qwen3(void) { return with_model("qwen3", check_replays); }
static int test_cuda_replays_qwen3_fp8(void) { return with_model("qwen3-fp8", check_replays); }
static int test_cuda_chunks_qwen3(void) { return with_model("qwen3", check_chunks); }
static int test_cuda_chunks_qwen3_fp8(void) { return with_model("qwen3-fp8", check_chunks); }
static int test_cuda_transformers_qwen3(void) { return with_model("qwen3", check_transformers); }
static int test_cuda_transformers_qwen3_fp8(void) { return with_model("qwen3-fp8", check_transformers); }

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_transformers_qwen3), LD_CASE(test_cuda_transformers_qwen3_fp8),
    LD_CASE(test_cuda_replays_qwen3),      LD_CASE(test_cuda_replays_qwen3_fp8),
    LD_CASE(test_cuda_chunks_qwen3),       LD_CASE(test_cuda_chunks_qwen3_fp8),
};

LD_TEST_MAIN(tests)
