/* engine.h - the engine as the layers above it see it: which kernels to
 * run (the CPU backends' and the CUDA backend's choices), a backend to run
 * them on, a group of ranks to split a model over, and the model interface
 * (ld_lm): open a model, make sessions (alone, split over tensor-parallel
 * ranks, a slice of its layers, siblings batched together) and run tokens.
 * replay/ includes this header and nothing else of engine/ but
 * engine/formats/gguf.h (a GGUF's metadata: chat template, vocabulary);
 * tools/check-layering.sh holds it to that.  The folders of engine/
 * implement it (engine/README.md); docs/engine.md tells the design.
 *
 * Ownership: what ld_*_create / _open / _join returns is the caller's, freed
 * by the matching _destroy / _close; what a function borrows must outlive
 * the object made with it (each comment says).  Threads: a session, a
 * backend and a communicator are used by one thread at a time.  Errors:
 * ld_status and an ld_error record (ld_error.h); nothing is printed.
 */
#ifndef LD_ENGINE_H
#define LD_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_backend ld_backend; /* an op table and its state (backend/backend.h) */
typedef struct ld_comm ld_comm;       /* a rank of a tensor-parallel group (tp/comm.h) */

/* ================================================================ the CPU backends' kernels
 * Which kernel each op of the CPU backends runs: the reference, the fast one
 * or a production-style variant, chosen per op with a spec
 * "OP=VARIANT[,OP=VARIANT...]" (`logdiff replay --kernels`; the ops and their
 * variants: backend/cpu_kernels.h). */
typedef enum ld_kvar {
    LD_KV_REF = 0, LD_KV_FAST, LD_KV_BF16, LD_KV_SPLITK, LD_KV_ABSORBED, LD_KV_FP8ACT, LD_KV_FUSED, LD_KV_FP8,
    LD_KV_SINKHORN_BF16, LD_KV_FP8UE8M0, LD_KV_Q8, LD_KV_I24, LD_KV_COUNT
} ld_kvar;

typedef enum ld_kop {
    LD_KOP_MATMUL = 0, LD_KOP_ATTENTION, LD_KOP_RMSNORM, LD_KOP_SWIGLU, LD_KOP_MLA, LD_KOP_ROUTER,
    LD_KOP_COMBINE, LD_KOP_MHC, LD_KOP_INDEXER, LD_KOP_ROPE, LD_KOP_COUNT
} ld_kop;

typedef struct ld_cpu_kernels {
    ld_kvar v[LD_KOP_COUNT];
} ld_cpu_kernels;

/* The defaults of backend "ref" (fast = 0) or "cpu" (fast = 1). */
ld_cpu_kernels ld_cpu_kernels_default(int fast);

/* Applies `spec` (NULL or "": nothing) to *k.  LD_ERR_USAGE naming the
 * unknown op or variant, err->offset its byte offset in the spec; *k is
 * unchanged on error. */
ld_status ld_cpu_kernels_parse(const char *spec, ld_cpu_kernels *k, ld_error *err);

/* "ref", "cpu", or the base name followed by the ops that differ from its
 * defaults, e.g. "ref+matmul=bf16"; into buf (cap bytes). */
const char *ld_cpu_kernels_label(const ld_cpu_kernels *k, int fast, char *buf, size_t cap);

/* Every "op=variant" that differs from the ref defaults, NULL-terminated
 * (what `--compare-kernels` runs one at a time). */
extern const char *const ld_cpu_kernel_variants[];

/* What a model has that session-level variants act on (ld_lm_info). */
enum {
    LD_KF_MLA = 1,     /* DeepSeek V3/V3.2: mla, router, combine=bf16 */
    LD_KF_MHC = 2,     /* DeepSeek-V4: mhc */
    LD_KF_INDEXER = 4, /* V3.2, and V4 with CSA layers: indexer */
    LD_KF_DEEPSEEK = 8 /* any DeepSeek: combine=fused, rope */
};

/* Whether variant v ("op=variant") changes anything on a model with
 * `features` (LD_KF_*); the ops of the backend (matmul, attention,
 * rmsnorm, swiglu) act on every model. */
