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

ld_status ld_session_check_slice(int first, int last, int n_layers, ld_error *err)
{
    if (first < 0 || last <= first || last > n_layers)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "layers [%d, %d): a slice of the model's %d layers is [first, last) "
                       "with 0 <= first < last <= %d", first, last, n_layers, n_layers);
    return LD_OK;
}

ld_status ld_session_check_rows(int T, int pos, int max_seq, ld_error *err)
{
    if (T < 1 || pos + T > max_seq)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "%d rows at position %d: the session holds %d positions", T, pos,
                       max_seq);
    return LD_OK;
}
