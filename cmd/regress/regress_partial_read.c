/* regress_partial_read.c - reading a partial back for `logdiff regress
 * --merge` (see regress_partial.h).  The file comes from another machine:
 * every field is checked, and an error names the line and its byte
 * offset. */
#include <stdlib.h>
#include <string.h>

#include "parse/request/request_json.h"
#include "regress_journal.h"
#include "regress_lines.h"
#include "regress_partial.h"
#include "replay/analysis/finding_json.h"
#include "replay/analysis/jsonline.h"

static ld_status syntax(ld_error *e, const char *what, const char *name)
{
    return LD_FAIL(e, LD_ERR_SYNTAX, 0, "%s%s%s", what, name ? ": " : "", name ? name : "");
}

static int whole(const cJSON *j, double max, double *out)
{
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0 && j->valuedouble <= max) ||
        j->valuedouble != (double)(uint64_t)j->valuedouble)
        return -1;
    *out = j->valuedouble;
    return 0;
}

static const cJSON *get(const cJSON *o, const char *name)
{
    return cJSON_GetObjectItemCaseSensitive(o, name);
}

/* The members of object o named in names[0..n) into slots[] (NULL when
 * absent), in one pass: a partial's writer puts them in this order, so
 * each is found at the first comparison (any order is read). */
static void collect(const cJSON *o, const char *const *names, size_t n, const cJSON **slots)
{
    size_t next = 0;
    for (size_t i = 0; i < n; i++) slots[i] = NULL;
    for (const cJSON *c = o ? o->child : NULL; c; c = c->next) {
        if (!c->string) continue;
        size_t k = next < n && !strcmp(c->string, names[next]) ? next : n;
        for (size_t i = 0; k == n && i < n; i++)
            if (!strcmp(c->string, names[i])) k = i;
        if (k < n && !slots[k]) slots[k] = c;
        next = k + 1;
    }
}

/* ---------------------------------------------------------------- head */

/* The input names: texts of ld_json_bytes (a path need not be UTF-8),
 * packed with their array into one malloc'd block. */
static ld_status pack_inputs(const cJSON *a, ld_arena *tmp, ld_cli_partial_head *h, ld_error *e)
{
    size_t n = (size_t)cJSON_GetArraySize(a), bytes = 0, i = 0;
    const char **names = ld_arena_alloc(tmp, (n ? n : 1) * sizeof *names);
    if (!names) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory for the inputs");
    for (const cJSON *s = a->child; s; s = s->next, i++) {
        size_t len;
        if (ld_json_bytes_get(s, tmp, &names[i], &len) != 0 || !names[i] || strlen(names[i]) != len)
            return syntax(e, "an input is not a text", "inputs");
        bytes += len + 1;
    }
    h->inputs = malloc(n * sizeof *h->inputs + bytes + 1);
    if (!h->inputs) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory for the inputs");
    char *p = (char *)(h->inputs + n);
    for (i = 0; i < n; i++) {
        size_t k = strlen(names[i]) + 1;
        h->inputs[i] = memcpy(p, names[i], k);
        p += k;
    }
    h->n_inputs = n;
    return LD_OK;
}

static ld_status head_inputs(const cJSON *a, ld_cli_partial_head *h, ld_error *e)
{
    if (!cJSON_IsArray(a)) return syntax(e, "not an array", "inputs");
    ld_arena tmp;
    ld_arena_init(&tmp, 0);
    ld_status st = pack_inputs(a, &tmp, h, e);
    ld_arena_release(&tmp);
    return st;
}

static ld_status hex_value(const cJSON *v, const char *name, uint64_t *out, ld_error *e)
{
    char *end = NULL;
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 16 || v->valuestring[0] == '-' ||
        v->valuestring[0] == '+')
        return syntax(e, "not 16 hex digits", name);
    *out = strtoull(v->valuestring, &end, 16);
    return *end ? syntax(e, "not 16 hex digits", name) : LD_OK;
}

