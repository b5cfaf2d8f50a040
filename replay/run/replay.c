/* replay.c - teacher-forced replay of a logged request and its verdict
 * (replay.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "replay_internal.h"

#define CHUNK 32 /* output rows evaluated per call (bounds the logits buffer) */

const char *ld_replay_verdict_kind(ld_replay_verdict v)
{
    switch (v) {
    case LD_REPLAY_CONSISTENT: return LD_K_REPLAY_CONSISTENT;
    case LD_REPLAY_DIVERGENT: return LD_K_REPLAY_DIVERGENT;
    case LD_REPLAY_NO_OUTPUT: return LD_K_REPLAY_NO_OUTPUT;
    }
    return "replay.unknown";
}

void ld_replay_result_free(ld_replay_result *res)
{
    if (!res) return;
    free(res->prompt);
    free(res->output);
    free(res->pos);
    free(res->top);
    free(res->greedy);
    memset(res, 0, sizeof *res);
}

/* What one row of logits says about `logged` (-1: nothing logged). */
static void row_stats(const float *x, int V, int32_t logged, ld_replay_pos *p)
{
    int best = 0;
    for (int j = 1; j < V; j++)
        if (x[j] > x[best]) best = j;
    double m = x[best], second = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++) {
        if (j != best && x[j] > second) second = x[j];
        sum += exp((double)x[j] - m);
    }
    double lse = m + log(sum);
    p->top1 = best;
    p->top1_logprob = m - lse;
    p->margin = V > 1 ? m - second : 0;
    if (logged < 0) return;
    double xl = x[logged];
    int64_t rank = 1;
    for (int j = 0; j < V; j++)
        if (x[j] > xl) rank++;
    p->id = logged;
    p->logprob = xl - lse;
    p->rank = rank;
    p->gap = m - xl;
}

/* The k best of a row, best first (lowest id first among equal logits). */
static ld_status top_k(const float *x, int V, int k, ld_replay_result *res, ld_error *err)
{
    if (k > V) k = V;
    res->top = malloc((size_t)k * sizeof *res->top);
    char *taken = calloc((size_t)V, 1);
    if (!res->top || !taken) {
        free(taken);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < V; j++)
        if (x[j] > m) m = x[j];
    for (int j = 0; j < V; j++) sum += exp((double)x[j] - m);
    double lse = m + log(sum);
    for (int i = 0; i < k; i++) {
        int best = -1;
        for (int j = 0; j < V; j++)
            if (!taken[j] && (best < 0 || x[j] > x[best])) best = j;
        taken[best] = 1;
        res->top[i].id = best;
        res->top[i].logprob = x[best] - lse;
    }
    res->n_top = (size_t)k;
    free(taken);
    return LD_OK;
}

static ld_status check_ids(const char *what, const int32_t *ids, size_t n, int V, ld_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= V)
            return LD_FAIL(err, LD_ERR_MISMATCH, i, "%s[%zu] = %ld is outside the model's vocabulary of %d ids",
                           what, i, (long)ids[i], V);
    return LD_OK;
}

/* The continuation of ctx [n] (n >= 1) for `count` tokens, from a reset
 * session, greedy or (res->sampled) sampled at output positions
 * res->greedy_from + i; `row` holds one row of logits. */
static ld_status greedy(ld_lm_session *s, const int32_t *ctx, size_t n, int count, int V, float *row,
                        ld_replay_result *res, ld_error *err)
{
    res->greedy = malloc((size_t)(count > 0 ? count : 1) * sizeof *res->greedy);
    if (!res->greedy) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_sampler *smp = NULL;
    if (res->sampled) LD_TRY(ld_sampler_new(V, &smp, err));
    ld_lm_reset(s);
    ld_status st = n > 1 ? ld_lm_eval(s, ctx, (int)(n - 1), NULL, NULL, err) : LD_OK;
    int32_t next = ctx[n - 1];
    for (int i = 0; st == LD_OK && i < count; i++) {
        st = ld_lm_eval(s, &next, 1, row, NULL, err);
        if (st == LD_OK && ld_replay_nonfinite_row(row, 1, V) >= 0)
            st = ld_replay_nonfinite(s, ctx, n, res->greedy, res->n_greedy, res->greedy_from + i, err);
        if (st != LD_OK) break;
        if (smp) {
            next = ld_sampler_token(smp, row, V, &res->params, res->seed, (uint64_t)res->greedy_from + (uint64_t)i);
        } else {
            ld_replay_pos p;
            row_stats(row, V, -1, &p);
            next = p.top1;
        }
        res->greedy[res->n_greedy++] = next;
    }
    ld_sampler_free(smp);
    return st;
}

