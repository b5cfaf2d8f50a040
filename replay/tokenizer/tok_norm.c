/* tok_norm.c - Unicode normalizers (NFC, NFD, NFKC, NFKD) through
 * utf8proc.  Each maximal run of valid UTF-8 is normalized on its own;
 * invalid bytes (which HF never sees) are copied unchanged. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tok_internal.h"

static utf8proc_option_t options(ld_tok_norm k)
{
    switch (k) {
    case LD_TOK_NFC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case LD_TOK_NFD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case LD_TOK_NFKC: return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case LD_TOK_NFKD: return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    }
    return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
}

/* Length of the valid UTF-8 run at the start of s[0..n). */
static size_t valid_run(const char *s, size_t n, int *ascii)
{
    size_t i = 0, k;
    *ascii = 1;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) {
            i++;
            continue;
        }
        if (ld_tok_utf8_next((const unsigned char *)s + i, n - i, &k) < 0) break;
        *ascii = 0;
        i += k;
    }
    return i;
}

static ld_status normalize_one(ld_tok_norm k, const char *s, size_t n, tok_buf *out)
{
    for (size_t i = 0; i < n;) {
        int ascii;
        size_t run = valid_run(s + i, n - i, &ascii);
        if (run == 0) { /* one invalid byte */
            LD_TRY(ld_tok_buf_append(out, s + i, 1));
            i++;
            continue;
        }
        if (ascii) {
            LD_TRY(ld_tok_buf_append(out, s + i, run));
        } else {
            utf8proc_uint8_t *dst = NULL;
            utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)run, &dst,
                                              options(k));
            ld_status st = m < 0 ? LD_ERR_NOMEM : ld_tok_buf_append(out, (const char *)dst, (size_t)m);
            free(dst);
            LD_TRY(st);
        }
        i += run;
    }
    return LD_OK;
}

ld_status ld_tok_normalize(const ld_tok_norm *norm, size_t n_norm, const char *s, size_t n, tok_buf *out)
{
    if (n_norm == 1) return normalize_one(norm[0], s, n, out);
    tok_buf a = { 0 }, b = { 0 };
    ld_status st = ld_tok_buf_append(&a, s, n);
    for (size_t i = 0; i < n_norm && st == LD_OK; i++) {
        b.n = 0;
        st = normalize_one(norm[i], a.v, a.n, &b);
        tok_buf t = a;
        a = b;
        b = t;
    }
    if (st == LD_OK) st = ld_tok_buf_append(out, a.v, a.n);
    free(a.v);
    free(b.v);
    return st;
}
