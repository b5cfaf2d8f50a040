/* logread.c - see logread.h. */
#include "logread.h"
#include "pd.h"

#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "progress.h"

enum { LD_LOGREAD_MAX_OPEN = 1 << 16 };

typedef struct read_ctx {
    ld_cli_logread *lr;
    ld_cli_progress bar;
} read_ctx;

cJSON *ld_cli_error_json(const char *kind, const ld_error *e)
{
    cJSON *row = cJSON_CreateObject();
    cJSON *err = cJSON_CreateObject();
    if (!row || !err) { cJSON_Delete(row); cJSON_Delete(err); return NULL; }
    cJSON_AddItemToObject(row, "rid", cJSON_CreateNull());
    cJSON_AddItemToObject(row, "file", ld_json_cstr(e->path));
    cJSON_AddItemToObject(row, "line", e->line ? ld_json_int((int64_t)e->line) : cJSON_CreateNull());
    cJSON_AddItemToObject(err, "kind", cJSON_CreateString(kind));
    cJSON_AddItemToObject(err, "file", ld_json_cstr(e->path));
    cJSON_AddItemToObject(err, "line", e->line ? ld_json_int((int64_t)e->line) : cJSON_CreateNull());
    cJSON_AddItemToObject(err, "offset", ld_json_int((int64_t)e->offset));
    cJSON_AddItemToObject(err, "code", cJSON_CreateString(ld_strerror(e->code)));
    cJSON_AddItemToObject(err, "reason", ld_json_cstr(e->msg));
    cJSON_AddItemToObject(row, "error", err);
    return row;
}

const char *ld_cli_error_origin(const ld_error *e, char *buf, size_t cap)
{
    const char *debug = getenv("LOGDIFF_DEBUG");
    buf[0] = 0;
    if (debug && *debug && strcmp(debug, "0") && e->origin_file)
        snprintf(buf, cap, " [%s:%d]", e->origin_file, e->origin_line);
    return buf;
}

static void print_problem(FILE *f, const ld_error *e)
{
    char at[300];
    ld_cli_error_origin(e, at, sizeof at);
    if (e->line)
        fprintf(f, "logdiff: %s:%llu: byte %llu: %s%s\n", e->path ? e->path : "-",
                (unsigned long long)e->line, (unsigned long long)e->offset, e->msg, at);
    else if (e->offset)
        fprintf(f, "logdiff: %s: byte %llu: %s%s\n", e->path ? e->path : "-",
                (unsigned long long)e->offset, e->msg, at);
    else /* failed before any byte was read: opening */
        fprintf(f, "logdiff: %s: %s%s\n", e->path ? e->path : "-", e->msg, at);
}

void ld_cli_logread_problem(ld_cli_logread *lr, ld_problem_kind kind, const ld_error *e)
{
    if (kind == LD_PROBLEM_LINE && lr->line_errors_as_records) return;
    static const char *const kinds[] = {"log.io_error", "log.parse_error", "log.capture_error"};
    if (lr->json) ld_json_print_line(lr->cli->out, ld_cli_error_json(kinds[kind], e));
    if (!lr->json || kind != LD_PROBLEM_LINE) print_problem(lr->cli->err, e);
}

static void on_problem(void *vctx, ld_problem_kind kind, const ld_error *e)
{
    read_ctx *c = vctx;
    if (kind == LD_PROBLEM_LINE && c->lr->line_errors_as_records) return;
    ld_cli_progress_done(&c->bar);
    ld_cli_logread_problem(c->lr, kind, e);
}

static void on_progress(void *vctx, uint64_t done, uint64_t total, const char *member)
{
    read_ctx *c = vctx;
    (void)total;
    ld_cli_progress_update(&c->bar, done, member);
}

static void on_walk_note(void *ctx, const char *msg)
{
    fprintf((FILE *)ctx, "logdiff: note: %s\n", msg);
}

