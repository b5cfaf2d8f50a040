/* template.c - `logdiff template`: render an OpenAI chat-completions request
 * through a chat template, the way HF transformers' apply_chat_template
 * does, and write the prompt to standard output byte for byte. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "parse/pylit/pylit_json.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "parse/input/slurp.h"
#include "replay/template/chat_render.h"
#include "replay/template/jinja/tpl.h"
#include "replay/template/render_date.h"
#include "replay/template/tpl_source.h"

static const char *const template_usage[] = {
    "logdiff template --template SRC [--bos-token S] [--eos-token S] [--no-generation-prompt] REQUEST.json",
    "logdiff template --template SRC [options] --rid RID LOG...",
    "",
    "Renders an OpenAI chat-completions request body through a chat template and",
    "writes the prompt to standard output, exact bytes, nothing added.  SRC is a",
    ".jinja file, a tokenizer_config.json, a GGUF file, a model directory, or a",
    "built-in encoder (deepseek-v3.2, deepseek-v4).  The template sees `messages`,",
    "`tools` (only when the request has them), `add_generation_prompt`,",
    "`bos_token`/`eos_token` (from SRC unless given; absent = None) and every key of",
    "`chat_template_kwargs`.  REQUEST.json may be '-' for standard input; with --rid",
    "the request is the logged `Receive OpenAI` payload of that rid.  strftime_now()",
    "prints today's local date, as transformers does (--date pins it).  Exit status:",
    "0 rendered, 2 the template refused (its message on standard error) or",
    "usage/I/O error.",
    NULL
};

typedef struct rid_state {
    const char *rid;
    cJSON *request;  /* the first matching payload, converted (owned) */
    int matched;     /* a record with this rid was seen */
    int oom;
} rid_state;

static int on_request(void *ctx, ld_request *r)
{
    rid_state *s = ctx;
    if (r->peer && r->peer->rid && !strcmp(r->peer->rid, s->rid) && !(r->rid && !strcmp(r->rid, s->rid)))
        r = r->peer; /* the prefill server's rid of a prefill/decode pair */
    if (!((r->rid && !strcmp(r->rid, s->rid)) ||
          (r->parent_rid && !strcmp(r->parent_rid, s->rid))))
        return 0;
    s->matched = 1;
    if (s->request || !r->openai_obj) return 0;
    ld_arena scratch;
    ld_arena_init(&scratch, 0);
    s->request = ld_json_value_plain(r->openai_obj, &scratch); /* strings copied by cJSON */
    if (!s->request) s->oom = 1;
    ld_arena_release(&scratch);
    return 0;
}

static cJSON *request_from_log(struct ld_cli *cli, const char *rid, ld_cli_capture_opts capture, char **logs,
                               int n)
{
    rid_state s = { rid, NULL, 0, 0 };
    ld_pair_options opts = { 0 };
    opts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES | LD_PAIR_KEEP_INTERNAL;
    opts.only_rid = rid;
    ld_cli_logread lr = { cli, 0, 0, { 0 }, { 0 }, capture };
    int rc = ld_cli_logread_run(&lr, logs, n, &opts, on_request, &s);
    if (rc != 0 || s.oom || lr.stats.io_errors) {
        if (s.oom) fprintf(cli->err, "logdiff template: out of memory\n");
        cJSON_Delete(s.request);
        return NULL;
    }
    if (!s.matched)
        fprintf(cli->err, "logdiff template: no request with rid '%s' in the logs given\n", rid);
    else if (!s.request)
        fprintf(cli->err, "logdiff template: request '%s' has no 'Receive OpenAI' line "
                          "(its message array was not logged)\n", rid);
    return s.request;
}

static cJSON *request_from_file(struct ld_cli *cli, const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = strcmp(path, "-") ? ld_slurp_file(path, &buf, &len, &err)
                                     : ld_slurp_stream(stdin, &buf, &len, &err);
    if (st != LD_OK) {
        fprintf(cli->err, "logdiff template: %s\n", err.msg);
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(buf, len);
    if (j && ld_tpl_json_keep_floats(j, buf, len) != LD_OK) { /* 2.0 stays a float */
        cJSON_Delete(j);
        j = NULL;
    }
    free(buf);
    if (!j) fprintf(cli->err, "logdiff template: '%s': not valid JSON\n", path);
    return j;
}

static void print_error(struct ld_cli *cli, const char *what, const ld_error *e)
{
    if (e->line)
        fprintf(cli->err, "logdiff template: %s:%llu: %s\n", what, (unsigned long long)e->line, e->msg);
    else
        fprintf(cli->err, "logdiff template: %s\n", e->msg);
}

static int render(struct ld_cli *cli, const ld_tpl_source *src, const cJSON *req,
                  const char *bos, const char *eos, int gen_prompt, const char *day)
{
    ld_tpl_limits lim = { 0 };
    lim.today = day;
    ld_chat_opts opts = { bos, eos, !gen_prompt, &lim, NULL };
    char *out = NULL;
    size_t out_len = 0;
    ld_error err;
    ld_error_clear(&err);
    int status = LD_EXIT_TROUBLE;
    if (ld_chat_render(src, req, &opts, &out, &out_len, &err) != LD_OK) {
        print_error(cli, src->template_path, &err);
    } else {
        fwrite(out, 1, out_len, cli->out);
        status = LD_EXIT_SAME;
    }
    free(out);
    return status;
}

int cmd_template(int argc, char **argv, struct ld_cli *cli)
{
    const char *tpl_path = NULL, *bos = NULL, *eos = NULL, *rid = NULL, *date = NULL;
    char today[LD_DATE_LEN + 1];
    ld_cli_capture_opts capture = { 0 };
    int no_gen = 0;
    const ld_cli_option options[] = {
        { LD_OPT_STRING, 0, "template", &tpl_path, "SRC", ".jinja, tokenizer_config.json or model directory (required)" },
        { LD_OPT_STRING, 0, "bos-token", &bos, "S", "bos_token (default: from SRC, else None)" },
        { LD_OPT_STRING, 0, "eos-token", &eos, "S", "eos_token (default: from SRC, else None)" },
        { LD_OPT_BOOL, 0, "no-generation-prompt", &no_gen, NULL, "add_generation_prompt=False" },
        { LD_OPT_STRING, 0, "rid", &rid, "RID", "render this logged request (LOG... instead of REQUEST.json)" },
        { LD_OPT_STRING, 0, "date", &date, "YYYY-MM-DD", "the date strftime_now() prints (default: today's local date)" },
        LD_CLI_CAPTURE_OPTIONS(capture),
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, template_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    const char *problem = !tpl_path ? "--template SRC is required"
                        : rid && n_args == 0 ? "no log given"
                        : !rid && n_args != 1 ? "give exactly one REQUEST.json (or --rid RID LOG...)"
                        : date && !ld_date_valid(date) ? "--date wants a date as YYYY-MM-DD"
                        : NULL;
    if (problem) {
        fprintf(cli->err, "logdiff template: %s\n", problem);
        return LD_EXIT_TROUBLE;
    }
    ld_tpl_source *src = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tpl_source_load(tpl_path, NULL, &src, &err) != LD_OK) {
        print_error(cli, tpl_path, &err);
        return LD_EXIT_TROUBLE;
    }
    cJSON *req = rid ? request_from_log(cli, rid, capture, argv + 1, n_args)
                     : request_from_file(cli, argv[1]);
    int status = LD_EXIT_TROUBLE;
    if (req)
        status = render(cli, src, req, bos, eos, !no_gen, date ? date : (ld_date_today(today), today));
    cJSON_Delete(req);
    ld_tpl_source_free(src);
    return status;
}
