/* ds4_check.h - what the DeepSeek-V4 tests share (tests/engine/models/
 * test_ds4.c, test_ds4_ops.c): the tiny models, transformers' outputs for
 * them, a session run, the models ablated one feature at a time. */
#ifndef LD_TEST_DS4_CHECK_H
#define LD_TEST_DS4_CHECK_H
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds4.h"

#define MROOT LD_TESTDATA_DIR "/models/"
/* the fixture the helpers read: testdata/models/<name> */
static char MDIR[512] = MROOT "deepseek-v4";
static const char *use_model(const char *name)
{
    snprintf(MDIR, sizeof MDIR, MROOT "%s", name);
    return name;
}
#define MAX_T 64
#define MAX_L 8
#define MAX_K 8

/* ------------------------------------------------------------ helpers */


typedef struct seq {
    int32_t tokens[MAX_T];
    int T;
    char logits_file[64], hidden_file[64];
    int32_t experts[MAX_L][MAX_T][MAX_K];   /* transformers', ascending */
} seq;

static inline int load_seqs(int top_k, seq *seqs, int max)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ref.json", MDIR);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "sequences"))
    {
        if (n == max) break;
        seq *s = &seqs[n++];
        memset(s, 0xff, sizeof *s);
        s->T = 0;
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItem(e, "tokens")) if (s->T < MAX_T) s->tokens[s->T++] = t->valueint;
        snprintf(s->logits_file, sizeof s->logits_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "logits"), "file")->valuestring);
        snprintf(s->hidden_file, sizeof s->hidden_file, "%s",
                 cJSON_GetObjectItem(cJSON_GetObjectItem(e, "hidden"), "file")->valuestring);
        const cJSON *lay;
        cJSON_ArrayForEach(lay, cJSON_GetObjectItem(e, "experts"))
        {
            int l = atoi(lay->string + strlen("layer.")), tt = 0;
            const cJSON *row;
            cJSON_ArrayForEach(row, lay)
            {
                int k = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, row) if (l < MAX_L && tt < MAX_T && k < top_k) s->experts[l][tt][k++] =
                    x->valueint;
                tt++;
            }
        }
    }
    cJSON_Delete(j);
    return n;
}

typedef struct backend_kind {
    const char *name;
    ld_status (*create)(int n_threads, ld_backend **out, ld_error *err);
} backend_kind;
static const backend_kind backends[] = {{"ref", ld_backend_ref_create}, {"cpu", ld_backend_cpu_create}};
#define N_BACKENDS ((int)(sizeof backends / sizeof backends[0]))

/* Run `toks` through a fresh session: `threads` threads, calls of `call`
 * tokens (0: all at once), chunks of at most `batch`, the session-level
 * variants of `kspec` (engine/backend/cpu_kernels.h; NULL: ref). */
static inline ld_status run_on_spec(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, int call,
                             const char *kspec, const int32_t *toks, int T, float *logits, float *hidden,
                             int32_t *experts, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_status st = ld_cpu_kernels_parse(kspec, &k, err);
    if (st == LD_OK) st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_ds4_session_create(m, be, MAX_T, batch, &s, err);
    if (st == LD_OK) ld_ds4_session_set_kernels(s, &k);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL;
        int32_t *ex = experts ? malloc(L * (size_t)n * K * sizeof *ex) : NULL;
        if ((hidden && !h) || (experts && !ex)) st = LD_ERR_NOMEM;
        if (st == LD_OK) st = ld_ds4_session_eval(s, toks + t0, n, logits ? logits + (size_t)t0 * V : NULL, h, ex, err);
        for (size_t p = 0; h && st == LD_OK && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        for (size_t l = 0; ex && st == LD_OK && l < L; l++)
            memcpy(experts + (l * (size_t)T + (size_t)t0) * K, ex + l * (size_t)n * K, (size_t)n * K * sizeof *ex);
        free(h);
        free(ex);
        t0 += n;
    }
    if (st == LD_OK && ld_ds4_session_pos(s) != T) st = LD_ERR_MISMATCH;
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

static inline ld_status run_on(const backend_kind *bk, const ld_ds4_model *m, int threads, int batch, int call,
                        const int32_t *toks, int T, float *logits, float *hidden, int32_t *experts, ld_error *err)
{
    return run_on_spec(bk, m, threads, batch, call, NULL, toks, T, logits, hidden, experts, err);
}

static inline int open_model(ld_ds4_model **m)
{
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_ds4_model_open(MDIR, m, &err);
    CHECK_MSG(st == LD_OK, "%s", err.msg);
    CHECK((*m)->cfg.n_layers <= MAX_L && (*m)->cfg.top_k <= MAX_K);
    return 0;
}


/* the fixture opened (*m), its sequences read (seqs [2]), and its tensors
 * bound again (*b) under the config `drop` changes; the config is static,
 * one ablated model at a time */
static inline int open_ablated(void (*drop)(ld_ds4_config *), ld_ds4_model **m, ld_ds4_model **b, seq *seqs)
{
    if (open_model(m)) return 1;
    CHECK(load_seqs((*m)->cfg.top_k, seqs, 2) == 2);
    static ld_ds4_config c;
    c = (*m)->cfg;
    drop(&c);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_ds4_model_bind(&c, (*m)->st, b, &err) == LD_OK, "%s", err.msg);
    return 0;
}

static inline int check_ablation(const char *what, void (*drop)(ld_ds4_config *))
{
    ld_ds4_model *m = NULL, *b = NULL;
    static seq seqs[2];
    if (open_ablated(drop, &m, &b, seqs)) return 1;
    ld_error err;
    ld_error_clear(&err);
    size_t n = (size_t)seqs[1].T * (size_t)b->cfg.vocab;
    float *ref = load_f32(MDIR, seqs[1].logits_file, n), *l = malloc(n * sizeof *l);
    CHECK(ref && l);
    CHECK_MSG(run_on(&backends[0], b, 1, MAX_T, 0, seqs[1].tokens, seqs[1].T, l, NULL, NULL, &err) == LD_OK, "%s",
              err.msg);
    double e = nerr(l, ref, n, NULL);
    fprintf(stderr, "  deepseek-v4 without %s: nerr %.3g\n", what, e);
    CHECK_MSG(e > 1e-3, "without %s: logits moved only %.3g", what, e);
    free(ref);
    free(l);
    ld_ds4_model_close(b); /* a bound model does not own the checkpoint */
    ld_ds4_model_close(m);
    return 0;
}

static inline void drop_sinkhorn(ld_ds4_config *c) { c->hc_sinkhorn_iters = 0; }
static inline void drop_sinks(ld_ds4_config *c) { c->use_sinks = 0; }
static inline void drop_hash(ld_ds4_config *c) { c->use_hash = 0; }
static inline void drop_compressed(ld_ds4_config *c) { c->use_compressed = 0; }
static inline void drop_indexer(ld_ds4_config *c) { c->index_topk = 1 << 20; }
static inline void drop_window(ld_ds4_config *c) { c->sliding_window = 1 << 20; }
static inline void drop_clamp(ld_ds4_config *c) { c->swiglu_limit = 1e30f; }
static inline void drop_bias(ld_ds4_config *c) { c->use_score_bias = 0; }
static inline void drop_yarn(ld_ds4_config *c) { c->rope_compress.yarn = 0; }
static inline void one_rope(ld_ds4_config *c) { c->rope_compress = c->rope_main; }

#endif /* LD_TEST_DS4_CHECK_H */