/* "conv": {"digest", "from"}; h->index is read. */
static ld_status head_conv(const cJSON *c, ld_cli_partial_head *h, ld_error *e)
{
    if (!cJSON_IsObject(c)) return syntax(e, "not an object", "conv");
    LD_TRY(hex_value(get(c, "digest"), "conv.digest", &h->conv_digest, e));
    const cJSON *from = get(c, "from");
    if (!from) return LD_OK;
    if (!cJSON_IsArray(from) || cJSON_GetArraySize(from) != h->index)
        return syntax(e, "not the digests of the shares before this one", "conv.from");
    h->conv_preloaded = 1;
    h->conv_from = malloc((h->index ? (size_t)h->index : 1) * sizeof *h->conv_from);
    if (!h->conv_from) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory for the digests");
    size_t i = 0;
    for (const cJSON *d = from->child; d; d = d->next) LD_TRY(hex_value(d, "conv.from", &h->conv_from[i++], e));
    return LD_OK;
}

static ld_status head_fields(const cJSON *o, ld_cli_partial_head *h, ld_error *e)
{
    const cJSON *format = get(o, "format"), *version = get(o, "version");
    h->journal = cJSON_IsString(format) && !strcmp(format->valuestring, LD_JOURNAL_FORMAT);
    if (!h->journal && (!cJSON_IsString(format) || strcmp(format->valuestring, LD_PARTIAL_FORMAT)))
        return syntax(e, "not a partial of logdiff regress (no \"format\": \"" LD_PARTIAL_FORMAT "\")", NULL);
    int want = h->journal ? LD_JOURNAL_VERSION : LD_PARTIAL_VERSION;
    if (!cJSON_IsNumber(version) || version->valuedouble != want)
        return LD_FAIL(e, LD_ERR_UNSUPPORTED, 0, "a %s of format version %g; this logdiff reads version %d",
                       h->journal ? "conversation journal" : "partial",
                       cJSON_IsNumber(version) ? version->valuedouble : -1.0, want);
    const cJSON *shard = get(o, "shard"), *share = get(o, "share");
    double index, count, first, end;
    if (whole(get(shard, "index"), 1e6, &index) || whole(get(shard, "count"), 1e6, &count) ||
        index >= count)
        return syntax(e, "not a share index below its count", "shard");
    if (whole(get(share, "first"), 1e12, &first) || whole(get(share, "end"), 1e12, &end) || first > end)
        return syntax(e, "not a range of inputs", "share");
    LD_TRY(head_inputs(get(o, "inputs"), h, e));
    if (end > (double)h->n_inputs) return syntax(e, "past the inputs", "share");
    if (!cJSON_IsObject(get(o, "settings"))) return syntax(e, "not an object", "settings");
    h->index = (long)index;
    h->count = (long)count;
    h->first = (size_t)first;
    h->end = (size_t)end;
    h->settings = cJSON_Duplicate(get(o, "settings"), 1);
    if (!h->settings) return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory for the settings");
    return h->journal ? LD_OK : head_conv(get(o, "conv"), h, e);
}

ld_status ld_cli_partial_read_head(const char *text, size_t len, ld_cli_partial_head *h, ld_error *e)
{
    memset(h, 0, sizeof *h);
    ld_cli_lines lr = { text, len, 0, 0, 0, NULL, 0 };
    cJSON *o = NULL;
    ld_status st = ld_cli_lines_next(&lr, &o, e);
    if (st != LD_OK || !o)
        st = syntax(e, o || st == LD_OK ? "an empty file, not a partial"
                                        : "not a partial of logdiff regress: its first line is not a JSON object",
                    NULL);
    if (st == LD_OK) st = head_fields(o, h, e);
    cJSON_Delete(o);
    if (st != LD_OK) {
        ld_cli_partial_head_free(h);
        e->line = lr.line ? lr.line : 1;
        e->offset = 0;
    }
    return st;
}

/* ---------------------------------------------------------------- body */

typedef struct body {
    ld_cli_regress_run *run;
    const ld_cli_partial_head *h;
    ld_error *e;
} body;

/* A text value as a C string in run->strings (NULL for null when allowed). */
static ld_status get_str(body *b, const cJSON *v, const char *name, int nullable, const char **out)
{
    size_t len;
    if (ld_json_bytes_get(v, &b->run->strings, out, &len) != 0 || (!*out && !nullable) ||
        (*out && strlen(*out) != len))
        return syntax(b->e, nullable ? "not a text or null" : "not a text", name);
    return LD_OK;
}

static ld_status get_input(body *b, const cJSON *v, size_t *input)
{
    double d;
    if (whole(v, 1e12, &d) || d < (double)b->h->first || d >= (double)b->h->end)
        return syntax(b->e, "not one of the share's inputs", "input");
    *input = (size_t)d;
    return LD_OK;
}

