/* difffmt.c - see difffmt.h. */
#include "difffmt.h"

#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "replay/judge.h"
#include "cmd/common/pd.h"
#include "cmd/common/quote.h"

static const char *const verdicts[LD_N_VERDICTS] = { "ok", "harness", "template",
                                                     "kernels", "sampling", "log" };

void ld_cli_diff_report_init(ld_cli_diff_report *rep, struct ld_cli *cli)
{
    memset(rep, 0, sizeof *rep);
    rep->cli = cli;
    ld_arena_init(&rep->arena, 0);
}

static int verdict_index(const char *v)
{
    for (int i = 0; i < LD_N_VERDICTS; i++)
        if (!strcmp(v, verdicts[i])) return i;
    return LD_N_VERDICTS - 1;
}

static cJSON *evidence_num(int64_t v)
{
    return v == LD_NO_VALUE ? cJSON_CreateNull() : ld_json_int(v);
}

static cJSON *finding_json(const ld_finding *f)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "kind", cJSON_CreateString(f->kind));
    cJSON_AddItemToObject(o, "severity", cJSON_CreateString(f->severity == LD_SEV_ERROR ? "error" : "info"));
    cJSON_AddItemToObject(o, "message", f->message >= 0 ? ld_json_int(f->message) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "detail", ld_json_cstr(f->detail));
    cJSON_AddItemToObject(o, "array_offset", evidence_num(f->array_offset));
    cJSON_AddItemToObject(o, "prompt_offset", evidence_num(f->prompt_offset));
    cJSON_AddItemToObject(o, "expected_len", evidence_num(f->expected_len));
    cJSON_AddItemToObject(o, "actual_len", evidence_num(f->actual_len));
    cJSON_AddItemToObject(o, "first_diff", evidence_num(f->first_diff));
    cJSON_AddItemToObject(o, "array_excerpt", ld_json_cstr(f->array_excerpt));
    cJSON_AddItemToObject(o, "prompt_excerpt", ld_json_cstr(f->prompt_excerpt));
    cJSON_AddItemToObject(o, "related_rid", ld_json_cstr(f->related_rid));
    cJSON_AddItemToObject(o, "unified_diff", ld_json_cstr(f->unified_diff));
    return o;
}

static void print_json(ld_cli_diff_report *rep, const ld_request *r, const ld_verdict *v)
{
    char where[512];
    const ld_source *src = NULL;
    ld_cli_request_where(r, where, sizeof where, &src);
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(r->rid));
    cJSON_AddItemToObject(o, "verdict", cJSON_CreateString(v->verdict));
    cJSON_AddItemToObject(o, "conversation", ld_json_cstr(v->conversation));
    cJSON_AddItemToObject(o, "file", ld_json_cstr((r->flags & LD_REQ_ERROR) ? r->error.path
                                                  : src ? src->member : NULL));
    cJSON_AddItemToObject(o, "line", (r->flags & LD_REQ_ERROR) ? ld_json_int((int64_t)r->error.line)
                          : src ? ld_json_int((int64_t)src->line) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "time", ld_json_cstr(r->timestamp));
    cJSON_AddItemToObject(o, "messages", r->n_messages >= 0 ? ld_json_int(r->n_messages) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "finish_reason", ld_json_cstr(r->finish_type));
    cJSON_AddBoolToObject(o, "aligned", v->aligned);
    cJSON_AddItemToObject(o, "pd", ld_cli_pd_json(r));
    cJSON *arr = cJSON_AddArrayToObject(o, "findings");
    for (size_t i = 0; i < v->findings.n; i++)
        cJSON_AddItemToArray(arr, finding_json(&v->findings.v[i]));
    ld_json_print_line(rep->cli->out, o);
}

