/* lm.h - one interface over the engine's model families, what a caller
 * that only runs tokens needs (replay/): the dense decoders (model.h,
 * forward.h: Llama, Qwen2/3, Mistral, SmolLM, from HF directories or GGUF)
 * DeepSeek-V3 / V3.2 (ds_model.h, ds_forward.h) and DeepSeek-V4
 * (deepseek_v4_*.h), from HF directories.  The families keep their own sessions; this dispatches.
 */
#ifndef LD_LM_H
#define LD_LM_H

#include <stdint.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "ld_error.h"
#include "engine/tp/tp_forward.h"

typedef struct ld_lm ld_lm;
typedef struct ld_lm_session ld_lm_session;

typedef struct ld_lm_info {
    const char *arch;  /* "LlamaForCausalLM", "DeepseekV3ForCausalLM", ... */
    int vocab;
    int max_pos;       /* the context length */
    int n_layers;
    int hidden;        /* the residual stream's width (hidden planes) */
    unsigned kernel_features; /* LD_KF_* (cpu_kernels.h): which session-level
                                 kernel variants act on this model */
    int state_width;   /* floats per row of the residual state entering a
                          layer (what a slice is fed): hidden, or DeepSeek
                          V4's hc_mult streams of hidden */
} ld_lm_info;

/* Opens `path`: a GGUF file or a directory holding only one, or an HF
 * directory whose config.json names DeepSeek-V3 or a dense decoder. */
ld_status ld_lm_open(const char *path, ld_lm **out, ld_error *err);

const ld_lm_info *ld_lm_info_of(const ld_lm *lm);

void ld_lm_close(ld_lm *lm);

/* A session of at most max_seq positions, chunks of at most max_batch
 * tokens, on `be` (borrowed; so are `lm` and `k`); `k` (NULL: the
 * defaults) says which form the session computes where the model family
 * has a choice (LD_KOP_MLA). */
ld_status ld_lm_session_create(const ld_lm *lm, ld_backend *be, const ld_cpu_kernels *k, int max_seq,
                               int max_batch, ld_lm_session **out, ld_error *err);

/* A session whose model is split over tp->n ranks (tensor parallelism,
 * tp_forward.h), each rank on its own backend as `tp` says; the dense
 * decoders, DeepSeek V3 / V3.2 (tp_ds_shard.h; the MLA form and the
 * variants from tp->kernels) and DeepSeek-V4 (tp_ds4_shard.h: the query
 * heads with wo_a's groups and the experts' intermediate rows split; the
 * combine, mhc, indexer and rope variants from tp->kernels).  The rest as
 * ld_lm_session_create. */
ld_status ld_lm_session_create_tp(const ld_lm *lm, const ld_tp_opts *tp, int max_seq, int max_batch,
                                  ld_lm_session **out, ld_error *err);

/* Whether `lm` can be split over n ranks (the first errors of
 * ld_lm_session_create_tp, without building anything). */
ld_status ld_lm_tp_check(const ld_lm *lm, int n, ld_error *err);

/* A session over layers [first, last) alone (forward.h's
 * ld_session_create_slice and its twins: their weights and caches only),
 * fed by ld_lm_eval_slice: x [T][state_width] the residual state entering
 * layer `first` (ld_lm_eval_state's), tokens [T] the rows' ids (DeepSeek
 * V4's hash layers route by them; the others ignore them, NULL allowed),
 * out [last - first][T][hidden] the hidden planes after each layer
 * (ld_lm_eval's, bitwise); `k` as ld_lm_session_create. */
ld_status ld_lm_session_create_slice(const ld_lm *lm, ld_backend *be, const ld_cpu_kernels *k, int first, int last,
                                     int max_seq, int max_batch, ld_lm_session **out, ld_error *err);
ld_status ld_lm_eval_slice(ld_lm_session *s, const int32_t *tokens, const float *x, int T, float *out,
                           ld_error *err);

/* Runs T tokens from the current position: logits [T][vocab] and hidden
 * [n_layers + 2][T][hidden] (embeddings, after each layer, final norm),
 * each NULL when not wanted; the contract of ld_session_eval. */
ld_status ld_lm_eval(ld_lm_session *s, const int32_t *tokens, int T, float *logits, float *hidden, ld_error *err);

/* ld_lm_eval, and the residual state entering layer `layer` (0 ..
 * n_layers; n_layers: after the last layer): `state` (NULL: not wanted)
 * receives [T][state_width], what a slice from `layer` is fed.  For the
 * models whose state is one stream it is hidden plane `layer`. */
ld_status ld_lm_eval_state(ld_lm_session *s, const int32_t *tokens, int T, float *logits, float *hidden, int layer,
                           float *state, ld_error *err);

/* Another request's session over the weights of `lead` (which must outlive
 * it): its own caches of max_seq positions, lead's max_batch and variants;
 * for a tensor-parallel lead, a sibling on each rank run by the lead's
 * group (tp_forward.h's ld_tp_session_create_sibling). */
ld_status ld_lm_session_create_sibling(const ld_lm_session *lead, int max_seq, ld_lm_session **out, ld_error *err);

/* One request's share of a batch: T tokens appended to s, logits [T][vocab]
 * and hidden [n_layers + 2][T][hidden] as ld_lm_eval writes them (each
 * NULL: not wanted). */
typedef struct ld_lm_part {
    ld_lm_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_lm_part;

/* Several requests in one batch, as a server batches them (each family's
 * eval_batch: forward.h's ld_session_eval_batch, ds_forward.h's,
 * ds4_forward.h's): every request's logits bitwise those it gets
 * alone.  One part runs on any session; several tensor-parallel sessions
 * batch when they are one group's (the first and its siblings:
 * ld_tp_session_eval_batch), each rank batching its share. */
ld_status ld_lm_eval_batch(const ld_lm_part *parts, int n, ld_error *err);

int ld_lm_pos(const ld_lm_session *s);
void ld_lm_reset(ld_lm_session *s);
void ld_lm_session_destroy(ld_lm_session *s);

#endif /* LD_LM_H */