int ld_cpu_kernel_variant_applies(const char *v, unsigned features);

/* ================================================================ the CUDA backend's kernels */
/* The ops whose kernel a spec selects, in the table's order. */
enum {
    LD_CUDA_OP_EMBED,
    LD_CUDA_OP_RMSNORM,
    LD_CUDA_OP_MATMUL,
    LD_CUDA_OP_ROPE,
    LD_CUDA_OP_KV_STORE,
    LD_CUDA_OP_ATTENTION,
    LD_CUDA_OP_SWIGLU,
    LD_CUDA_OP_ADD,
    LD_CUDA_OP_SOFTMAX,
    LD_CUDA_OP_MLA,    /* mla_latent */
    LD_CUDA_OP_ABSORB, /* mla_absorb_q, mla_absorb_out */
    LD_CUDA_OP_ROUTE,  /* ds_route, ds4_route */
    LD_CUDA_OP_INDEX,  /* index_topk (its scores and its top-k) */
    LD_CUDA_OP_HC,     /* hc_pre, hc_post (V4's mHC mixing) */
    LD_CUDA_N_OPS
};

/* the kernel choices (ld_cuda_kernels.custom[op]); TC for matmul only */
#define LD_CUDA_KERNEL_REF 0
#define LD_CUDA_KERNEL_CUSTOM 1
#define LD_CUDA_KERNEL_TC 2

/* kernel choice per op: LD_CUDA_KERNEL_REF, _CUSTOM or (matmul) _TC; a
 * non-zero value is a non-reference kernel */
typedef struct ld_cuda_kernels {
    unsigned char custom[LD_CUDA_N_OPS];
    int graphs; /* 0: launches go to the GPU one by one; N: captured in CUDA graphs of N operations */
} ld_cuda_kernels;

/* graphs=on: operations a graph (kernels/cuda/cuda_graph.cu's chunk) */
#define LD_CUDA_GRAPH_CHUNK 64

/* "embed", "rmsnorm"..., "mla", "absorb", "route", "index", "hc"; NULL outside [0, LD_CUDA_N_OPS) */
const char *ld_cuda_op_name(int op);

/* Parse a kernel spec: comma-separated `op=variant` with op one of the
 * names above or `all`, variant `ref` or `custom`, or `tc` for matmul
 * alone; later items win ("all=ref,matmul=tc").  NULL or "" = every op
 * custom.  One more item is not an op: `graphs=on|off|N` captures the
 * backend's work in CUDA graphs of LD_CUDA_GRAPH_CHUNK (on) or N
 * operations (kernels/cuda/cuda_ops.h's ld_cu_graphs_begin), off by default.  Errors (LD_ERR_USAGE) name the unknown op or variant, or `tc`
 * for another op, and the item's offset.
 * Needs no GPU, and is there in builds without CUDA. */
ld_status ld_cuda_kernels_parse(const char *spec, ld_cuda_kernels *out, ld_error *err);

/* ================================================================ backends */
/* The plain-C reference backend with `n_threads` threads (>= 1, the caller's
 * thread included). */
ld_status ld_backend_ref_create(int n_threads, ld_backend **out, ld_error *err);

/* The fast CPU backend: the reference's ops but for the matmul and the
 * attention of kernels/cpu/cpu_ops.h (eight-lane fma sums, SIMD where the machine has it),
 * with the same contract above; its results agree with the reference to
 * rounding, not bitwise. */
ld_status ld_backend_cpu_create(int n_threads, ld_backend **out, ld_error *err);

/* Either CPU backend (fast = 0: "ref", 1: "cpu") with ops swapped for
 * other kernels by `kernels`, "OP=VARIANT[,...]" (engine/backend/cpu_kernels.h:
 * matmul=ref|fast|bf16|splitk|fp8act, attention=ref|fast, rmsnorm=ref|bf16,
 * swiglu=ref|bf16); its ops->name says which ("ref+matmul=bf16").
 * LD_ERR_USAGE for a bad spec, naming the op or variant. */