/* The first error finding, or NULL: the one-line reason of the verdict. */
static const ld_finding *first_error(const ld_verdict *v)
{
    const char *want = v->verdict;
    for (size_t i = 0; i < v->findings.n; i++)
        if (v->findings.v[i].severity == LD_SEV_ERROR &&
            !strcmp(ld_kind_category(v->findings.v[i].kind), want))
            return &v->findings.v[i];
    return NULL;
}

/* An excerpt on one line, quoted by the report's one rule (quote.h; the
 * JSON output keeps the raw text). */
static void put_excerpt(FILE *f, const char *s)
{
    ld_cli_put_quoted(f, s);
}

static void print_excerpts(FILE *f, const ld_finding *g, const char *dim, const char *reset)
{
    int stale = !strcmp(g->kind, LD_K_HARNESS_STALE_ASSISTANT);
    int render = !strcmp(g->kind, LD_K_TEMPLATE_RENDER_MISMATCH);
    int tokens = !strcmp(g->kind, LD_K_TEMPLATE_TOKEN_MISMATCH);
    int kernels = !strcmp(g->kind, LD_K_KERNELS_DIVERGENCE);
    int servers = !strcmp(g->kind, LD_K_TEMPLATE_SERVERS_DIFFER); /* the related rid is the left side's */
    const char *left = stale ? "sent back" : render ? "rendered" : tokens ? "re-encoded" : kernels ? "replay"
                       : servers ? "prefill" : "array";
    const char *right = stale ? "produced" : render || tokens || kernels ? "logged" : servers ? "decode" : "prompt";
    if (g->array_excerpt) {
        fprintf(f, "        %s%-9s%s ", dim, left, reset);
        put_excerpt(f, g->array_excerpt);
        if (servers && g->related_rid) fprintf(f, "  %s(by %s)%s", dim, g->related_rid, reset);
        fputc('\n', f);
    }
    if (g->prompt_excerpt) {
        fprintf(f, "        %s%-9s%s ", dim, right, reset);
        put_excerpt(f, g->prompt_excerpt);
        if (g->related_rid && !servers) fprintf(f, "  %s(by %s)%s", dim, g->related_rid, reset);
        fputc('\n', f);
    } else if (g->related_rid && !(servers && g->array_excerpt)) {
        fprintf(f, "        %srelated%s   %s\n", dim, reset, g->related_rid);
    }
}

/* The diff indented under its finding, '-' lines red and '+' lines green on
 * a terminal. */
static void print_unified_diff(FILE *f, const char *d, int tty)
{
    while (*d) {
        const char *nl = strchr(d, '\n');
        size_t n = nl ? (size_t)(nl - d) : strlen(d);
        const char *col = !tty || !strncmp(d, "---", 3) || !strncmp(d, "+++", 3) ? ""
                          : *d == '-' ? "\033[31m" : *d == '+' ? "\033[32m"
                          : *d == '@' ? "\033[36m" : "";
        fprintf(f, "        %s%.*s%s\n", col, (int)n, d, *col ? "\033[0m" : "");
        d += n + (nl != NULL);
    }
}

static void print_text(ld_cli_diff_report *rep, const ld_request *r, const ld_verdict *v)
{
    FILE *f = rep->cli->out;
    int tty = rep->cli->out_is_tty, ok = !strcmp(v->verdict, "ok");
    const char *col = tty ? (ok ? "\033[32m" : "\033[1;31m") : "", *reset = tty ? "\033[0m" : "";
    const char *dim = tty ? "\033[2m" : "";
    char where[512];
    ld_cli_request_where(r, where, sizeof where, NULL);
    const ld_finding *why = first_error(v);
    fprintf(f, "%-32s %s%-8s%s %-30s %s\n", r->rid ? r->rid : "-", col, v->verdict, reset,
            where, why ? why->kind : "");
    if (ok && !rep->verbose) return;
    for (size_t i = 0; i < v->findings.n; i++) {
        const ld_finding *g = &v->findings.v[i];
        if (g->severity != LD_SEV_ERROR && !rep->verbose) continue;
        fprintf(f, "    %s%-5s%s %s", g->severity == LD_SEV_ERROR ? col : dim,
                g->severity == LD_SEV_ERROR ? "error" : "info", reset, g->kind);
        if (g->message >= 0) fprintf(f, " [message %lld]", (long long)g->message);
        fprintf(f, ": %s\n", g->detail);
        print_excerpts(f, g, dim, reset);
        if (g->unified_diff && *g->unified_diff) print_unified_diff(f, g->unified_diff, tty);
    }
}

