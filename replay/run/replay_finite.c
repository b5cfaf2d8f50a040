/* replay_finite.c - non-finite logits in a replay: found with a cheap look
 * at the rows the replay reads anyway, then located by running the ids
 * again with every value checked (engine.h's ld_lm_eval_checked).  NaN
 * logits would otherwise pass for a verdict: no logit compares larger than
 * a NaN, so every logged token would rank first. */
#include <math.h>

#include "replay_internal.h"

int64_t ld_replay_nonfinite_row(const float *logits, size_t n, int V)
{
    for (size_t r = 0; r < n; r++) {
        const float *x = logits + r * (size_t)V;
        for (int j = 0; j < V; j++)
            if (!isfinite(x[j])) return (int64_t)r;
    }
    return -1;
}

ld_status ld_replay_nonfinite(ld_lm_session *s, const int32_t *a, size_t na, const int32_t *b, size_t nb,
                              int64_t at, ld_error *err)
{
    ld_lm_reset(s);
    ld_status st = na ? ld_lm_eval_checked(s, a, (int)na, err) : LD_OK;
    if (st == LD_OK && nb) st = ld_lm_eval_checked(s, b, (int)nb, err);
    if (st == LD_OK) /* the same ids, the same bits: not expected */
        return LD_FAIL(err, LD_ERR_NUMERIC, (uint64_t)at,
                       "non-finite logits at position %lld, not found again with every value checked",
                       (long long)at);
    if (st == LD_ERR_NUMERIC && err) err->offset = (uint64_t)at;
    return st;
}
