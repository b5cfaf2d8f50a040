/* replay_internal.h - what the replay files share (not a public API). */
#ifndef LD_REPLAY_INTERNAL_H
#define LD_REPLAY_INTERNAL_H

#include "engine/engine.h"
#include "replay.h"

struct ld_replay_engine {
    ld_lm *lm;
    ld_backend *be;
    ld_cpu_kernels k;     /* the kernel spec's choices (what the session reads: mla) */
    int tp;               /* tensor parallelism: ranks (0: none, the plain session on `be`) */
    ld_tp_opts tpo;       /* with tp: what each rank runs (tpo.backend / kernels point below) */
    char tp_backend[8];
    char *tp_kernels;     /* owned, NULL when none */
    ld_comm *world;       /* this process's rank of a group of processes (ld_replay_engine_join_tp), owned; NULL: none;
                             its GPU is tpo.device */
    ld_tok *tok;          /* NULL when none */
    char tok_error[256];  /* why there is none ("" when no tokenizer.json) */
};

/* Non-finite logits (replay_finite.c).  The first of the n rows of V
 * logits holding a NaN or an infinity, or -1. */
int64_t ld_replay_nonfinite_row(const float *logits, size_t n, int V);

/* Where the first non-finite value behind a row of logits was computed:
 * the ids that led to the row, a [na] then b [nb] (the row being the
 * logits after the last), run again on s from position 0 with every value
 * checked.  Always an error: LD_ERR_NUMERIC, the engine's message naming
 * the layer, the op and the position (engine.h's ld_lm_eval_checked),
 * err->offset = `at` (the caller's index of the row: an output position);
 * or the engine's other errors.  s is left part-way. */
ld_status ld_replay_nonfinite(ld_lm_session *s, const int32_t *a, size_t na, const int32_t *b, size_t nb,
                              int64_t at, ld_error *err);

#endif
