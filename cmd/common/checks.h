/* checks.h - the flags of `diff` and `regress` that turn on a request's
 * optional checks (replay/judge.h): --template / --model / --server,
 * --tokenizer, --replay / --replay-backend / --replay-tp.  Each loader
 * prints its failure on cli->err, naming the command and the flag. */
#ifndef LD_CLI_CHECKS_H
#define LD_CLI_CHECKS_H

#include "cmd/cmd.h"
#include "replay/judge.h"

/* --template / --model / --server of command `cmd` ("diff"): loads the
 * template into *src (left NULL when neither is given) and sets up *rr.
 * Returns 0, or -1 with the reason printed on cli->err. */
int ld_cli_load_template(struct ld_cli *cli, const char *cmd, const char *tpl_path, const char *model_dir,
                         const char *server, ld_rerender *rr, ld_tpl_source **src);

/* --tokenizer SRC of command `cmd`: loads it into *tok (left NULL when
 * `path` is NULL).  Returns 0, or -1 with the reason printed. */
int ld_cli_load_tokenizer(struct ld_cli *cli, const char *cmd, const char *path, ld_tok **tok);

/* How --replay replays: the model, the backend (--replay-backend: cpu, the
 * default, ref or cuda) and the tensor-parallel split (--replay-tp N, 0:
 * none), as `logdiff replay --backend NAME --tp N`. */
typedef struct ld_cli_replay_opts {
    const char *dir;
    const char *backend;
    long tp;
} ld_cli_replay_opts;

/* A problem to report when the options above are given without a model to
 * replay, or out of range (NULL: fine). */
const char *ld_cli_replay_problem(const ld_cli_replay_opts *o);

/* --replay DIR of command `cmd`: opens the engine into *e (left NULL when
 * o->dir is NULL) on o's backend, split over o->tp ranks, with as many
 * threads as cores (at most 64).  Returns 0, or -1 with the reason
 * printed. */
int ld_cli_load_replay(struct ld_cli *cli, const char *cmd, const ld_cli_replay_opts *o, ld_replay_engine **e);

/* The checks' flags of a command, as given (NULL / 0: not given). */
typedef struct ld_cli_check_flags {
    const char *tpl_path, *model_dir, *server, *tok_path;
    ld_cli_replay_opts replay;
} ld_cli_check_flags;

/* What the flags loaded (owned: ld_cli_checks_free) and the judge's view
 * of it.  rr.chat's bos / eos overrides are the caller's to set before
 * loading. */
typedef struct ld_cli_checks {
    ld_rerender rr;
    ld_tpl_source *src;
    ld_tok *tok;
    ld_replay_engine *engine;
    ld_arena scratch; /* every re-render's, reused */
    ld_judge_checks judge;
} ld_cli_checks;

/* The option lines of the template and tokenizer checks, the same in diff
 * and watch: f an ld_cli_check_flags, c the ld_cli_checks (its bos/eos). */
#define LD_CLI_CHECK_OPTIONS(f, c)                                                                               \
    { LD_OPT_STRING, 0, "template", &(f).tpl_path, "SRC", "re-render through this chat template and compare" }, \
    { LD_OPT_STRING, 0, "model", &(f).model_dir, "DIR", "same, with the template of this model directory" },    \
    { LD_OPT_STRING, 0, "server", &(f).server, "NAME",                                                        \
      "preprocessing before the template: sglang (default) or hf" },                                         \
    { LD_OPT_STRING, 0, "bos-token", &(c).rr.chat.bos_token, "S", "bos_token for the template (default: from SRC)" }, \
    { LD_OPT_STRING, 0, "eos-token", &(c).rr.chat.eos_token, "S", "eos_token for the template (default: from SRC)" }, \
    { LD_OPT_STRING, 0, "tokenizer", &(f).tok_path, "SRC",                                                    \
      "check the logged input ids against the prompt text (tokenizer.json, GGUF or model dir)" }

/* Loads what `f` asks for into *c: 0, or -1 with the reason printed (and
 * *c freed). */
int ld_cli_checks_load(struct ld_cli *cli, const char *cmd, const ld_cli_check_flags *f, ld_cli_checks *c);
void ld_cli_checks_free(ld_cli_checks *c);

#endif