static ld_status dup_ids(const int32_t *src, size_t n, int32_t **dst, ld_error *err)
{
    *dst = malloc((n ? n : 1) * sizeof **dst);
    if (!*dst) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (n) memcpy(*dst, src, n * sizeof **dst);
    return LD_OK;
}

/* While dumping: the dump being filled, a per-call hidden buffer
 * [planes][CHUNK][D] (every plane: the dump keeps some of them), a
 * per-call state buffer [CHUNK][state_width] (the dump wants the state),
 * and the index of the next wanted position. */
typedef struct dumper {
    ld_replay_dump *d;
    float *hbuf, *sbuf;
    size_t planes, D, next;
} dumper;

/* the call's row r (position index dp->next of the dump) into the dump's
 * kept planes and state */
static void keep_row(dumper *dp, size_t k, size_t r)
{
    ld_replay_dump *d = dp->d;
    for (size_t p = (size_t)d->plane_lo; p <= (size_t)d->plane_hi; p++)
        memcpy(d->rows + ((p - (size_t)d->plane_lo) * d->n_pos + dp->next) * dp->D, dp->hbuf + (p * k + r) * dp->D,
               dp->D * sizeof *d->rows);
    if (d->want_state) {
        size_t W = (size_t)d->state_width;
        memcpy(d->state + dp->next * W, dp->sbuf + r * W, W * sizeof *d->state);
    }
}

/* Feeds toks [n] (absolute positions at .. at+n) to the session: one call
 * when not dumping (dp NULL), else calls of at most CHUNK tokens, asking
 * for the hidden states only in calls holding a wanted position and copying
 * those rows into the dump.  `logits` (NULL: not wanted) needs n <= CHUNK. */
static ld_status feed(ld_lm_session *s, const int32_t *toks, size_t n, size_t at, float *logits, dumper *dp,
                      ld_error *err)
{
    if (!dp) return n ? ld_lm_eval(s, toks, (int)n, logits, NULL, err) : LD_OK;
    ld_replay_dump *d = dp->d;
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        size_t k = n - i0 < CHUNK ? n - i0 : CHUNK, lo = at + i0;
        int want = dp->next < d->n_pos && (size_t)d->pos[dp->next] < lo + k;
        LD_TRY(ld_lm_eval_state(s, toks + i0, (int)k, i0 == 0 ? logits : NULL, want ? dp->hbuf : NULL,
                                d->state_layer, want && d->want_state ? dp->sbuf : NULL, err));
        for (; dp->next < d->n_pos && (size_t)d->pos[dp->next] < lo + k; dp->next++)
            keep_row(dp, k, (size_t)d->pos[dp->next] - lo);
    }
    return LD_OK;
}

/* what output position i's logits row says: its rank, log-probability and
 * margin; the first positions off the top-k and the top-1; the divergence
 * (the replay's top k there) */
static ld_status judge_row(const float *row, int V, size_t i, ld_replay_result *res, ld_error *err)
{
    ld_replay_pos *p = &res->pos[i];
    row_stats(row, V, res->output[i], p);
    p->outside = p->rank > res->top_k;
    p->near_tie = p->outside && p->gap < res->near_tie;
    if (p->near_tie) res->n_near_ties++;
    if (p->outside && res->first_outside < 0) res->first_outside = (int64_t)i;
    if (p->rank > 1 && res->first_not_top1 < 0) res->first_not_top1 = (int64_t)i;
    if (p->outside && !p->near_tie && res->divergence < 0) {
        res->divergence = (int64_t)i;
        return top_k(row, V, res->top_k, res, err);
    }
    return LD_OK;
}

/* The logged output teacher-forced: row i of the logits predicts
 * output[i], fed prompt[np-1] and output[0..no-1); buf holds CHUNK rows */
