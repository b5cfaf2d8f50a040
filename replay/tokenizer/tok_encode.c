/* tok_encode.c - the encoding pipeline: post-processor ids around the
 * text; added tokens with normalized=false split out of the raw text; each
 * gap normalized, then added tokens with normalized=true split out of it;
 * each remaining gap pre-tokenized and merged (tok_pretok.c, tok_bpe.c). */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static ld_status normalized_gap(tok_run *r, const char *s, size_t n)
{
    return ld_tok_pretokenize(r, 0, s, n);
}

static ld_status raw_gap(tok_run *r, const char *s, size_t n)
{
    const ld_tok *t = r->tok;
    if (t->n_norm == 0) return ld_tok_pretokenize(r, 0, s, n);
    r->norm.n = 0;
    if (ld_tok_normalize(t->norm, t->n_norm, s, n, &r->norm) != LD_OK)
        return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
    return ld_tok_added_split(r, &t->norm_added, r->norm.v, r->norm.n, normalized_gap);
}

static ld_status run_encode(tok_run *r, const char *text, size_t len)
{
    const ld_tok *t = r->tok;
    r->md = pcre2_match_data_create(1, NULL);
    r->mctx = pcre2_match_context_create(NULL);
    if (!r->md || !r->mctx) return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
    if (r->flags & LD_TOK_ADD_SPECIAL) LD_TRY(ld_tok_ids_append(&r->out, t->prefix, t->n_prefix));
    LD_TRY(ld_tok_added_split(r, &t->raw_added, text, len, raw_gap));
    if (r->flags & LD_TOK_ADD_SPECIAL) LD_TRY(ld_tok_ids_append(&r->out, t->suffix, t->n_suffix));
    if (!r->out.v && !(r->out.v = malloc(sizeof *r->out.v))) /* never NULL on success */
        return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

ld_status ld_tok_encode(const ld_tok *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                        size_t *n, ld_error *err)
{
    tok_run r;
    memset(&r, 0, sizeof r);
    r.tok = tok;
    r.flags = flags;
    r.err = err;
    *ids = NULL;
    *n = 0;
    ld_status st = run_encode(&r, text, len);
    if (st == LD_ERR_NOMEM && err && err->code != LD_ERR_NOMEM) LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    pcre2_match_data_free(r.md);
    pcre2_match_context_free(r.mctx);
    pcre2_jit_stack_free(r.jit);
    free(r.norm.v);
    free(r.sym);
    free(r.heap);
    if (st != LD_OK) {
        free(r.out.v);
        return st;
    }
    *ids = r.out.v;
    *n = r.out.n;
    return LD_OK;
}
