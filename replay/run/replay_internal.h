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

#endif
