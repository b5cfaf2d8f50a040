/* baseline.c - see baseline.h: the model (adding, sorting, hashing) and the
 * comparison.  Reading and writing the file: baseline_io.c. */
#include "baseline.h"

#include <stdlib.h>
#include <string.h>

#include "baseline_internal.h"

const char *ld_baseline_static_verdict(const char *s)
{
    return ld_verdict_static(s);
}

const char *ld_baseline_static_kind(const char *s)
{
    return ld_kind_static(s);
}

void ld_baseline_init(ld_baseline *b)
{
    memset(b, 0, sizeof *b);
    ld_arena_init(&b->arena, 0);
}

void ld_baseline_free(ld_baseline *b)
{
    if (!b) return;
    free(b->v);
    ld_arena_release(&b->arena);
    memset(b, 0, sizeof *b);
}

ld_baseline_entry *ld_baseline_push(ld_baseline *b, ld_error *err)
{
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        ld_baseline_entry *nv = realloc(b->v, cap * sizeof *nv);
        if (!nv) {
            LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for baseline entries");
            return NULL;
        }
        b->v = nv;
        b->cap = cap;
    }
    ld_baseline_entry *e = &b->v[b->n++];
    memset(e, 0, sizeof *e);
    return e;
}

static int cmp_kind(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts list[0..*n) and drops repeats. */
void ld_baseline_sort_kinds(const char **list, size_t *n)
{
    if (*n < 2) return;
    qsort(list, *n, sizeof *list, cmp_kind);
    size_t o = 1;
    for (size_t i = 1; i < *n; i++)
        if (strcmp(list[i], list[o - 1])) list[o++] = list[i];
    *n = o;
}

/* The findings' kinds of one severity, as static strings in the arena. */
static ld_status kinds_of(ld_arena *a, const ld_findings *f, ld_severity sev,
                          const char ***out, size_t *n_out, ld_error *err)
{
    size_t n = 0;
    *out = NULL;
    *n_out = 0;
    if (!f || !f->n) return LD_OK;
    const char **list = ld_arena_alloc(a, f->n * sizeof *list);
    if (!list) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for finding kinds");
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i].severity == sev) list[n++] = f->v[i].kind;
    ld_baseline_sort_kinds(list, &n);
    *out = list;
    *n_out = n;
    return LD_OK;
}

static ld_status add(ld_baseline *b, const char *rid, const char *fallback_key, const char *verdict,
                     const ld_findings *findings, uint64_t hash, size_t tag, int kept, ld_error *err)
{
    const char *v = ld_baseline_static_verdict(verdict ? verdict : "");
    if (!v) return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown verdict '%s'", verdict ? verdict : "");
    const char *key = rid ? rid : fallback_key ? fallback_key : "";
    const char *copy = kept ? key : ld_arena_memdup(&b->arena, key, strlen(key));
    if (!copy) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a rid");
    ld_baseline_entry *e = ld_baseline_push(b, err);
    if (!e) return LD_ERR_NOMEM;
    e->rid = copy;
    e->verdict = v;
    e->hash = hash;
    e->tag = tag;
    LD_TRY(kinds_of(&b->arena, findings, LD_SEV_ERROR, &e->errors, &e->n_errors, err));
    return kinds_of(&b->arena, findings, LD_SEV_INFO, &e->info, &e->n_info, err);
}

ld_status ld_baseline_add(ld_baseline *b, const char *rid, const char *fallback_key,
                          const char *verdict, const ld_findings *findings,
                          uint64_t hash, size_t tag, ld_error *err)
{
    return add(b, rid, fallback_key, verdict, findings, hash, tag, 0, err);
}

ld_status ld_baseline_add_kept(ld_baseline *b, const char *rid, const char *fallback_key,
                               const char *verdict, const ld_findings *findings,
                               uint64_t hash, size_t tag, ld_error *err)
{
    return add(b, rid, fallback_key, verdict, findings, hash, tag, 1, err);
}

/* Order: rid bytes, then occurrence, then tag (the judging order). */
static int cmp_entry(const void *pa, const void *pb)
{
    const ld_baseline_entry *a = pa, *b = pb;
    int c = strcmp(a->rid, b->rid);
    if (c) return c;
    if (a->occurrence != b->occurrence) return a->occurrence < b->occurrence ? -1 : 1;
    return a->tag < b->tag ? -1 : a->tag > b->tag;
}

void ld_baseline_sort(ld_baseline *b)
{
    size_t k = 1;
    while (k < b->n && cmp_entry(&b->v[k - 1], &b->v[k]) <= 0) k++; /* often in order already */
    if (k < b->n) qsort(b->v, b->n, sizeof *b->v, cmp_entry);
    for (size_t i = 1; i < b->n; i++)
        if (!strcmp(b->v[i].rid, b->v[i - 1].rid))
            b->v[i].occurrence = b->v[i - 1].occurrence + 1;
}

/* ------------------------------------------------------------ UTF-8 */

size_t ld_utf8_seq_len(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (!len || c > 0xF4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && s[1] >= 0xA0) return 0; /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && s[1] >= 0x90) return 0; /* past U+10FFFF */
    return len;
}

/* ------------------------------------------------------------ hash */

typedef struct fnv { uint64_t h; } fnv;

static void fnv_bytes(fnv *s, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) {
        s->h ^= c[i];
        s->h *= 0x100000001b3ull;
    }
}

/* A field: a tag byte, its length (8 bytes, little-endian) and its bytes,
 * so that no two different field lists hash the same stream. */
