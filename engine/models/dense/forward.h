/* forward.h - the forward pass of a dense decoder (model.h) over a backend
 * (backend.h), with a KV cache: a session holds the cache and the position.
 *
 * ld_session_eval appends T tokens at the current position, in chunks of at
 * most max_batch tokens.  Every op computes a token's row the same way
 * whatever the chunk (attention reads the cache, which holds the same
 * values), so the logits of a position are bitwise identical whether the
 * prompt runs as one prefill, in chunks or token by token, and (with the
 * reference backend) whatever the number of threads.
 */
#ifndef LD_FORWARD_H
#define LD_FORWARD_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "model.h"

typedef struct ld_session ld_session;

/* A session of at most `max_seq` positions over `model` (borrowed) and
 * `be` (borrowed); max_batch bounds the tokens per chunk (and the scratch
 * buffers). */
ld_status ld_session_create(const ld_model *model, ld_backend *be, int max_seq,
                            int max_batch, ld_session **out, ld_error *err);

/* Run `T` tokens from the current position.  `logits` (NULL: not wanted)
 * receives [T][vocab]; `hidden` (NULL: not wanted) receives
 * [n_layers + 2][T][hidden]: the embeddings, the residual stream after each
 * layer, and the final norm's output. */
ld_status ld_session_eval(ld_session *s, const int32_t *tokens, int T,
                          float *logits, float *hidden, ld_error *err);

/* A session that borrows the weights of `lead` (which must outlive it) and
 * has its own KV cache of max_seq positions and its own scratch (lead's
 * max_batch): another request on the same model, for batches. */
ld_status ld_session_create_sibling(const ld_session *lead, int max_seq, ld_session **out, ld_error *err);

/* One sequence's share of a batch: T tokens appended to s at its position,
 * logits [T][vocab] and hidden [n_layers + 2][T][hidden] as in
 * ld_session_eval (each NULL: not wanted). */
typedef struct ld_session_part {
    ld_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_session_part;

/* Several sequences in one batch, as a server batches its requests: the
 * parts' sessions (all of parts[0].s's model and backend, each once, with
 * parts[0].s's reduce hook if any: one tensor-parallel rank's sessions,
 * tp_forward.h's ld_tp_session_eval_batch; the hook is called on a
 * chunk's rows) run together in chunks of at
 * most parts[0].s's max_batch rows (and of each part's own max_batch
 * rows: batch.h's ld_batch_run), every op on all the chunk's rows but
 * attention, which each sequence runs on its own rows and cache.
 * parts[0].s's weights and scratch serve the batch.  A sequence's logits
 * are bitwise those it gets alone: no op's row depends on the other rows
 * (backend.h's contract).  Several parts need the backend's buf_view
 * (LD_ERR_UNSUPPORTED without).  On an error the sessions may have run
 * part of their tokens (ld_session_pos). */
ld_status ld_session_eval_batch(const ld_session_part *parts, int n, ld_error *err);

/* Tensor parallelism (tp_forward.h): a hook the session calls on the
 * output of o_proj (which = 0) and of down_proj (which = 1) of layer
 * `layer`, x [T][hidden] in the session's backend, before it is added to
 * the residual stream; the TP forward sums the ranks' partial outputs
 * there.  NULL (the default): no call, the plain forward. */
typedef ld_status (*ld_session_reduce_fn)(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which,
                                          ld_error *err);
void ld_session_set_reduce(ld_session *s, ld_session_reduce_fn fn, void *ctx);

/* A slice of the model: a session over layers [first, last) alone, whose
 * weights and KV caches are the only ones it loads and allocates, so that
 * a CPU can check a few layers of a model too large for it against
 * another backend (logdiff replay --check-layers).  It runs hidden rows,
 * not tokens: ld_session_eval_slice appends T rows x [T][hidden] (the
 * residual stream entering layer `first`: plane `first` of
 * ld_session_eval's hidden) at the current position, in chunks of at most
 * max_batch, and writes out [last - first][T][hidden]: the residual
 * stream after each of its layers (planes first + 1 .. last).  Given the
 * planes of a whole forward pass on the same backend, the rows are
 * bitwise that pass's.  ld_session_eval and batches refuse a slice's
 * session (LD_ERR_USAGE), as does ld_session_create_sibling. */
ld_status ld_session_create_slice(const ld_model *model, ld_backend *be, int first, int last, int max_seq,
                                  int max_batch, ld_session **out, ld_error *err);
ld_status ld_session_eval_slice(ld_session *s, const float *x, int T, float *out, ld_error *err);

/* Checks (on = 1) every op's output in the evals that follow for NaN and
 * infinities, in the order the ops run: the embeddings ("embed"), each
 * layer's attn_norm, q_proj, k_proj, v_proj, q_norm, k_norm (Qwen3),
 * attention (the heads' outputs), attn_out (o_proj), attn_residual,
 * ffn_norm, ffn_gate, ffn_up, ffn_act (SwiGLU), ffn_down, ffn_residual,
 * then final_norm and the logits a sequence takes.  The first non-finite
 * value fails the eval with LD_ERR_NUMERIC naming its layer, op and
 * position (finite.h's message); the session has then run part of the
 * chunk.  Each check reads the op's output back: slow, for locating what
 * a cheaper look found (engine.h's ld_lm_eval_checked).  In a batch the
 * lead's (parts[0].s's) setting holds. */
void ld_session_set_check(ld_session *s, int on);

/* Positions done so far. */
int ld_session_pos(const ld_session *s);

/* Forget the cache (back to position 0). */
void ld_session_reset(ld_session *s);

void ld_session_destroy(ld_session *s);

#endif /* LD_FORWARD_H */
