/* session_args.h - what every session (dense forward.c, DeepSeek
 * deepseek_forward.c and deepseek_v4_forward.c) checks of an eval call
 * before it runs anything, with the same errors whichever model it is. */
#ifndef LD_SESSION_ARGS_H
#define LD_SESSION_ARGS_H

#include <stdint.h>

#include "ld_error.h"

/* T tokens from position pos fit a session of max_seq positions
 * (LD_ERR_LIMIT), and each id lies in [0, vocab) (LD_ERR_USAGE naming the
 * id and its index). */
ld_status ld_session_check_eval(const int32_t *tokens, int T, int pos, int max_seq, int vocab, ld_error *err);

/* One round of a batch of n sequences (the sessions' eval_batch): each in
 * turn takes what is left of its T[i] tokens (done[i] run so far), at most
 * cap[i] (its session's max_batch) and what is left of `budget` rows (the
 * lead's max_batch).  take[i]: its rows this round (0: none); done[]
 * advanced.  Returns the round's rows, 0 when every sequence is done. */
int ld_batch_round(const int *T, const int *cap, int *done, int *take, int n, int budget);

#endif /* LD_SESSION_ARGS_H */
