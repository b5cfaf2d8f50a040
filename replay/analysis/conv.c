/* conv.c - see conv.h.  Tracker storage, prefix hashing, eviction; the
 * comparison of an output with the message sent back is below. */
#include "conv.h"

#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include "harness.h"

#define MAX_CANDIDATES 4
#define EXCERPT_CHARS 48

/* ------------------------------------------------------------ text views */

typedef struct view {
    const char *p;
    size_t n;
} view;

static int ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static view trim(view v)
{
    while (v.n && ws(v.p[0])) v.p++, v.n--;
    while (v.n && ws(v.p[v.n - 1])) v.n--;
    return v;
}

/* memchr for the first byte (vectorised in libc: every message of every
 * request's history goes through here), then the rest. */
static const char *find(view v, const char *needle)
{
    size_t k = strlen(needle);
    const char *p = v.p, *end = v.p + v.n;
    while ((size_t)(end - p) >= k && (p = memchr(p, needle[0], (size_t)(end - p - (ptrdiff_t)k + 1)))) {
        if (!memcmp(p, needle, k)) return p;
        p++;
    }
    return NULL;
}

static int starts(view v, view pre) { return v.n >= pre.n && !memcmp(v.p, pre.p, pre.n); }
static int ends(view v, view suf) { return v.n >= suf.n && !memcmp(v.p + v.n - suf.n, suf.p, suf.n); }
static int same(view a, view b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

static size_t common_prefix(view a, view b)
{
    size_t i = 0;
    while (i < a.n && i < b.n && a.p[i] == b.p[i]) i++;
    return i;
}

/* Splits text into reasoning and visible answer: "[<think>]R</think>A";
 * "<think>R" without a close is all reasoning; anything else all answer. */
static void split_think(view t, view *reason, view *answer)
{
    const char *close = find(t, "</think>");
    view lead = trim(t);
    *reason = (view){t.p, 0};
    *answer = t;
    if (close) {
        reason->p = t.p;
        reason->n = (size_t)(close - t.p);
        answer->p = close + 8;
        answer->n = t.n - (size_t)(answer->p - t.p);
    } else if (lead.n >= 7 && !memcmp(lead.p, "<think>", 7)) {
        *reason = lead;
        *answer = (view){t.p + t.n, 0};
    } else {
        return;
    }
    view r = trim(*reason);
    if (r.n >= 7 && !memcmp(r.p, "<think>", 7)) r.p += 7, r.n -= 7;
    *reason = trim(r);
}

static view text_view(const ld_text *t)
{
    return t->bytes ? (view){t->bytes, t->len} : (view){"", 0};
}

/* ------------------------------------------------------------ hashing */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
}

static uint64_t word_at(const char *p)
{
    uint64_t x;
    memcpy(&x, p, 8);
    return x;
}

static uint64_t rotl(uint64_t x, int k)
{
    return x << k | x >> (64 - k);
}

/* 16 bytes into a lane with one 64x64->128-bit multiply, its halves xored,
 * and the lane's old value rotated in (so no word makes it forget). */
static uint64_t fold16(uint64_t lane, uint64_t w0, uint64_t w1)
{
    __extension__ typedef unsigned __int128 u128;
    u128 m = (u128)(w0 ^ lane) * (w1 ^ 0xA4093822299F31D0ull);
    return ((uint64_t)m ^ (uint64_t)(m >> 64)) ^ (lane << 23 | lane >> 41);
}

/* The bytes after the last whole 16: up to 15, zero-padded (the length,
 * mixed in at the end, tells "ab" from "ab\0"). */
static void tail16(const char *p, size_t n, uint64_t *w0, uint64_t *w1)
{
    unsigned char b[16] = {0};
    memcpy(b, p, n);
    memcpy(w0, b, 8);
    memcpy(w1, b + 8, 8);
}