ld_status ld_backend_cpu_create_ex(int n_threads, int fast, const char *kernels, ld_backend **out, ld_error *err);

/* Frees a backend of any kind and everything it holds (NULL: nothing). */
void ld_backend_destroy(ld_backend *be);

/* Its name as reports give it ("ref", "cpu+matmul=bf16", "cuda"...), as long as it lives. */
const char *ld_backend_name(const ld_backend *be);

/* The CUDA backend on `device` with the kernels of `kernels_spec` (above).
 * Errors: a bad spec (LD_ERR_USAGE, checked first), a build without CUDA or
 * no CUDA device (LD_ERR_UNSUPPORTED, the message says which), a device
 * number out of range (LD_ERR_USAGE), any other CUDA failure (LD_ERR_CUDA). */
ld_status ld_backend_cuda_create(int device, const char *kernels_spec, ld_backend **out, ld_error *err);

/* The CUDA devices this process sees: 0 in a build without CUDA, without
 * a device or where the runtime fails. */
int ld_backend_cuda_device_count(void);

/* As ld_backend_cuda_create, but graphs=N does not put the calling thread
 * in graph mode (graph mode is a thread's, kernels/cuda/cuda_ops.h): each
 * thread that runs the backend's ops enters it itself,
 * ld_backend_cuda_graphs_thread(be, 1) before its first and (be, 0)
 * after its last, as a tensor-parallel rank's thread does with the
 * backend made for it on the caller's thread (tp_forward.c).  Destroying
 * it ends no thread's mode. */
ld_status ld_backend_cuda_create_unbound(int device, const char *kernels_spec, ld_backend **out, ld_error *err);

/* The calling thread enters (on = 1: be's device made current, then its
 * graph mode with be's graphs=N) or leaves (on = 0: what is captured run
 * and waited for) graph mode for be; nothing for a backend without
 * graphs=N or made by ld_backend_cuda_create (bound to its creator's
 * thread), or not a CUDA backend.  Errors: LD_ERR_CUDA. */
ld_status ld_backend_cuda_graphs_thread(ld_backend *be, int on, ld_error *err);

/* ================================================================ tensor parallelism */
/* One process's rank of a group of processes (on one machine or several),
 * by transport: "shm" (ld_comm_shm_join at `path`) or "nccl" (NCCL's
 * bootstrap: rank 0 writes ld_comm_nccl_unique_id's bytes to `path`,
 * published by link(2) so that a leftover is refused, the others read
 * them when they appear, all call ld_comm_nccl_create_rank on `device`;
 * rank 0 removes the file once the group is made).  For "nccl" `path` must
 * be on storage every node sees.  Errors as the transport's, LD_ERR_USAGE
 * for an unknown transport, LD_ERR_IO for a missing or short id file at
 * timeout_s (<= 0: wait for ever).  timeout_s also bounds each collective's
 * wait for the slowest rank (the transports' wait_s / timeout_s): a rank
 * alive but stalled fails the group instead of hanging it. */
typedef struct ld_comm_join_opts {
    const char *transport; /* "shm" or "nccl" */
    const char *path;      /* the rendezvous file */
    int size, rank;
    int device;            /* nccl: this rank's GPU */
    double timeout_s;
} ld_comm_join_opts;

ld_status ld_comm_join(const ld_comm_join_opts *o, ld_comm **out, ld_error *err);

/* Frees a communicator of any transport (NULL: nothing). */
void ld_comm_destroy(ld_comm *c);

/* The group's size, this rank, and the transport's name ("sim", "shm", "nccl"). */
int ld_comm_size(const ld_comm *c);
int ld_comm_rank(const ld_comm *c);
const char *ld_comm_transport(const ld_comm *c);

/* 1 when this build has the NCCL communicator. */
int ld_comm_nccl_available(void);