int ld_cli_logread_run(ld_cli_logread *lr, char **inputs, int n,
                   const ld_pair_options *opts, ld_pair_emit_fn emit, void *ctx)
{
    char **paths = NULL;
    size_t n_paths = 0;
    ld_error e;
    ld_error_clear(&e);
    ld_logset_options lo = { LD_CAPTURE_AUTO, 0 };
    if (ld_cli_capture_options(lr->cli, &lr->capture, &lo) != 0) return LD_EXIT_TROUBLE;
    if (ld_logset_expand_noted((const char *const *)inputs, (size_t)n, on_walk_note, lr->cli->err,
                               &paths, &n_paths, &e) != LD_OK) {
        fprintf(lr->cli->err, "logdiff: %s\n", e.msg);
        return LD_EXIT_TROUBLE;
    }
    read_ctx c = { lr, { 0 } };
    ld_cli_progress_init(&c.bar, lr->cli->err, lr->cli->err_is_tty,
                     ld_logset_total_bytes(paths, n_paths), 64u << 20);
    /* Memory is bounded by open requests; a log whose requests never finish
     * (vLLM without --enable-log-outputs, SGLang at EXCEEDED_MS) would keep
     * them all, so the oldest is reported unpaired past this many. */
    ld_pair_options o = *opts;
    if (!o.max_open) o.max_open = LD_LOGREAD_MAX_OPEN;
    ld_pairer *p = NULL;
    if (ld_pairer_new(&o, emit, ctx, &p, &e) != LD_OK) {
        fprintf(lr->cli->err, "logdiff: %s\n", e.msg);
        ld_logset_free_paths(paths, n_paths);
        return LD_EXIT_TROUBLE;
    }
    ld_logset_hooks hooks = { on_problem, on_progress, &c };
    ld_status st = ld_logset_run(paths, n_paths, p, &hooks, &lo, &lr->stats, &e);
    ld_cli_progress_done(&c.bar);
    lr->pair_stats = *ld_pairer_stats(p);
    ld_pairer_free(p);
    ld_logset_free_paths(paths, n_paths);
    if (st != LD_OK) {
        fprintf(lr->cli->err, "logdiff: %s\n", e.msg);
        return LD_EXIT_TROUBLE;
    }
    return 0;
}

const ld_source *ld_cli_request_first_part(const ld_request *r)
{
    for (int p = 0; p < LD_PART_COUNT; p++)
        if (r->src[p].line) return &r->src[p];
    return NULL;
}

const char *ld_cli_request_where(const ld_request *r, char *buf, size_t cap,
                             const ld_source **out_src)
{
    const ld_source *best = ld_cli_request_first_part(r);
    if (out_src) *out_src = best;
    if (r->flags & LD_REQ_ERROR)
        snprintf(buf, cap, "%s:%llu", r->error.path ? r->error.path : "-",
                 (unsigned long long)r->error.line);
    else if (best)
        snprintf(buf, cap, "%s:%llu", best->member ? best->member : "-",
                 (unsigned long long)best->line);
    else
        snprintf(buf, cap, "-");
    return buf;
}

const char *ld_cli_request_flag_words(const ld_request *r, char *buf, size_t cap)
{
    static const struct { unsigned bit; const char *word; } words[] = {
        { LD_REQ_ERROR, "parse-error" },   { LD_REQ_UNPAIRED, "unpaired" },
        { LD_REQ_AMBIGUOUS, "ambiguous" }, { LD_REQ_UNCONFIRMED, "unconfirmed" },
        { LD_REQ_TRUNCATED, "truncated" }, { LD_REQ_SKIPPED_FIELDS, "fields-skipped" },
        { LD_REQ_BATCH, "batch" },         { LD_REQ_DUPLICATE, "duplicate" },
        { LD_REQ_INTERNAL, "internal" },   { LD_REQ_CAPTURE_LOSS, "capture-loss" },
        { LD_REQ_CAPTURE_CUT, "cut" },
    };
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (!(r->flags & words[i].bit)) continue;
        int n = snprintf(buf + used, cap - used, "%s%s", used ? "," : "", words[i].word);
        if (n < 0 || (size_t)n >= cap - used) break;
        used += (size_t)n;
    }
    ld_cli_pd_words(r, buf, cap, &used);
    return buf;
}

/* ", N what" into buf at *o when n > 0 */
static void add_count(char *buf, size_t cap, size_t *o, uint64_t n, const char *what)
{
    if (n && *o < cap) *o += (size_t)snprintf(buf + *o, cap - *o, ", %llu %s", (unsigned long long)n, what);
}

const char *ld_cli_capture_summary(const ld_logset_stats *st, char *buf, size_t cap)
{
    const ld_capture_stats *c = &st->capture;
    size_t o = 0;
    buf[0] = 0;
    int wrapped = 0;
    for (int k = LD_CAPTURE_PLAIN + 1; k < LD_CAPTURE_COUNT; k++) wrapped |= c->members[k] != 0;
    if (!wrapped && !c->rejoined_lines && !c->cut_lines && !c->lost_records) return buf;
    for (int k = LD_CAPTURE_PLAIN; k < LD_CAPTURE_COUNT && o < cap; k++)
        if (c->members[k] && (k != LD_CAPTURE_PLAIN || !wrapped))
            o += (size_t)snprintf(buf + o, cap - o, "%s%s %llu", o ? ", " : "capture: ", ld_capture_name(k),
                                  (unsigned long long)c->members[k]);
    if (!o) o = (size_t)snprintf(buf, cap, "capture: plain");
    if (o >= cap) return buf;
    o += (size_t)snprintf(buf + o, cap - o, " of %llu members; %llu records, %llu lines rejoined from %llu pieces",
                          (unsigned long long)st->members, (unsigned long long)c->records,
                          (unsigned long long)c->rejoined_lines, (unsigned long long)c->joined_records);
    if (c->open_joins && o < cap)
        o += (size_t)snprintf(buf + o, cap - o, " (%llu joined where a literal was left open)",
                              (unsigned long long)c->open_joins);
    add_count(buf, cap, &o, c->unfinished_lines, "lines never finished");
    add_count(buf, cap, &o, c->cut_lines, "lines cut for good");
    add_count(buf, cap, &o, c->lost_records, "records whose text the capture left out");
    add_count(buf, cap, &o, c->bad_records, "records not of their capture");
    add_count(buf, cap, &o, c->damaged_lines, "lines cut inside a character");
    add_count(buf, cap, &o, c->replaced_bytes, "bytes lost there (U+FFFD)");
    return buf;
}