static uint64_t hash_bytes(uint64_t h, const char *p, size_t n)
{
    /* eight independent lanes of one multiply per 16 bytes (a lane's
     * multiply waits on its last): every request re-hashes its whole
     * history, so this runs over most message bytes of a log again, mostly
     * from L3 by then (two lanes took 1.6x the time of eight).  Shorter
     * texts: one lane, 16 bytes a step. */
    uint64_t a = h ^ 0x243F6A8885A308D3ull;
    size_t i = 0;
    if (n >= 128) {
        uint64_t l[8];
        for (int k = 0; k < 8; k++) l[k] = h ^ (0x13198A2E03707344ull * (uint64_t)(2 * k + 1));
        for (; i + 128 <= n; i += 128)
            for (int k = 0; k < 8; k++) l[k] = fold16(l[k], word_at(p + i + 16 * k), word_at(p + i + 16 * k + 8));
        for (int k = 0; k < 8; k++) a ^= rotl(l[k], 8 * k + 3); /* unequal turns: lanes' order counts */
        a = mix(a);
    }
    for (; i + 16 <= n; i += 16) a = fold16(a, word_at(p + i), word_at(p + i + 8));
    uint64_t w0, w1;
    tail16(p + i, n - i, &w0, &w1);
    return mix(fold16(a, w0, w1 ^ 0xBE5466CF34E90C6Cull) ^ ((uint64_t)n << 56)) + n;
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    return s ? hash_bytes(h, s, strlen(s)) : mix(h + 0x51);
}

static uint64_t hash_text(uint64_t h, const ld_text *t)
{
    if (t->flags & LD_TEXT_ABBREVIATED) return mix(h ^ (t->n_chars * 31 + 0xab));
    return hash_bytes(h ^ (t->flags & LD_TEXT_TRUNCATED), t->bytes ? t->bytes : "",
                      t->bytes ? t->len : 0);
}

/* role + visible content + tool calls + tool_call_id + name. */
static uint64_t message_hash(const ld_message *m)
{
    uint64_t h = hash_str(0x6c6f67646966ull, m->role);
    view reason, answer;
    split_think(text_view(&m->content), &reason, &answer);
    answer = trim(answer);
    if (m->content.flags & (LD_TEXT_TRUNCATED | LD_TEXT_ABBREVIATED)) h = hash_text(h, &m->content);
    else h = hash_bytes(h, answer.p, answer.n);
    for (uint32_t k = 0; m->tool_calls && k < m->n_tool_calls; k++) {
        h = hash_str(h, m->tool_calls[k].id);
        h = hash_str(h, m->tool_calls[k].name);
        h = hash_text(h, &m->tool_calls[k].arguments);
    }
    h = hash_str(h ^ m->n_tool_calls, m->tool_call_id);
    return hash_str(h, m->name);
}

/* ------------------------------------------------------------ storage */

typedef struct conv conv;

typedef struct entry {
    uint64_t key;              /* chained hash of the producer's whole array */
    struct entry *next_bucket; /* tracker's entry table */
    struct entry *newer, *older; /* within the conversation */
    conv *cv;
    const char *rid;
    const char *out;           /* NULL when the output is unknown */
    size_t out_len, out_cut;   /* out_cut < out_len: head [0,cut), tail [cut,len) */
    int out_cut_set;
    ld_finish_kind finish;
    const char *finish_type;
    const char *stop_str;      /* matched stop string (not a token id); NULL */
    int64_t completion_tokens;
    size_t bytes;
} entry;

struct conv {
    uint64_t key;
    char *id;
    entry *oldest, *newest;
    size_t n_entries, bytes;
    conv *lru_prev, *lru_next; /* lru_next = less recently used */
    conv *next_bucket;
};

struct ld_conv_tracker {
    ld_conv_options o;
    entry **ebuckets;
    size_t n_ebuckets;
    conv **cbuckets;
    size_t n_cbuckets;
    conv *mru, *lru;
    ld_conv_stats st;
};

static ld_status grow_tables(ld_conv_tracker *t)
{
    if (t->st.entries + 1 > t->n_ebuckets) {
        size_t n = t->n_ebuckets * 2;
        entry **nb = calloc(n, sizeof *nb);
        if (!nb) return LD_ERR_NOMEM;
        for (size_t i = 0; i < t->n_ebuckets; i++)
            for (entry *e = t->ebuckets[i], *nx; e; e = nx) {
                nx = e->next_bucket;
                e->next_bucket = nb[e->key & (n - 1)];
                nb[e->key & (n - 1)] = e;
            }
        free(t->ebuckets);
        t->ebuckets = nb;
        t->n_ebuckets = n;
    }
    if (t->st.conversations + 1 > t->n_cbuckets) {
        size_t n = t->n_cbuckets * 2;
        conv **nb = calloc(n, sizeof *nb);
        if (!nb) return LD_ERR_NOMEM;
        for (size_t i = 0; i < t->n_cbuckets; i++)
            for (conv *c = t->cbuckets[i], *nx; c; c = nx) {
                nx = c->next_bucket;
                c->next_bucket = nb[c->key & (n - 1)];
                nb[c->key & (n - 1)] = c;
            }
        free(t->cbuckets);
        t->cbuckets = nb;
        t->n_cbuckets = n;
    }
    return LD_OK;
}

