/* judge.h - one request's verdict: the differ's checks (analysis/diff.h)
 * and, where they are on, the re-render check (analysis/rerender.h), the
 * token check (analysis/tokcheck.h) and the kernels check (run/replay.h:
 * ld_replay_check).  What `logdiff diff` and `logdiff regress` share, so
 * that both judge every request the same way; cmd/common/checks.c turns
 * their flags into the checks. */
#ifndef LD_JUDGE_H
#define LD_JUDGE_H

#include "replay/analysis/diff.h"
#include "replay/analysis/rerender.h"
#include "replay/run/replay.h"
#include "replay/template/tpl_source.h"
#include "replay/tokenizer/tok.h"

/* The optional checks; NULL members are off.  Borrowed. */
typedef struct ld_judge_checks {
    const ld_rerender *rerender; /* the re-render check */
    const ld_tok *tok;           /* the token check */
    ld_replay_engine *replay;    /* the kernels check: used by one judge at a time */
} ld_judge_checks;

/* The re-render check through the chat template at `path` (tpl_source.h:
 * a .jinja file, a tokenizer_config.json, a GGUF, a model directory or a
 * built-in encoder's name) after the preprocessing of server `server`
 * ("sglang" or "hf"): loads the template into *src (the caller's:
 * ld_tpl_source_free) and sets *rr to use it.  Errors: LD_ERR_USAGE for an
 * unknown server, else the loader's (err->line set where the template has
 * a syntax error). */
ld_status ld_judge_open_template(const char *path, const char *server, ld_rerender *rr, ld_tpl_source **src,
                                 ld_error *err);

/* The kernels check's engine: the model at `dir` on `backend` ("cpu",
 * "ref" or "cuda"; NULL: cpu) with `threads` threads, split over `tp`
 * tensor-parallel ranks (0: not split).  *in_split is set when the split
 * is what failed.  On error *e is NULL. */
ld_status ld_judge_open_replay(const char *dir, const char *backend, int tp, int threads, ld_replay_engine **e,
                               int *in_split, ld_error *err);

/* 1 when the checks need the logged values (LD_PAIR_KEEP_VALUES). */
int ld_judge_needs_values(const ld_judge_checks *c);

/* Judges r into *v (findings in `arena`): ld_differ_judge(), then the
 * checks that are on; their findings join and the verdict is recomputed
 * over all of them.  Errors: LD_ERR_NOMEM. */
ld_status ld_judge_request(ld_differ *d, const ld_judge_checks *checks, const ld_request *r,
                           ld_arena *arena, ld_verdict *v, ld_error *e);

#endif
