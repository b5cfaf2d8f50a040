/* tp_forward.h - tensor parallelism for the dense decoders (forward.h),
 * DeepSeek-V3 / V3.2 (ds_forward.h, ld_tp_ds_session_create) and
 * DeepSeek-V4 (ds4_forward.h, ld_tp_ds4_session_create):
 * the model split over N ranks (tp_shard.h; DeepSeek: tp_ds_shard.h,
 * MLA's heads, the FFN's and every expert's intermediate rows; V4:
 * tp_ds4_shard.h), each rank
 * running the ordinary forward pass on its shard with its own backend
 * instance, the partial outputs of o_proj and down_proj (DeepSeek: of
 * o_proj and of the whole FFN) summed across ranks by a communicator
 * (comm.h) before they join the residual stream: where the partial lives
 * when the backend says where (buf_mem) and the communicator reduces that
 * memory (host memory over the simulated ranks, device memory over NCCL),
 * else through a host copy; the same bits either way (tp_forward.c).
 *
 * The design: docs/engine-tp.md, "Tensor parallelism: the group's session". */
#ifndef LD_TP_FORWARD_H
#define LD_TP_FORWARD_H

#include <stdint.h>

#include "comm.h"
#include "engine/engine.h"
#include "engine/backend/cpu_kernels.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "engine/models/deepseek_v4/ds4_model.h"
#include "engine/models/dense/model.h"



typedef struct ld_tp_session ld_tp_session;

/* A TP session of `m` (borrowed) as forward.h's ld_session_create.
 * Errors: those of ld_tp_check_config / ld_tp_shard_create (a size that
 * does not divide the heads, a K-slice cutting quantization blocks),
 * LD_ERR_USAGE for a bad backend name or node count, the backends' and
 * communicators' (LD_ERR_UNSUPPORTED for cuda in a build without NCCL or
 * on a machine with fewer GPUs than ranks). */
ld_status ld_tp_session_create(const ld_model *m, const ld_tp_opts *o, int max_seq, int max_batch,
                               ld_tp_session **out, ld_error *err);

/* A TP session of the DeepSeek-V3 / V3.2 model `m` (borrowed), split as
 * tp_ds_shard.h says, each rank running ds_forward.h's session
 * on its shard with MLA's form `attn` and the session-level variants of `k`
 * (NULL: the defaults; router, combine, indexer, rope), the reduce hook
 * summing the ranks' partials after o_proj and after the FFN.  What holds
 * for the dense decoders above holds here: TP = N the same bits run after
 * run, whatever the threads per rank, the node grouping or the chunking;
 * TP = 1 the plain session's bits.  Errors: ld_tp_ds_check's (a size that
 * does not divide the heads or an intermediate width, an FP8 scale block
 * cut), LD_ERR_UNSUPPORTED for combine=bf16 with N > 1 (it rounds the
 * whole expert sum, of which a rank holds a part), the rest as
 * ld_tp_session_create. */
ld_status ld_tp_ds_session_create(const ld_ds_model *m, const ld_tp_opts *o, ld_ds_attn attn,
                                  const ld_cpu_kernels *k, int max_seq, int max_batch, ld_tp_session **out,
                                  ld_error *err);

/* A TP session of the DeepSeek-V4 model `m` (borrowed), split as
 * tp_ds4_shard.h says (the query heads with wo_a's groups, every expert's
 * intermediate rows), each rank running ds4_forward.h's session on
 * its shard with the session-level variants of `k` (NULL: the defaults;
 * combine, mhc, indexer, rope), the reduce hook summing the ranks'
 * partials of wo_b's output and of the MoE before hc_post.  The same
 * guarantees as above (TP = N the same bits run after run, whatever the
 * threads per rank, the node grouping or the chunking; TP = 1 the plain
 * session's bits).  Errors: ld_tp_ds4_check's (a size that does not divide
 * the heads, o_groups or moe_intermediate_size; a scale block cut), the
 * rest as ld_tp_session_create. */
ld_status ld_tp_ds4_session_create(const ld_ds4_model *m, const ld_tp_opts *o, const ld_cpu_kernels *k, int max_seq,
                                   int max_batch, ld_tp_session **out, ld_error *err);

/* ld_session_eval (ld_ds_session_eval without the experts) over the group (logits and hidden from rank 0).  After
 * an error the session is unusable (destroy it). */
ld_status ld_tp_session_eval(ld_tp_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                             ld_error *err);

/* ld_tp_session_eval of a DeepSeek-V4 session, and (rank 0's: every rank
 * holds them whole) the residual streams entering layer `layer`, as
 * ld_ds4_session_eval_streams gives them; LD_ERR_USAGE for the other
 * families (their state is a hidden plane). */
ld_status ld_tp_session_eval_streams(ld_tp_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                     int layer, float *streams, ld_error *err);

/* Another request's TP session on the group of `lead` (a group or another
 * sibling; destroying the group first only closes it: it goes with its
 * last sibling): on each rank a sibling of the
 * group's rank session (the shard's weights borrowed, its own caches of
 * max_seq positions), run by the group's backends, communicators and
 * threads.  What a tensor-parallel server batches.  The group's ranks run
 * one eval at a time: a group and its siblings are evaluated from one
 * thread (or under the caller's own lock). */
ld_status ld_tp_session_create_sibling(ld_tp_session *lead, int max_seq, ld_tp_session **out, ld_error *err);

/* One request's share of a TP batch: T tokens appended to s, logits
 * [T][vocab] and hidden [n_layers + 2][T][hidden] as ld_tp_session_eval
 * writes them (each NULL: not wanted). */
typedef struct ld_tp_session_part {
    ld_tp_session *s;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
} ld_tp_session_part;

/* Several requests of one group (parts[0].s's, each a group or its
 * sibling, each once) in one batch: every rank runs its family's
 * eval_batch on its sessions of the parts, the same chunks on every rank,
 * its reduces on the chunk's rows; logits and hidden planes from rank 0.  A request's logits
 * are bitwise those it gets alone under the same split. */
ld_status ld_tp_session_eval_batch(const ld_tp_session_part *parts, int n, ld_error *err);

int ld_tp_session_pos(const ld_tp_session *s);
void ld_tp_session_reset(ld_tp_session *s);

/* The ranks' backend name ("cpu", "ref", "cuda"...). */
const char *ld_tp_session_backend(const ld_tp_session *s);



/* cuda: the GPUs this process's ranks run on (ld_tp_opts.gpus as
 * resolved: fewer than its ranks when they share); 0 on the CPU backends. */
int ld_tp_session_gpus(const ld_tp_session *s);

/* Rank r's communicator (for its counters; comm_sim.h's traffic); NULL
 * for a rank this process does not run. */
const ld_comm *ld_tp_session_comm(const ld_tp_session *s, int rank);

/* Rank r's backend (borrowed: lives as long as s), NULL for a rank out of
 * range.  For tests and instrumentation: a caller may point its ops at a
 * table of its own (e.g. without buf_mem, to take the staging path)
 * before the first eval, if it does so on every rank and keeps the table
 * alive while s lives. */
ld_backend *ld_tp_session_rank_backend(ld_tp_session *s, int rank);

void ld_tp_session_destroy(ld_tp_session *s);

#endif /* LD_TP_FORWARD_H */