static ld_status read_member(body *b, const cJSON *o)
{
    static const char *const names[] = { "input", "name", "label", "lines", "request_lines", "failed" };
    const cJSON *f[6];
    collect(o, names, 6, f);
    ld_cli_regress_member *m = ld_cli_regress_new_member(b->run);
    if (!m) return LD_FAIL(b->e, LD_ERR_NOMEM, 0, "out of memory listing members");
    double lines, req;
    LD_TRY(get_input(b, f[0], &m->input));
    LD_TRY(get_str(b, f[1], "name", 0, &m->name));
    LD_TRY(get_str(b, f[2], "label", 0, &m->label));
    if (whole(f[3], 1e18, &lines) || whole(f[4], 1e18, &req))
        return syntax(b->e, "not counts", "lines, request_lines");
    if (!cJSON_IsBool(f[5])) return syntax(b->e, "not true or false", "failed");
    m->lines = (uint64_t)lines;
    m->request_lines = (uint64_t)req;
    m->failed = cJSON_IsTrue(f[5]);
    return LD_OK;
}

static ld_status read_problem(body *b, const cJSON *o)
{
    static const char *const names[] = { "input", "name", "msg" };
    const cJSON *f[3];
    collect(o, names, 3, f);
    ld_cli_regress_problem *p = ld_cli_regress_new_problem(b->run);
    if (!p) return LD_FAIL(b->e, LD_ERR_NOMEM, 0, "out of memory listing problems");
    LD_TRY(get_input(b, f[0], &p->input));
    LD_TRY(get_str(b, f[1], "name", 0, &p->name));
    return get_str(b, f[2], "msg", 0, &p->msg);
}

enum { MAX_KINDS = 64 };

/* The baseline's kinds of a request ("errors" and "info": arrays[0], [1])
 * as findings of those kinds, which is all ld_baseline_add reads of them. */
static ld_status kinds_as_findings(body *b, const cJSON *const arrays[2], ld_finding *v, ld_findings *out)
{
    const char *names[] = { "errors", "info" };
    out->v = v;
    out->n = out->cap = 0;
    for (int s = 0; s < 2; s++) {
        const cJSON *a = arrays[s];
        if (!a) continue; /* none */
        if (!cJSON_IsArray(a)) return syntax(b->e, "not an array of kinds", names[s]);
        for (const cJSON *k = a->child; k; k = k->next) {
            const char *kind = cJSON_IsString(k) ? ld_kind_static(k->valuestring) : NULL;
            if (!kind) return syntax(b->e, "not a kind this logdiff knows", names[s]);
            if (out->n == MAX_KINDS) return syntax(b->e, "too many kinds", names[s]);
            memset(&v[out->n], 0, sizeof v[out->n]);
            v[out->n].kind = kind;
            v[out->n++].severity = s == 0 ? LD_SEV_ERROR : LD_SEV_INFO;
        }
    }
    return LD_OK;
}

static ld_status get_hash(body *b, const cJSON *h, const char *name, uint64_t *out)
{
    return hex_value(h, name, out, b->e);
}

/* A request that is not ok: its findings and record, kept for the reports,
 * and the alignment computed again from the record. */
static ld_status read_evidence(body *b, const cJSON *findings, const cJSON *request, ld_cli_regress_item *it)
{
    if (!cJSON_IsArray(findings) || !request)
        return syntax(b->e, "a request that is not ok without its findings and record", "findings, request");
    ld_arena *a = malloc(sizeof *a);
    ld_verdict *v = NULL;
    if (a) ld_arena_init(a, 0);
    if (!a || !(v = ld_arena_alloc(a, sizeof *v))) {
        if (a) { ld_arena_release(a); free(a); }
        return LD_FAIL(b->e, LD_ERR_NOMEM, 0, "out of memory for a verdict");
    }
    memset(v, 0, sizeof *v);
    it->arena = a; /* from here on the item owns it (ld_cli_regress_run_free) */
    v->verdict = it->verdict;
    v->conversation = it->conversation;
    for (const cJSON *f = findings->child; f; f = f->next) LD_TRY(ld_finding_from_json(f, a, &v->findings, b->e));
    LD_TRY(ld_request_from_json(request, &it->req, b->e));
    it->v = v;
    return ld_differ_align_only(it->req, a, v, b->e);
}

