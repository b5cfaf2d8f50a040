/* ds_forward.h - the forward pass of DeepSeek-V3 and V3.2 (ds_model.h)
 * over a backend (backend.h), with a latent KV cache: a session holds the
 * cache and the position, as forward.h's does for the dense models.
 *
 * The design: docs/engine-deepseek.md, "DeepSeek-V3 and V3.2: what the forward pass computes". */
#ifndef LD_DS_FORWARD_H
#define LD_DS_FORWARD_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "ds_model.h"

typedef enum ld_ds_attn {
    LD_DS_ATTN_NAIVE = 0,    /* per-head k/v expanded from the latent */
    LD_DS_ATTN_ABSORBED = 1, /* kv_b_proj absorbed into q and the output */
    LD_DS_ATTN_SPLITK = 2    /* absorbed, the latent attention split-KV
                                (mla=splitk, kernels/ref/ref_ds_variants.h) */
} ld_ds_attn;

typedef struct ld_ds_session ld_ds_session;

/* A session of at most `max_seq` positions (<= max_position_embeddings)
 * over `model` and `be` (both borrowed); at most max_batch tokens per
 * chunk; `attn` is the MLA form (engine/backend/cpu_kernels.h: mla=ref, absorbed,
 * splitk).  The other session-level variants (router, combine, indexer,
 * rope) start at ref: ld_ds_session_set_kernels. */
ld_status ld_ds_session_create(const ld_ds_model *model, ld_backend *be, int max_seq, int max_batch,
                               ld_ds_attn attn, ld_ds_session **out, ld_error *err);

/* Run `T` tokens from the current position.  `logits` (NULL: not wanted)
 * receives [T][vocab]; `hidden` (NULL: not wanted) [n_layers + 2][T][hidden]
 * (the embeddings, the residual stream after each layer, the final norm's
 * output); `experts` (NULL: not wanted) [n_layers][T][num_experts_per_tok],
 * the experts each token was routed to in ascending id (-1 for dense
 * layers). */
ld_status ld_ds_session_eval(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                             int32_t *experts, ld_error *err);

/* ld_ds_session_eval, and for DeepSeek-V3.2 the positions the indexer
 * selected: `selected` (NULL: not wanted; ignored for V3) receives
 * [n_layers][T][index_topk], per query the min(index_topk, pos + 1)
 * positions its MLA attended to in ascending order, then -1. */
ld_status ld_ds_session_eval_sel(ld_ds_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                 int32_t *experts, int32_t *selected, ld_error *err);

/* A session that borrows the weights of `lead` (which must outlive it):
 * its own latent (and index key) caches of max_seq positions, scratch
 * (lead's max_batch), position; lead's MLA form and variants. */
ld_status ld_ds_session_create_sibling(const ld_ds_session *lead, int max_seq, ld_ds_session **out, ld_error *err);

/* A slice: layers [first, last) alone, fed hidden rows, as forward.h's
 * ld_session_create_slice / ld_session_eval_slice (their weights and
 * caches only; out [last - first][T][hidden]); the variants as
 * ld_ds_session_set_kernels sets them. */
ld_status ld_ds_session_create_slice(const ld_ds_model *m, ld_backend *be, int first, int last, int max_seq,
                                     int max_batch, ld_ds_attn attn, ld_ds_session **out, ld_error *err);
ld_status ld_ds_session_eval_slice(ld_ds_session *s, const float *x, int T, float *out, ld_error *err);

/* One sequence's share of a batch: T tokens appended to s at its position,
 * logits [T][vocab] and hidden [n_layers + 2][T][hidden] as the session's
 * eval writes them (each NULL: not wanted). */
typedef struct ld_ds_session_part {
    ld_ds_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_ds_session_part;

/* Several sequences in one batch (forward.h's ld_session_eval_batch for
 * V3 / V3.2): the parts' sessions (of parts[0].s's model, backend, MLA
 * form and variants, each once, with parts[0].s's reduce hook if any: one
 * tensor-parallel rank's sessions) run together in chunks of at most parts[0].s's max_batch rows (and each part's own):
 * the norms, MLA's projections, the MLP/MoE and the head on all the
 * chunk's rows with parts[0].s's weights and scratch, MLA's rope, caches
 * and attention (and V3.2's indexer) per sequence on its rows and its
 * session's caches.  A
 * sequence's logits are bitwise those it gets alone.  Several parts need
 * the backend's buf_view (LD_ERR_UNSUPPORTED without). */
ld_status ld_ds_session_eval_batch(const ld_ds_session_part *parts, int n, ld_error *err);

/* The router, combine, indexer and rope variants of `k` (the MLA form is
 * the session's, fixed at creation). */
void ld_ds_session_set_kernels(ld_ds_session *s, const ld_cpu_kernels *k);

/* Tensor parallelism (tp_forward.h, ld_tp_ds_session_create): a hook the
 * session calls on layer `layer`'s partial output x [T][hidden] in the
 * session's backend before it joins the residual stream: after o_proj
 * (which = 0) and after the whole FFN (which = 1: the dense MLP's
 * down_proj, or the MoE's routed sum plus the shared experts), where the
 * TP forward sums the ranks' partial outputs.  NULL (the default): no
 * call, the plain forward's bits.  The signature is forward.h's
 * ld_session_reduce_fn. */
typedef ld_status (*ld_ds_reduce_fn)(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which,
                                     ld_error *err);
void ld_ds_session_set_reduce(ld_ds_session *s, ld_ds_reduce_fn fn, void *ctx);

/* Positions done so far. */
int ld_ds_session_pos(const ld_ds_session *s);

/* Forget the cache (back to position 0). */
void ld_ds_session_reset(ld_ds_session *s);

void ld_ds_session_destroy(ld_ds_session *s);

#endif /* LD_DS_FORWARD_H */