const char *ld_cli_over_limit_summary(const ld_logset_stats *st, const char *max_line, char *buf,
                                      size_t cap)
{
    snprintf(buf, cap, "%llu line%s longer than the line-size limit (--max-line %s): skipped, each "
             "reported above with its file, line and offset",
             (unsigned long long)st->over_limit, st->over_limit == 1 ? "" : "s",
             max_line ? max_line : "1G, the default");
    return buf;
}

int ld_cli_capture_kind(struct ld_cli *cli, const char *name, ld_capture_kind *out)
{
    int k = name ? ld_capture_by_name(name) : LD_CAPTURE_AUTO;
    if (k == -2) {
        fprintf(cli->err, "logdiff: unknown --capture '%s' (auto", name);
        for (int i = 0; i < LD_CAPTURE_COUNT; i++) fprintf(cli->err, ", %s", ld_capture_name((ld_capture_kind)i));
        fprintf(cli->err, ")\n");
        return -1;
    }
    *out = (ld_capture_kind)k;
    return 0;
}

/* "64M", "1G", "100000": bytes, 0 when not a size of 1 KiB to 64 GiB */
size_t ld_cli_parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *s == '-') return 0;
    int shift = *end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20 : *end == 'G' || *end == 'g' ? 30 : 0;
    if (shift) end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end || v > (64ull << 30) >> shift) return 0;
    v <<= shift;
    return v >= 1024 ? (size_t)v : 0;
}

int ld_cli_capture_options(struct ld_cli *cli, const ld_cli_capture_opts *o, ld_logset_options *out)
{
    if (ld_cli_capture_kind(cli, o->capture, &out->capture) != 0) return -1;
    out->max_line = 0;
    if (!o->max_line) return 0;
    if (!(out->max_line = ld_cli_parse_size(o->max_line))) {
        fprintf(cli->err, "logdiff: --max-line '%s' is not a size from 1K to 64G (bytes, or with K, M, G)\n",
                o->max_line);
        return -1;
    }
    return 0;
}

cJSON *ld_cli_capture_json(const ld_logset_stats *st)
{
    const ld_capture_stats *c = &st->capture;
    cJSON *o = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(o, "members");
    for (int k = 0; k < LD_CAPTURE_COUNT; k++)
        if (c->members[k]) cJSON_AddItemToObject(m, ld_capture_name(k), ld_json_int((int64_t)c->members[k]));
    cJSON_AddItemToObject(o, "records", ld_json_int((int64_t)c->records));
    cJSON_AddItemToObject(o, "rejoined_lines", ld_json_int((int64_t)c->rejoined_lines));
    cJSON_AddItemToObject(o, "joined_records", ld_json_int((int64_t)c->joined_records));
    cJSON_AddItemToObject(o, "unfinished_lines", ld_json_int((int64_t)c->unfinished_lines));
    cJSON_AddItemToObject(o, "bad_records", ld_json_int((int64_t)c->bad_records));
    cJSON_AddItemToObject(o, "damaged_lines", ld_json_int((int64_t)c->damaged_lines));
    cJSON_AddItemToObject(o, "replaced_bytes", ld_json_int((int64_t)c->replaced_bytes));
    cJSON_AddItemToObject(o, "marked_joins", ld_json_int((int64_t)c->marked_joins));
    cJSON_AddItemToObject(o, "open_joins", ld_json_int((int64_t)c->open_joins));
    cJSON_AddItemToObject(o, "cut_lines", ld_json_int((int64_t)c->cut_lines));
    cJSON_AddItemToObject(o, "lost_records", ld_json_int((int64_t)c->lost_records));
    cJSON_AddItemToObject(o, "problems", ld_json_int((int64_t)st->capture_problems));
    cJSON_AddItemToObject(o, "over_limit", ld_json_int((int64_t)st->over_limit));
    return o;
}