static ld_status teacher_force(ld_lm_session *s, ld_replay_result *res, int V, float *buf, dumper *dp, ld_error *err)
{
    size_t np = res->n_prompt, no = res->n_output;
    res->pos = calloc(no, sizeof *res->pos);
    int32_t *fed = malloc(no * sizeof *fed);
    ld_status st = res->pos && fed ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK) {
        fed[0] = res->prompt[np - 1];
        for (size_t i = 1; i < no; i++) fed[i] = res->output[i - 1];
        st = feed(s, res->prompt, np - 1, 0, NULL, dp, err);
    }
    for (size_t i0 = 0; st == LD_OK && i0 < no; i0 += CHUNK) {
        int n = no - i0 < CHUNK ? (int)(no - i0) : CHUNK;
        st = feed(s, fed + i0, (size_t)n, np - 1 + i0, buf, dp, err);
        int64_t bad = st == LD_OK ? ld_replay_nonfinite_row(buf, (size_t)n, V) : -1;
        if (bad >= 0) /* the row predicting output[i0 + bad]: after the prompt and the outputs before it */
            st = ld_replay_nonfinite(s, res->prompt, np, res->output, i0 + (size_t)bad, (int64_t)i0 + bad, err);
        for (int r = 0; st == LD_OK && r < n; r++) st = judge_row(buf + (size_t)r * (size_t)V, V, i0 + (size_t)r, res, err);
    }
    /* the last output token, only fed for its hidden states */
    if (st == LD_OK && dp && dp->next < dp->d->n_pos) st = feed(s, res->output + no - 1, 1, np + no - 1, NULL, dp, err);
    free(fed);
    return st;
}

/* the greedy (or sampled) continuation from output position `from` (0
 * with no output: the prompt's end) */
static ld_status continuation(ld_lm_session *s, ld_replay_result *res, int64_t from, int max_tokens, int V,
                              float *buf, ld_error *err)
{
    size_t np = res->n_prompt, n = np + (size_t)from;
    int32_t *ctx = malloc(n * sizeof *ctx);
    if (!ctx) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    memcpy(ctx, res->prompt, np * sizeof *ctx);
    if (from) memcpy(ctx + np, res->output, (size_t)from * sizeof *ctx);
    res->greedy_from = from;
    ld_status st = greedy(s, ctx, n, max_tokens, V, buf, res, err);
    free(ctx);
    return st;
}

static ld_status run(ld_replay_engine *e, const ld_replay_opts *o, ld_replay_result *res, int max_tokens,
                     ld_replay_dump *dump, ld_error *err)
{
    const ld_lm_info *c = ld_lm_info_of(e->lm);
    int V = c->vocab, ctxlen = c->max_pos;
    size_t np = res->n_prompt, no = res->n_output;
    (void)o;
    /* positions: the prompt, the output, the continuation (shortened to fit) */
    size_t need = np + no;
    size_t room = (size_t)ctxlen - need;
    if ((size_t)max_tokens > room) max_tokens = (int)room;
    int max_seq = (int)(need + (size_t)max_tokens);
    if (max_seq < 1) max_seq = 1;
    ld_lm_session *s = NULL;
    if (e->tp) LD_TRY(ld_lm_session_create_tp(e->lm, &e->tpo, max_seq, CHUNK, &s, err));
    else LD_TRY(ld_lm_session_create(e->lm, e->be, &e->k, max_seq, CHUNK, &s, err));
    float *buf = malloc((size_t)CHUNK * (size_t)V * sizeof *buf);
    dumper dpv = { dump, NULL, NULL, (size_t)c->n_layers + 2, (size_t)c->hidden, 0 }, *dp = dump ? &dpv : NULL;
    if (dp) dpv.hbuf = malloc(dpv.planes * CHUNK * dpv.D * sizeof *dpv.hbuf);
    if (dp && dump->want_state) dpv.sbuf = malloc((size_t)CHUNK * (size_t)c->state_width * sizeof *dpv.sbuf);
    int bufs = buf && (!dp || dpv.hbuf) && (!dp || !dump->want_state || dpv.sbuf);
    ld_status st = bufs ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (st == LD_OK && no == 0 && dp) st = feed(s, res->prompt, np, 0, NULL, dp, err);
    if (st == LD_OK && no > 0) st = teacher_force(s, res, V, buf, dp, err);
    if (st == LD_OK) {
        if (no == 0) res->verdict = LD_REPLAY_NO_OUTPUT;
        else res->verdict = res->divergence >= 0 ? LD_REPLAY_DIVERGENT : LD_REPLAY_CONSISTENT;
    }
    /* the greedy continuation: from the divergence, or from the prompt's end */
    int64_t from = res->verdict == LD_REPLAY_DIVERGENT ? res->divergence : no == 0 ? 0 : -1;
    if (st == LD_OK && from >= 0 && max_tokens > 0) st = continuation(s, res, from, max_tokens, V, buf, err);
    free(buf);
    if (dp) free(dpv.hbuf);
    if (dp) free(dpv.sbuf);
    ld_lm_session_destroy(s);
    return st;
}