ld_status ld_conv_tracker_new(const ld_conv_options *opts, ld_conv_tracker **out, ld_error *err)
{
    *out = NULL;
    ld_conv_tracker *t = calloc(1, sizeof *t);
    if (!t) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a conversation tracker");
    if (opts) t->o = *opts;
    if (!t->o.max_conversations) t->o.max_conversations = 65536;
    if (!t->o.max_bytes) t->o.max_bytes = (size_t)256 << 20;
    if (!t->o.max_entries) t->o.max_entries = 4096;
    if (!t->o.max_entry_bytes) t->o.max_entry_bytes = (size_t)1 << 20;
    t->n_ebuckets = t->n_cbuckets = 256;
    t->ebuckets = calloc(t->n_ebuckets, sizeof *t->ebuckets);
    t->cbuckets = calloc(t->n_cbuckets, sizeof *t->cbuckets);
    if (!t->ebuckets || !t->cbuckets) {
        ld_conv_tracker_free(t);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a conversation tracker");
    }
    *out = t;
    return LD_OK;
}

static void drop_entry(ld_conv_tracker *t, entry *e)
{
    entry **pp = &t->ebuckets[e->key & (t->n_ebuckets - 1)];
    while (*pp != e) pp = &(*pp)->next_bucket;
    *pp = e->next_bucket;
    conv *c = e->cv;
    if (e->newer) e->newer->older = e->older; else c->newest = e->older;
    if (e->older) e->older->newer = e->newer; else c->oldest = e->newer;
    c->n_entries--;
    c->bytes -= e->bytes;
    t->st.entries--;
    t->st.bytes -= e->bytes;
    free(e);
}

static void lru_unlink(ld_conv_tracker *t, conv *c)
{
    if (c->lru_prev) c->lru_prev->lru_next = c->lru_next; else t->mru = c->lru_next;
    if (c->lru_next) c->lru_next->lru_prev = c->lru_prev; else t->lru = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
}

static void lru_front(ld_conv_tracker *t, conv *c)
{
    c->lru_next = t->mru;
    if (t->mru) t->mru->lru_prev = c;
    t->mru = c;
    if (!t->lru) t->lru = c;
}

static void drop_conv(ld_conv_tracker *t, conv *c)
{
    while (c->oldest) drop_entry(t, c->oldest);
    conv **pp = &t->cbuckets[c->key & (t->n_cbuckets - 1)];
    while (*pp != c) pp = &(*pp)->next_bucket;
    *pp = c->next_bucket;
    lru_unlink(t, c);
    t->st.bytes -= sizeof *c + strlen(c->id) + 1;
    t->st.conversations--;
    free(c);
}

/* Keeps the caps; `keep` (the conversation in use) goes last. */
static void enforce_caps(ld_conv_tracker *t, conv *keep)
{
    while (keep->n_entries > t->o.max_entries) drop_entry(t, keep->oldest);
    while ((t->st.bytes > t->o.max_bytes || t->st.conversations > t->o.max_conversations) &&
           t->lru && t->lru != keep) {
        drop_conv(t, t->lru);
        t->st.evicted++;
    }
    while (t->st.bytes > t->o.max_bytes && keep->oldest) drop_entry(t, keep->oldest);
}

void ld_conv_tracker_free(ld_conv_tracker *t)
{
    if (!t) return;
    while (t->lru) drop_conv(t, t->lru);
    free(t->ebuckets);
    free(t->cbuckets);
    free(t);
}

void ld_conv_tracker_stats(const ld_conv_tracker *t, ld_conv_stats *out)
{
    *out = t->st;
}

