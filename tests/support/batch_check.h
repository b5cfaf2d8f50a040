/* batch_check.h - "the same request batched with others gives the same
 * logits" (issue 9's determinism), for any backend: the check that
 * test_batch.c runs on the CPU backends and test_cuda_determinism.c on the
 * CUDA one (a GPU, the emulator, the mock).
 *
 * BATCH_SEQS requests, each a prompt and BATCH_DECODE greedy steps, run
 * alone (one fresh session each: a prefill, then a token a call) and then
 * together through ld_session_eval_batch as a server's continuous batching
 * runs them: the first two prompts in one batch, then every step the
 * running requests' next tokens in one batch, the third request's prompt
 * joining at the first decode step (its prefill rows in the same chunks
 * as the others' decode rows), chunks of BATCH_ROWS rows so that a prompt
 * spans several.  The batch feeds each request the tokens its alone run
 * chose, so the positions line up; each request's logits at every
 * position must be bitwise its alone run's, and so must its hidden planes
 * (lm.h's ld_lm_part.hidden: embeddings, each layer's output, the final
 * norm), which a batch writes for each part as its eval does.  Sessions (lm.h, any family
 * that batches: the dense decoders, DeepSeek-V4): the first created (its
 * weights, its scratch serve the batch), the second a sibling borrowing
 * them, the third created with its own weights and a max_batch of 2.
 * Split over tensor-parallel ranks (ld_test_check_batch_tp): every run
 * split the same way, alone on a fresh group each, batched on one group
 * (the first, and the two others its siblings: sessions of one group
 * batch together), each rank batching its share.  The prompts:
 * ref.json's sequences, and the first again with its ids shifted (a
 * request the others do not share a prefix with). */
#ifndef LD_TEST_BATCH_CHECK_H
#define LD_TEST_BATCH_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "ld_test.h"
#include "engine/engine.h"

#define BATCH_SEQS 3
#define BATCH_DECODE 4
#define BATCH_ROWS 6
#define BATCH_MAX_SEQ 64

typedef struct batch_req {
    int32_t toks[BATCH_MAX_SEQ]; /* the prompt, then the alone run's choices */
    int P, T;                    /* prompt length; P + BATCH_DECODE */
    float *alone, *batched;      /* [T][vocab] */
    float *alone_h, *batched_h;  /* each call's hidden planes [planes][n][hidden]
                                    (n its tokens) from planes * pos * hidden */
} batch_req;

/* where a call from position pos writes its hidden planes */
static inline float *batch_planes(const ld_lm *m, float *h, int pos)
{
    const ld_lm_info *in = ld_lm_info_of(m);
    return h + ((size_t)in->n_layers + 2) * (size_t)pos * (size_t)in->hidden;
}

static inline int32_t batch_argmax(const float *v, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = (int32_t)i;
    return best;
}

/* a session of m (max_batch rows a chunk): on be with k, or split as tp
 * says (not NULL) */
static inline ld_status batch_session(ld_backend *be, const ld_lm *m, const ld_cpu_kernels *k, const ld_tp_opts *tp,
                                      int max_batch, ld_lm_session **s, ld_error *err)
{
    if (tp) return ld_lm_session_create_tp(m, tp, BATCH_MAX_SEQ, max_batch, s, err);
    return ld_lm_session_create(m, be, k, BATCH_MAX_SEQ, max_batch, s, err);
}

/* request r alone on a fresh session: its prompt, then greedy steps */
static inline ld_status batch_alone(ld_backend *be, const ld_lm *m, const ld_cpu_kernels *k, const ld_tp_opts *tp,
                                    batch_req *r, ld_error *err)
{
    ld_lm_session *s = NULL;
    size_t V = (size_t)ld_lm_info_of(m)->vocab;
    ld_status st = batch_session(be, m, k, tp, r->P, &s, err);
    if (st == LD_OK) st = ld_lm_eval(s, r->toks, r->P, r->alone, r->alone_h, err);
    for (int p = r->P; st == LD_OK && p < r->T; p++) {
        r->toks[p] = batch_argmax(r->alone + (size_t)(p - 1) * V, (int)V);
        st = ld_lm_eval(s, r->toks + p, 1, r->alone + (size_t)p * V, batch_planes(m, r->alone_h, p), err);
    }
    ld_lm_session_destroy(s);
    return st;
}

/* step k of the batched run: request i's part (T 0 when it has nothing
 * to run at that step): request 2 starts a step late */
static inline ld_lm_part batch_step_part(const ld_lm *m, ld_lm_session *s, batch_req *r, int i, int k)
{
    int start = i == 2 ? 1 : 0, j = k - start; /* the request's own step */
    ld_lm_part p = {s, NULL, 0, NULL, NULL};
    if (j < 0 || j > BATCH_DECODE) return p;
    int pos = j == 0 ? 0 : r->P + j - 1, n = j == 0 ? r->P : 1;
    p.tokens = r->toks + pos;
    p.T = n;
    p.logits = r->batched + (size_t)pos * (size_t)ld_lm_info_of(m)->vocab;
    p.hidden = batch_planes(m, r->batched_h, pos);
    return p;
}

