/* scan.c - `logdiff scan`: one row per request found in the logs. */
#include <math.h>
#include <string.h>

#include "cmd.h"
#include "parse/pylit/pylit_json.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/common/pd.h"

static const char *const scan_usage[] = {
    "logdiff scan [--json [--summary]] [--all] [--capture NAME] LOG...",
    "",
    "Lists every request in SGLang / vLLM request logs, one row each: rid, time,",
    "file:line, messages, prompt and output characters (N+ where the logger cut",
    "the text and kept N), finish reason,",
    "temperature and flags (truncated by the logger, unpaired, parse error).",
    "LOG may be a file, a directory, or '-' for standard input; gzip, zstd, xz,",
    "bzip2, tar and zip are read by content, and so are the captures that wrap",
    "and split long lines (Docker json-file, CRI, kubectl --prefix, log",
    "shippers' JSON lines, journalctl's outputs and journal files, syslog):",
    "split lines are rejoined, and the summary says how.  A request of a",
    "prefill/decode deployment, logged by both servers, is one row: the",
    "decode server's (flag pd; pd-differs when the two servers logged different",
    "messages, prompts or input ids; pd-alone when the other's is not given).",
    "Exit status: 0 all requests complete and parsed, 1 a line failed to parse,",
    "a request misses a part, a line was lost in its capture or cut for good",
    "(read up to its cut), 2 usage or I/O error.",
    NULL
};

typedef struct scan_state {
    struct ld_cli *cli;
    int json, all, summary;
    uint64_t rows, errors, unpaired;
} scan_state;

static cJSON *request_json(const ld_request *r)
{
    char where[512];
    const ld_source *src = NULL;
    ld_cli_request_where(r, where, sizeof where, &src);
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(r->rid));
    cJSON_AddItemToObject(o, "time", ld_json_cstr(r->timestamp));
    cJSON_AddItemToObject(o, "file", ld_json_cstr(src ? src->member : NULL));
    cJSON_AddItemToObject(o, "line", src ? ld_json_int((int64_t)src->line) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "engine", cJSON_CreateString(ld_engine_name(r->engine)));
    cJSON_AddItemToObject(o, "messages", r->n_messages >= 0 ? ld_json_int(r->n_messages) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "prompt_chars", (r->prompt.flags & LD_TEXT_PRESENT)
                          ? ld_json_int((int64_t)r->prompt.n_chars) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "output_chars", (r->output.flags & LD_TEXT_PRESENT)
                          ? ld_json_int((int64_t)r->output.n_chars) : cJSON_CreateNull());
    /* prompt_chars / output_chars count what the log shows: at least, when the logger cut it */
    cJSON_AddBoolToObject(o, "prompt_cut", (r->prompt.flags & (LD_TEXT_TRUNCATED | LD_TEXT_HEAD_ONLY)) != 0);
    cJSON_AddBoolToObject(o, "output_cut", (r->output.flags & (LD_TEXT_TRUNCATED | LD_TEXT_HEAD_ONLY)) != 0);
    cJSON_AddItemToObject(o, "finish_reason", ld_json_cstr(r->finish_type));
    cJSON_AddItemToObject(o, "temperature", ld_json_double(r->temperature));
    cJSON_AddItemToObject(o, "top_p", ld_json_double(r->top_p));
    cJSON_AddItemToObject(o, "max_tokens", ld_json_int(r->max_tokens));
    cJSON_AddItemToObject(o, "model", ld_json_cstr(r->model));
    cJSON_AddItemToObject(o, "input_ids", r->n_input_ids >= 0 ? ld_json_int(r->n_input_ids) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "output_ids", r->n_output_ids >= 0 ? ld_json_int(r->n_output_ids) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "prompt_tokens", ld_json_int(r->prompt_tokens));
    cJSON_AddItemToObject(o, "completion_tokens", ld_json_int(r->completion_tokens));
    cJSON_AddItemToObject(o, "e2e_latency", ld_json_double(r->e2e_latency));
    cJSON *parts = cJSON_AddArrayToObject(o, "parts");
    cJSON *missing = cJSON_AddArrayToObject(o, "missing");
    for (int p = 0; p < LD_PART_COUNT; p++) {
        if (r->seen & LD_PART_BIT(p))
            cJSON_AddItemToArray(parts, cJSON_CreateString(ld_part_name((ld_part)p)));
        if (r->missing & LD_PART_BIT(p))
            cJSON_AddItemToArray(missing, cJSON_CreateString(ld_part_name((ld_part)p)));
    }
    cJSON_AddItemToObject(o, "pd", ld_cli_pd_json(r));
    char words[256];
    ld_cli_request_flag_words(r, words, sizeof words);
    cJSON *flags = cJSON_AddArrayToObject(o, "flags");
    for (char *w = strtok(words, ","); w; w = strtok(NULL, ","))
        cJSON_AddItemToArray(flags, cJSON_CreateString(w));
    return o;
}

