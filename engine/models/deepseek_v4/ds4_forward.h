/* ds4_forward.h - the forward pass of DeepSeek-V4
 * (ds4_model.h) over a backend (backend.h), with its caches: a
 * session holds the per-layer KV rows, the compressors' per-position
 * projections and their compressed entries, and the position, as
 * ds_forward.h's does for V3.
 *
 * The design: docs/engine-deepseek.md, "DeepSeek-V4: what the forward pass computes". */
#ifndef LD_DS4_FORWARD_H
#define LD_DS4_FORWARD_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "ds4_model.h"

typedef struct ld_ds4_session ld_ds4_session;

/* A session of at most `max_seq` positions (<= max_position_embeddings)
 * over `model` and `be` (both borrowed); at most max_batch tokens per
 * chunk.  The session-level variants (engine/backend/cpu_kernels.h: combine, mhc,
 * indexer, rope) start at ref: ld_ds4_session_set_kernels. */
ld_status ld_ds4_session_create(const ld_ds4_model *model, ld_backend *be, int max_seq, int max_batch,
                                ld_ds4_session **out, ld_error *err);

/* Run `T` tokens from the current position.  `logits` (NULL: not wanted)
 * receives [T][vocab]; `hidden` (NULL: not wanted) [n_layers + 2][T][hidden]:
 * plane 0 the embeddings (every stream's start), plane 1 + l the MEAN of the
 * hc_mult streams after layer l (transformers' output_hidden_states gives
 * the streams [T][hc_mult][hidden] for layers but the last), plane
 * n_layers + 1 the final norm's output (as transformers' last hidden state);
 * `experts` (NULL: not wanted) [n_layers][T][num_experts_per_tok], each
 * token's experts in ascending id. */
ld_status ld_ds4_session_eval(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                              int32_t *experts, ld_error *err);

/* ld_ds4_session_eval, and the CSA indexer's picks: `picks` (NULL: not
 * wanted) receives [n_layers][T][index_topk], per query of a CSA layer the
 * compressed entries it attends to in ascending order, then -1 (all -1 in
 * the other layers). */
ld_status ld_ds4_session_eval_picks(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                    int32_t *experts, int32_t *picks, ld_error *err);

/* ld_ds4_session_eval, and the residual streams entering layer `layer`
 * (0 .. n_layers; n_layers: after the last layer, before the head's
 * collapse): `streams` (NULL: not wanted) receives [T][hc_mult][hidden].
 * What a slice of layers [layer, ...) is fed. */
ld_status ld_ds4_session_eval_streams(ld_ds4_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                      int layer, float *streams, ld_error *err);

/* A slice: layers [first, last) alone (their weights, KV rings,
 * compressors and indexers only; no embeddings, head collapse, final
 * norm or lm head), fed the streams ld_ds4_session_eval_streams gives at
 * `first`.  ld_ds4_session_eval_slice runs T rows from the slice's
 * position: x [T][hc_mult][hidden] the streams entering `first`, `tokens`
 * [T] their ids (the hash layers route by them), out [last - first][T]
 * [hidden] the planes ld_ds4_session_eval's `hidden` has after each layer
 * (the streams' means), bitwise those of the whole pass.  A slice's
 * session runs nothing else (no eval, batch or sibling).  The variants
 * as ld_ds4_session_set_kernels sets them. */
ld_status ld_ds4_session_create_slice(const ld_ds4_model *m, ld_backend *be, int first, int last, int max_seq,
                                      int max_batch, ld_ds4_session **out, ld_error *err);
ld_status ld_ds4_session_eval_slice(ld_ds4_session *s, const int32_t *tokens, const float *x, int T, float *out,
                                    ld_error *err);

/* A session that borrows the weights of `lead` (which must outlive it):
 * its own caches (max_seq positions), scratch (lead's max_batch) and
 * position, lead's variants: another request on the same model, for
 * batches. */
ld_status ld_ds4_session_create_sibling(const ld_ds4_session *lead, int max_seq, ld_ds4_session **out,
                                        ld_error *err);

/* One sequence's share of a batch: T tokens appended to s at its position,
 * logits [T][vocab] and hidden [n_layers + 2][T][hidden] as the session's
 * eval writes them (each NULL: not wanted). */
typedef struct ld_ds4_session_part {
    ld_ds4_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_ds4_session_part;

/* Several sequences in one batch (forward.h's ld_session_eval_batch for
 * V4): the parts' sessions (of parts[0].s's model, backend and variants,
 * each once, with parts[0].s's reduce hook if any: one tensor-parallel
 * rank's sessions) run together in chunks of at most parts[0].s's max_batch rows (and each part's own max_batch): the
 * mHC mixing, the projections, the MoE and the head on all the chunk's
 * rows with parts[0].s's weights and scratch, the attention's KV ring,
 * compressors, indexer and attention (on the host path its projections
 * too) per sequence on its rows and its session's state.  A sequence's logits are bitwise those it gets
 * alone.  Several parts need the backend's buf_view (LD_ERR_UNSUPPORTED
 * without).  On an error the sessions may have run part of their tokens. */
ld_status ld_ds4_session_eval_batch(const ld_ds4_session_part *parts, int n, ld_error *err);

/* The combine, mhc, indexer and rope variants of `k`. */
void ld_ds4_session_set_kernels(ld_ds4_session *s, const ld_cpu_kernels *k);

/* Tensor parallelism (tp_ds4_shard.h, tp_forward.h): `fn` is called on the
 * rank's partial output of a block, [T][hidden] in the backend buffer `x`,
 * before its hc_post (which = 0: wo_b's output, 1: the MoE's routed +
 * shared sum), and leaves there the sum over the ranks.  NULL (the
 * default): no call, the single-rank forward's bits. */
typedef ld_status (*ld_ds4_reduce_fn)(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which,
                                      ld_error *err);
void ld_ds4_session_set_reduce(ld_ds4_session *s, ld_ds4_reduce_fn fn, void *ctx);

/* Positions done so far. */
int ld_ds4_session_pos(const ld_ds4_session *s);

/* Forget the caches (back to position 0). */
void ld_ds4_session_reset(ld_ds4_session *s);

void ld_ds4_session_destroy(ld_ds4_session *s);

#endif /* LD_DS4_FORWARD_H */