static conv *get_conv(ld_conv_tracker *t, uint64_t key, const char *rid)
{
    for (conv *c = t->cbuckets[key & (t->n_cbuckets - 1)]; c; c = c->next_bucket)
        if (c->key == key) {
            lru_unlink(t, c);
            lru_front(t, c);
            return c;
        }
    if (grow_tables(t) != LD_OK) return NULL;
    size_t idn = strlen(rid);
    conv *c = calloc(1, sizeof *c + idn + 1);
    if (!c) return NULL;
    c->key = key;
    c->id = (char *)(c + 1);
    memcpy(c->id, rid, idn + 1);
    c->next_bucket = t->cbuckets[key & (t->n_cbuckets - 1)];
    t->cbuckets[key & (t->n_cbuckets - 1)] = c;
    lru_front(t, c);
    t->st.conversations++;
    t->st.bytes += sizeof *c + idn + 1;
    return c;
}

static int numeric(const char *s)
{
    if (!s || !*s) return 1;
    for (; *s; s++)
        if ((*s < '0' || *s > '9') && *s != '-') return 0;
    return 1;
}

/* What later turns need of r (rid, output maybe as head + tail, finish)
 * as the op that keeps it: views into r, nothing copied. */
static void op_of(const ld_conv_tracker *t, const ld_request *r, uint64_t conv_key, uint64_t key,
                  ld_conv_op *op)
{
    const ld_text *o = &r->output;
    size_t on = o->bytes ? o->len : 0, cut = on, keep = on;
    int cut_set = (o->flags & LD_TEXT_TRUNCATED) != 0;
    if (cut_set) cut = o->cut;
    if (on > t->o.max_entry_bytes) {
        if (cut_set) on = keep = 0, cut_set = 0; /* one cut only: not kept */
        else keep = t->o.max_entry_bytes, cut = keep / 2, cut_set = 1;
    }
    memset(op, 0, sizeof *op);
    op->conv_key = conv_key, op->key = key, op->rid = r->rid;
    if (o->bytes && (on || !(o->flags & LD_TEXT_TRUNCATED))) {
        op->out_head = o->bytes, op->head_len = cut;
        op->out_tail = o->bytes + on - (keep - cut), op->tail_len = keep - cut;
        op->out_cut = cut_set;
    }
    op->finish = r->finish_kind;
    op->finish_type = r->finish_type;
    op->stop_str = r->finish_kind == LD_FINISH_STOP && !numeric(r->finish_matched) ? r->finish_matched : NULL;
    op->completion_tokens = r->completion_tokens;
}

/* Copies op's entry into the tracker (conversation c). */
static ld_status record(ld_conv_tracker *t, conv *c, const ld_conv_op *op)
{
    size_t keep = op->out_head ? op->head_len + op->tail_len : 0;
    size_t rn = strlen(op->rid), sn = op->stop_str ? strlen(op->stop_str) : 0;
    size_t ft = op->finish_type ? strlen(op->finish_type) : 0;
    size_t bytes = sizeof(entry) + rn + 1 + keep + 1 + sn + 1 + ft + 1;
    /* malloc, not calloc: the strings after the entry are all copied in (a
     * byte left unwritten is one nothing points at), only the entry is zeroed */
    entry *e = malloc(bytes);
    if (!e) return LD_ERR_NOMEM;
    memset(e, 0, sizeof *e);
    char *p = (char *)(e + 1);
    e->rid = memcpy(p, op->rid, rn + 1), p += rn + 1;
    if (op->out_head) {
        memcpy(p, op->out_head, op->head_len);
        memcpy(p + op->head_len, op->out_tail, op->tail_len);
        p[keep] = 0;
        e->out = p, e->out_len = keep, e->out_cut = op->head_len, e->out_cut_set = op->out_cut;
    }
    p += keep + 1;
    if (op->stop_str) e->stop_str = memcpy(p, op->stop_str, sn + 1);
    p += sn + 1;
    e->finish_type = op->finish_type ? memcpy(p, op->finish_type, ft + 1) : NULL;
    e->key = op->key, e->cv = c, e->finish = op->finish, e->bytes = bytes;
    e->completion_tokens = op->completion_tokens;
    e->next_bucket = t->ebuckets[op->key & (t->n_ebuckets - 1)];
    t->ebuckets[op->key & (t->n_ebuckets - 1)] = e;
    e->older = c->newest;
    if (c->newest) c->newest->newer = e; else c->oldest = e;
    c->newest = e;
    c->n_entries++, c->bytes += bytes;
    t->st.entries++, t->st.bytes += bytes;
    if (t->st.bytes > t->st.peak_bytes) t->st.peak_bytes = t->st.bytes;
    return LD_OK;
}