static void print_header(scan_state *s)
{
    const char *bold = s->cli->out_is_tty ? "\033[1m" : "", *reset = s->cli->out_is_tty ? "\033[0m" : "";
    fprintf(s->cli->out, "%s%-32s %-19s %5s %9s %8s %-7s %5s  %-16s %s%s\n", bold, "rid", "time",
            "msgs", "prompt", "output", "finish", "temp", "flags", "file:line", reset);
}

static void fmt_count(char *buf, size_t cap, int present, int64_t v)
{
    if (present) snprintf(buf, cap, "%lld", (long long)v);
    else snprintf(buf, cap, "-");
}

/* a text's characters; "N+" when the logger cut it (N is what it kept) */
static void fmt_text(char *buf, size_t cap, const ld_text *t)
{
    fmt_count(buf, cap, t->flags & LD_TEXT_PRESENT, (int64_t)t->n_chars);
    if ((t->flags & LD_TEXT_PRESENT) && (t->flags & (LD_TEXT_TRUNCATED | LD_TEXT_HEAD_ONLY)))
        strncat(buf, "+", cap - strlen(buf) - 1);
}

static void print_row(scan_state *s, const ld_request *r)
{
    char where[512], words[256], msgs[24], prompt[24], output[24], temp[16];
    ld_cli_request_where(r, where, sizeof where, NULL);
    ld_cli_request_flag_words(r, words, sizeof words);
    if (r->flags & LD_REQ_ERROR) {
        const char *red = s->cli->out_is_tty ? "\033[31m" : "", *reset = s->cli->out_is_tty ? "\033[0m" : "";
        fprintf(s->cli->out, "%s%-32s %-19s parse error at byte %llu: %s%s  %s\n", red, "-", "-",
                (unsigned long long)r->error.offset, r->error.msg, reset, where);
        return;
    }
    fmt_count(msgs, sizeof msgs, r->n_messages >= 0, r->n_messages);
    fmt_text(prompt, sizeof prompt, &r->prompt);
    fmt_text(output, sizeof output, &r->output);
    if (isnan(r->temperature)) snprintf(temp, sizeof temp, "-");
    else snprintf(temp, sizeof temp, "%g", r->temperature);
    const char *warn = "", *reset = "";
    if (s->cli->out_is_tty && words[0]) {
        warn = (r->flags & (LD_REQ_UNPAIRED | LD_REQ_AMBIGUOUS)) ? "\033[33m" : "";
        reset = warn[0] ? "\033[0m" : "";
    }
    fprintf(s->cli->out, "%-32s %-19.19s %5s %9s %8s %-7.7s %5s  %s%-16s%s %s\n",
            r->rid ? r->rid : "(no rid)", r->timestamp ? r->timestamp : "-", msgs, prompt, output,
            r->finish_type ? r->finish_type : "-", temp, warn, words[0] ? words : "-", reset, where);
}

static int on_request(void *ctx, ld_request *r)
{
    scan_state *s = ctx;
    if (r->flags & LD_REQ_ERROR) s->errors++;
    if (r->flags & (LD_REQ_UNPAIRED | LD_REQ_AMBIGUOUS)) s->unpaired++;
    if (s->rows++ == 0 && !s->json) print_header(s);
    if (s->json) ld_json_print_line(s->cli->out, (r->flags & LD_REQ_ERROR)
                                    ? ld_cli_error_json("log.parse_error", &r->error)
                                    : request_json(r));
    else print_row(s, r);
    return 0;
}

