/* align_find.c - locate one part's text in a window of the prompt: verbatim,
 * edge-stripped, JSON-string-escaped, as equal JSON, by leaf values, or
 * partly by head/tail anchors (see align_find.h). */
#include "align_find.h"
#include "ld_json_escape.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANCHOR_MAX 32      /* bytes of a head/tail anchor */
#define PARTIAL_MIN 16     /* shorter texts are found whole or not at all */
#define JSON_ATTEMPTS 64   /* parse attempts of the JSON scan per window */
#define JSON_SCAN_MAX (64u * 1024u)
#define MAX_LEAVES 256

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void ld_af_strip(const char *t, size_t tlen, size_t *off, size_t *len)
{
    size_t a = 0, b = tlen;
    while (a < b && is_ws(t[a])) a++;
    while (b > a && is_ws(t[b - 1])) b--;
    *off = a;
    *len = b - a;
}

/* ------------------------------------------------------------ buffers */

typedef struct buf { char *p; size_t len, cap; int bad; } buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->bad) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) { b->bad = 1; return; }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

/* Body of a JSON string literal as json.dumps(ensure_ascii=False) writes it.
 * Runs of bytes that stay as they are go in with one put (most of a text),
 * found 32 or 16 bytes a step (include/ld_json_escape.h). */
static void put_escaped(buf *b, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t k = ld_json_next_escape(s, i, n);
        if (k > i) put(b, s + i, k - i);
        if (k == n) break;
        unsigned char c = (unsigned char)s[k];
        char e[8];
        const char *r = e;
        switch (c) {
        case '"': r = "\\\""; break;
        case '\\': r = "\\\\"; break;
        case '\n': r = "\\n"; break;
        case '\r': r = "\\r"; break;
        case '\t': r = "\\t"; break;
        case '\b': r = "\\b"; break;
        case '\f': r = "\\f"; break;
        default: snprintf(e, sizeof e, "\\u%04x", c);
        }
        put(b, r, strlen(r));
        i = k + 1;
    }
}

static void put_number(buf *b, double d)
{
    char s[40];
    if (isfinite(d) && d == floor(d) && fabs(d) < 1e15) {
        snprintf(s, sizeof s, "%lld", (long long)d);
    } else {
        for (int prec = 15; prec <= 17; prec++) { /* shortest round-trip */
            snprintf(s, sizeof s, "%.*g", prec, d);
            if (strtod(s, NULL) == d) break;
        }
    }
    put(b, s, strlen(s));
}

/* json.dumps(v) with the default separators ", " and ": " (insertion order). */
static void put_pyjson(buf *b, const cJSON *v, int depth)
{
    if (depth > 64) { b->bad = 1; return; }
    if (cJSON_IsString(v)) {
        put(b, "\"", 1);
        put_escaped(b, v->valuestring, strlen(v->valuestring));
        put(b, "\"", 1);
    } else if (cJSON_IsNumber(v)) {
        put_number(b, v->valuedouble);
    } else if (cJSON_IsTrue(v)) put(b, "true", 4);
    else if (cJSON_IsFalse(v)) put(b, "false", 5);
    else if (cJSON_IsNull(v)) put(b, "null", 4);
    else {
        int obj = cJSON_IsObject(v);
        put(b, obj ? "{" : "[", 1);
        for (const cJSON *c = v->child; c; c = c->next) {
            if (c != v->child) put(b, ", ", 2);
            if (obj) {
                put(b, "\"", 1);
                put_escaped(b, c->string, strlen(c->string));
                put(b, "\": ", 3);
            }
            put_pyjson(b, c, depth + 1);
        }
        put(b, obj ? "}" : "]", 1);
    }
}

/* ------------------------------------------------------------ searches */

static int find_in(const ld_af_prompt *pr, size_t lo, size_t hi, const char *n,
                   size_t nlen, size_t *at)
{
    if (hi > pr->len) hi = pr->len;
    if (lo >= hi) return 0;
    const char *f = ld_af_mem(pr->p + lo, hi - lo, n, nlen);
    if (!f) return 0;
    *at = (size_t)(f - pr->p);
    return 1;
}

static void set_found(ld_af_hit *h, ld_align_how how, size_t s, size_t e)
{
    h->state = LD_ALIGN_FOUND;
    h->how = how;
    h->start = s;
    h->end = e;
}