/* The dump's positions in the sequence prompt ++ output of `res`, its
 * tokens, and room for its rows. */
static ld_status dump_prepare(const ld_replay_engine *e, const ld_replay_result *res, ld_replay_dump *d,
                              ld_error *err)
{
    const ld_lm_info *c = ld_lm_info_of(e->lm);
    d->seq_len = res->n_prompt + res->n_output;
    d->n_prompt = res->n_prompt;
    d->n_layers = c->n_layers;
    d->hidden = c->hidden;
    if (!d->some_planes) d->plane_lo = 0, d->plane_hi = c->n_layers + 1;
    if (d->plane_lo < 0 || d->plane_lo > d->plane_hi || d->plane_hi > c->n_layers + 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "planes %d-%d: the model has planes 0-%d", d->plane_lo, d->plane_hi,
                       c->n_layers + 1);
    if (d->want_state && (d->state_layer < 0 || d->state_layer > c->n_layers))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "the state entering layer %d: the model has %d layers", d->state_layer,
                       c->n_layers);
    LD_TRY(ld_replay_positions_resolve(d->want, d->seq_len, &d->pos, &d->n_pos, err));
    size_t planes = (size_t)(d->plane_hi - d->plane_lo + 1), D = (size_t)c->hidden;
    size_t W = d->want_state ? (size_t)c->state_width : 0;
    if (d->n_pos > SIZE_MAX / sizeof *d->rows / (planes * D + W + 1))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    d->tokens = malloc(d->n_pos * sizeof *d->tokens);
    d->rows = malloc(planes * d->n_pos * D * sizeof *d->rows);
    if (W) d->state = malloc(d->n_pos * W * sizeof *d->state);
    d->state_width = (int)W;
    if (!d->tokens || !d->rows || (W && !d->state)) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < d->n_pos; i++) {
        size_t p = (size_t)d->pos[i];
        d->tokens[i] = p < res->n_prompt ? res->prompt[p] : res->output[p - res->n_prompt];
    }
    return LD_OK;
}

