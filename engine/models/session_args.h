/* session_args.h - what every session (dense forward.c, DeepSeek
 * ds_forward.c and ds4_forward.c) checks of an eval call
 * before it runs anything, with the same errors whichever model it is. */
#ifndef LD_SESSION_ARGS_H
#define LD_SESSION_ARGS_H

#include <stdint.h>

#include "ld_error.h"

/* T tokens from position pos fit a session of max_seq positions
 * (LD_ERR_LIMIT), and each id lies in [0, vocab) (LD_ERR_USAGE naming the
 * id and its index). */
ld_status ld_session_check_eval(const int32_t *tokens, int T, int pos, int max_seq, int vocab, ld_error *err);

/* A layer slice (forward.h's ld_session_create_slice and its twins):
 * [first, last) within a model's n_layers (LD_ERR_USAGE); T rows from
 * position pos fit a session of max_seq positions (LD_ERR_USAGE). */
ld_status ld_session_check_slice(int first, int last, int n_layers, ld_error *err);
ld_status ld_session_check_rows(int T, int pos, int max_seq, ld_error *err);

#endif /* LD_SESSION_ARGS_H */
