/* tok_pretok.c - pre-tokenizers, as HF runs them: each step re-splits every
 * piece the previous step produced.
 * - ByteLevel: a space in front when add_prefix_space and the piece does not
 *   start with one, then (use_regex) the GPT-2 regex, each match and each gap
 *   a piece.  The byte-to-character mapping itself is implicit: pieces stay
 *   bytes and the vocabulary was decoded to bytes when loaded.
 * - Split: the pattern's matches and the gaps between them, combined by the
 *   behaviour (invert swaps matches and gaps first).
 * - Digits: each numeric character (Unicode N*, Rust's char::is_numeric) a
 *   match; individual_digits = Isolated, else Contiguous.
 * Regexes run in PCRE2 with UTF, UCP and MATCH_INVALID_UTF (invalid bytes
 * match nothing), JIT-compiled where possible. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

ld_status ld_tok_pre_compile(tok_pre *p, const ld_tok_pre_spec *spec, ld_error *err)
{
    memset(p, 0, sizeof *p);
    p->kind = spec->kind;
    p->behaviour = spec->behaviour;
    p->invert = spec->invert;
    p->add_prefix_space = spec->add_prefix_space;
    p->individual_digits = spec->individual_digits;
    const char *pat = NULL;
    size_t len = 0;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    if (spec->kind == LD_TOK_PRE_BYTELEVEL && spec->use_regex) {
        pat = ld_tok_gpt2_regex;
        len = strlen(pat);
    } else if (spec->kind == LD_TOK_PRE_SPLIT && spec->pattern.n > 0) {
        pat = spec->pattern.s;
        len = spec->pattern.n;
        if (spec->literal) opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_LITERAL; /* no UCP */
    }
    if (!pat) return LD_OK; /* an empty literal matches nothing, as in HF */
    tok_buf re = { 0 };
    if (!(opts & PCRE2_LITERAL) && ld_tok_regex_for_pcre2(pat, len, &re) != LD_OK)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    int code;
    PCRE2_SIZE at;
    p->re = opts & PCRE2_LITERAL ? pcre2_compile((PCRE2_SPTR)pat, len, opts, &code, &at, NULL)
                                 : pcre2_compile((PCRE2_SPTR)(re.v ? re.v : ""), re.n, opts, &code, &at, NULL);
    free(re.v);
    if (!p->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "pre-tokenizer regex '%.80s': %s", pat, (const char *)msg);
    }
    (void)pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE); /* the interpreter runs it otherwise */
    return LD_OK;
}

/* Combines (range, is_match) events by behaviour and hands each resulting
 * piece to the next step.  `have`/`ps`/`pe` is a piece held back because
 * the next range may join it. */
typedef struct combiner {
    tok_run *r;
    size_t next_step;
    const char *s;
    ld_tok_behaviour b;
    int have, prev_match;
    size_t ps, pe;
} combiner;

static ld_status emit(combiner *c, size_t start, size_t end)
{
    return end > start ? ld_tok_pretokenize(c->r, c->next_step, c->s + start, end - start) : LD_OK;
}

static ld_status flush(combiner *c)
{
    if (!c->have) return LD_OK;
    c->have = 0;
    return emit(c, c->ps, c->pe);
}

static ld_status hold(combiner *c, size_t start, size_t end)
{
    LD_TRY(flush(c));
    c->have = 1;
    c->ps = start;
    c->pe = end;
    return LD_OK;
}

static ld_status feed(combiner *c, size_t start, size_t end, int is_match)
{
    ld_status st = LD_OK;
    switch (c->b) {
    case LD_TOK_ISOLATED: return emit(c, start, end);
    case LD_TOK_REMOVED: return is_match ? LD_OK : emit(c, start, end);
    case LD_TOK_CONTIGUOUS: /* runs of matches (or of gaps) are one piece */
        if (c->have && is_match == c->prev_match) c->pe = end;
        else st = hold(c, start, end);
        break;
    case LD_TOK_MERGED_WITH_PREVIOUS: /* a match joins the gap before it */
        if (is_match && !c->prev_match && c->have) c->pe = end;
        else st = hold(c, start, end);
        break;
    case LD_TOK_MERGED_WITH_NEXT: /* a match joins the gap after it */
        if (c->have && !is_match) {
            c->have = 0;
            st = emit(c, c->ps, end);
        } else if (is_match) {
            st = hold(c, start, end);
        } else {
            st = emit(c, start, end);
        }
        break;
    }
    c->prev_match = is_match;
    return st;
}