/* The change ld_conv_check makes after its checks (c: op's conversation,
 * already made the most recently used): op's entry kept unless the same
 * request was kept already, then the memory bounds. */
static ld_status keep_op(ld_conv_tracker *t, conv *c, const ld_conv_op *op, ld_error *err)
{
    for (entry *e = t->ebuckets[op->key & (t->n_ebuckets - 1)]; e; e = e->next_bucket)
        if (e->key == op->key && !strcmp(e->rid, op->rid)) return LD_OK; /* seen already */
    if (grow_tables(t) != LD_OK || record(t, c, op) != LD_OK)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory recording request '%s'", op->rid);
    enforce_caps(t, c);
    return LD_OK;
}

ld_status ld_conv_replay(ld_conv_tracker *t, const ld_conv_op *op, ld_error *err)
{
    if (!t || !op || !op->rid) return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_conv_replay: NULL argument");
    conv *c = get_conv(t, op->conv_key, op->rid);
    if (!c) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a conversation");
    return keep_op(t, c, op, err);
}

/* ------------------------------------------------------------ comparison */

typedef struct verdict {
    int benign;
    const char *what;          /* "was sent back empty", "was cut short", ... */
    size_t first_diff;         /* in the compared texts */
    size_t expected;           /* bytes of the server's side (head + tail when cut) */
    view out, msg;             /* compared texts: server side, message side */
} verdict;

static const char *find_view(view hay, view needle)
{
    for (size_t i = 0; i + needle.n <= hay.n; i++)
        if (!memcmp(hay.p + i, needle.p, needle.n)) return hay.p + i;
    return NULL;
}

static int names_in(const ld_message *m, view out)
{
    for (uint32_t k = 0; m->tool_calls && k < m->n_tool_calls; k++)
        if (m->tool_calls[k].name && !find(out, m->tool_calls[k].name)) return 0;
    return 1;
}

static view head_of(view v, size_t n) { return (view){v.p, v.n < n ? v.n : n}; }

/* Why two different visible answers differ. */
static const char *classify(view ao, view ro, view am, view rm)
{
    if (!am.n)
        return rm.n && ao.n && find_view(rm, head_of(ao, 32)) ? "had its answer moved into the reasoning"
                                                              : "was sent back empty";
    if (starts(ao, am)) return "was cut short";
    if (ro.n && find_view(am, head_of(ro, 32))) return "had the reasoning moved into its content";
    return "was edited";
}

/* The message's visible answer and reasoning (reasoning_content or inline). */
static void message_parts(const ld_message *m, view *am, view *rm)
{
    split_think(text_view(&m->content), rm, am);
    *am = trim(*am);
    if (!rm->n) *rm = trim(text_view(&m->reasoning_content));
}

/* An output the logger did not cut. */
static void compare_full(const entry *e, const ld_message *m, verdict *v)
{
    view o = {e->out, e->out_len}, ro, ao, am, rm;
    split_think(o, &ro, &ao);
    ao = trim(ao);
    message_parts(m, &am, &rm);
    view ao2 = ao;
    size_t sn = e->stop_str ? strlen(e->stop_str) : 0;
    if (sn && ends(ao, (view){e->stop_str, sn})) ao2 = trim((view){ao.p, ao.n - sn});
    int ok = m->n_tool_calls ? (starts(ao, am) || starts(ao2, am)) && names_in(m, o)
                             : same(ao, am) || same(ao2, am);
    v->out = ao, v->msg = am, v->expected = ao.n;
    if (!ok) {
        v->what = classify(ao, ro, am, rm);
        v->first_diff = common_prefix(ao, am);
        return;
    }
    if (rm.n && !same(rm, ro)) { /* answer intact, reasoning not the server's */
        v->what = "carries reasoning the server did not produce";
        v->out = ro, v->msg = rm, v->expected = ro.n;
        v->first_diff = common_prefix(ro, rm);
        return;
    }
    v->benign = 1;
}

static view ltrim(view v) { while (v.n && ws(v.p[0])) v.p++, v.n--; return v; }
static view rtrim(view v) { while (v.n && ws(v.p[v.n - 1])) v.n--; return v; }

