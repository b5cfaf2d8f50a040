/* replay_check.c - the kernels check of `logdiff diff --replay`: one
 * request replayed, its verdict as a finding (replay.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define SHOW 8     /* tokens of context before P and after it in the excerpts */
#define EXCERPT 400 /* bytes of an excerpt, at most */

typedef struct sbuf {
    char b[EXCERPT + 16];
    size_t n;
} sbuf;

static void put(sbuf *s, const char *t, size_t n)
{
    if (s->n + n > EXCERPT) n = EXCERPT - s->n;
    memcpy(s->b + s->n, t, n);
    s->n += n;
    s->b[s->n] = 0;
}

/* Length of the valid UTF-8 sequence at t[0..n) (n >= 1), or 0. */
static size_t utf8_len(const unsigned char *t, size_t n)
{
    size_t k = t[0] >= 0xf0 && t[0] <= 0xf4 ? 4 : t[0] >= 0xe0 ? 3 : t[0] >= 0xc2 && t[0] < 0xe0 ? 2 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((t[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((t[0] == 0xe0 && t[1] < 0xa0) || (t[0] == 0xed && t[1] >= 0xa0))) return 0;
    if (k == 4 && ((t[0] == 0xf0 && t[1] < 0x90) || (t[0] == 0xf4 && t[1] >= 0x90))) return 0;
    return k;
}

/* Decoded bytes, readable on one line: newlines as \n, other control bytes
 * and bytes that are not valid UTF-8 (a token cut inside a character) as
 * \xNN. */
static void put_text(sbuf *s, const char *text, size_t len)
{
    const unsigned char *t = (const unsigned char *)text;
    char esc[8];
    for (size_t i = 0; i < len && s->n < EXCERPT;) {
        size_t k = t[i] >= 0x80 ? utf8_len(t + i, len - i) : 1;
        if (t[i] == '\n') put(s, "\\n", 2);
        else if (t[i] == '\t') put(s, "\\t", 2);
        else if (t[i] < 0x20 || t[i] == 0x7f || k == 0) {
            snprintf(esc, sizeof esc, "\\x%02x", t[i]);
            put(s, esc, 4);
        } else {
            put(s, text + i, k);
            i += k;
            continue;
        }
        i++;
    }
}

/* ids [n] decoded (tokenizer) or as ids, into s; 0 or LD_ERR_NOMEM. */
static ld_status put_ids(sbuf *s, const ld_tok *tok, const int32_t *ids, size_t n, ld_error *err)
{
    if (!n) return LD_OK;
    if (tok) {
        char *text = NULL;
        size_t len = 0;
        ld_error derr;
        ld_status st = ld_tok_decode(tok, ids, n, &text, &len, &derr);
        if (st == LD_ERR_NOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        if (st == LD_OK) {
            put_text(s, text, len);
            free(text);
            return LD_OK;
        }
    }
    char num[24];
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(num, sizeof num, "%s%ld", i ? " " : "", (long)ids[i]);
        put(s, num, (size_t)k);
    }
    return LD_OK;
}

/* "...context | tail": the SHOW logged tokens before P, then `tail`. */
static const char *excerpt(ld_arena *arena, const ld_tok *tok, const ld_replay_result *res, size_t P,
                           const int32_t *tail, size_t n_tail, ld_error *err)
{
    sbuf s = { { 0 }, 0 };
    size_t from = P > SHOW ? P - SHOW : 0;
    if (from > 0) put(&s, "...", 3);
    if (put_ids(&s, tok, res->output + from, P - from, err) != LD_OK) return NULL;
    put(&s, " | ", 3);
    if (put_ids(&s, tok, tail, n_tail, err) != LD_OK) return NULL;
    const char *out = ld_arena_memdup(arena, s.b, s.n);
    if (!out) (void)LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return out;
}

/* A token for the detail line: its id, and its text quoted when decoded. */
static const char *tok_word(const ld_tok *tok, int32_t id, char *buf, size_t cap, ld_error *err)
{
    sbuf s = { { 0 }, 0 };
    int n = snprintf(buf, cap, "%ld", (long)id);
    if (tok && n > 0 && put_ids(&s, tok, &id, 1, err) == LD_OK && s.n)
        snprintf(buf + n, cap - (size_t)n, " \"%.40s\"", s.b);
    return buf;
}

static ld_status not_replayed(ld_findings *out, ld_arena *arena, const char *why, ld_error *err)
{
    if (!ld_findings_add(out, arena, LD_K_KERNELS_NOT_REPLAYED, LD_SEV_INFO, -1, "not replayed: %s", why))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

/* "backend NAME" and, when split, ", tp N": where the replay ran */
static const char *where_replayed(const ld_replay_engine *e, char *buf, size_t cap)
{
    int tp = ld_replay_engine_tp(e);
    if (tp) snprintf(buf, cap, "backend %s, tp %d", ld_replay_engine_backend(e), tp);
    else snprintf(buf, cap, "backend %s", ld_replay_engine_backend(e));
    return buf;
}

static ld_status divergence(ld_replay_engine *e, const ld_replay_result *res, ld_arena *arena, ld_findings *out,
                            ld_error *err)
{
    char where[96];
    const ld_tok *tok = ld_replay_engine_tok(e);
    size_t P = (size_t)res->divergence;
    const ld_replay_pos *p = &res->pos[P];
    char a[96], b[96];
    ld_finding *f = ld_findings_add(
        out, arena, LD_K_KERNELS_DIVERGENCE, LD_SEV_ERROR, -1,
        "the replay on logdiff's engine (%s, %s) diverges at output position %zu of %zu: logged %s (rank "
        "%lld, logprob %.4f), the replay's top-1 %s (logprob %.4f); %.4f nats apart, top-two margin %.4f",
        ld_replay_engine_arch(e), where_replayed(e, where, sizeof where), P, res->n_output, tok_word(tok, p->id, a, sizeof a, err), (long long)p->rank,
        p->logprob, tok_word(tok, p->top1, b, sizeof b, err), p->top1_logprob, p->gap, p->margin);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    f->first_diff = (int64_t)P;
    f->expected_len = p->rank;
    f->actual_len = (int64_t)res->n_output;
    size_t n_tail = res->n_output - P < SHOW ? res->n_output - P : SHOW;
    f->prompt_excerpt = excerpt(arena, tok, res, P, res->output + P, n_tail, err);
    if (!f->prompt_excerpt) return LD_ERR_NOMEM;
    int32_t top1 = p->top1;
    f->array_excerpt = res->n_greedy ? excerpt(arena, tok, res, P, res->greedy, res->n_greedy, err)
                                     : excerpt(arena, tok, res, P, &top1, 1, err);
    if (!f->array_excerpt) return LD_ERR_NOMEM;
    return LD_OK;
}

/* The replay's logits at output position P were not finite (rerr: where the
 * first non-finite value was computed): no logged token can be judged from
 * there.  An error of the divergence's kind, so that diff's verdict and
 * exit status are a divergence's, not a pass. */
static ld_status nonfinite(ld_replay_engine *e, const ld_error *rerr, size_t n_output, ld_arena *arena,
                           ld_findings *out, ld_error *err)
{
    char where[96];
    int64_t P = (int64_t)rerr->offset;
    ld_finding *f = ld_findings_add(out, arena, LD_K_KERNELS_DIVERGENCE, LD_SEV_ERROR, -1,
                                    "the replay on logdiff's engine (%s, %s) judges no logged token from output "
                                    "position %lld of %zu on, its logits not finite; %.200s",
                                    ld_replay_engine_arch(e), where_replayed(e, where, sizeof where), (long long)P,
                                    n_output, rerr->msg);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    f->first_diff = P;
    f->actual_len = (int64_t)n_output;
    return LD_OK;
}

static ld_status consistent(ld_replay_engine *e, const ld_replay_result *res, ld_arena *arena, ld_findings *out,
                            ld_error *err)
{
    char ties[96] = "", first[96] = "; each is the replay's top-1", cut[96] = "", where[96];
    if (res->output_cut && res->n_output_logged >= 0)
        snprintf(cut, sizeof cut, " (the logger cut the output_ids: the first %zu of %lld)", res->n_output,
                 (long long)res->n_output_logged);
    else if (res->output_cut)
        snprintf(cut, sizeof cut, " (the logger cut the output_ids: the first %zu)", res->n_output);
    if (res->n_near_ties)
        snprintf(ties, sizeof ties, " or near-ties (%zu, within %g nats of the top-1)", res->n_near_ties,
                 res->near_tie);
    if (res->first_not_top1 >= 0)
        snprintf(first, sizeof first, "; first token other than the top-1 at position %lld (margin %.4f)",
                 (long long)res->first_not_top1, res->pos[res->first_not_top1].margin);
    ld_finding *f = ld_findings_add(out, arena, LD_K_KERNELS_CONSISTENT, LD_SEV_INFO, -1,
                                    "replayed on logdiff's engine (%s, %s, %zu prompt ids%s): all %zu logged "
                                    "tokens%s within the replay's top %d%s%s",
                                    ld_replay_engine_arch(e), where_replayed(e, where, sizeof where), res->n_prompt,
                                    res->prompt_source == LD_REPLAY_PROMPT_IDS ? "" : ", the prompt text tokenized",
                                    res->n_output, cut, res->top_k, ties, first);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    f->actual_len = (int64_t)res->n_output;
    return LD_OK;
}

ld_status ld_replay_check(ld_replay_engine *e, const ld_request *r, ld_arena *arena, ld_findings *out,
                          ld_error *err)
{
    if (r->flags & LD_REQ_ERROR) return LD_OK;
    /* no output ids: nothing to replay (and no continuation computed for nothing) */
    int32_t *ids = NULL;
    size_t n = 0;
    ld_error ierr;
    ld_error_clear(&ierr);
    ld_status st = ld_request_output_ids(r, &ids, &n, &ierr);
    if (st == LD_ERR_TRUNCATED) { /* the logger cut them: the head it kept is replayed */
        free(ids);
        ids = NULL;
        st = ld_request_output_ids_head(r, &ids, &n, &ierr);
    }
    free(ids);
    if (st == LD_ERR_NOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    char why[400];
    if (st == LD_ERR_MISMATCH) {
        snprintf(why, sizeof why, "no output ids: %.300s",
                 !(r->seen & (LD_PART_BIT(LD_PART_FINISH) | LD_PART_BIT(LD_PART_INOUT)))
                     ? "no Finish line was logged for this request"
                     : ierr.msg);
        return not_replayed(out, arena, why, err);
    }
    if (st != LD_OK) {
        snprintf(why, sizeof why, "output ids unusable: %.300s", ierr.msg);
        return not_replayed(out, arena, why, err);
    }
    if (n == 0) return not_replayed(out, arena, "no output ids: the logged output_ids list is empty", err);
    ld_replay_opts o = { 0, LD_REPLAY_CHECK_TOKENS, -1 };
    ld_replay_result res;
    ld_error rerr;
    ld_error_clear(&rerr);
    st = ld_replay_request(e, r, &o, &res, &rerr);
    switch (st) {
    case LD_OK: break;
    case LD_ERR_MISMATCH: case LD_ERR_LIMIT: case LD_ERR_TRUNCATED: case LD_ERR_SYNTAX:
        snprintf(why, sizeof why, "%.390s", rerr.msg);
        return not_replayed(out, arena, why, err);
    case LD_ERR_NUMERIC:
        return nonfinite(e, &rerr, n, arena, out, err);
    default:
        if (err) *err = rerr;
        return st;
    }
    if (res.verdict == LD_REPLAY_DIVERGENT) st = divergence(e, &res, arena, out, err);
    else if (res.verdict == LD_REPLAY_CONSISTENT) st = consistent(e, &res, arena, out, err);
    else st = not_replayed(out, arena, res.no_output_reason, err);
    ld_replay_result_free(&res);
    return st;
}
