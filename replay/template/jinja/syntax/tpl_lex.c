/* tpl_lex.c - the template lexer: jinja2's whitespace rules with
 * trim_blocks=True and lstrip_blocks=True ({%- -%} {{- -}} {#- -#} strip all
 * whitespace on their side; a block or comment tag alone on its line takes
 * the line's leading blanks with it; the first newline after %} or #} is
 * dropped), then the tokens inside tags.  Input: the normalised source
 * (newlines already \n, one trailing newline removed). */
#include <stdlib.h>
#include <string.h>

#include "replay/template/jinja/tpl_internal.h"

void ld_tpl_line_col(const char *src, size_t off, uint64_t *line, uint64_t *col)
{
    uint64_t l = 1;
    size_t ls = 0;
    for (size_t i = 0; i < off; i++)
        if (src[i] == '\n') l++, ls = i + 1;
    *line = l;
    *col = off - ls + 1;
}

static ld_status lex_fail(const char *src, size_t off, ld_status code,
                          ld_error *err, const char *what)
{
    uint64_t line, col;
    ld_tpl_line_col(src, off, &line, &col);
    LD_FAIL(err, code, off, "%s at column %llu", what, (unsigned long long)col);
    if (err) err->line = line;
    return code;
}

static bool push(tpl_tokens *t, tpl_token tok)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        tpl_token *v = realloc(t->v, cap * sizeof *v);
        if (!v) return false;
        t->v = v, t->cap = cap;
    }
    t->v[t->n++] = tok;
    return true;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_utf8(char *o, uint32_t cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63)); return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Python "unicode-escape" decoding of a string literal's body. */
static char *unescape(ld_arena *a, const char *s, size_t n, size_t *out_len)
{
    char *o = ld_arena_alloc(a, n + 1);
    size_t k = 0;
    if (!o) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) { o[k++] = s[i]; continue; }
        char c = s[++i];
        int nhex = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        switch (c) {
        case '\n': break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'n': o[k++] = '\n'; break;
        case 'r': o[k++] = '\r'; break;
        case 't': o[k++] = '\t'; break;
        case 'v': o[k++] = '\v'; break;
        default:
            if (nhex && i + (size_t)nhex < n) {
                uint32_t cp = 0;
                int j;
                for (j = 1; j <= nhex && hexval(s[i + (size_t)j]) >= 0; j++)
                    cp = cp * 16 + (uint32_t)hexval(s[i + (size_t)j]);
                if (j > nhex && cp <= 0x10FFFF && k + 4 <= n) {
                    k += put_utf8(o + k, cp);
                    i += (size_t)nhex;
                    break;
                }
            }
            if (c >= '0' && c <= '7') {
                uint32_t cp = 0;
                int j = 0;
                while (j < 3 && i < n && s[i] >= '0' && s[i] <= '7') cp = cp * 8 + (uint32_t)(s[i++] - '0'), j++;
                i--;
                k += put_utf8(o + k, cp);
                break;
            }
            o[k++] = '\\';
            o[k++] = c;
        }
    }
    o[k] = 0;
    *out_len = k;
    return o;
}

static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">=", NULL};
static const char ops1[] = "+-*/%~<>=()[]{},.:|;";

/* 0x1F, 0o17, 0b101 (underscores allowed between digits) at c (offset p) */
static ld_status lex_radix(const char *src, size_t p, const char *c, size_t rest, tpl_token *tok, ld_error *err)
{
    int base = (c[1] | 32) == 'x' ? 16 : (c[1] | 32) == 'o' ? 8 : 2;
    size_t n = 2;
    uint64_t v = 0;
    for (; n < rest && (c[n] == '_' || (hexval(c[n]) >= 0 && hexval(c[n]) < base)); n++) {
        if (c[n] == '_') continue;
        if (v > UINT64_MAX / 16) return lex_fail(src, p, LD_ERR_UNSUPPORTED, err, "integer literal too large");
        v = v * (uint64_t)base + (uint64_t)hexval(c[n]);
    }
    if (v > INT64_MAX) return lex_fail(src, p, LD_ERR_UNSUPPORTED, err, "integer literal too large");
    tok->type = TK_INT, tok->len = n, tok->i = (int64_t)v;
    return LD_OK;
}

