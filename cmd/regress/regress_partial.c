/* regress_partial.c - writing one share's partial result (see
 * regress_partial.h). */
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "parse/request/request_json.h"
#include "regress_journal.h"
#include "regress_partial.h"
#include "replay/analysis/finding_json.h"

void ld_cli_partial_head_free(ld_cli_partial_head *h)
{
    if (!h) return;
    free(h->inputs);
    free(h->conv_from);
    cJSON_Delete(h->settings);
    memset(h, 0, sizeof *h);
}

/* Adds v to o; *ok = 0 when v is NULL (out of memory). */
static void put(cJSON *o, const char *name, cJSON *v, int *ok)
{
    if (!v || !o || !cJSON_AddItemToObject(o, name, v)) {
        cJSON_Delete(v);
        *ok = 0;
    }
}

static cJSON *text(const char *s)
{
    return ld_json_bytes(s, s ? strlen(s) : 0);
}

/* {name: inner} on one line. */
static int print_wrapped(FILE *f, const char *name, cJSON *inner, int ok)
{
    cJSON *line = cJSON_CreateObject();
    if (!ok || !inner || !line || !cJSON_AddItemToObject(line, name, inner)) {
        cJSON_Delete(line);
        cJSON_Delete(inner);
        return -1;
    }
    return ld_json_print_line(f, line);
}

static cJSON *hex_json(uint64_t v)
{
    char s[17];
    snprintf(s, sizeof s, "%016llx", (unsigned long long)v);
    return cJSON_CreateString(s);
}

/* "conv": the share's digest, and those it started from. */
static cJSON *conv_json(const ld_cli_partial_head *h)
{
    cJSON *o = cJSON_CreateObject(), *from = h->conv_preloaded ? cJSON_CreateArray() : NULL;
    int ok = 1;
    put(o, "digest", hex_json(h->conv_digest), &ok);
    for (long i = 0; from && i < h->index; i++)
        if (!cJSON_AddItemToArray(from, hex_json(h->conv_from[i]))) ok = 0;
    if (h->conv_preloaded) put(o, "from", from, &ok);
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

int ld_cli_partial_write_head(const ld_cli_partial_head *h, FILE *f)
{
    cJSON *o = cJSON_CreateObject(), *shard = cJSON_CreateObject(), *share = cJSON_CreateObject();
    cJSON *inputs = cJSON_CreateArray();
    int ok = 1;
    put(shard, "index", ld_json_int((int64_t)(h->index)), &ok);
    put(shard, "count", ld_json_int((int64_t)(h->count)), &ok);
    put(share, "first", ld_json_int((int64_t)(h->first)), &ok);
    put(share, "end", ld_json_int((int64_t)(h->end)), &ok);
    for (size_t i = 0; ok && inputs && i < h->n_inputs; i++)
        if (!cJSON_AddItemToArray(inputs, text(h->inputs[i]))) ok = 0;
    put(o, "format", cJSON_CreateString(h->journal ? LD_JOURNAL_FORMAT : LD_PARTIAL_FORMAT), &ok);
    put(o, "version", cJSON_CreateNumber(h->journal ? LD_JOURNAL_VERSION : LD_PARTIAL_VERSION), &ok);
    put(o, "shard", shard, &ok);
    put(o, "share", share, &ok);
    put(o, "inputs", inputs, &ok);
    put(o, "settings", cJSON_Duplicate(h->settings, 1), &ok);
    if (!h->journal) put(o, "conv", conv_json(h), &ok);
    if (!ok) { cJSON_Delete(o); return -1; }
    return ld_json_print_line(f, o);
}

static int write_member(const ld_cli_regress_member *m, size_t base, FILE *f)
{
    cJSON *o = cJSON_CreateObject();
    int ok = 1;
    put(o, "input", ld_json_int((int64_t)(m->input + base)), &ok);
    put(o, "name", text(m->name), &ok);
    put(o, "label", text(m->label), &ok);
    put(o, "lines", ld_json_int((int64_t)(m->lines)), &ok);
    put(o, "request_lines", ld_json_int((int64_t)(m->request_lines)), &ok);
    put(o, "failed", cJSON_CreateBool(m->failed), &ok);
    return print_wrapped(f, "member", o, ok);
}

static int write_problem(const ld_cli_regress_problem *p, size_t base, FILE *f)
{
    cJSON *o = cJSON_CreateObject();
    int ok = 1;
    put(o, "input", ld_json_int((int64_t)(p->input + base)), &ok);
    put(o, "name", text(p->name), &ok);
    put(o, "msg", text(p->msg), &ok);
    return print_wrapped(f, "problem", o, ok);
}

static cJSON *kinds(const char **k, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(k[i]))) { cJSON_Delete(a); return NULL; }
    return a;
}