/* The next match at or after `at`: 1 and its bounds, 0 none. */
static ld_status next_match(tok_run *r, const pcre2_code *re, const char *s, size_t n, size_t at,
                            size_t *ms, size_t *me, int *found)
{
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, 0, r->md, r->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !r->jit) {
        r->jit = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
        if (!r->jit) return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
        pcre2_jit_stack_assign(r->mctx, NULL, r->jit);
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, at, 0, r->md, r->mctx);
    }
    *found = rc >= 0;
    if (rc == PCRE2_ERROR_NOMATCH) return LD_OK;
    if (rc < 0) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return LD_FAIL(r->err, rc == PCRE2_ERROR_NOMEMORY ? LD_ERR_NOMEM : LD_ERR_LIMIT, at,
                       "pre-tokenizer regex: %s", (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(r->md);
    *ms = ov[0];
    *me = ov[1];
    if (*ms < at || *me < *ms || *me > n) /* \K games */
        return LD_FAIL(r->err, LD_ERR_UNSUPPORTED, at, "pre-tokenizer regex match goes backwards");
    return LD_OK;
}

static ld_status split_regex(tok_run *r, const pcre2_code *re, int invert, combiner *c, size_t n)
{
    size_t prev = 0, at = 0, ms = 0, me = 0, k;
    int found;
    while (re && at <= n) {
        LD_TRY(next_match(r, re, c->s, n, at, &ms, &me, &found));
        if (!found) break;
        if (ms > prev) LD_TRY(feed(c, prev, ms, invert));
        LD_TRY(feed(c, ms, me, !invert));
        prev = me;
        if (me > ms) {
            at = me;
            continue;
        }
        if (me >= n) break; /* an empty match: step over one character */
        (void)ld_tok_utf8_next((const unsigned char *)c->s + me, n - me, &k);
        at = me + k;
    }
    if (prev < n) LD_TRY(feed(c, prev, n, invert));
    return flush(c);
}

static int is_numeric(int32_t cp)
{
    if (cp < 0x80) return cp >= '0' && cp <= '9';
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

static ld_status split_digits(combiner *c, size_t n)
{
    size_t prev = 0, k;
    for (size_t i = 0; i < n; i += k) {
        int32_t cp = ld_tok_utf8_next((const unsigned char *)c->s + i, n - i, &k);
        if (cp < 0 || !is_numeric(cp)) continue;
        if (i > prev) LD_TRY(feed(c, prev, i, 0));
        LD_TRY(feed(c, i, i + k, 1));
        prev = i + k;
    }
    if (prev < n) LD_TRY(feed(c, prev, n, 0));
    return flush(c);
}

static ld_status byte_level(tok_run *r, const tok_pre *p, size_t step, const char *s, size_t n)
{
    char small[256], *big = NULL;
    if (p->add_prefix_space && s[0] != ' ') {
        char *b = n < sizeof small ? small : (big = malloc(n + 1));
        if (!b) return LD_FAIL(r->err, LD_ERR_NOMEM, 0, "out of memory");
        b[0] = ' ';
        memcpy(b + 1, s, n);
        s = b;
        n++;
    }
    combiner c = { r, step + 1, s, LD_TOK_ISOLATED, 0, 0, 0, 0 };
    ld_status st = p->re ? split_regex(r, p->re, 0, &c, n) : ld_tok_pretokenize(r, step + 1, s, n);
    free(big);
    return st;
}

ld_status ld_tok_pretokenize(tok_run *r, size_t step, const char *s, size_t n)
{
    if (n == 0) return LD_OK; /* HF drops empty pieces */
    if (step == r->tok->n_pre) return ld_tok_bpe_piece(r, s, n);
    const tok_pre *p = &r->tok->pre[step];
    combiner c = { r, step + 1, s, p->behaviour, 0, 0, 0, 0 };
    switch (p->kind) {
    case LD_TOK_PRE_BYTELEVEL: return byte_level(r, p, step, s, n);
    case LD_TOK_PRE_SPLIT: return split_regex(r, p->re, p->invert, &c, n);
    case LD_TOK_PRE_DIGITS:
        c.b = p->individual_digits ? LD_TOK_ISOLATED : LD_TOK_CONTIGUOUS;
        return split_digits(&c, n);
    }
    return LD_OK;
}