static ld_status replay_ids(ld_replay_engine *e, const int32_t *prompt, size_t n_prompt, const int32_t *output,
                            size_t n_output, const char *no_output_reason, const ld_replay_opts *opts,
                            const ld_replay_sampling *sampling, ld_replay_dump *dump, ld_replay_result *out,
                            ld_error *err)
{
    memset(out, 0, sizeof *out);
    if (dump) ld_replay_dump_reset(dump);
    out->divergence = out->first_outside = out->first_not_top1 = out->greedy_from = -1;
    ld_replay_opts o = opts ? *opts : (ld_replay_opts){ 0, 0, NAN };
    if (o.top_k < 0 || o.top_k > LD_REPLAY_MAX_TOP_K)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "top-k %d: give 1 to %d", o.top_k, LD_REPLAY_MAX_TOP_K);
    out->top_k = o.top_k ? o.top_k : LD_REPLAY_TOP_K;
    if (sampling) {
        out->seed = sampling->seed;
        out->params = sampling->params;
        out->sampled = !ld_sample_is_greedy(&sampling->params);
    }
    out->near_tie = isnan(o.near_tie) || o.near_tie < 0 ? LD_REPLAY_NEAR_TIE : o.near_tie;
    int max_tokens = o.max_tokens == 0 ? LD_REPLAY_MAX_TOKENS : o.max_tokens < 0 ? 0 : o.max_tokens;
    int V = ld_lm_info_of(e->lm)->vocab, ctxlen = ld_lm_info_of(e->lm)->max_pos;
    if (n_prompt == 0) return LD_FAIL(err, LD_ERR_MISMATCH, 0, "the prompt has no ids: nothing to replay");
    LD_TRY(check_ids("input_ids", prompt, n_prompt, V, err));
    LD_TRY(check_ids("output_ids", output, output ? n_output : 0, V, err));
    if (n_prompt > (size_t)ctxlen)
        return LD_FAIL(err, LD_ERR_LIMIT, (uint64_t)ctxlen,
                       "the prompt's %zu ids exceed the model's context of %d positions: input_ids[%d] is the "
                       "first that does not fit", n_prompt, ctxlen, ctxlen);
    if (output && n_output > (size_t)ctxlen - n_prompt)
        return LD_FAIL(err, LD_ERR_LIMIT, (uint64_t)ctxlen - n_prompt,
                       "the prompt's %zu ids and the output's %zu exceed the model's context of %d positions: "
                       "output_ids[%zu] is the first that does not fit", n_prompt, n_output, ctxlen,
                       (size_t)ctxlen - n_prompt);
    ld_status st = dup_ids(prompt, n_prompt, &out->prompt, err);
    out->n_prompt = n_prompt;
    if (st == LD_OK && output && n_output) {
        st = dup_ids(output, n_output, &out->output, err);
        out->n_output = n_output;
    }
    if (st == LD_OK && !out->n_output && no_output_reason)
        snprintf(out->no_output_reason, sizeof out->no_output_reason, "%s", no_output_reason);
    if (st == LD_OK && dump) st = dump_prepare(e, out, dump, err);
    if (st == LD_OK) st = run(e, &o, out, max_tokens, dump, err);
    if (st != LD_OK) {
        ld_replay_result_free(out);
        ld_replay_dump_free(dump);
    }
    return st;
}

ld_status ld_replay_ids(ld_replay_engine *e, const int32_t *prompt, size_t n_prompt, const int32_t *output,
                        size_t n_output, const char *no_output_reason, const ld_replay_opts *opts,
                        ld_replay_result *out, ld_error *err)
{
    return replay_ids(e, prompt, n_prompt, output, n_output, no_output_reason, opts, NULL, NULL, out, err);
}

ld_status ld_replay_ids_dump(ld_replay_engine *e, const int32_t *prompt, size_t n_prompt, const int32_t *output,
                             size_t n_output, const ld_replay_opts *opts, ld_replay_dump *dump,
                             ld_replay_result *out, ld_error *err)
{
    return replay_ids(e, prompt, n_prompt, output, n_output, NULL, opts, NULL, dump, out, err);
}

ld_status ld_replay_request(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                            ld_replay_result *out, ld_error *err)
{
    return ld_replay_request_sampled(e, r, opts, NULL, out, err);
}

ld_status ld_replay_request_sampled(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                    const ld_replay_sampling *sampling, ld_replay_result *out, ld_error *err)
{
    return ld_replay_request_dump(e, r, opts, sampling, NULL, out, err);
}

/* The prompt ids of r (malloc'd into *prompt [*np]): its input_ids, or its
 * whole prompt text tokenized (*src says which) */
static ld_status prompt_ids(ld_replay_engine *e, const ld_request *r, int32_t **prompt, size_t *np,
                            ld_replay_prompt_source *src, ld_error *err)
{
    *src = LD_REPLAY_PROMPT_IDS;
    ld_error ierr;
    ld_error_clear(&ierr);
    ld_status st = ld_request_input_ids(r, prompt, np, &ierr);
    int text_whole = r->prompt.bytes && (r->prompt.flags & LD_TEXT_PRESENT) &&
                     !(r->prompt.flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED | LD_TEXT_HEAD_ONLY));
    if ((st == LD_ERR_MISMATCH || st == LD_ERR_TRUNCATED) && text_whole && e->tok) {
        /* no id list, or one the logger cut: the whole prompt text, tokenized */
        LD_TRY(ld_tok_encode(e->tok, r->prompt.bytes, r->prompt.len, LD_TOK_PARSE_SPECIAL, prompt, np, err));
        *src = LD_REPLAY_PROMPT_TOKENIZED;
    } else if (st == LD_ERR_MISMATCH && text_whole) {
        return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                       "the log holds no input_ids for this request, only the prompt text, and the model "
                       "directory has no tokenizer to tokenize it%s%s",
                       e->tok_error[0] ? ": " : "", e->tok_error);
    } else if (st == LD_ERR_MISMATCH) {
        const char *why = !(r->prompt.flags & LD_TEXT_PRESENT) ? "nor the prompt text"
                        : "and the logger cut the prompt text";
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "the log holds no input_ids for this request %s", why);
    } else if (st != LD_OK) {
        if (err) *err = ierr;
        return st;
    }
    return LD_OK;
}

