/* checks.c - see checks.h. */
#include "checks.h"

#include <string.h>
#include <unistd.h>

#include "replay/template/server_prep.h"

int ld_cli_load_template(struct ld_cli *cli, const char *cmd, const char *tpl_path, const char *model_dir,
                         const char *server, ld_rerender *rr, ld_tpl_source **src)
{
    if (ld_server_by_name(server) < 0) {
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
    if (ld_judge_open_template(path, server, rr, src, &e) == LD_OK) return 0;
    if (e.line)
        fprintf(cli->err, "logdiff %s: %s:%llu: %s\n", cmd, path, (unsigned long long)e.line, e.msg);
    else
        fprintf(cli->err, "logdiff %s: %s\n", cmd, e.msg);
    return -1;
}

int ld_cli_load_tokenizer(struct ld_cli *cli, const char *cmd, const char *path, ld_tok **tok)
{
    if (!path) return 0;
    ld_error e;
    ld_error_clear(&e);
    if (ld_tok_load(path, tok, &e) == LD_OK) return 0;
    fprintf(cli->err, "logdiff %s: --tokenizer %s: %s\n", cmd, path, e.msg);
    return -1;
}

const char *ld_cli_replay_problem(const ld_cli_replay_opts *o)
{
    const char *b = o->backend;
    if (b && strcmp(b, "cpu") && strcmp(b, "ref") && strcmp(b, "cuda")) return "--replay-backend: give cpu, ref or cuda";
    if (o->tp < 0 || o->tp > 64) return "--replay-tp: give 1 to 64";
    if (!o->dir && (b || o->tp)) return "--replay-backend and --replay-tp go with a model to replay (--replay DIR)";
    return NULL;
}

int ld_cli_load_replay(struct ld_cli *cli, const char *cmd, const ld_cli_replay_opts *o, ld_replay_engine **e)
{
    *e = NULL;
    if (!o->dir) return 0;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = n < 1 ? 1 : n > 64 ? 64 : (int)n;
    ld_error err;
    ld_error_clear(&err);
    int in_split = 0;
    if (ld_judge_open_replay(o->dir, o->backend, (int)o->tp, threads, e, &in_split, &err) == LD_OK) return 0;
    const char *what = in_split ? "--replay-tp: " : "";
    if (err.path) fprintf(cli->err, "logdiff %s: --replay %s: %s%s: %s\n", cmd, o->dir, what, err.path, err.msg);
    else fprintf(cli->err, "logdiff %s: --replay %s: %s%s\n", cmd, o->dir, what, err.msg);
    return -1;
}

int ld_cli_checks_load(struct ld_cli *cli, const char *cmd, const ld_cli_check_flags *f, ld_cli_checks *c)
{
    c->src = NULL;
    c->tok = NULL;
    c->engine = NULL;
    ld_arena_init(&c->scratch, 0);
    c->rr.chat.scratch = &c->scratch;
    c->judge = (ld_judge_checks){ NULL, NULL, NULL };
    const char *problem = ld_cli_replay_problem(&f->replay);
    if (problem) fprintf(cli->err, "logdiff %s: %s\n", cmd, problem);
    if (problem || ld_cli_load_template(cli, cmd, f->tpl_path, f->model_dir, f->server, &c->rr, &c->src) != 0 ||
        ld_cli_load_tokenizer(cli, cmd, f->tok_path, &c->tok) != 0 ||
        ld_cli_load_replay(cli, cmd, &f->replay, &c->engine) != 0) {
        ld_cli_checks_free(c);
        return -1;
    }
    c->judge.rerender = c->src ? &c->rr : NULL;
    c->judge.tok = c->tok;
    c->judge.replay = c->engine;
    return 0;
}

void ld_cli_checks_free(ld_cli_checks *c)
{
    ld_tpl_source_free(c->src);
    ld_tok_free(c->tok);
    ld_replay_engine_close(c->engine);
    ld_arena_release(&c->scratch);
    c->src = NULL;
    c->tok = NULL;
    c->engine = NULL;
}