static void fnv_field(fnv *s, unsigned char tag, const char *p, size_t n)
{
    unsigned char hdr[9] = { tag };
    uint64_t len = p ? n : UINT64_MAX;
    for (int i = 0; i < 8; i++) hdr[1 + i] = (unsigned char)(len >> (8 * i));
    fnv_bytes(s, hdr, sizeof hdr);
    if (p) fnv_bytes(s, p, n);
}

static void fnv_cstr(fnv *s, unsigned char tag, const char *p)
{
    fnv_field(s, tag, p, p ? strlen(p) : 0);
}

static void hash_message(fnv *s, const ld_message *m)
{
    fnv_cstr(s, 'r', m->role);
    fnv_field(s, 'c', m->content.bytes, m->content.len);
    fnv_field(s, 'R', m->reasoning_content.bytes, m->reasoning_content.len);
    fnv_cstr(s, 'i', m->tool_call_id);
    fnv_cstr(s, 'n', m->name);
    for (uint32_t i = 0; m->tool_calls && i < m->n_tool_calls; i++) {
        fnv_cstr(s, 'I', m->tool_calls[i].id);
        fnv_cstr(s, 'N', m->tool_calls[i].name);
        fnv_field(s, 'A', m->tool_calls[i].arguments.bytes, m->tool_calls[i].arguments.len);
    }
}

uint64_t ld_baseline_request_hash(const ld_request *r)
{
    fnv s = { 0xcbf29ce484222325ull };
    for (int64_t i = 0; r->messages && i < r->n_messages; i++) hash_message(&s, &r->messages[i]);
    fnv_field(&s, 'P', r->prompt.bytes, r->prompt.len);
    fnv_field(&s, 'O', r->output.bytes, r->output.len);
    fnv_cstr(&s, 'F', r->finish_type);
    return s.h;
}

/* ------------------------------------------------------------ compare */

const char *ld_change_name(ld_change c)
{
    static const char *const names[] = { "same", "regressed", "new-failing",
                                         "fixed", "improved", "new" };
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "same";
}

int ld_change_is_regression(ld_change c)
{
    return c == LD_CHANGE_REGRESSED || c == LD_CHANGE_NEW_FAILING;
}

static int has_kind(const char *const *list, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], k)) return 1;
    return 0;
}

/* The change of a request with its baseline entry (NULL: new); its error
 * kinds that the baseline lacks go to new_errors[0..*n_new). */
static ld_change change_of(const ld_baseline_entry *was, const ld_baseline_entry *now,
                           const char **new_errors, size_t *n_new)
{
    int ok_now = !strcmp(now->verdict, "ok");
    *n_new = 0;
    for (size_t i = 0; i < now->n_errors; i++)
        if (!was || !has_kind(was->errors, was->n_errors, now->errors[i]))
            new_errors[(*n_new)++] = now->errors[i];
    if (!was) return ok_now ? LD_CHANGE_NEW : LD_CHANGE_NEW_FAILING;
    int ok_was = !strcmp(was->verdict, "ok");
    if ((ok_was && !ok_now) || *n_new) return LD_CHANGE_REGRESSED;
    if (!ok_was && ok_now) return LD_CHANGE_FIXED;
    if (now->n_errors < was->n_errors) return LD_CHANGE_IMPROVED;
    return LD_CHANGE_SAME;
}

static int key_cmp(const ld_baseline_entry *a, const ld_baseline_entry *b)
{
    int c = strcmp(a->rid, b->rid);
    if (c) return c;
    return a->occurrence < b->occurrence ? -1 : a->occurrence > b->occurrence;
}

static ld_status diff_alloc(ld_baseline_diff *d, size_t n_cur, size_t n_base, ld_error *err)
{
    memset(d, 0, sizeof *d);
    size_t n = n_cur ? n_cur : 1;
    d->change = calloc(n, sizeof *d->change);
    d->before = calloc(n, sizeof *d->before);
    d->new_errors = calloc(n, sizeof *d->new_errors);
    d->n_new_errors = calloc(n, sizeof *d->n_new_errors);
    d->missing = calloc(n_base ? n_base : 1, sizeof *d->missing);
    d->n = n_cur;
    if (d->change && d->before && d->new_errors && d->n_new_errors && d->missing) return LD_OK;
    ld_baseline_diff_free(d);
    return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory comparing with the baseline");
}

ld_status ld_baseline_compare(const ld_baseline *base, const ld_baseline *cur,
                              ld_baseline_diff *out, ld_error *err)
{
    LD_TRY(diff_alloc(out, cur->n, base->n, err));
    size_t i = 0, j = 0;
    while (i < cur->n || j < base->n) {
        int c = i == cur->n ? 1 : j == base->n ? -1 : key_cmp(&cur->v[i], &base->v[j]);
        if (c > 0) { out->missing[out->n_missing++] = j++; continue; }
        const ld_baseline_entry *was = c == 0 ? &base->v[j++] : NULL;
        const ld_baseline_entry *now = &cur->v[i];
        if (now->n_errors && !(out->new_errors[i] = malloc(now->n_errors * sizeof(char *)))) {
            ld_baseline_diff_free(out);
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory comparing with the baseline");
        }
        out->before[i] = was;
        out->change[i] = change_of(was, now, out->new_errors[i], &out->n_new_errors[i]);
        out->count[out->change[i]]++;
        i++;
    }
    return LD_OK;
}

void ld_baseline_diff_free(ld_baseline_diff *d)
{
    if (!d) return;
    for (size_t i = 0; d->new_errors && i < d->n; i++) free((void *)d->new_errors[i]);
    free(d->change);
    free(d->before);
    free(d->new_errors);
    free(d->n_new_errors);
    free(d->missing);
    memset(d, 0, sizeof *d);
}