/* The logged output ids of r (malloc'd into *output [*no]); their head
 * when the logger cut them (*cut 1); LD_ERR_MISMATCH (ierr says why) when
 * it logged none */
static ld_status output_ids(const ld_request *r, int32_t **output, size_t *no, int *cut, ld_error *ierr)
{
    ld_error_clear(ierr);
    *cut = 0;
    ld_status st = ld_request_output_ids(r, output, no, ierr);
    if (st == LD_ERR_TRUNCATED) { /* head ... tail: the head can still be teacher-forced */
        st = ld_request_output_ids_head(r, output, no, ierr);
        *cut = st == LD_OK;
    }
    return st;
}

ld_status ld_replay_request_dump(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                 const ld_replay_sampling *sampling, ld_replay_dump *dump,
                                 ld_replay_result *out, ld_error *err)
{
    memset(out, 0, sizeof *out);
    if (dump) ld_replay_dump_reset(dump);
    int32_t *prompt = NULL, *output = NULL;
    size_t np = 0, no = 0;
    ld_replay_prompt_source src;
    LD_TRY(prompt_ids(e, r, &prompt, &np, &src, err));
    ld_error ierr;
    char reason[160] = "";
    int cut = 0;
    ld_status st = output_ids(r, &output, &no, &cut, &ierr);
    if (st == LD_ERR_MISMATCH) {
        snprintf(reason, sizeof reason, "%.150s",
                 !(r->seen & (LD_PART_BIT(LD_PART_FINISH) | LD_PART_BIT(LD_PART_INOUT)))
                     ? "no Finish line was logged for this request"
                     : ierr.msg);
        st = LD_OK;
    } else if (st != LD_OK) {
        free(prompt);
        if (err) *err = ierr;
        return st;
    } else if (no == 0) {
        snprintf(reason, sizeof reason, "the logged output_ids list is empty");
    }
    st = replay_ids(e, prompt, np, output, no, reason, opts, sampling, dump, out, err);
    if (st == LD_OK) {
        out->prompt_source = src;
        out->output_cut = cut;
        out->n_output_logged = cut ? (r->completion_tokens != LD_UNSET_INT ? r->completion_tokens : -1) : (int64_t)no;
    }
    free(prompt);
    free(output);
    return st;
}

ld_status ld_replay_request_seq(ld_replay_engine *e, const ld_request *r, int32_t **seq, size_t *n, ld_error *err)
{
    *seq = NULL;
    *n = 0;
    int32_t *prompt = NULL, *output = NULL;
    size_t np = 0, no = 0;
    ld_replay_prompt_source src;
    LD_TRY(prompt_ids(e, r, &prompt, &np, &src, err));
    ld_error ierr;
    int cut;
    ld_status st = output_ids(r, &output, &no, &cut, &ierr);
    if (st == LD_ERR_MISMATCH) st = LD_OK, no = 0; /* no output logged: the prompt alone */
    int32_t *all = st == LD_OK ? malloc((np + no + 1) * sizeof *all) : NULL;
    if (st != LD_OK && err) *err = ierr;
    else if (!all) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    if (all) {
        memcpy(all, prompt, np * sizeof *all);
        if (no) memcpy(all + np, output, no * sizeof *all);
        *seq = all;
        *n = np + no;
    }
    free(prompt);
    free(output);
    if (st == LD_OK && *n) st = check_ids("ids", all, *n, ld_replay_engine_vocab(e), err);
    return st;
}