/* --json --summary's closing object: the counts of the text summary */
static void print_summary_json(scan_state *s, const ld_cli_logread *lr)
{
    const ld_pair_stats *ps = &lr->pair_stats;
    cJSON *o = cJSON_CreateObject(), *sum = cJSON_AddObjectToObject(o, "summary");
    cJSON_AddItemToObject(sum, "requests", ld_json_int((int64_t)(s->rows - s->errors)));
    cJSON_AddItemToObject(sum, "lines", ld_json_int((int64_t)ps->lines));
    cJSON_AddItemToObject(sum, "request_lines", ld_json_int((int64_t)ps->request_lines));
    cJSON_AddItemToObject(sum, "skipped_lines", ld_json_int((int64_t)ps->skipped));
    cJSON_AddItemToObject(sum, "parse_errors", ld_json_int((int64_t)ps->errors));
    cJSON_AddItemToObject(sum, "cut_lines", ld_json_int((int64_t)ps->cut_lines));
    cJSON_AddItemToObject(sum, "health_checks", ld_json_int((int64_t)ps->health_checks));
    cJSON_AddItemToObject(sum, "unpaired", ld_json_int((int64_t)s->unpaired));
    cJSON_AddItemToObject(sum, "input_errors", ld_json_int((int64_t)lr->stats.io_errors));
    cJSON_AddItemToObject(sum, "members", ld_json_int((int64_t)lr->stats.members));
    cJSON_AddItemToObject(sum, "capture", ld_cli_capture_json(&lr->stats));
    cJSON_AddItemToObject(sum, "prefill_decode", ld_cli_pd_summary_json(ps));
    ld_json_print_line(s->cli->out, o);
}

static void print_summary(scan_state *s, const ld_cli_logread *lr)
{
    if (s->json && s->summary) print_summary_json(s, lr);
    const ld_pair_stats *ps = &lr->pair_stats;
    FILE *f = s->json ? s->cli->err : s->cli->out;
    if (s->json && !s->cli->err_is_tty) return; /* scripts read stdout only */
    fprintf(f, "%llu requests; %llu lines read: %llu request lines, %llu other lines skipped, "
               "%llu parse errors; %llu health checks left out; %llu unpaired or ambiguous; "
               "%llu input errors\n",
            (unsigned long long)(s->rows - s->errors), (unsigned long long)ps->lines,
            (unsigned long long)ps->request_lines, (unsigned long long)ps->skipped,
            (unsigned long long)ps->errors, (unsigned long long)ps->health_checks,
            (unsigned long long)s->unpaired, (unsigned long long)lr->stats.io_errors);
    char cap[512];
    if (lr->stats.over_limit)
        fprintf(f, "%s\n", ld_cli_over_limit_summary(&lr->stats, lr->capture.max_line, cap, sizeof cap));
    if (ps->cut_lines)
        fprintf(f, "%llu request lines were cut for good: read up to their last whole field (log.capture_cut)\n",
                (unsigned long long)ps->cut_lines);
    if (*ld_cli_capture_summary(&lr->stats, cap, sizeof cap)) fprintf(f, "%s\n", cap);
    if (*ld_cli_pd_summary(ps, cap, sizeof cap)) fprintf(f, "%s\n", cap);
}

int cmd_scan(int argc, char **argv, struct ld_cli *cli)
{
    scan_state s = { cli, 0, 0, 0, 0, 0, 0 };
    ld_cli_capture_opts capture = { 0 };
    const ld_cli_option options[] = {
        { LD_OPT_BOOL, 0, "json", &s.json, NULL, "JSON Lines, one object per request" },
        { LD_OPT_BOOL, 0, "summary", &s.summary, NULL, "with --json: a last object {\"summary\": {...}}, the counts" },
        { LD_OPT_BOOL, 0, "all", &s.all, NULL, "include internal requests (HEALTH_CHECK_*)" },
        LD_CLI_CAPTURE_OPTIONS(capture),
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, scan_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    if (n_args == 0) {
        fprintf(cli->err, "logdiff scan: no log given (use '-' for standard input)\n");
        return LD_EXIT_TROUBLE;
    }
    ld_pair_options opts = { 0 };
    opts.flags = LD_PAIR_ERROR_RECORDS | (s.all ? LD_PAIR_KEEP_INTERNAL : 0);
    ld_cli_logread lr = { cli, s.json, 1, { 0 }, { 0 }, capture };
    if (ld_cli_logread_run(&lr, argv + 1, n_args, &opts, on_request, &s) != 0)
        return LD_EXIT_TROUBLE;
    print_summary(&s, &lr);
    if (lr.stats.io_errors) return LD_EXIT_TROUBLE;
    return (s.errors || s.unpaired || lr.stats.capture_problems || lr.pair_stats.cut_lines) ? LD_EXIT_DIFF
                                                                                        : LD_EXIT_SAME;
}