/* How a session is split over ranks (ld_lm_session_create_tp; tp/tp_forward.h). */
typedef struct ld_tp_opts {
    int n;               /* ranks (>= 1) */
    int n_nodes;         /* sim only: nodes the ranks are grouped in (0 or 1: flat) */
    const char *backend; /* "cpu" (NULL: this), "ref" or "cuda" */
    const char *kernels; /* the backend's kernel spec (backend.h / backend_cuda.h), NULL: defaults */
    int threads;         /* CPU backends: threads per rank (>= 1) */
    /* A group of processes (NULL: all n ranks in this process, on
     * threads): this process runs rank comm->rank alone, its collectives
     * over `comm` (comm->size == n; ld_comm_join), borrowed: it outlives
     * the sessions made with it, which use it one eval at a time (every
     * process making the same sessions and evals in the same order).
     * Its outputs (logits, hidden, streams) come from its own rank: every
     * rank holds the whole residual stream, the same bits on each. */
    ld_comm *comm;
    int device;          /* with comm, cuda: this rank's GPU */
    /* cuda, the ranks on threads (no comm): the GPUs they run on, 0 ..
     * gpus - 1 (0: one a rank while the machine has them, else all it
     * has).  One a rank: the collectives over NCCL (where the build has
     * it).  Fewer (several ranks on a GPU, as a model split N ways on one
     * card), or a build without NCCL: rank k on GPU k % gpus, the
     * collectives through host memory (comm_sim.c), the same ordered sum,
     * so the same bits. */
    int gpus;
} ld_tp_opts;

/* cuda, the ranks on threads: the GPUs they will run on as o->gpus says
 * (*gpus, at most o->n) and whether their collectives go over NCCL
 * (*nccl); LD_ERR_USAGE for more GPUs than the machine has. */
ld_status ld_tp_cuda_placement(const ld_tp_opts *o, int *gpus, int *nccl, ld_error *err);

/* ================================================================ models */
/* The GGUF file a model path names: `path` itself when it is a regular file,
 * or the only *.gguf of a directory that has no config.json: a malloc'd
 * copy in *gguf (caller frees).  *gguf = NULL for a directory with a
 * config.json (an HF model) or without a *.gguf.  LD_ERR_MISMATCH for a
 * directory with several *.gguf and no config.json; LD_ERR_IO when `path`
 * cannot be read. */
ld_status ld_model_find_gguf(const char *path, char **gguf, ld_error *err);

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

/* Non-finite values.  A NaN or an infinity spreads to every later value of
 * its row and, through attention, of the rows after it: the logits end all
 * NaN, and ranks or a top-1 read from them mean nothing.  The evals above
 * do not look for them (reading back every op's output costs); a caller
 * that finds a non-finite logit, a cheap look at what it reads anyway,
 * runs the same tokens again from position 0 (after ld_lm_reset) with
 * ld_lm_eval_checked to learn where the first one was computed.
 *
 * ld_lm_eval_checked runs T tokens from the current position as ld_lm_eval
 * does (its outputs computed and dropped), in chunks of the session's
 * max_batch, checking what it computes in the order it computes it: on the
 * dense decoders every op's output (forward.h's ld_session_set_check:
 * "embed", then each layer's "attn_norm", "q_proj" ... "attn_out" ...
 * "ffn_down", "ffn_residual", then "final_norm" and "logits"); on DeepSeek
 * and on a split session the hidden planes (the embeddings, each layer's
 * output, the final norm) and the logits.  LD_OK when every value is
 * finite; else LD_ERR_NUMERIC at the first, err->offset its position, the
 * message naming where: "non-finite values: first at layer 3, op attn_out
 * (NaN at position 7)", "... first at layer 3's output (+inf at position
 * 7)" where the ops are not checked one by one, "... first at the
 * embeddings, op embed ..." or "... at the head, op logits ..." (layers
 * count from 0).  The session has then run part of the tokens. */
ld_status ld_lm_eval_checked(ld_lm_session *s, const int32_t *tokens, int T, ld_error *err);

int ld_lm_pos(const ld_lm_session *s);
void ld_lm_reset(ld_lm_session *s);
void ld_lm_session_destroy(ld_lm_session *s);

#endif /* LD_ENGINE_H */