/* Verbatim (stripped) text; widen the span over edge whitespace the prompt kept. */
static int try_plain(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
                     size_t tlen, ld_af_hit *h)
{
    size_t off, len, at;
    ld_af_strip(t, tlen, &off, &len);
    if (!find_in(pr, lo, hi, t + off, len, &at)) return 0;
    size_t s = at, e = at + len, tail = tlen - off - len;
    int lead_ok = off <= s - lo && memcmp(pr->p + s - off, t, off) == 0;
    int tail_ok = e + tail <= hi && e + tail <= pr->len &&
                  memcmp(pr->p + e, t + off + len, tail) == 0;
    if (lead_ok) s -= off;
    if (tail_ok) e += tail;
    set_found(h, lead_ok && tail_ok ? LD_ALIGN_HOW_EXACT : LD_ALIGN_HOW_STRIPPED, s, e);
    return 1;
}

static int try_escaped(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
                       size_t tlen, ld_align_how how, ld_af_hit *h)
{
    buf b = {0};
    size_t off, len, at;
    ld_af_strip(t, tlen, &off, &len);
    if (ld_json_next_escape(t + off, 0, len) == len)
        return 0; /* escaping would change nothing: the verbatim search had it */
    put_escaped(&b, t + off, len);
    if (b.bad) { free(b.p); return -1; }
    int ok = b.len != len && find_in(pr, lo, hi, b.p, b.len, &at);
    if (ok) set_found(h, how, at, at + b.len);
    free(b.p);
    return ok;
}

/* Scan '{'/'[' (and '"' before them) in the window, parse there, compare. */
static int json_scan(const ld_af_prompt *pr, size_t lo, size_t hi, const cJSON *want,
                     ld_af_hit *h)
{
    char open = cJSON_IsObject(want) ? '{' : '[';
    size_t end = hi - lo > JSON_SCAN_MAX ? lo + JSON_SCAN_MAX : hi;
    int attempts = 0;
    for (size_t i = lo; i < end && attempts < JSON_ATTEMPTS; i++) {
        char c = pr->p[i];
        int quoted = c == '"' && i + 1 < hi && pr->p[i + 1] == open;
        if (c != open && !quoted) continue;
        attempts++;
        const char *pe = NULL;
        cJSON *got = cJSON_ParseWithLengthOpts(pr->p + i, hi - i, &pe, 0);
        cJSON *inner = NULL;
        if (got && quoted && cJSON_IsString(got)) inner = cJSON_Parse(got->valuestring);
        int same = quoted ? inner && cJSON_Compare(inner, want, 1)
                          : got && cJSON_Compare(got, want, 1);
        cJSON_Delete(inner);
        cJSON_Delete(got);
        if (same && pe) {
            set_found(h, quoted ? LD_ALIGN_HOW_JSON_ESCAPED : LD_ALIGN_HOW_JSON, i,
                      (size_t)(pe - pr->p));
            return 1;
        }
    }
    return 0;
}

static int try_json_forms(const ld_af_prompt *pr, size_t lo, size_t hi, const cJSON *v,
                          ld_af_hit *h)
{
    buf b = {0};
    put_pyjson(&b, v, 0);
    if (b.bad) { free(b.p); return -1; }
    size_t at;
    int r = 0;
    if (find_in(pr, lo, hi, b.p, b.len, &at)) {
        set_found(h, LD_ALIGN_HOW_JSON, at, at + b.len);
        r = 1;
    } else {
        r = try_escaped(pr, lo, hi, b.p, b.len, LD_ALIGN_HOW_JSON_ESCAPED, h);
    }
    free(b.p);
    if (r) return r;
    return json_scan(pr, lo, hi, v, h);
}

/* Leaf strings/numbers of v, in document order, searched one after another. */
static void collect_leaves(const cJSON *v, const cJSON **out, size_t *n, int depth)
{
    if (depth > 64) return;
    for (const cJSON *c = v->child; c && *n < MAX_LEAVES; c = c->next) {
        if (cJSON_IsString(c) || cJSON_IsNumber(c)) out[(*n)++] = c;
        else if (cJSON_IsObject(c) || cJSON_IsArray(c)) collect_leaves(c, out, n, depth + 1);
    }
}