/* An output cut by the logger (or by max_entry_bytes): compare what is shown. */
static void compare_cut(const entry *e, const ld_message *m, verdict *v)
{
    view h = {e->out, e->out_cut}, tl = {e->out + e->out_cut, e->out_len - e->out_cut};
    const char *ch = find(h, "</think>"), *ct = find(tl, "</think>");
    view lead = trim(h), am, rm;
    if (ch) h = (view){ch + 8, h.n - (size_t)(ch + 8 - h.p)};
    else if (ct) h = (view){h.p, 0}, tl = (view){ct + 8, tl.n - (size_t)(ct + 8 - tl.p)};
    else if (lead.n >= 7 && !memcmp(lead.p, "<think>", 7)) { v->benign = 1; return; } /* unknown */
    h = ltrim(h), tl = rtrim(tl);
    message_parts(m, &am, &rm);
    size_t sn = e->stop_str ? strlen(e->stop_str) : 0;
    view tl2 = tl;
    if (sn && ends(tl, (view){e->stop_str, sn})) tl2 = rtrim((view){tl.p, tl.n - sn});
    int ok = m->n_tool_calls ? starts(h, am) || starts(am, h)
                             : starts(am, h) && (ends(am, tl) || ends(am, tl2)) &&
                                   am.n >= h.n + tl2.n;
    v->out = h, v->msg = am, v->expected = h.n + tl.n;
    if (ok) { v->benign = 1; return; }
    v->first_diff = common_prefix(h, am);
    if (!am.n) v->what = "was sent back empty";
    else if (starts(am, h) && am.n < h.n + tl2.n) v->what = "was cut short";
    else if (starts(h, am)) v->what = "was cut short";
    else v->what = "was edited";
}

static void compare(const entry *e, const ld_message *m, verdict *v)
{
    memset(v, 0, sizeof *v);
    if (!e->out) { v->benign = 1; return; } /* output not in the log */
    if (e->out_cut_set) compare_cut(e, m, v);
    else compare_full(e, m, v);
}

static const char *finish_words(const entry *e, char *buf, size_t n)
{
    if (e->finish == LD_FINISH_ABORT) return "finish reason abort: interrupted";
    snprintf(buf, n, "finish reason %s", e->finish_type ? e->finish_type : "unknown");
    return buf;
}

static ld_status report(const entry *e, const ld_message *m, int64_t j, const verdict *v,
                        ld_arena *a, ld_findings *out, ld_error *err)
{
    char fw[96];
    ld_finding *f = ld_findings_add(out, a, LD_K_HARNESS_STALE_ASSISTANT, LD_SEV_ERROR, j,
        "assistant message %lld %s: request %s produced %zu bytes (%s), the harness sent back "
        "%zu; first difference at byte %zu", (long long)j, v->what, e->rid, v->expected,
        finish_words(e, fw, sizeof fw), v->msg.n, v->first_diff);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory adding a finding");
    f->expected_len = (int64_t)v->expected;
    f->actual_len = (int64_t)v->msg.n;
    f->first_diff = (int64_t)v->first_diff;
    f->array_excerpt = ld_excerpt(a, v->msg.p, v->msg.n, v->first_diff, EXCERPT_CHARS);
    f->prompt_excerpt = ld_excerpt(a, v->out.p, v->out.n, v->first_diff, EXCERPT_CHARS);
    f->related_rid = ld_arena_memdup(a, e->rid, strlen(e->rid));
    const char *c = m->content.bytes;
    if (c && v->msg.p >= c && v->msg.p <= c + m->content.len)
        f->array_offset = (int64_t)(v->msg.p - c + v->first_diff);
    if (!f->related_rid || !f->array_excerpt || !f->prompt_excerpt)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory adding a finding");
    return LD_OK;
}

/* Completes harness.empty_assistant of message j with its producer. */
static ld_status annotate_empty(const entry *e, int64_t j, ld_arena *a, ld_findings *out,
                                ld_error *err)
{
    for (size_t i = 0; i < out->n; i++) {
        ld_finding *f = &out->v[i];
        if (strcmp(f->kind, LD_K_HARNESS_EMPTY_ASSISTANT) || f->message != j || f->related_rid)
            continue;
        char buf[512], fw[96], ob[64] = "output not in the log";
        /* the count stale_assistant compares: blanks at either end aside */
        if (e->out) snprintf(ob, sizeof ob, "%zu bytes of output", trim((view){e->out, e->out_len}).n);
        snprintf(buf, sizeof buf, "%s; it stands for the answer of request %s (%s, %s)",
                 f->detail, e->rid, finish_words(e, fw, sizeof fw), ob);
        f->detail = ld_arena_memdup(a, buf, strlen(buf));
        f->related_rid = ld_arena_memdup(a, e->rid, strlen(e->rid));
        if (!f->detail || !f->related_rid)
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory completing a finding");
    }
    return LD_OK;
}