enum { F_INPUT, F_RID, F_KEY, F_LABEL, F_WHERE, F_VERDICT, F_CONV, F_CONV_KEY, F_HASH, F_ERRORS, F_INFO,
       F_FINDINGS, F_REQUEST, F_COUNT };

static ld_status read_item(body *b, const cJSON *o)
{
    static const char *const names[F_COUNT] = { "input", "rid", "key", "label", "where", "verdict",
                                                "conversation", "conv_key", "hash", "errors", "info", "findings",
                                                "request" };
    const cJSON *f[F_COUNT];
    collect(o, names, F_COUNT, f);
    ld_cli_regress_run *run = b->run;
    ld_cli_regress_item *it = ld_cli_regress_new_item(run);
    if (!it) return LD_FAIL(b->e, LD_ERR_NOMEM, 0, "out of memory for the verdicts");
    it->verdict = cJSON_IsString(f[F_VERDICT]) ? ld_verdict_static(f[F_VERDICT]->valuestring) : NULL;
    if (!it->verdict) return syntax(b->e, "not a verdict this logdiff knows", "verdict");
    LD_TRY(get_input(b, f[F_INPUT], &it->input));
    LD_TRY(get_str(b, f[F_RID], "rid", 1, &it->rid));
    if (f[F_KEY] || !it->rid) LD_TRY(get_str(b, f[F_KEY], "key", 0, &it->key));
    else it->key = it->rid; /* left out: the rid */
    LD_TRY(get_str(b, f[F_LABEL], "label", 0, &it->label));
    LD_TRY(get_str(b, f[F_WHERE], "where", 0, &it->where));
    LD_TRY(get_str(b, f[F_CONV], "conversation", 1, &it->conversation));
    uint64_t hash = 0;
    ld_finding kinds[MAX_KINDS];
    ld_findings list;
    LD_TRY(get_hash(b, f[F_HASH], "hash", &hash));
    if (f[F_CONV_KEY]) LD_TRY(get_hash(b, f[F_CONV_KEY], "conv_key", &it->conv_key));
    LD_TRY(kinds_as_findings(b, f + F_ERRORS, kinds, &list));
    LD_TRY(ld_baseline_add_kept(&run->cur, it->rid, it->key, it->verdict, &list, hash, run->n_items - 1, b->e));
    return strcmp(it->verdict, "ok") ? read_evidence(b, f[F_FINDINGS], f[F_REQUEST], it) : LD_OK;
}

/* ------------------------------------------------ an ok item, in place */

/* A value taken by ld_jl_object as a text of get_str: NULL for null or
 * absent (when nullable); 0 when get_str would not read it so. */
static int flat_text(const ld_jl_value *v, int nullable)
{
    return v->type == LD_JL_STRING || (nullable && (v->type == LD_JL_ABSENT || v->type == LD_JL_NULL));
}

static ld_status keep_text(body *b, const ld_jl_value *v, const char *name, const char **out)
{
    *out = NULL;
    if (v->type != LD_JL_STRING) return LD_OK;
    *out = ld_arena_memdup(&b->run->strings, v->s, v->len);
    return *out ? LD_OK : syntax(b->e, "not a text", name); /* as get_str says it */
}

/* Kinds of a STRINGS value (or none) into v[*n...]; 0 when one is not a
 * kind this logdiff knows or there are too many (read_item's errors). */
static int flat_kinds(const ld_jl_value *a, ld_severity sev, ld_finding *v, size_t *n)
{
    if (a->type == LD_JL_ABSENT) return 1;
    if (a->type != LD_JL_STRINGS) return 0;
    const char *s;
    size_t len, pos = 0;
    char name[64];
    while (ld_jl_next_string(a, &pos, &s, &len)) {
        if (len >= sizeof name || *n == MAX_KINDS) return 0;
        memcpy(name, s, len);
        name[len] = '\0';
        const char *kind = ld_kind_static(name);
        if (!kind) return 0;
        memset(&v[*n], 0, sizeof v[*n]);
        v[*n].kind = kind;
        v[(*n)++].severity = sev;
    }
    return 1;
}

/* An ok item line's values, checked. */
typedef struct flat_item {
    ld_jl_value f[F_COUNT];
    uint64_t hash, conv_key;
    ld_finding kinds[MAX_KINDS];
    ld_findings list;
} flat_item;