/* The record and findings of a request that is not ok. */
static void put_evidence(cJSON *o, const ld_cli_regress_item *it, int *ok)
{
    cJSON *findings = cJSON_CreateArray();
    for (size_t k = 0; findings && k < it->v->findings.n; k++)
        if (!cJSON_AddItemToArray(findings, ld_finding_json(&it->v->findings.v[k]))) *ok = 0;
    put(o, "findings", findings, ok);
    put(o, "request", ld_request_json(it->req), ok);
}

static int write_item(const ld_cli_regress_item *it, const ld_baseline_entry *e, size_t base, FILE *f)
{
    char hash[17];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)e->hash);
    cJSON *o = cJSON_CreateObject();
    int ok = 1;
    /* what most requests hold is left out (no rid, a key that is the rid, no
     * conversation, no kinds): fewer values for a merge of millions to read */
    put(o, "input", ld_json_int((int64_t)(it->input + base)), &ok);
    if (it->rid) put(o, "rid", text(it->rid), &ok);
    if (!it->rid || strcmp(it->key, it->rid)) put(o, "key", text(it->key), &ok);
    put(o, "label", text(it->label), &ok);
    put(o, "where", text(it->where), &ok);
    put(o, "verdict", cJSON_CreateString(it->verdict), &ok);
    if (it->conversation) put(o, "conversation", text(it->conversation), &ok);
    if (it->conv_key) {
        char key[17];
        snprintf(key, sizeof key, "%016llx", (unsigned long long)it->conv_key);
        put(o, "conv_key", cJSON_CreateString(key), &ok);
    }
    put(o, "hash", cJSON_CreateString(hash), &ok);
    if (e->n_errors) put(o, "errors", kinds(e->errors, e->n_errors), &ok);
    if (e->n_info) put(o, "info", kinds(e->info, e->n_info), &ok);
    if (it->v && it->req) put_evidence(o, it, &ok);
    return print_wrapped(f, "item", o, ok);
}

static int write_end(const ld_cli_regress_run *run, FILE *f)
{
    const ld_conv_stats *c = &run->conv;
    const char *names[] = { "items", "members", "problems", "io_errors", "capture_problems",
                            "over_limit", "conversations", "entries", "bytes", "peak_bytes",
                            "evicted", "matched" };
    uint64_t values[] = { run->n_items, run->n_members, run->n_problems, run->io_errors,
                          run->capture_problems, run->over_limit, c->conversations, c->entries,
                          c->bytes, c->peak_bytes, c->evicted, c->matched };
    cJSON *o = cJSON_CreateObject();
    int ok = 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        put(o, names[i], ld_json_int((int64_t)(values[i])), &ok);
    return print_wrapped(f, "end", o, ok);
}

int ld_cli_regress_write_partial(const ld_cli_regress_run *run, const ld_cli_partial_head *h, FILE *f)
{
    if (ld_cli_partial_write_head(h, f) != 0) return -1;
    for (size_t i = 0; i < run->n_members; i++)
        if (write_member(&run->members[i], h->first, f) != 0) return -1;
    for (size_t i = 0; i < run->n_problems; i++)
        if (write_problem(&run->problems[i], h->first, f) != 0) return -1;
    for (size_t i = 0; i < run->n_items; i++) {
        const ld_baseline_entry *e = &run->cur.v[i];
        if (e->tag != i) return -1; /* the entries must still be in judging order */
        if (write_item(&run->items[i], e, h->first, f) != 0) return -1;
    }
    return write_end(run, f);
}
