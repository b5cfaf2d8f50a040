/* udiff.c - short unified diffs for evidence (udiff.h). */
#include "udiff.h"

#include <stdio.h>
#include <string.h>

typedef struct lines {
    const char *text;
    size_t len;
    size_t n;
    size_t *start; /* n + 1 offsets: line i is [start[i], start[i+1]) */
} lines;

static int split_lines(const char *s, size_t len, ld_arena *arena, lines *out)
{
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += s[i] == '\n' && i + 1 < len;
    out->text = s, out->len = len, out->n = len ? n : 0;
    out->start = ld_arena_alloc(arena, (n + 1) * sizeof *out->start);
    if (!out->start) return 0;
    size_t k = 0;
    out->start[k++] = 0;
    for (size_t i = 0; i < len; i++)
        if (s[i] == '\n' && i + 1 < len) out->start[k++] = i + 1;
    out->start[out->n] = len;
    return 1;
}

static int same_line(const lines *a, size_t i, const lines *b, size_t j)
{
    size_t la = a->start[i + 1] - a->start[i], lb = b->start[j + 1] - b->start[j];
    return la == lb && !memcmp(a->text + a->start[i], b->text + b->start[j], la);
}

typedef struct out_buf {
    char *p;
    size_t len, cap;
    int failed;
} out_buf;

static void put(out_buf *o, ld_arena *arena, const char *s, size_t n)
{
    if (o->failed) return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 1024;
        while (cap < o->len + n + 1) cap *= 2;
        char *np = ld_arena_alloc(arena, cap);
        if (!np) { o->failed = 1; return; }
        if (o->len) memcpy(np, o->p, o->len);
        o->p = np, o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = 0;
}

static void put_str(out_buf *o, ld_arena *arena, const char *s) { put(o, arena, s, strlen(s)); }

/* One line with its sign, cut at max bytes (on a UTF-8 boundary). */
static void put_line(out_buf *o, ld_arena *arena, char sign, const lines *l, size_t i, size_t max)
{
    const char *s = l->text + l->start[i];
    size_t n = l->start[i + 1] - l->start[i];
    if (n && s[n - 1] == '\n') n--;
    put(o, arena, &sign, 1);
    if (n > max) {
        size_t cut = max;
        while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;
        put(o, arena, s, cut);
        char more[48];
        snprintf(more, sizeof more, " [... %zu more bytes]", n - cut);
        put_str(o, arena, more);
    } else {
        put(o, arena, s, n);
    }
    put(o, arena, "\n", 1);
}

/* Lines [from, to) of `l` with `sign`, at most `max` of them. */
static void put_run(out_buf *o, ld_arena *arena, char sign, const lines *l, size_t from,
                    size_t to, size_t max, size_t max_len)
{
    for (size_t i = from; i < to && i - from < max; i++) put_line(o, arena, sign, l, i, max_len);
    if (to - from > max) {
        char more[64];
        snprintf(more, sizeof more, "%c[... %zu more lines]\n", sign, to - from - max);
        put_str(o, arena, more);
    }
}

/* "start,count" of a hunk as diff -u writes it: 1-based, ",count" left out
 * for one line, and an empty range named by the line before it. */
static void hunk_range(char *buf, size_t size, size_t first, size_t count)
{
    if (count == 1) snprintf(buf, size, "%zu", first + 1);
    else snprintf(buf, size, "%zu,%zu", count ? first + 1 : first, count);
}

const char *ld_udiff(const char *a, size_t a_len, const char *b, size_t b_len,
                     const char *a_label, const char *b_label,
                     const ld_udiff_opts *opts, ld_arena *arena)
{
    ld_udiff_opts d = { 3, 8, 160 };
    if (opts && opts->context) d.context = opts->context;
    if (opts && opts->max_lines) d.max_lines = opts->max_lines;
    if (opts && opts->max_line_len) d.max_line_len = opts->max_line_len;
    if (a_len == b_len && !memcmp(a, b, a_len)) return "";
    lines la, lb;
    if (!split_lines(a, a_len, arena, &la) || !split_lines(b, b_len, arena, &lb)) return NULL;
    size_t pre = 0;
    while (pre < la.n && pre < lb.n && same_line(&la, pre, &lb, pre)) pre++;
    size_t suf = 0;
    while (suf < la.n - pre && suf < lb.n - pre &&
           same_line(&la, la.n - 1 - suf, &lb, lb.n - 1 - suf))
        suf++;
    size_t ctx0 = pre > d.context ? pre - d.context : 0;
    size_t a_end = la.n - suf, b_end = lb.n - suf;
    size_t ctx1 = suf > d.context ? d.context : suf;
    out_buf o = { 0 };
    char head[128];
    put_str(&o, arena, "--- "), put_str(&o, arena, a_label), put_str(&o, arena, "\n");
    put_str(&o, arena, "+++ "), put_str(&o, arena, b_label), put_str(&o, arena, "\n");
    char ra[48], rb[48];
    hunk_range(ra, sizeof ra, ctx0, a_end + ctx1 - ctx0);
    hunk_range(rb, sizeof rb, ctx0, b_end + ctx1 - ctx0);
    snprintf(head, sizeof head, "@@ -%s +%s @@\n", ra, rb);
    put_str(&o, arena, head);
    put_run(&o, arena, ' ', &la, ctx0, pre, d.context, d.max_line_len);
    put_run(&o, arena, '-', &la, pre, a_end, d.max_lines, d.max_line_len);
    put_run(&o, arena, '+', &lb, pre, b_end, d.max_lines, d.max_line_len);
    put_run(&o, arena, ' ', &la, a_end, a_end + ctx1, d.context, d.max_line_len);
    return o.failed ? NULL : o.p;
}
