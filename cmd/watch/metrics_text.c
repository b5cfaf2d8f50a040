/* metrics_text.c - see metrics_text.h. */
#include "metrics_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ld_mtext_init(ld_mtext *t)
{
    memset(t, 0, sizeof *t);
}

void ld_mtext_free(ld_mtext *t)
{
    free(t->buf);
    ld_mtext_init(t);
}

char *ld_mtext_take(ld_mtext *t, size_t *len)
{
    ld_mtext_put(t, "", 0); /* a NUL even for an empty text */
    if (t->failed) {
        ld_mtext_free(t);
        return NULL;
    }
    char *s = t->buf;
    if (len) *len = t->len;
    ld_mtext_init(t);
    return s;
}

/* Room for n more bytes and the NUL; 0 when the buffer cannot grow. */
static int reserve(ld_mtext *t, size_t n)
{
    if (t->failed) return 0;
    if (t->len + n + 1 <= t->cap) return 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + n + 1) {
        if (cap > SIZE_MAX / 2) { t->failed = 1; return 0; }
        cap *= 2;
    }
    char *b = realloc(t->buf, cap);
    if (!b) { t->failed = 1; return 0; }
    t->buf = b;
    t->cap = cap;
    return 1;
}

void ld_mtext_put(ld_mtext *t, const char *s, size_t n)
{
    if (!reserve(t, n)) return;
    if (n) memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = 0;
}

void ld_mtext_puts(ld_mtext *t, const char *s)
{
    ld_mtext_put(t, s, strlen(s));
}

/* s with backslash and newline escaped, and the double quote when `quote`
 * (a label value; HELP text leaves it alone). */
static void put_escaped(ld_mtext *t, const char *s, int quote)
{
    for (const char *p = s; *p; p++) {
        if (*p == '\\') ld_mtext_put(t, "\\\\", 2);
        else if (*p == '\n') ld_mtext_put(t, "\\n", 2);
        else if (*p == '"' && quote) ld_mtext_put(t, "\\\"", 2);
        else ld_mtext_put(t, p, 1);
    }
}

void ld_mtext_family(ld_mtext *t, const char *name, const char *type, const char *help)
{
    ld_mtext_puts(t, "# HELP ");
    ld_mtext_puts(t, name);
    ld_mtext_puts(t, " ");
    put_escaped(t, help, 0);
    ld_mtext_puts(t, "\n# TYPE ");
    ld_mtext_puts(t, name);
    ld_mtext_puts(t, " ");
    ld_mtext_puts(t, type);
    ld_mtext_puts(t, "\n");
}

static void put_series(ld_mtext *t, const char *name, const ld_mlabel *labels, size_t n)
{
    ld_mtext_puts(t, name);
    if (n == 0) return;
    ld_mtext_puts(t, "{");
    for (size_t i = 0; i < n; i++) {
        if (i) ld_mtext_puts(t, ",");
        ld_mtext_puts(t, labels[i].name);
        ld_mtext_puts(t, "=\"");
        put_escaped(t, labels[i].value, 1);
        ld_mtext_puts(t, "\"");
    }
    ld_mtext_puts(t, "}");
}

void ld_mtext_sample_u64(ld_mtext *t, const char *name, const ld_mlabel *labels, size_t n_labels,
                         uint64_t value)
{
    char num[32];
    snprintf(num, sizeof num, " %" PRIu64 "\n", value);
    put_series(t, name, labels, n_labels);
    ld_mtext_puts(t, num);
}

void ld_mtext_format_f64(double v, char *out, size_t size)
{
    if (isnan(v)) { snprintf(out, size, "NaN"); return; }
    if (isinf(v)) { snprintf(out, size, v > 0 ? "+Inf" : "-Inf"); return; }
    /* the shortest of %.15g..%.17g that reads back as v */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, size, "%.*g", prec, v);
        if (strtod(out, NULL) == v) return;
    }
}

void ld_mtext_sample_f64(ld_mtext *t, const char *name, const ld_mlabel *labels, size_t n_labels,
                         double value)
{
    char num[40];
    ld_mtext_format_f64(value, num, sizeof num);
    put_series(t, name, labels, n_labels);
    ld_mtext_puts(t, " ");
    ld_mtext_puts(t, num);
    ld_mtext_puts(t, "\n");
}
