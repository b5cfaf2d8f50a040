/* ds_check.h - what the DeepSeek-V3 / V3.2 tests share (tests/engine/models/
 * test_ds.c, test_ds_config.c): the tiny models, transformers' outputs for
 * them, a session run. */
#ifndef LD_TEST_DS_CHECK_H
#define LD_TEST_DS_CHECK_H
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "kernels/ref/ref_ds.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_T 64
#define MAX_L 8
#define MAX_K 8
#define MAX_KI 8 /* index_topk of the V3.2 fixture at most */

/* ------------------------------------------------------------ helpers */

typedef struct seq {
    int32_t tokens[MAX_T];
    int T;
    char logits_file[64], hidden_file[64];
    /* transformers' experts, [layer][t][k] ascending, -1: dense layer */
    int32_t experts[MAX_L][MAX_T][MAX_K];
    /* V3.2: the positions transformers' indexer selected, [layer][t][j]
     * ascending, -1 after them; has_sel: present in ref.json */
    int32_t selected[MAX_L][MAX_T][MAX_KI];
    int has_sel;
} seq;

/* The sequences of ref.json (top_k experts per token). */
static inline int load_seqs(const char *dir, int top_k, seq *seqs, int max)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/ref.json", dir);
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    int n = 0;
    const cJSON *arr = cJSON_GetObjectItem(j, "sequences"), *e;
    cJSON_ArrayForEach(e, arr)
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
            int l = atoi(lay->string + strlen("layer."));
            int tt = 0;
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
        s->has_sel = 0;
        cJSON_ArrayForEach(lay, cJSON_GetObjectItem(e, "selected"))
        {
            int l = atoi(lay->string + strlen("layer."));
            int tt = 0;
            const cJSON *row;
            s->has_sel = 1;
            cJSON_ArrayForEach(row, lay)
            {
                int k = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, row) if (l < MAX_L && tt < MAX_T && k < MAX_KI) s->selected[l][tt][k++] =
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
static inline ld_status run_on_spec(const backend_kind *bk, const ld_ds_model *m, int threads, int batch, int call,
                             ld_ds_attn attn, const char *kspec, const int32_t *toks, int T, float *logits,
                             float *hidden, int32_t *experts, int32_t *selected, ld_error *err)
{
    ld_backend *be = NULL;
    ld_ds_session *s = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_status st = ld_cpu_kernels_parse(kspec, &k, err);
    if (st == LD_OK) st = bk->create(threads, &be, err);
    if (st == LD_OK) st = ld_ds_session_create(m, be, MAX_T, batch, attn, &s, err);
    if (st == LD_OK) ld_ds_session_set_kernels(s, &k);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers, KI = (size_t)m->cfg.index_topk;
    if (!m->cfg.v32) selected = NULL;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        /* hidden planes and experts are per call: a temporary, scattered */
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL;
        int32_t *ex = experts ? malloc(L * (size_t)n * K * sizeof *ex) : NULL;
        int32_t *sl = selected ? malloc(L * (size_t)n * KI * sizeof *sl) : NULL;
        if ((hidden && !h) || (experts && !ex) || (selected && !sl)) st = LD_ERR_NOMEM;
        if (st == LD_OK)
            st = ld_ds_session_eval_sel(s, toks + t0, n, logits ? logits + (size_t)t0 * V : NULL, h, ex, sl, err);
        for (size_t l = 0; sl && st == LD_OK && l < L; l++)
            memcpy(selected + (l * (size_t)T + (size_t)t0) * KI, sl + l * (size_t)n * KI, (size_t)n * KI * sizeof *sl);
        free(sl);
        for (size_t p = 0; h && st == LD_OK && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        for (size_t l = 0; ex && st == LD_OK && l < L; l++)
            memcpy(experts + (l * (size_t)T + (size_t)t0) * K, ex + l * (size_t)n * K, (size_t)n * K * sizeof *ex);
        free(h);
        free(ex);
        t0 += n;
    }
    if (st == LD_OK && ld_ds_session_pos(s) != T) st = LD_ERR_MISMATCH;
    ld_ds_session_destroy(s);
    ld_backend_destroy(be);
    return st;
}

static inline ld_status run_on_sel(const backend_kind *bk, const ld_ds_model *m, int threads, int batch, int call,
                            ld_ds_attn attn, const int32_t *toks, int T, float *logits, float *hidden,
                            int32_t *experts, int32_t *selected, ld_error *err)
{
    return run_on_spec(bk, m, threads, batch, call, attn, NULL, toks, T, logits, hidden, experts, selected, err);
}

static inline ld_status run_on(const backend_kind *bk, const ld_ds_model *m, int threads, int batch, int call,
                        ld_ds_attn attn, const int32_t *toks, int T, float *logits, float *hidden, int32_t *experts,
                        ld_error *err)
{
    return run_on_sel(bk, m, threads, batch, call, attn, toks, T, logits, hidden, experts, NULL, err);
}

static inline int open_model(const char *name, ld_ds_model **m)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_ds_model_open(dir, m, &err);
    CHECK_MSG(st == LD_OK, "%s: %s", name, err.msg);
    return 0;
}

#endif /* LD_TEST_DS_CHECK_H */