/* Whether the item line's values in t->f are an ok request's that
 * read_item reads without an error: the input the share's, a key (given
 * or the rid), the texts texts, the hashes hex, known kinds. */
static int flat_item_checked(const body *b, flat_item *t)
{
    const ld_jl_value *f = t->f;
    const ld_jl_value *v = &f[F_VERDICT], *in = &f[F_INPUT];
    if (v->type != LD_JL_STRING || v->len != 2 || memcmp(v->s, "ok", 2)) return 0; /* others have their evidence */
    if (in->type != LD_JL_NUMBER || in->num > (uint64_t)1e12 || in->num < b->h->first || in->num >= b->h->end)
        return 0;
    int rid = f[F_RID].type == LD_JL_STRING;
    if (!flat_text(&f[F_RID], 1) || !flat_text(&f[F_LABEL], 0) || !flat_text(&f[F_WHERE], 0) ||
        !flat_text(&f[F_CONV], 1) || !(f[F_KEY].type == LD_JL_STRING || (f[F_KEY].type == LD_JL_ABSENT && rid)))
        return 0;
    t->conv_key = 0;
    if (f[F_HASH].type != LD_JL_STRING || !ld_jl_hex16(f[F_HASH].s, f[F_HASH].len, 0, &t->hash)) return 0;
    if (f[F_CONV_KEY].type != LD_JL_ABSENT &&
        (f[F_CONV_KEY].type != LD_JL_STRING || !ld_jl_hex16(f[F_CONV_KEY].s, f[F_CONV_KEY].len, 0, &t->conv_key)))
        return 0;
    t->list = (ld_findings){ t->kinds, 0, 0 };
    return flat_kinds(&f[F_ERRORS], LD_SEV_ERROR, t->kinds, &t->list.n) &&
           flat_kinds(&f[F_INFO], LD_SEV_INFO, t->kinds, &t->list.n);
}

/* A checked ok item kept as read_item keeps it. */
static ld_status flat_item_keep(body *b, const flat_item *t)
{
    ld_cli_regress_run *run = b->run;
    const ld_jl_value *f = t->f;
    ld_cli_regress_item *it = ld_cli_regress_new_item(run);
    if (!it) return LD_FAIL(b->e, LD_ERR_NOMEM, 0, "out of memory for the verdicts");
    it->verdict = ld_verdict_static("ok");
    it->input = (size_t)f[F_INPUT].num;
    it->conv_key = t->conv_key;
    LD_TRY(keep_text(b, &f[F_RID], "rid", &it->rid));
    if (f[F_KEY].type == LD_JL_STRING) LD_TRY(keep_text(b, &f[F_KEY], "key", &it->key));
    else it->key = it->rid; /* left out: the rid */
    const char *label = run->n_items > 1 ? run->items[run->n_items - 2].label : NULL;
    if (label && strlen(label) == f[F_LABEL].len && !memcmp(label, f[F_LABEL].s, f[F_LABEL].len))
        it->label = label; /* a member's requests: one copy of its label */
    else
        LD_TRY(keep_text(b, &f[F_LABEL], "label", &it->label));
    LD_TRY(keep_text(b, &f[F_WHERE], "where", &it->where));
    LD_TRY(keep_text(b, &f[F_CONV], "conversation", &it->conversation));
    return ld_baseline_add_kept(&run->cur, it->rid, it->key, it->verdict, &t->list, t->hash, run->n_items - 1,
                                b->e);
}

/* An item line of an ok request whose values ld_jl_object takes (all but
 * a few: their texts have no escapes), read in place; 0 (nothing done)
 * for any other line, which read_item reads.  Checked whole before
 * anything is kept, so a line reads the same either way (*st: how
 * keeping it went). */
