/* tp_check.h - what the tensor-parallel tests share (tests/engine/tp/
 * test_tp.c, test_tp_dense.c): the tiny dense models, their reference token
 * sequences and transformers' outputs, a split and a plain run of them, the
 * all-reduce taken in place or through host memory. */
#ifndef LD_TEST_TP_CHECK_H
#define LD_TEST_TP_CHECK_H
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "engine/tp/comm.h"
#include "engine/tp/comm_file.h"
#include "tests/support/fixtures.h"
#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/engine.h"
#include "engine/models/dense/model.h"
#include "engine/tp/tp_forward.h"
#include "engine/tp/tp_shard.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define QDIR LD_TESTDATA_DIR "/engine/quant/"

/* ------------------------------------------------------------ models */

typedef struct seq {
    int32_t tokens[64];
    int T;
    char name[8];
} seq;

/* Sequence a (which = 0) or b of the fixtures: the tokens of ref.json's
 * sequences (ref_tokens_match checks) and of models.txt's, whose logits are
 * ref-<name>.{logits,hidden}.f32 and <model>-<name>.logits.f32 */
static inline void load_seq(int which, seq *s)
{
    static const int32_t a[] = {1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200};
    static const int32_t b[] = {12, 49, 86, 123, 160, 197, 234, 271, 9, 46, 83, 120, 157, 194, 231, 268, 6, 43, 80,
                                117, 154};
    const int32_t *t = which ? b : a;
    s->T = which ? (int)(sizeof b / sizeof b[0]) : (int)(sizeof a / sizeof a[0]);
    memcpy(s->tokens, t, (size_t)s->T * sizeof *t);
    snprintf(s->name, sizeof s->name, "%s", which ? "b" : "a");
}

/* The tokens of ref.json's sequence `which`, checked against load_seq's. */
static inline int ref_tokens_match(const char *dir, const seq *s)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    CHECK_MSG(text, "cannot read %s", path);
    /* the sequence's token list, as the generator prints it: "tokens": [ 1, 17, ... */
    char want[64];
    snprintf(want, sizeof want, "\"name\": \"%s\"", s->name);
    const char *p = strstr(text, want);
    CHECK_MSG(p, "%s: no sequence %s", path, s->name);
    p = strstr(p, "\"tokens\"");
    CHECK(p);
    p = strchr(p, '[');
    CHECK(p);
    p++;
    for (int i = 0; i < s->T; i++) {
        char *end;
        long v = strtol(p, &end, 10);
        CHECK_MSG(end != p && v == s->tokens[i], "%s: token %d", path, i);
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n') p++;
    }
    CHECK(*p == ']');
    free(text);
    return 0;
}

static inline int open_model(const char *name, ld_model **m)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_model_open(dir, m, &err) == LD_OK, "%s: %s", name, err.msg);
    return 0;
}

/* Runs toks through a TP session in calls of `call` tokens (0: one call),
 * chunks of `batch`; logits [T][V] and (when not NULL) hidden [P][T][D]. */
static inline ld_status run_tp(const ld_model *m, const ld_tp_opts *o, int batch, int call, const int32_t *toks, int T,
                        float *logits, float *hidden, ld_error *err)
{
    ld_tp_session *s = NULL;
    ld_status st = ld_tp_session_create(m, o, 64, batch, &s, err);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL;
        if (hidden && !h) st = LD_ERR_NOMEM;
        if (st == LD_OK) st = ld_tp_session_eval(s, toks + t0, n, logits + (size_t)t0 * V, h, err);
        for (size_t p = 0; st == LD_OK && h && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        free(h);
        t0 += n;
    }
    if (st == LD_OK && ld_tp_session_pos(s) != T) st = LD_ERR_MISMATCH;
    ld_tp_session_destroy(s);
    return st;
}

/* whether layer l of a shard still has its row-parallel biases in the
 * matmuls (it must not: they come after the reduce) */
static inline int present_in(const ld_model *m, int l)
{
    return m->layers[l].bo.st || m->layers[l].bo.gg || m->layers[l].b_down.st || m->layers[l].b_down.gg;
}

/* The plain forward (forward.h) on a fresh CPU backend. */
static inline ld_status run_plain(const ld_model *m, const char *backend, const int32_t *toks, int T, float *logits,
                           float *hidden, ld_error *err)
{
    ld_backend *be = NULL;
    ld_session *s = NULL;
    ld_status st = ld_backend_cpu_create_ex(2, strcmp(backend, "cpu") == 0, NULL, &be, err);
    if (st == LD_OK) st = ld_session_create(m, be, 64, 64, &s, err);
    if (st == LD_OK) st = ld_session_eval(s, toks, T, logits, hidden, err);
    ld_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

static const char *const backends[] = {"ref", "cpu"};

/* ------------------------------------------------------------ in place or staged */

/* What the staging path needs: every rank's backend pointed at a copy of
 * its op table without buf_mem (tp_forward.h: before the first eval). */
static ld_backend_ops staged_ops[4];

static inline int take_staging_path(ld_tp_session *s, int n)
{
    CHECK(n <= (int)(sizeof staged_ops / sizeof staged_ops[0]));
    return ld_test_tp_staged(s, n, staged_ops);
}

/* toks through a TP session of m (staged: without buf_mem) in calls of
 * `call` tokens (0: one): logits [T][V], hidden [P][T][D] of the last call
 * (NULL: none), and (n_in_place not NULL: a simulated group) the group's
 * in-place and buffer all-reduces. */
static inline int run_path(const ld_model *m, const ld_tp_opts *o, int staged, int call, const seq *q, float *logits,
                    float *hidden, uint64_t *n_in_place, uint64_t *n_buffer)
{
    ld_tp_session *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tp_session_create(m, o, 64, 64, &s, &err) == LD_OK, "%s", err.msg);
    if (staged && take_staging_path(s, o->n)) return 1;
    size_t V = (size_t)m->cfg.vocab;
    for (int t0 = 0; t0 < q->T;) {
        int n = call && q->T - t0 > call ? call : q->T - t0;
        CHECK_MSG(ld_tp_session_eval(s, q->tokens + t0, n, logits + (size_t)t0 * V, t0 + n == q->T ? hidden : NULL,
                                     &err) == LD_OK, "%s", err.msg);
        t0 += n;
    }
    if (n_in_place) ld_comm_sim_reduces(ld_tp_session_comm(s, 0), n_in_place, n_buffer);
    ld_tp_session_destroy(s);
    return 0;
}

#endif /* LD_TEST_TP_CHECK_H */
