/* session_args.c - see session_args.h. */
#include "session_args.h"

ld_status ld_session_check_eval(const int32_t *tokens, int T, int pos, int max_seq, int vocab, ld_error *err)
{
    if (T < 0 || T > max_seq - pos)
        return LD_FAIL(err, LD_ERR_LIMIT, 0, "%d tokens at position %d exceed the session's %d positions", T, pos,
                       max_seq);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= vocab)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "token id %d at index %d outside the vocabulary of %d", (int)tokens[t],
                           t, vocab);
    return LD_OK;
}
