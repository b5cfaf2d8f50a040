/* replay_batch.h - a logged request replayed alone and batched with other
 * logged requests, as the server ran it among others (`logdiff replay
 * --batch-with`).  logdiff's engine computes a token's row the same way
 * whatever else is in its batch (engine/models/lm.h's ld_lm_eval_batch), so the
 * request's logits must come out bitwise the same: the evidence that a
 * replay's verdict does not depend on load, and that an answer which
 * changed with the server's load points at the server's kernels.  A
 * difference is a fault of logdiff's engine. */
#ifndef LD_REPLAY_BATCH_H
#define LD_REPLAY_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"
#include "replay.h"
#include "parse/request/request.h"

/* Each step the request feeds LD_REPLAY_BATCH_STEP of its ids and every
 * other request LD_REPLAY_BATCH_OTHER of its own, in one batch, so that
 * the request's prefill rows sit next to the others' in every chunk. */
#define LD_REPLAY_BATCH_STEP 4
#define LD_REPLAY_BATCH_OTHER 3

/* What differs at the first position that differs: a hidden plane (its
 * index: 0 the embeddings, 1 + l layer l's output, n_layers + 1 the final
 * norm's) or, with every plane the same, the logits alone (the head). */
#define LD_REPLAY_BATCH_HEAD (-1)

typedef struct ld_replay_batch_report {
    size_t n_with;         /* the other requests */
    size_t positions;      /* the request's positions compared: its prompt and logged output */
    size_t steps;          /* batched steps run */
    int64_t first_diff;    /* the first position whose logits or hidden planes differ, or -1 */
    int first_plane;       /* at first_diff, the first hidden plane that
                              differs, or LD_REPLAY_BATCH_HEAD */
    int n_layers;          /* the model's layers (planes 0 .. n_layers + 1) */
    size_t n_diff;         /* positions whose logits or hidden planes differ */
    size_t n_diff_logits;  /* positions whose logits differ */
    double max_abs;        /* the largest |difference| of a logit */
    double max_abs_hidden; /* the largest |difference| of a hidden value */
    int tp;                /* the replays' tensor-parallel ranks (0: not split) */
} ld_replay_batch_report;

/* One step's positions [p, p + k) of both runs: logits [k][vocab] and
 * hidden planes [n_layers + 2][k][width] alone (a, ah) and batched (c,
 * ch), into out (its n_layers read): the first position that differs and
 * its first plane, the counts and the largest differences.  Split out of
 * ld_replay_batch_check for its tests. */
void ld_replay_batch_compare(const float *a, const float *c, const float *ah, const float *ch, size_t p, int k,
                             int vocab, size_t width, ld_replay_batch_report *out);

/* Replays r's ids (ld_replay_request_seq) twice from fresh sessions
 * sharing the engine's weights: alone, LD_REPLAY_BATCH_STEP ids a call,
 * and batched with the requests `with` [n_with] (their ids, each step
 * LD_REPLAY_BATCH_OTHER more of each until they run out), and compares
 * the logits and hidden planes (lm.h's ld_lm_part.hidden, so that a
 * difference names the layer where it starts) of every position bit for
 * bit.  A request's ids beyond the model's context are cut there.  Under
 * tensor parallelism both runs are split alike.  The errors of
 * ld_replay_request_seq and of the engine; LD_ERR_NUMERIC when r's logits
 * alone are not finite (replay.h), err->offset the position. */
ld_status ld_replay_batch_check(ld_replay_engine *e, const ld_request *r, const ld_request *const *with,
                                size_t n_with, ld_replay_batch_report *out, ld_error *err);

#endif /* LD_REPLAY_BATCH_H */
