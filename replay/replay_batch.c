/* replay_batch.c - see replay_batch.h. */
#include "replay_batch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm.h"
#include "replay_internal.h"

/* the requests' ids (seqs[0] r's, then with's), cut to the context */
typedef struct batch_seqs {
    size_t n;
    int32_t **ids;
    size_t *len, *done;
} batch_seqs;

static void seqs_free(batch_seqs *b)
{
    for (size_t i = 0; b->ids && i < b->n; i++) free(b->ids[i]);
    free(b->ids);
    free(b->len);
    free(b->done);
}

static ld_status seqs_load(ld_replay_engine *e, const ld_request *r, const ld_request *const *with, size_t n_with,
                           batch_seqs *b, ld_error *err)
{
    *b = (batch_seqs){n_with + 1, calloc(n_with + 1, sizeof *b->ids), calloc(n_with + 1, sizeof *b->len),
                      calloc(n_with + 1, sizeof *b->done)};
    if (!b->ids || !b->len || !b->done) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    size_t ctx = (size_t)ld_replay_engine_context(e);
    for (size_t i = 0; i < b->n; i++) {
        const ld_request *q = i ? with[i - 1] : r;
        ld_status st = ld_replay_request_seq(e, q, &b->ids[i], &b->len[i], err);
        if (st != LD_OK && i && err) { /* name the other request */
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "--batch-with %.60s: %.180s", q->rid ? q->rid : "?", err->msg);
            memcpy(err->msg, msg, sizeof msg);
        }
        LD_TRY(st);
        if (b->len[i] > ctx) b->len[i] = ctx;
        if (!b->len[i]) return LD_FAIL(err, LD_ERR_MISMATCH, 0, "--batch-with: request %zu has no ids", i);
    }
    return LD_OK;
}

/* the sessions: s[0] leads (r batched), s[1..n] the others, s[n + 1] r
 * alone; all but the lead its siblings (the engine's weights once; split
 * over the engine's ranks when it has them, each rank batching its share) */
static ld_status sessions(ld_replay_engine *e, const batch_seqs *b, ld_lm_session **s, ld_error *err)
{
    int rows = LD_REPLAY_BATCH_STEP + LD_REPLAY_BATCH_OTHER * (int)(b->n - 1);
    if (e->tp) LD_TRY(ld_lm_session_create_tp(e->lm, &e->tpo, (int)b->len[0], rows, &s[0], err));
    else LD_TRY(ld_lm_session_create(e->lm, e->be, &e->k, (int)b->len[0], rows, &s[0], err));
    for (size_t i = 1; i < b->n; i++) LD_TRY(ld_lm_session_create_sibling(s[0], (int)b->len[i], &s[i], err));
    return ld_lm_session_create_sibling(s[0], (int)b->len[0], &s[b->n], err);
}

/* positions [p, p + k) of r: alone (into a) and batched (into c) */
static ld_status step(ld_lm_session **s, batch_seqs *b, ld_lm_part *parts, size_t p, int k, float *a, float *c,
                      ld_error *err)
{
    LD_TRY(ld_lm_eval(s[b->n], b->ids[0] + p, k, a, NULL, err));
    size_t np = 0;
    parts[np++] = (ld_lm_part){s[0], b->ids[0] + p, k, c};
    for (size_t i = 1; i < b->n; i++) {
        size_t left = b->len[i] - b->done[i], t = left < LD_REPLAY_BATCH_OTHER ? left : LD_REPLAY_BATCH_OTHER;
        if (t) parts[np++] = (ld_lm_part){s[i], b->ids[i] + b->done[i], (int)t, NULL};
        b->done[i] += t;
    }
    return ld_lm_eval_batch(parts, (int)np, err);
}

static void compare(const float *a, const float *c, size_t p, int k, int V, ld_replay_batch_report *out)
{
    for (int t = 0; t < k; t++) {
        const float *x = a + (size_t)t * (size_t)V, *y = c + (size_t)t * (size_t)V;
        if (!memcmp(x, y, (size_t)V * sizeof *x)) continue;
        if (out->first_diff < 0) out->first_diff = (int64_t)(p + (size_t)t);
        out->n_diff++;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)x[v] - (double)y[v]);
            if (d > out->max_abs || d != d) out->max_abs = d;
        }
    }
}

ld_status ld_replay_batch_check(ld_replay_engine *e, const ld_request *r, const ld_request *const *with,
                                size_t n_with, ld_replay_batch_report *out, ld_error *err)
{
    *out = (ld_replay_batch_report){n_with, 0, 0, -1, 0, 0.0, e->tp};
    batch_seqs b;
    ld_status st = seqs_load(e, r, with, n_with, &b, err);
    int V = ld_replay_engine_vocab(e);
    ld_lm_session **s = calloc(b.n + 1, sizeof *s);
    ld_lm_part *parts = calloc(b.n, sizeof *parts);
    float *a = malloc((size_t)LD_REPLAY_BATCH_STEP * (size_t)V * sizeof *a);
    float *c = malloc((size_t)LD_REPLAY_BATCH_STEP * (size_t)V * sizeof *c);
    if (st == LD_OK && !(s && parts && a && c)) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) st = sessions(e, &b, s, err);
    for (size_t p = 0; st == LD_OK && p < b.len[0]; p += LD_REPLAY_BATCH_STEP) {
        int k = b.len[0] - p < LD_REPLAY_BATCH_STEP ? (int)(b.len[0] - p) : LD_REPLAY_BATCH_STEP;
        st = step(s, &b, parts, p, k, a, c, err);
        if (st == LD_OK) compare(a, c, p, k, V, out);
        out->steps++;
        out->positions = p + (size_t)k;
    }
    /* siblings before the lead whose weights they borrow */
    for (size_t i = b.n + 1; s && i-- > 0;) ld_lm_session_destroy(s[i]);
    seqs_free(&b);
    free(s);
    free(parts);
    free(a);
    free(c);
    return st;
}