/* 12, 1_000, 1.5, 2e-3 at c (offset p): an int or a float */
static ld_status lex_decimal(const char *src, size_t p, const char *c, size_t rest, tpl_token *tok, ld_error *err)
{
    size_t n = 0;
    bool is_f = false;
    while (n < rest && ((c[n] >= '0' && c[n] <= '9') || c[n] == '_')) n++;
    if (n + 1 < rest && c[n] == '.' && c[n + 1] >= '0' && c[n + 1] <= '9') {
        is_f = true, n++;
        while (n < rest && ((c[n] >= '0' && c[n] <= '9') || c[n] == '_')) n++;
    }
    if (n + 1 < rest && (c[n] | 32) == 'e' && ((c[n + 1] >= '0' && c[n + 1] <= '9') ||
        ((c[n + 1] == '+' || c[n + 1] == '-') && n + 2 < rest && c[n + 2] >= '0' && c[n + 2] <= '9'))) {
        is_f = true, n += 2;
        while (n < rest && c[n] >= '0' && c[n] <= '9') n++;
    }
    char buf[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof buf - 1; i++) if (c[i] != '_') buf[k++] = c[i];
    buf[k] = 0;
    tok->type = is_f ? TK_FLOAT : TK_INT, tok->len = n;
    if (is_f) {
        tok->f = strtod(buf, NULL);
        return LD_OK;
    }
    unsigned long long v = strtoull(buf, NULL, 10);
    if (n > 18) return lex_fail(src, p, LD_ERR_UNSUPPORTED, err, "integer literal too large");
    tok->i = (int64_t)v;
    return LD_OK;
}

/* An operator at c; *depth follows the brackets (an end marker inside
 * them is not one) */
static ld_status lex_op(const char *src, size_t p, const char *c, size_t rest, int *depth, tpl_token *tok,
                        ld_error *err)
{
    unsigned char ch = (unsigned char)*c;
    tok->type = TK_OP;
    for (int i = 0; ops2[i]; i++)
        if (rest >= 2 && c[0] == ops2[i][0] && c[1] == ops2[i][1]) tok->len = 2;
    if (!tok->len && ch && strchr(ops1, ch)) tok->len = 1;
    if (!tok->len) return lex_fail(src, p, LD_ERR_SYNTAX, err, "unexpected character");
    if (strchr("([{", ch)) (*depth)++;
    if (strchr(")]}", ch) && *depth > 0) (*depth)--;
    return LD_OK;
}

/* The tag's end marker at *p (`endc` then `}`, or `-` first): pushed, *p
 * past it and the whitespace it trims (`-`: all; trim_blocks: a newline);
 * *nl_end set when what it trimmed ends in \n.  0 when it is not there. */
static int lex_tag_end(const char *src, size_t len, size_t *p, char endc, bool trim, tpl_tokens *t, bool *nl_end,
                       ld_status *st)
{
    const char *c = src + *p;
    size_t rest = len - *p;
    bool dash = rest >= 3 && c[0] == '-' && c[1] == endc && c[2] == '}';
    bool plain = rest >= 2 && c[0] == endc && c[1] == '}';
    if (!dash && !plain) return 0;
    tpl_token tok = {endc == '}' ? TK_VAR_END : TK_BLOCK_END, (uint32_t)*p, c, 0, 0, 0};
    *st = push(t, tok) ? LD_OK : LD_ERR_NOMEM;
    *p += dash ? 3 : 2;
    *nl_end = false;
    if (dash) {
        while (*p < len && is_ws(src[*p])) *nl_end = src[*p] == '\n', (*p)++;
    } else if (trim && *p < len && src[*p] == '\n') {
        (*p)++;
        *nl_end = true;
    }
    return 1;
}