static int try_values(const ld_af_prompt *pr, size_t lo, size_t hi, const cJSON *v,
                      ld_af_hit *h)
{
    const cJSON *leaves[MAX_LEAVES];
    size_t n = 0, found = 0, pos = lo, first = 0, last = 0;
    collect_leaves(v, leaves, &n, 0);
    for (size_t i = 0; i < n; i++) {
        char num[40];
        const char *s = leaves[i]->valuestring;
        if (cJSON_IsNumber(leaves[i])) {
            buf b = {0};
            put_number(&b, leaves[i]->valuedouble);
            snprintf(num, sizeof num, "%s", b.bad ? "" : b.p);
            free(b.p);
            s = num;
        }
        size_t at;
        if (!*s || !find_in(pr, pos, hi, s, strlen(s), &at)) continue;
        if (!found++) first = at;
        pos = last = at + strlen(s);
    }
    if (!found) return 0;
    set_found(h, LD_ALIGN_HOW_VALUES, first, last);
    if (found < n) {
        h->state = LD_ALIGN_PARTLY;
        h->first_diff = 0;
        h->first_diff_prompt = first;
    }
    return 1;
}

static size_t common_prefix(const char *a, const char *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* Head anchor, then the whole text compared at it; tail anchor after the
 * first difference (or alone when the head is not there). */
static int try_partial(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
                       size_t tlen, ld_af_hit *h)
{
    size_t off, len, at;
    ld_af_strip(t, tlen, &off, &len);
    if (len < PARTIAL_MIN) return 0;
    const char *s = t + off;
    size_t a = len / 2 < ANCHOR_MAX ? len / 2 : ANCHOR_MAX, d = 0, hs = 0;
    int head = find_in(pr, lo, hi, s, a, &hs);
    if (!head && a > PARTIAL_MIN / 2) { /* the difference may lie inside the anchor */
        a = PARTIAL_MIN / 2;
        head = find_in(pr, lo, hi, s, a, &hs);
    }
    size_t from = lo;
    if (head) {
        size_t room = (hi < pr->len ? hi : pr->len) - hs;
        d = common_prefix(s, pr->p + hs, len < room ? len : room);
        from = hs + d;
    }
    size_t tail_hi = head ? from + 2 * len + 4096 : hi;
    if (tail_hi > hi) tail_hi = hi;
    size_t ts = 0, sfx = 0;
    int tail = find_in(pr, from, tail_hi, s + len - a, a, &ts);
    if (!tail && a > PARTIAL_MIN / 2) {
        a = PARTIAL_MIN / 2;
        tail = find_in(pr, from, tail_hi, s + len - a, a, &ts);
    }
    if (tail) { /* extend the tail match backwards */
        size_t e = ts + a, lim = len - d;
        while (sfx < lim && e - sfx > from && pr->p[e - sfx - 1] == s[len - sfx - 1]) sfx++;
    }
    /* Short anchors match by chance (a shared "message N:" prefix): accept
     * only both anchors around one difference, or half of the text. */
    if (!head && !tail) return 0;
    if (!(head && tail) && (head ? d : sfx) < len / 2) return 0;
    if (head && tail && d + sfx < (len / 4 < 2 * ANCHOR_MAX ? len / 4 : 2 * ANCHOR_MAX)) return 0;
    h->state = LD_ALIGN_PARTLY;
    h->how = LD_ALIGN_HOW_ANCHORS;
    h->n_pieces = 0;
    if (head) h->pieces[h->n_pieces++] = (ld_align_piece){off, d, hs};
    if (tail) h->pieces[h->n_pieces++] = (ld_align_piece){off + len - sfx, sfx, ts + a - sfx};
    h->start = head ? hs : ts + a - sfx;
    h->end = tail ? ts + a : hs + d;
    h->first_diff = off + (head ? d : 0);
    h->first_diff_prompt = head ? hs + d : h->start;
    (void)at;
    /* A difference exactly at the logger's cut is the cut, not damage. */
    if (pr->has_cut && (h->first_diff_prompt == pr->cut ||
                        (tail && ts + a - sfx == pr->cut)))
        h->state = LD_ALIGN_UNKNOWN;
    return 1;
}

/* The logger's cut of the prompt (a head [0,cut) and a tail [cut,len) with
 * an unknown middle) may fall inside the text: the head then ends with the
 * text's first bytes, or the tail begins with its last ones.  Such a text is
 * matched on what is visible (how CUT), never called changed for what the
 * cut hides.  At least PARTIAL_MIN bytes (or the whole text) must show. */
static int runs_into_cut(const ld_af_prompt *pr, size_t lo, const char *s, size_t len,
                         size_t *start)
{
    size_t cut = pr->cut, from = cut > len ? cut - len + 1 : 0;
    size_t k = len < PARTIAL_MIN ? len : PARTIAL_MIN;
    if (from < lo) from = lo;
    while (from + k <= cut) {
        const char *f = ld_af_mem(pr->p + from, cut - from, s, k);
        if (!f) return 0;
        size_t at = (size_t)(f - pr->p);
        if (memcmp(pr->p + at, s, cut - at) == 0) {
            *start = at;
            return 1;
        }
        from = at + 1;
    }
    return 0;
}

static int runs_from_cut(const ld_af_prompt *pr, size_t hi, const char *s, size_t len,
                         size_t *end)
{
    size_t cut = pr->cut, k = len < PARTIAL_MIN ? len : PARTIAL_MIN;
    size_t lim = cut + len - 1 < hi ? cut + len - 1 : hi; /* the whole text would not be cut */
    if (lim > pr->len) lim = pr->len;
    if (lim < cut + k) return 0;
    const char *f = ld_af_mem(pr->p + cut, lim - cut, s + len - k, k);
    for (size_t from = cut; f; ) {
        size_t e = (size_t)(f - pr->p) + k, q = e - cut;
        if (memcmp(pr->p + cut, s + len - q, q) == 0) {
            *end = e;
            return 1;
        }
        from = (size_t)(f - pr->p) + 1;
        f = lim > from + k - 1 ? ld_af_mem(pr->p + from, lim - from, s + len - k, k) : NULL;
    }
    return 0;
}

static int try_at_cut(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
                      size_t tlen, ld_af_hit *h)
{
    if (!pr->has_cut || pr->cut < lo || pr->cut > hi) return 0;
    size_t off, len, s = 0, e = 0;
    ld_af_strip(t, tlen, &off, &len);
    if (len == 0) return 0;
    int head = pr->cut > lo && runs_into_cut(pr, lo, t + off, len, &s);
    int tail = pr->cut < hi && runs_from_cut(pr, hi, t + off, len, &e);
    if (!head && !tail) return 0;
    set_found(h, LD_ALIGN_HOW_CUT, head ? s : pr->cut, tail ? e : pr->cut);
    return 1;
}

static int find_json(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t,
                     size_t tlen, unsigned flags, ld_af_hit *h)
{
    size_t off, len;
    ld_af_strip(t, tlen, &off, &len);
    if (len == 0 || (t[off] != '{' && t[off] != '[')) return 0;
    cJSON *v = cJSON_ParseWithLength(t + off, len);
    if (!v) return 0;
    int r = try_json_forms(pr, lo, hi, v, h);
    if (r == 0 && (flags & LD_AF_VALUES)) r = try_values(pr, lo, hi, v, h);
    cJSON_Delete(v);
    return r;
}

int ld_af_find(const ld_af_prompt *pr, size_t lo, size_t hi, const char *t, size_t tlen,
               unsigned flags, ld_af_hit *out)
{
    memset(out, 0, sizeof *out);
    out->state = LD_ALIGN_ABSENT;
    if (hi > pr->len) hi = pr->len;
    if (lo >= hi || tlen == 0) return 0;
    int r = try_plain(pr, lo, hi, t, tlen, out);
    if (r == 0) r = try_escaped(pr, lo, hi, t, tlen, LD_ALIGN_HOW_ESCAPED, out);
    if (r == 0) r = try_at_cut(pr, lo, hi, t, tlen, out);
    if (r == 0 && (flags & LD_AF_JSON)) r = find_json(pr, lo, hi, t, tlen, flags, out);
    if (r == 0 && (flags & LD_AF_PARTIAL)) r = try_partial(pr, lo, hi, t, tlen, out);
    return r < 0 ? -1 : 0;
}