static int item_in_place(body *b, const char *line, size_t n, ld_status *st)
{
    static const char prefix[] = "{\"item\":";
    static const ld_jl_name names[F_COUNT] = {
        LD_JL_NAME("input"), LD_JL_NAME("rid"), LD_JL_NAME("key"), LD_JL_NAME("label"), LD_JL_NAME("where"),
        LD_JL_NAME("verdict"), LD_JL_NAME("conversation"), LD_JL_NAME("conv_key"), LD_JL_NAME("hash"),
        LD_JL_NAME("errors"), LD_JL_NAME("info"), LD_JL_NAME("findings"), LD_JL_NAME("request") };
    flat_item t;
    if (n < sizeof prefix || memcmp(line, prefix, sizeof prefix - 1)) return 0;
    const char *after = ld_jl_object(line + sizeof prefix - 1, line + n, names, F_COUNT, t.f);
    if (!after || after + 1 != line + n || *after != '}' || !flat_item_checked(b, &t)) return 0;
    *st = flat_item_keep(b, &t);
    return 1;
}

/* The "end" line: the counts the writer wrote, checked against what was
 * read, and the run's counters. */
static ld_status read_end(body *b, const cJSON *o, const size_t read[3])
{
    const char *names[] = { "items", "members", "problems", "io_errors", "capture_problems",
                            "over_limit", "conversations", "entries", "bytes", "peak_bytes",
                            "evicted", "matched" };
    uint64_t v[12];
    for (size_t i = 0; i < 12; i++) {
        double d;
        if (whole(get(o, names[i]), 1e18, &d)) return syntax(b->e, "not a count", names[i]);
        v[i] = (uint64_t)d;
    }
    if (v[0] != read[0] || v[1] != read[1] || v[2] != read[2])
        return LD_FAIL(b->e, LD_ERR_MISMATCH, 0, "the file holds %zu items, %zu members and %zu problems; "
                       "its end line says %llu, %llu and %llu", read[0], read[1], read[2],
                       (unsigned long long)v[0], (unsigned long long)v[1], (unsigned long long)v[2]);
    ld_cli_regress_run *run = b->run;
    run->io_errors += v[3];
    run->capture_problems += v[4];
    run->over_limit += v[5];
    ld_conv_stats *c = &run->conv;
    c->conversations += v[6];
    c->entries += v[7];
    c->bytes += v[8];
    if (v[9] > c->peak_bytes) c->peak_bytes = v[9];
    c->evicted += v[10];
    c->matched += v[11];
    return LD_OK;
}

/* One line: {"member"|"problem"|"item"|"end": {...}}.  *ended set by "end". */
static ld_status read_body_line(body *b, const cJSON *line, size_t read[3], int *ended)
{
    const cJSON *o = line && cJSON_IsObject(line) && line->child && !line->child->next ? line->child : NULL;
    if (!o || !cJSON_IsObject(o)) return syntax(b->e, "not an object of one member", NULL);
    if (*ended) return syntax(b->e, "a line after the end line", NULL);
    static const char *const kinds[] = { "item", "member", "problem" };
    static ld_status (*const readers[])(body *, const cJSON *) = { read_item, read_member, read_problem };
    for (int k = 0; k < 3; k++)
        if (!strcmp(o->string, kinds[k])) {
            read[k]++;
            return readers[k](b, o);
        }
    if (strcmp(o->string, "end")) return syntax(b->e, "an unknown line", o->string);
    *ended = 1;
    return read_end(b, o, read);
}

ld_status ld_cli_partial_read_body(const char *text, size_t len, const ld_cli_partial_head *h,
                                   ld_cli_regress_run *run, ld_error *e)
{
    ld_cli_lines lr = { text, len, 0, 0, 0, NULL, 0 };
    body b = { run, h, e };
    size_t read[3] = { 0, 0, 0 };
    int ended = 0, more = 1;
    ld_status st = ld_cli_lines_next_raw(&lr, &more, e); /* the head, read before */
    while (st == LD_OK && more) {
        st = ld_cli_lines_next_raw(&lr, &more, e);
        if (st != LD_OK || !more) break;
        if (!ended && item_in_place(&b, lr.raw, lr.raw_len, &st)) { /* most lines */
            read[0]++;
            continue;
        }
        cJSON *line = cJSON_ParseWithLength(lr.raw, lr.raw_len);
        st = line ? read_body_line(&b, line, read, &ended) : LD_FAIL(e, LD_ERR_SYNTAX, 0, "not a JSON line");
        cJSON_Delete(line);
    }
    if (st == LD_OK && !ended)
        st = LD_FAIL(e, LD_ERR_TRUNCATED, 0, "the file ends before its end line: it was cut");
    if (st != LD_OK && lr.line) {
        e->line = lr.line;
        e->offset = lr.line_offset;
    }
    return st;
}
