/* batch.c - see batch.h. */
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_args.h"

/* the checks of ld_batch_run */
static ld_status check(const ld_batch_seq *p, int n, int has_views, const char *what, ld_error *err)
{
    if (n < 1 || !p[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    for (int i = 0; i < n; i++) {
        if (!p[i].s || (n > 1 && !p[i].same))
            return LD_FAIL(err, LD_ERR_USAGE, 0, "batch part %d: not a session of the first part's %s", i, what);
        for (int j = 0; j < i; j++)
            if (p[j].s == p[i].s)
                return LD_FAIL(err, LD_ERR_USAGE, 0, "batch parts %d and %d: the same session", j, i);
        if (p[i].other_rank && n > 1)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "batch part %d: not on the first part's tensor-parallel rank "
                           "(sessions of one group batch together: siblings)", i);
        ld_status st = ld_session_check_eval(p[i].tokens, p[i].T, p[i].pos, p[i].max_seq, p[i].vocab, err);
        if (st != LD_OK && n > 1 && err) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "batch part %d: %.200s", i, err->msg);
            memcpy(err->msg, msg, sizeof msg);
        }
        LD_TRY(st);
    }
    if (n > 1 && !has_views)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "this backend runs one sequence at a time (no buf_view)");
    return LD_OK;
}

/* the next round into rows (*nrows of them) and tokens; its rows, 0 when
 * every part is done */
static int next_round(const ld_batch_seq *p, int n, int budget, int *done, ld_batch_rows *rows, int *nrows,
                      int32_t *tokens)
{
    int N = 0;
    *nrows = 0;
    for (int i = 0; i < n && N < budget; i++) {
        int t = p[i].T - done[i];
        if (t > p[i].cap) t = p[i].cap;
        if (t > budget - N) t = budget - N;
        if (t <= 0) continue;
        float *lg = p[i].logits ? p[i].logits + (size_t)done[i] * (size_t)p[i].vocab : NULL;
        rows[(*nrows)++] = (ld_batch_rows){i, N, t, done[i], lg, p[i].hidden, p[i].T};
        memcpy(tokens + N, p[i].tokens + done[i], (size_t)t * sizeof *tokens);
        done[i] += t;
        N += t;
    }
    return N;
}

ld_status ld_batch_run(const ld_batch_seq *parts, int n, int budget, int has_views, const char *what,
                       ld_batch_round_fn fn, void *ctx, ld_error *err)
{
    LD_TRY(check(parts, n, has_views, what, err));
    int *done = calloc((size_t)n, sizeof *done);
    ld_batch_rows *rows = calloc((size_t)n, sizeof *rows);
    int32_t *tokens = calloc(budget > 0 ? (size_t)budget : 1, sizeof *tokens);
    ld_status st = done && rows && tokens ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    int N, nrows;
    while (st == LD_OK && (N = next_round(parts, n, budget, done, rows, &nrows, tokens)) > 0)
        st = fn(ctx, rows, nrows, tokens, N, err);
    free(done);
    free(rows);
    free(tokens);
    return st;
}

ld_status ld_batch_logits(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *lm_head,
                          const ld_batch_rows *rows, int nrows, int N, size_t vocab, ld_error *err)
{
    int want = 0;
    for (int i = 0; i < nrows; i++) want |= rows[i].logits != NULL;
    if (!want) return LD_OK;
    LD_TRY(be->ops->matmul(be, out, x, lm_head, NULL, N, err));
    for (int i = 0; i < nrows; i++)
        if (rows[i].logits)
            LD_TRY(be->ops->buf_read(be, out, (size_t)rows[i].row * vocab, rows[i].logits, (size_t)rows[i].n * vocab,
                                     err));
    return LD_OK;
}

int ld_batch_wants_hidden(const ld_batch_rows *rows, int nrows)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].hidden) return 1;
    return 0;
}

/* where row t0 of plane `plane` of r's hidden planes starts */
static float *plane_rows(const ld_batch_rows *r, int plane, size_t width)
{
    return r->hidden + ((size_t)plane * (size_t)r->T + (size_t)r->t0) * width;
}

ld_status ld_batch_trace(ld_backend *be, const ld_buf *src, const ld_batch_rows *rows, int nrows, int plane,
                         size_t width, ld_error *err)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].hidden)
            LD_TRY(be->ops->buf_read(be, src, (size_t)rows[i].row * width, plane_rows(&rows[i], plane, width),
                                     (size_t)rows[i].n * width, err));
    return LD_OK;
}

void ld_batch_trace_host(const float *src, const ld_batch_rows *rows, int nrows, int plane, size_t width)
{
    for (int i = 0; i < nrows; i++)
        if (rows[i].hidden)
            memcpy(plane_rows(&rows[i], plane, width), src + (size_t)rows[i].row * width,
                   (size_t)rows[i].n * width * sizeof *src);
}

ld_status ld_batch_bind_rows(ld_backend *be, ld_buf **const *src, ld_buf **const *dst, const size_t *w, int n,
                             int row, int rows, ld_batch_bind *b, ld_error *err)
{
    *b = (ld_batch_bind){0};
    if (n > LD_BATCH_MAX_BUFS) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d row buffers to bind (at most %d)", n,
                                              LD_BATCH_MAX_BUFS);
    for (int k = 0; k < n; k++) {
        if (!w[k] || !*src[k]) continue;
        ld_buf *v;
        ld_status st = be->ops->buf_view(be, *src[k], (size_t)row * w[k], (size_t)rows * w[k], &v, err);
        if (st != LD_OK) {
            ld_batch_unbind(be, b);
            return st;
        }
        b->dst[b->n] = dst[k];
        b->own[b->n] = *dst[k];
        b->view[b->n++] = v;
        *dst[k] = v;
    }
    return LD_OK;
}

void ld_batch_unbind(ld_backend *be, ld_batch_bind *b)
{
    for (int i = b->n; i-- > 0;) { /* last first: a field named twice gets its own back */
        *b->dst[i] = b->own[i];
        be->ops->buf_free(be, b->view[i]);
    }
    b->n = 0;
}
