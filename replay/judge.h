/* judge.h - one request's verdict as `logdiff diff` gives it: the differ's
 * checks (replay/analysis/diff.h) and, with --template / --model, the re-render
 * check (replay/analysis/rerender.h), with --tokenizer the token check
 * (replay/analysis/tokcheck.h), with --replay the kernels check (replay/run/replay.h:
 * ld_replay_check).  Shared by `logdiff diff` and `logdiff regress`
 * so that both judge every request the same way. */
#ifndef LD_CMD_JUDGE_H
#define LD_CMD_JUDGE_H

#include "cmd/cmd.h"
#include "replay/analysis/diff.h"
#include "replay/run/replay.h"
#include "replay/analysis/rerender.h"
#include "replay/tokenizer/tok.h"
#include "replay/template/tpl_source.h"

/* The optional checks; NULL members are off. */
typedef struct ld_judge_checks {
    const ld_rerender *rerender; /* --template / --model */
    const ld_tok *tok;           /* --tokenizer */
    ld_replay_engine *replay;    /* --replay: used by one judge at a time */
} ld_judge_checks;

/* --template / --model / --server of command `cmd` ("diff"): loads the
 * template into *src (left NULL when neither is given) and sets up *rr.
 * Returns 0, or -1 with the reason printed on cli->err. */
int ld_judge_load_template(struct ld_cli *cli, const char *cmd, const char *tpl_path,
                           const char *model_dir, const char *server, ld_rerender *rr,
                           ld_tpl_source **src);

/* --tokenizer SRC of command `cmd`: loads it into *tok (left NULL when
 * `path` is NULL).  Returns 0, or -1 with the reason printed. */
int ld_judge_load_tokenizer(struct ld_cli *cli, const char *cmd, const char *path, ld_tok **tok);

/* How --replay replays: the model, the backend (--replay-backend: cpu, the
 * default, ref or cuda) and the tensor-parallel split (--replay-tp N, 0:
 * none), as `logdiff replay --backend NAME --tp N`. */
typedef struct ld_judge_replay {
    const char *dir;
    const char *backend;
    long tp;
} ld_judge_replay;

/* The options above as flags of `diff` and `regress`; a problem to report
 * when they are given without a model to replay, or out of range (NULL:
 * fine). */
const char *ld_judge_replay_problem(const ld_judge_replay *o);

/* --replay DIR of command `cmd`: opens the engine into *e (left NULL when
 * o->dir is NULL) on o's backend, split over o->tp ranks, with as many
 * threads as cores (at most 64).  Returns 0, or -1 with the reason
 * printed. */
int ld_judge_load_replay(struct ld_cli *cli, const char *cmd, const ld_judge_replay *o, ld_replay_engine **e);

/* 1 when the checks need the logged values (LD_PAIR_KEEP_VALUES). */
int ld_judge_needs_values(const ld_judge_checks *c);

/* Judges r into *v (findings in `arena`): ld_differ_judge(), then the
 * checks that are on; their findings join and the verdict is recomputed
 * over all of them.  Errors: LD_ERR_NOMEM. */
ld_status ld_judge_request(ld_differ *d, const ld_judge_checks *checks, const ld_request *r,
                           ld_arena *arena, ld_verdict *v, ld_error *e);

#endif