static inline ld_status batch_run(ld_backend *be, const ld_lm *m, const ld_cpu_kernels *k, const ld_tp_opts *tp,
                                  batch_req *r, ld_error *err)
{
    ld_lm_session *s[BATCH_SEQS] = {NULL, NULL, NULL};
    ld_status st = batch_session(be, m, k, tp, BATCH_ROWS, &s[0], err);
    if (st == LD_OK) st = ld_lm_session_create_sibling(s[0], BATCH_MAX_SEQ, &s[1], err);
    /* the third: its own weights, or under tp a sibling of the second (one group) */
    if (st == LD_OK && tp) st = ld_lm_session_create_sibling(s[1], BATCH_MAX_SEQ, &s[2], err);
    else if (st == LD_OK) st = ld_lm_session_create(m, be, k, BATCH_MAX_SEQ, 2, &s[2], err);
    for (int step = 0; st == LD_OK && step <= BATCH_DECODE + 1; step++) {
        ld_lm_part parts[BATCH_SEQS];
        int n = 0;
        for (int i = 0; i < BATCH_SEQS; i++) {
            ld_lm_part p = batch_step_part(m, s[i], &r[i], i, step);
            if (p.T) parts[n++] = p;
        }
        /* the first part leads: s[0] while it runs, then s[2] alone */
        if (n) st = ld_lm_eval_batch(parts, n, err);
    }
    for (int i = BATCH_SEQS - 1; i >= 0; i--) ld_lm_session_destroy(s[i]); /* siblings first */
    return st;
}

/* the check on backend be and the model of fixture dir, with the session
 * variants k (NULL: the defaults), or (tp not NULL) split as tp says;
 * label names the run in the output */
static inline int ld_test_check_batch_tp(ld_backend *be, const char *dir, const ld_cpu_kernels *k,
                                         const ld_tp_opts *tp, const char *label)
{
    ld_test_seq q[2];
    CHECK_MSG(ld_test_load_seqs(dir, q, 2) == 2, "%s/ref.json: two sequences", dir);
    ld_error err = {0};
    ld_lm *m = NULL;
    CHECK_MSG(ld_lm_open(dir, &m, &err) == LD_OK, "%s: %s", dir, err.msg);
    batch_req r[BATCH_SEQS];
    size_t V = (size_t)ld_lm_info_of(m)->vocab;
    size_t H = ((size_t)ld_lm_info_of(m)->n_layers + 2) * (size_t)ld_lm_info_of(m)->hidden; /* a position's planes */
    for (int i = 0; i < BATCH_SEQS; i++) {
        const ld_test_seq *src = &q[i == 1];
        r[i].P = src->T;
        r[i].T = src->T + BATCH_DECODE;
        CHECK(r[i].T <= BATCH_MAX_SEQ);
        for (int t = 0; t < src->T; t++)
            r[i].toks[t] = i == 2 ? (int32_t)((src->tokens[t] + 7) % (int32_t)V) : src->tokens[t];
        r[i].alone = malloc((size_t)r[i].T * V * sizeof(float));
        r[i].batched = malloc((size_t)r[i].T * V * sizeof(float));
        r[i].alone_h = malloc((size_t)r[i].T * H * sizeof(float));
        r[i].batched_h = malloc((size_t)r[i].T * H * sizeof(float));
        CHECK(r[i].alone && r[i].batched && r[i].alone_h && r[i].batched_h);
        /* NaN: a row never written differs */
        memset(r[i].batched, 0xff, (size_t)r[i].T * V * sizeof(float));
        memset(r[i].batched_h, 0xff, (size_t)r[i].T * H * sizeof(float));
    }
    for (int i = 0; i < BATCH_SEQS; i++)
        CHECK_MSG(batch_alone(be, m, k, tp, &r[i], &err) == LD_OK, "%s: request %d alone: %s", label, i, err.msg);
    CHECK_MSG(batch_run(be, m, k, tp, r, &err) == LD_OK, "%s: batched: %s", label, err.msg);
    int bad = 0;
    for (int i = 0; i < BATCH_SEQS; i++) {
        int first = -1, first_h = -1;
        for (int p = r[i].T - 1; p >= 0; p--) {
            if (memcmp(r[i].alone + (size_t)p * V, r[i].batched + (size_t)p * V, V * sizeof(float))) first = p;
            if (memcmp(r[i].alone_h + (size_t)p * H, r[i].batched_h + (size_t)p * H, H * sizeof(float))) first_h = p;
        }
        printf("  %-24s request %d (%2d + %d tokens) batched with %d others: %s", label, i, r[i].P, BATCH_DECODE,
               BATCH_SEQS - 1, first < 0 ? "bitwise its alone logits" : "logits differ");
        if (first >= 0) printf(" from position %d", first);
        printf(first_h < 0 ? ", hidden planes too\n" : ", hidden planes differ from position %d\n", first_h);
        bad += first >= 0 || first_h >= 0;
        free(r[i].alone);
        free(r[i].batched);
        free(r[i].alone_h);
        free(r[i].batched_h);
    }
    ld_lm_close(m);
    CHECK_MSG(!bad, "%s: %d requests differ batched", label, bad);
    return 0;
}

static inline int ld_test_check_batch(ld_backend *be, const char *dir, const ld_cpu_kernels *k, const char *label)
{
    return ld_test_check_batch_tp(be, dir, k, NULL, label);
}

#endif /* LD_TEST_BATCH_CHECK_H */
