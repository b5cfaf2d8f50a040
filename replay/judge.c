/* judge.c - see judge.h. */
#include "judge.h"

#include <string.h>
#include <unistd.h>

#include "cmd/common/jsonout.h"
#include "replay/analysis/tokcheck.h"

int ld_judge_load_template(struct ld_cli *cli, const char *cmd, const char *tpl_path,
                           const char *model_dir, const char *server, ld_rerender *rr,
                           ld_tpl_source **src)
{
    int kind = ld_server_by_name(server);
    if (kind < 0) {
        fprintf(cli->err, "logdiff %s: unknown --server '%s' (sglang or hf)\n", cmd, server);
        return -1;
    }
    if (tpl_path && model_dir) {
        fprintf(cli->err, "logdiff %s: give --template or --model, not both\n", cmd);
        return -1;
    }
    const char *path = tpl_path ? tpl_path : model_dir;
    if (!path) return 0;
    ld_error e;
    ld_error_clear(&e);
    if (ld_tpl_source_load(path, NULL, src, &e) != LD_OK) {
        if (e.line)
            fprintf(cli->err, "logdiff %s: %s:%llu: %s\n", cmd, path, (unsigned long long)e.line, e.msg);
        else
            fprintf(cli->err, "logdiff %s: %s\n", cmd, e.msg);
        return -1;
    }
    rr->src = *src;
    rr->server = (ld_server_kind)kind;
    rr->content_parts = (*src)->text && ld_server_template_wants_parts((*src)->text, (*src)->text_len);
    return 0;
}

int ld_judge_load_tokenizer(struct ld_cli *cli, const char *cmd, const char *path, ld_tok **tok)
{
    if (!path) return 0;
    ld_error e;
    ld_error_clear(&e);
    if (ld_tok_load(path, tok, &e) == LD_OK) return 0;
    fprintf(cli->err, "logdiff %s: --tokenizer %s: %s\n", cmd, path, e.msg);
    return -1;
}

const char *ld_judge_replay_problem(const ld_judge_replay *o)
{
    const char *b = o->backend;
    if (b && strcmp(b, "cpu") && strcmp(b, "ref") && strcmp(b, "cuda")) return "--replay-backend: give cpu, ref or cuda";
    if (o->tp < 0 || o->tp > 64) return "--replay-tp: give 1 to 64";
    if (!o->dir && (b || o->tp)) return "--replay-backend and --replay-tp go with a model to replay (--replay DIR)";
    return NULL;
}

/* the engine of o, split when o->tp; *what names the step that failed */
static ld_status open_replay(const ld_judge_replay *o, int threads, ld_replay_engine **e, const char **what,
                             ld_error *err)
{
    const char *b = o->backend ? o->backend : "cpu";
    *what = "";
    /* split: the engine's own backend is made by the split (replay.h) */
    LD_TRY(ld_replay_engine_open(o->dir, o->tp ? "cpu" : b, threads, e, err));
    if (!o->tp) return LD_OK;
    *what = "--replay-tp: ";
    return ld_replay_engine_set_tp(*e, (int)o->tp, 1, b, NULL, threads, err);
}

int ld_judge_load_replay(struct ld_cli *cli, const char *cmd, const ld_judge_replay *o, ld_replay_engine **e)
{
    *e = NULL;
    if (!o->dir) return 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
    ld_error err;
    ld_error_clear(&err);
    const char *what = "";
    if (open_replay(o, threads, e, &what, &err) == LD_OK) return 0;
    ld_replay_engine_close(*e);
    *e = NULL;
    if (err.path) fprintf(cli->err, "logdiff %s: --replay %s: %s%s: %s\n", cmd, o->dir, what, err.path, err.msg);
    else fprintf(cli->err, "logdiff %s: --replay %s: %s%s\n", cmd, o->dir, what, err.msg);
    return -1;
}

int ld_judge_needs_values(const ld_judge_checks *c)
{
    return c->rerender || c->tok || c->replay;
}

/* --template: the re-render findings join the request's. */
static ld_status rerender(const ld_rerender *rr, const ld_request *r, ld_arena *arena,
                          ld_verdict *v, ld_error *e)
{
    cJSON *request = r->openai_obj && !(r->flags & LD_REQ_ERROR)
                     ? ld_json_value_plain(r->openai_obj, arena) : NULL;
    if (r->openai_obj && !request && !(r->flags & LD_REQ_ERROR))
        return LD_FAIL(e, LD_ERR_NOMEM, 0, "out of memory converting the logged request");
    ld_status st = LD_OK;
    if (!(r->flags & LD_REQ_ERROR))
        st = ld_rerender_check(rr, r, request, arena, &v->findings, e);
    cJSON_Delete(request);
    return st;
}

ld_status ld_judge_request(ld_differ *d, const ld_judge_checks *checks, const ld_request *r,
                           ld_arena *arena, ld_verdict *v, ld_error *e)
{
    LD_TRY(ld_differ_judge(d, r, arena, v, e));
    if (checks && checks->rerender) LD_TRY(rerender(checks->rerender, r, arena, v, e));
    /* the token check needs the request's own lines: not an OpenAI-only or error record */
    if (checks && checks->tok && r->rid && !(r->flags & LD_REQ_ERROR))
        LD_TRY(ld_tokcheck(checks->tok, r, arena, &v->findings, e));
    if (checks && checks->replay) LD_TRY(ld_replay_check(checks->replay, r, arena, &v->findings, e));
    v->verdict = ld_verdict_of(&v->findings);
    return LD_OK;
}