/* Message j of r against the requests whose whole array hashed to key. */
static ld_status check_message(ld_conv_tracker *t, const ld_request *r, int64_t j, uint64_t key,
                               ld_arena *a, ld_findings *out, ld_error *err)
{
    const ld_message *m = &r->messages[j];
    const entry *first = NULL, *first_known = NULL;
    verdict v, bad = {0};
    int n = 0, benign = 0;
    for (entry *e = t->ebuckets[key & (t->n_ebuckets - 1)]; e && n < MAX_CANDIDATES;
         e = e->next_bucket) {
        if (e->key != key) continue;
        n++;
        if (!first) first = e;
        if (!e->out) continue; /* its output is not in the log */
        compare(e, m, &v);
        if (v.benign) {
            benign = 1;
            first_known = e;
            break;
        }
        if (!first_known) first_known = e, bad = v;
    }
    if (!first) return LD_OK;
    t->st.matched++;
    if (!benign && first_known) LD_TRY(report(first_known, m, j, &bad, a, out, err));
    return annotate_empty(first_known ? first_known : first, j, a, out, err);
}

static int texts_kept(const ld_request *r)
{
    for (int64_t i = 0; i < r->n_messages; i++) {
        const ld_message *m = &r->messages[i];
        if ((m->content.flags & LD_TEXT_NOT_KEPT) || (m->n_tool_calls && !m->tool_calls)) return 0;
    }
    return 1;
}

/* Whether ld_conv_check looks at r at all. */
static int checkable(const ld_request *r)
{
    return !(r->flags & LD_REQ_ERROR) && r->n_messages > 0 && r->rid && texts_kept(r);
}

uint64_t ld_conv_key(const ld_request *r)
{
    if (!r || !checkable(r)) return 0;
    size_t n = (size_t)r->n_messages, u = 0;
    while (u < n && !(r->messages[u].role && !strcmp(r->messages[u].role, "user"))) u++;
    uint64_t h = 0x636f6e76ull;
    for (size_t k = 0; k < (u < n ? u + 1 : 1); k++) h = mix(h ^ message_hash(&r->messages[k])) + k;
    return h ? h : 1;
}

ld_status ld_conv_check(ld_conv_tracker *t, const ld_request *r, ld_arena *arena,
                        ld_findings *out, const char **out_conversation_id, ld_error *err)
{
    if (out_conversation_id) *out_conversation_id = NULL;
    if (!t || !r || !arena || !out) return LD_FAIL(err, LD_ERR_USAGE, 0, "ld_conv_check: NULL argument");
    if (!checkable(r)) return LD_OK;
    size_t n = (size_t)r->n_messages, u = 0;
    uint64_t *h = ld_arena_alloc(arena, (n + 1) * sizeof *h);
    if (!h) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory hashing %zu messages", n);
    h[0] = 0x636f6e76ull;
    for (size_t k = 0; k < n; k++) h[k + 1] = mix(h[k] ^ message_hash(&r->messages[k])) + k;
    while (u < n && !(r->messages[u].role && !strcmp(r->messages[u].role, "user"))) u++;
    conv *c = get_conv(t, h[u < n ? u + 1 : 1], r->rid);
    if (!c) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a conversation");
    if (out_conversation_id) {
        *out_conversation_id = ld_arena_memdup(arena, c->id, strlen(c->id));
        if (!*out_conversation_id) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    for (size_t j = 1; j + 1 < n; j++) /* the last message is a prefill, not history */
        if (r->messages[j].role && !strcmp(r->messages[j].role, "assistant"))
            LD_TRY(check_message(t, r, (int64_t)j, h[j], arena, out, err));
    ld_conv_op op;
    op_of(t, r, c->key, h[n], &op);
    if (t->o.journal && t->o.journal(t->o.journal_ctx, &op) != 0)
        return LD_FAIL(err, LD_ERR_IO, 0, "the conversation journal could not be written (request '%s')",
                       r->rid);
    return keep_op(t, c, &op, err);
}
