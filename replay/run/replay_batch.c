/* replay_batch.c - see replay_batch.h. */
#include "replay_batch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
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

/* one step's outputs of both runs: logits [STEP][vocab] and hidden
 * planes [planes][STEP][width], alone (a, ah) and batched (c, ch) */
typedef struct step_out {
    float *a, *c, *ah, *ch;
} step_out;

/* positions [p, p + k) of r: alone and batched, into o */
static ld_status step(ld_lm_session **s, batch_seqs *b, ld_lm_part *parts, size_t p, int k, const step_out *o,
                      ld_error *err)
{
    LD_TRY(ld_lm_eval(s[b->n], b->ids[0] + p, k, o->a, o->ah, err));
    size_t np = 0;
    parts[np++] = (ld_lm_part){s[0], b->ids[0] + p, k, o->c, o->ch};
    for (size_t i = 1; i < b->n; i++) {
        size_t left = b->len[i] - b->done[i], t = left < LD_REPLAY_BATCH_OTHER ? left : LD_REPLAY_BATCH_OTHER;
        if (t) parts[np++] = (ld_lm_part){s[i], b->ids[i] + b->done[i], (int)t, NULL, NULL};
        b->done[i] += t;
    }
    return ld_lm_eval_batch(parts, (int)np, err);
}

/* the largest |x[i] - y[i]| of n values (a NaN's counts as NaN) */
static double max_abs_diff(const float *x, const float *y, size_t n, double m)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

void ld_replay_batch_compare(const float *a, const float *c, const float *ah, const float *ch, size_t p, int k,
                             int vocab, size_t width, ld_replay_batch_report *out)
{
    size_t V = (size_t)vocab, K = (size_t)k;
    int planes = out->n_layers + 2;
    for (size_t t = 0; t < K; t++) {
        int first_plane = LD_REPLAY_BATCH_HEAD;
        for (int q = planes - 1; q >= 0; q--) { /* downwards: the lowest plane that differs stays */
            const float *x = ah + ((size_t)q * K + t) * width, *y = ch + ((size_t)q * K + t) * width;
            if (!memcmp(x, y, width * sizeof *x)) continue;
            first_plane = q;
            out->max_abs_hidden = max_abs_diff(x, y, width, out->max_abs_hidden);
        }
        int logits_differ = memcmp(a + t * V, c + t * V, V * sizeof *a) != 0;
        if (logits_differ) {
            out->n_diff_logits++;
            out->max_abs = max_abs_diff(a + t * V, c + t * V, V, out->max_abs);
        }
        if (!logits_differ && first_plane == LD_REPLAY_BATCH_HEAD) continue;
        if (out->first_diff < 0) {
            out->first_diff = (int64_t)(p + t);
            out->first_plane = first_plane;
        }
        out->n_diff++;
    }
}

ld_status ld_replay_batch_check(ld_replay_engine *e, const ld_request *r, const ld_request *const *with,
                                size_t n_with, ld_replay_batch_report *out, ld_error *err)
{
    const ld_lm_info *in = ld_lm_info_of(e->lm);
    *out = (ld_replay_batch_report){.n_with = n_with, .first_diff = -1, .first_plane = LD_REPLAY_BATCH_HEAD,
                                    .n_layers = in->n_layers, .tp = e->tp};
    batch_seqs b;
    ld_status st = seqs_load(e, r, with, n_with, &b, err);
    size_t V = (size_t)in->vocab, H = ((size_t)in->n_layers + 2) * (size_t)in->hidden, S = LD_REPLAY_BATCH_STEP;
    ld_lm_session **s = calloc(b.n + 1, sizeof *s);
    ld_lm_part *parts = calloc(b.n, sizeof *parts);
    step_out o = {malloc(S * V * sizeof *o.a), malloc(S * V * sizeof *o.c), malloc(S * H * sizeof *o.ah),
                  malloc(S * H * sizeof *o.ch)};
    if (st == LD_OK && !(s && parts && o.a && o.c && o.ah && o.ch)) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) st = sessions(e, &b, s, err);
    for (size_t p = 0; st == LD_OK && p < b.len[0]; p += S) {
        int k = b.len[0] - p < S ? (int)(b.len[0] - p) : (int)S;
        st = step(s, &b, parts, p, k, &o, err);
        /* NaN logits alone and batched match bit for bit, and say nothing */
        int64_t bad = st == LD_OK ? ld_replay_nonfinite_row(o.a, (size_t)k, (int)V) : -1;
        if (bad >= 0) st = ld_replay_nonfinite(s[b.n], b.ids[0], p + (size_t)bad + 1, NULL, 0, (int64_t)p + bad, err);
        if (st == LD_OK) ld_replay_batch_compare(o.a, o.c, o.ah, o.ch, p, k, (int)V, (size_t)in->hidden, out);
        out->steps++;
        out->positions = p + (size_t)k;
    }
    /* siblings before the lead whose weights they borrow */
    for (size_t i = b.n + 1; s && i-- > 0;) ld_lm_session_destroy(s[i]);
    seqs_free(&b);
    free(s);
    free(parts);
    free(o.a);
    free(o.c);
    free(o.ah);
    free(o.ch);
    return st;
}