/* Lexes the inside of a tag starting at *pos; stops after the end marker
 * (`end` is "}}" or "%}").  Sets *nl_end when the matched end ends in \n. */
static ld_status lex_tag(const char *src, size_t len, size_t *pos, char endc,
                         bool trim, ld_arena *a, tpl_tokens *t, bool *nl_end,
                         ld_error *err)
{
    size_t p = *pos;
    int depth = 0;
    for (;;) {
        while (p < len && is_ws(src[p])) p++;
        if (p >= len) return lex_fail(src, *pos, LD_ERR_TRUNCATED, err, "unclosed tag");
        ld_status st = LD_OK;
        if (depth == 0 && lex_tag_end(src, len, &p, endc, trim, t, nl_end, &st)) {
            *pos = p;
            return st;
        }
        const char *c = src + p;
        size_t rest = len - p;
        tpl_token tok = {0, (uint32_t)p, c, 0, 0, 0};
        unsigned char ch = (unsigned char)*c;
        if (ch == '_' || ((ch | 32) >= 'a' && (ch | 32) <= 'z')) {
            size_t n = 1;
            while (n < rest && (c[n] == '_' || ((c[n] | 32) >= 'a' && (c[n] | 32) <= 'z') || (c[n] >= '0' && c[n] <= '9'))) n++;
            tok.type = TK_NAME, tok.len = n;
        } else if (ch == '0' && rest > 2 && strchr("xXoObB", c[1]) && hexval(c[2]) >= 0) {
            LD_TRY(lex_radix(src, p, c, rest, &tok, err));
        } else if (ch >= '0' && ch <= '9') {
            LD_TRY(lex_decimal(src, p, c, rest, &tok, err));
        } else if (ch == '\'' || ch == '"') {
            size_t n = 1;
            while (n < rest && c[n] != (char)ch) n += c[n] == '\\' ? 2 : 1;
            if (n >= rest) return lex_fail(src, p, LD_ERR_TRUNCATED, err, "unterminated string");
            tok.type = TK_STRING;
            tok.s = unescape(a, c + 1, n - 1, &tok.len);
            if (!tok.s) return LD_ERR_NOMEM;
            p += n + 1;
            if (!push(t, tok)) return LD_ERR_NOMEM;
            continue;
        } else {
            LD_TRY(lex_op(src, p, c, rest, &depth, &tok, err));
        }
        p += tok.len;
        if (!push(t, tok)) return LD_ERR_NOMEM;
    }
}

