/* batch.h - several sessions' tokens run together, as a server batches
 * its requests: what each model family's eval_batch (forward.h,
 * ds_forward.h, ds4_forward.h) shares.  The family says
 * which sessions may share a batch and runs a round's rows; this checks
 * the parts, cuts them into rounds and reads each part's logits. */
#ifndef LD_BATCH_H
#define LD_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "engine/backend/backend.h"
#include "ld_error.h"

/* One part of a batch, as its family describes it. */
typedef struct ld_batch_seq {
    const void *s;           /* its session (compared, never entered here) */
    const int32_t *tokens;   /* [T] */
    int T;
    float *logits;           /* [T][vocab], NULL: not wanted */
    float *hidden;           /* [planes][T][width] (the family's planes), NULL: not wanted */
    int cap;                 /* its session's max_batch: its rows a round at most */
    int pos, max_seq, vocab; /* its session's, for the checks */
    int same;                /* 1: of the lead's model, backend and variants */
    int other_rank;          /* 1: its tensor-parallel reduce is not the lead's
                                (another group's rank, or the lead's is one and
                                its not): it cannot share the lead's chunks */
} ld_batch_seq;

/* A part's rows in a round. */
typedef struct ld_batch_rows {
    int part;       /* the part */
    int row;        /* its first row among the round's */
    int n;          /* its rows */
    int t0;         /* its first token's index in its tokens */
    float *logits;  /* where its rows' logits go ([n][vocab]), NULL: not wanted */
    float *hidden;  /* its part's hidden planes [planes][T][width] (from row
                       t0 of each plane), NULL: not wanted */
    int T;          /* its part's tokens, the planes' height */
} ld_batch_rows;

/* Runs one round: rows [nrows], tokens [N] (one part's after another). */
typedef ld_status (*ld_batch_round_fn)(void *ctx, const ld_batch_rows *rows, int nrows, const int32_t *tokens,
                                       int N, ld_error *err);

/* Checks the n parts (parts[0] leads: a session of each part's own, each
 * once, `same` and not `other_rank` when n > 1, tokens that fit its session,
 * has_views (the backend's buf_view) when n > 1; `what` names the lead's
 * properties in the error), then runs them in rounds of at most `budget`
 * rows (the lead's max_batch): each round, each part in turn takes what is
 * left of its tokens, at most its cap and what is left of the round. */
ld_status ld_batch_run(const ld_batch_seq *parts, int n, int budget, int has_views, const char *what,
                       ld_batch_round_fn fn, void *ctx, ld_error *err);

/* The logits of a round's N rows of x (lm_head in one matmul into out),
 * each part's rows to its logits. */
ld_status ld_batch_logits(ld_backend *be, ld_buf *out, const ld_buf *x, const ld_weight *lm_head,
                          const ld_batch_rows *rows, int nrows, int N, size_t vocab, ld_error *err);

/* Whether any of the round's parts wants its hidden planes. */
int ld_batch_wants_hidden(const ld_batch_rows *rows, int nrows);

/* Plane `plane` of each of the round's parts that wants its hidden
 * planes: its rows of the round's [N][width] rows, from the backend's
 * buffer `src` (ld_batch_trace) or the host's (ld_batch_trace_host). */
ld_status ld_batch_trace(ld_backend *be, const ld_buf *src, const ld_batch_rows *rows, int nrows, int plane,
                         size_t width, ld_error *err);
void ld_batch_trace_host(const float *src, const ld_batch_rows *rows, int nrows, int plane, size_t width);

/* A part's row buffers while its core runs on a batch: each of the part's
 * session's fields dst[k] (k < n, at most LD_BATCH_MAX_BUFS) points at a
 * view of rows [row, row + rows) of the lead's buffer *src[k] (w[k] floats
 * a row); what the field held is kept and put back by ld_batch_unbind,
 * which frees the views.  A field with w[k] 0 or no lead buffer is left
 * as it is.  Several families' sessions run their position-dependent
 * code (attention) on a batch's rows this way, unchanged. */
#define LD_BATCH_MAX_BUFS 16
typedef struct ld_batch_bind {
    int n;
    ld_buf **dst[LD_BATCH_MAX_BUFS];
    ld_buf *own[LD_BATCH_MAX_BUFS], *view[LD_BATCH_MAX_BUFS];
} ld_batch_bind;

ld_status ld_batch_bind_rows(ld_backend *be, ld_buf **const *src, ld_buf **const *dst, const size_t *w, int n,
                             int row, int rows, ld_batch_bind *b, ld_error *err);
void ld_batch_unbind(ld_backend *be, ld_batch_bind *b);

#endif /* LD_BATCH_H */