/* --rid: the request's own rid, or its prefill server's (a prefill/decode pair) */
static int names(const ld_request *r, const char *rid)
{
    return (r->rid && !strcmp(r->rid, rid)) || (r->peer && r->peer->rid && !strcmp(r->peer->rid, rid));
}

/* A request that could not be judged: said, and the run marked failed. */
static int judge_failed(ld_cli_diff_report *rep, const ld_error *e)
{
    fprintf(rep->cli->err, "logdiff diff: %s\n", e->msg);
    rep->failed = 1;
    return 0;
}

int ld_cli_diff_report_request(void *ctx, ld_request *r)
{
    ld_cli_diff_report *rep = ctx;
    ld_verdict v;
    ld_error e;
    ld_error_clear(&e);
    ld_arena_reset(&rep->arena);
    /* the replay is costly: only for the requests reported (the differ still
     * sees every one, for the conversations) */
    ld_judge_checks checks = rep->checks;
    if (rep->only_rid && !names(r, rep->only_rid)) checks.replay = NULL;
    if (ld_judge_request(rep->differ, &checks, r, &rep->arena, &v, &e) != LD_OK) return judge_failed(rep, &e);
    if (rep->only_rid && !names(r, rep->only_rid)) return 0;
    rep->n_reported++;
    rep->per_verdict[verdict_index(v.verdict)]++;
    if (strcmp(v.verdict, "ok")) rep->n_not_ok++;
    if (rep->json) print_json(rep, r, &v);
    else print_text(rep, r, &v);
    if (rep->on_judged) rep->on_judged(rep->on_judged_ctx, r, &v);
    return 0;
}

int ld_cli_diff_report_feed(void *ctx, ld_request *r)
{
    ld_cli_diff_report *rep = ctx;
    ld_verdict v;
    ld_error e;
    ld_error_clear(&e);
    ld_arena_reset(&rep->arena);
    return ld_differ_judge(rep->differ, r, &rep->arena, &v, &e) == LD_OK ? 0 : judge_failed(rep, &e);
}

void ld_cli_diff_report_summary(ld_cli_diff_report *rep, const ld_cli_logread *lr)
{
    FILE *f = rep->json ? rep->cli->err : rep->cli->out;
    if (rep->json && !rep->cli->err_is_tty) return; /* scripts read stdout only */
    fprintf(f, "%s%llu requests%s", rep->json ? "" : "\n", (unsigned long long)rep->n_reported,
            rep->n_reported ? ":" : "");
    for (int i = 0; i < LD_N_VERDICTS; i++)
        if (rep->per_verdict[i])
            fprintf(f, " %llu %s", (unsigned long long)rep->per_verdict[i], verdicts[i]);
    fprintf(f, "; %llu lines read, %llu health checks left out, %llu input errors\n",
            (unsigned long long)lr->pair_stats.lines,
            (unsigned long long)lr->pair_stats.health_checks, (unsigned long long)lr->stats.io_errors);
    char cap[512];
    ld_conv_stats cs;
    ld_differ_conv_stats(rep->differ, &cs);
    if (*ld_cli_conv_summary(&cs, &rep->conv, cap, sizeof cap)) fprintf(f, "%s\n", cap);
    if (lr->stats.over_limit)
        fprintf(f, "%s\n", ld_cli_over_limit_summary(&lr->stats, lr->capture.max_line, cap, sizeof cap));
}