/* Finds the next tag opener at or after p: returns its offset or len. */
static size_t next_tag(const char *src, size_t len, size_t p)
{
    for (; p + 1 < len; p++)
        if (src[p] == '{' && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')) return p;
    return len;
}

static ld_status emit_data(tpl_tokens *t, const char *src, size_t from, size_t to)
{
    if (to <= from) return LD_OK;
    tpl_token tok = {TK_DATA, (uint32_t)from, src + from, to - from, 0, 0};
    return push(t, tok) ? LD_OK : LD_ERR_NOMEM;
}

/* Where the data before a tag at `tag` ends: `{%-` strips all whitespace
 * before it; otherwise (lstrip_blocks) a block or comment tag that only
 * blanks precede on its line takes those blanks. */
static size_t data_end(const char *src, size_t p, size_t tag, char kind, char sign, bool line_starting)
{
    size_t end = tag;
    if (sign == '-') {
        while (end > p && is_ws(src[end - 1])) end--;
    } else if (sign != '+' && kind != '{') {
        size_t l = end;
        while (l > p && src[l - 1] != '\n') l--;
        bool blank = l < end;
        for (size_t i = l; i < end; i++) blank = blank && is_ws(src[i]);
        if ((l > p || (l == p && line_starting)) && blank) end = l;
    }
    return end;
}

/* After `{% raw %}` (its three tokens are the last ones): pops them and
 * emits everything up to `{% endraw %}` as data.  Like jinja2, the newline
 * after the raw tag is kept even with trim_blocks; the endraw tag strips
 * and trims like any block tag. */
static ld_status lex_raw(const char *src, size_t len, size_t *pos, tpl_tokens *t, bool *nl, ld_error *err)
{
    size_t p = *pos, open = t->v[t->n - 3].off;
    if (*t->v[t->n - 1].s != '-' && *nl && p > 0 && src[p - 1] == '\n') p--;
    t->n -= 3;
    for (size_t q = p; q + 1 < len; q++) {
        if (src[q] != '{' || src[q + 1] != '%') continue;
        size_t r = q + 2;
        char sign = r < len && (src[r] == '-' || src[r] == '+') ? src[r] : 0;
        r += sign != 0;
        while (r < len && is_ws(src[r])) r++;
        if (len - r < 6 || memcmp(src + r, "endraw", 6) != 0) continue;
        r += 6;
        while (r < len && is_ws(src[r])) r++;
        bool dash = r < len && src[r] == '-', plus = r < len && src[r] == '+';
        r += dash || plus;
        if (len - r < 2 || src[r] != '%' || src[r + 1] != '}') continue;
        LD_TRY(emit_data(t, src, p, data_end(src, p, q, '%', sign, false)));
        r += 2;
        *nl = false;
        if (dash) {
            while (r < len && is_ws(src[r])) *nl = src[r] == '\n', r++;
        } else if (!plus && r < len && src[r] == '\n') {
            r++, *nl = true;
        }
        *pos = r;
        return LD_OK;
    }
    return lex_fail(src, open, LD_ERR_TRUNCATED, err, "missing endraw");
}

static bool at_raw(const tpl_tokens *t)
{
    return t->n >= 3 && t->v[t->n - 3].type == TK_BLOCK_BEGIN && t->v[t->n - 2].type == TK_NAME &&
           t->v[t->n - 2].len == 3 && memcmp(t->v[t->n - 2].s, "raw", 3) == 0 && t->v[t->n - 1].type == TK_BLOCK_END;
}

ld_status ld_tpl_lex(const char *src, size_t len, ld_arena *a, tpl_tokens *t, ld_error *err)
{
    size_t p = 0;
    bool line_starting = true;
    if (len > UINT32_MAX) return LD_FAIL(err, LD_ERR_LIMIT, 0, "template larger than 4 GiB");
    while (p < len) {
        size_t tag = next_tag(src, len, p);
        if (tag == len) return emit_data(t, src, p, len) == LD_OK ? LD_OK : LD_ERR_NOMEM;
        char kind = src[tag + 1];
        char sign = tag + 2 < len ? src[tag + 2] : 0;
        size_t end = data_end(src, p, tag, kind, sign, line_starting);
        if (emit_data(t, src, p, end) != LD_OK) return LD_ERR_NOMEM;
        p = tag + 2 + (sign == '-' || sign == '+');
        bool nl = false;
        if (kind == '#') {
            size_t q = p;
            while (q + 1 < len && !(src[q] == '#' && src[q + 1] == '}')) q++;
            if (q + 1 >= len) return lex_fail(src, tag, LD_ERR_TRUNCATED, err, "unclosed comment");
            bool dash = q > p && src[q - 1] == '-';
            p = q + 2;
            if (dash) {
                while (p < len && is_ws(src[p])) nl = src[p] == '\n', p++;
            } else if (p < len && src[p] == '\n') {
                p++, nl = true;
            }
        } else {
            tpl_token tok = {kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, (uint32_t)tag, src + tag, 2, 0, 0};
            if (!push(t, tok)) return LD_ERR_NOMEM;
            LD_TRY(lex_tag(src, len, &p, kind == '{' ? '}' : '%', kind == '%', a, t, &nl, err));
            if (kind == '%' && at_raw(t)) LD_TRY(lex_raw(src, len, &p, t, &nl, err));
        }
        line_starting = nl;
    }
    return LD_OK;
}
