/* replay.h - replaying a logged request on the reference engine: the prompt
 * ids of the log run through the model, the logged output ids teacher-forced
 * after them, and at every output position the logged token's log-probability
 * and rank under the replay, the replay's own top-1 and the margin between
 * its two best logits.
 *
 * The verdict (what `logdiff replay` reports):
 *   - the logged token at position i is "within reach" when its rank under
 *     the replay is at most top_k (ranks count from 1: one plus the number of
 *     tokens with a strictly larger logit);
 *   - a position whose logged token is outside the top_k but whose logit is
 *     less than `near_tie` (nats; default LD_REPLAY_NEAR_TIE) below the
 *     replay's top-1 logit is a near-tie: a flat distribution, where rounding
 *     differences between the server's kernels and the reference can reorder
 *     many tokens at once.  It is reported, and is not a divergence;
 *   - the divergence P is the first position outside the top_k that is not
 *     a near-tie: LD_REPLAY_DIVERGENT at P, with the replay's greedy
 *     continuation from P (the context being the prompt and the logged
 *     tokens before P);
 *   - LD_REPLAY_CONSISTENT otherwise;
 *   - LD_REPLAY_NO_OUTPUT when the log holds no output ids (or an empty list):
 *     the greedy continuation of the prompt is reported.
 * The logit gap (top-1 logit minus the logged token's) is the same number as
 * the log-probability gap, as both sides are normalised by the same sum.
 *
 * A row of logits holding a NaN or an infinity (NaN weights, an overflow)
 * gives no verdict: no logit compares larger than a NaN, so every logged
 * token would rank first and the replay would pass for consistent.  The
 * replay fails instead (LD_ERR_NUMERIC), after running its ids again with
 * every value checked to name where the first non-finite one was computed:
 * "non-finite values: first at layer 3, op attn_out (NaN at position 7)"
 * (engine/engine.h's ld_lm_eval_checked).  Each row is looked at as it is
 * read; only a replay that finds one pays for the checked run.
 *
 * Prompt ids: `input_ids` of the log (ld_request_input_ids); when the log has
 * no id list (or one the logger cut) but the whole prompt text, and the engine
 * has a tokenizer (tokenizer.json in the model directory), the text tokenized
 * with special tokens parsed and nothing added (LD_REPLAY_PROMPT_TOKENIZED
 * says so); else an error.
 *
 * Layer dumps (ld_replay_request_dump, below): the hidden states of chosen
 * positions, kept while replaying, and written as .npy files (npy.h).
 *
 * Ownership: an ld_replay_engine owns its model, backend and tokenizer; it is
 * used by one replay at a time.  An ld_replay_result owns its arrays (free
 * with ld_replay_result_free).  Library code: errors are returned, nothing is
 * printed.
 */
#ifndef LD_REPLAY_H
#define LD_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "replay/analysis/finding.h"
#include "ld_error.h"
#include "replay_sample.h"
#include "parse/request/request.h"
#include "replay/tokenizer/tok.h"

/* Stable verdict kinds (scripts match on them). */
#define LD_K_REPLAY_CONSISTENT "replay.consistent"
#define LD_K_REPLAY_DIVERGENT "replay.divergent"
#define LD_K_REPLAY_NO_OUTPUT "replay.no_output"

#define LD_REPLAY_TOP_K 5          /* default k */
#define LD_REPLAY_MAX_TOKENS 8     /* default length of the greedy continuation */
#define LD_REPLAY_NEAR_TIE 0.1     /* default near-tie threshold, nats */
#define LD_REPLAY_MAX_TOP_K 64     /* the top-k list kept at the divergence */

typedef struct ld_replay_engine ld_replay_engine;

/* Opens the model at `dir`: an HF model directory (config.json, safetensors;
 * engine/models/dense/model.h) with its tokenizer.json when there is one, or a GGUF file
 * (or a directory holding only one) with the tokenizer of its vocabulary; on
 * the CPU backend `backend` ("cpu", the fast one, when NULL; or "ref", the
 * plain reference; see engine/backend/backend.h) with `n_threads` threads.  A
 * tokenizer that cannot be loaded is not an error (tokens are then shown as
 * ids): ld_replay_engine_tok_error says why. */
ld_status ld_replay_engine_open(const char *dir, const char *backend, int n_threads, ld_replay_engine **out,
                                ld_error *err);

/* Replaces the engine's backend by `backend` ("cpu", "ref"; "cuda": device
 * 0, `kernels` then being engine/backend/cuda/backend_cuda.h's op=ref|custom) with the ops
 * `kernels` names swapped ("OP=VARIANT,...", engine/backend/cpu_kernels.h; NULL:
 * none).  On error the engine keeps its backend. */
ld_status ld_replay_engine_set_backend(ld_replay_engine *e, const char *backend, const char *kernels,
                                       int n_threads, ld_error *err);

/* Checks a --kernels spec for `backend` ("cpu" or NULL, "ref": engine/
 * cpu_kernels.h's OP=VARIANT; "cuda": engine/backend/cuda/backend_cuda.h's op=ref|custom)
 * without opening anything, so that a bad spec is named before a model or
 * a log is read, whatever the build has (a build without CUDA still names
 * the spec's error first).  LD_ERR_USAGE naming the op or the variant. */
ld_status ld_replay_kernels_check(const char *backend, const char *kernels, ld_error *err);

/* Splits the model over `n` ranks (tensor parallelism, engine/
 * tp_forward.h) for the replays that follow: each rank on its own
 * `backend` ("cpu", "ref" over simulated ranks, threads of this process;
 * "cuda" over NCCL, GPUs 0..n-1) with `kernels` (NULL: none) and
 * max(1, n_threads / n) threads; the ranks grouped into `n_nodes`
 * simulated nodes (0 or 1: one).  n = 0 goes back to the plain session.
 * Errors (checked here, before any replay): LD_ERR_UNSUPPORTED for a
 * DeepSeek model, LD_ERR_USAGE for an n that does not divide the model's
 * heads or intermediate size (naming the field) or a bad backend.  The
 * shards, backends and communicator are made per replay.  The engine's own
 * backend becomes `backend` with `kernels` too (the name the reports give;
 * the ranks compute): a CUDA one unbound, on this process's GPU (its own
 * once it joins a group of processes), never putting the caller's thread
 * in graph mode.  Open the engine on "cpu" when a split follows, so that
 * it makes nothing on GPU 0. */
ld_status ld_replay_engine_set_tp(ld_replay_engine *e, int n, int n_nodes, const char *backend, const char *kernels,
                                  int n_threads, ld_error *err);

/* This process as rank `rank` of a group of processes, one rank each,
 * for the split replays that follow (after ld_replay_engine_set_tp(e, N,
 * ...), N the group's size): they meet at the file `rendezvous` (engine/
 * comm.h's ld_comm_join) within timeout_s (<= 0: for ever), over
 * `transport`: "nccl", NCCL's bootstrap (CUDA only; the default there
 * where the build has NCCL), or "shm", a shared mapping for the processes
 * of one machine (the default otherwise; CUDA ranks then sum through host
 * memory and may share GPUs, with the same bits).  A CUDA rank runs on
 * GPU `device`, or by default GPU `rank` over NCCL (a rank past the
 * machine's GPUs is refused, saying what to give), rank mod the machine's
 * GPUs over shm.  Every process must then make the same replays in the
 * same order; each gets the whole results (the residual stream is the
 * same bits on every rank).  Later set_tp calls must keep N and the
 * backend.  A CUDA split's own backend moves to the rank's GPU.  Errors:
 * LD_ERR_USAGE without a split, when joined already, for an unknown
 * transport or NCCL asked for cpu/ref; ld_comm_join's. */
typedef struct ld_replay_tp_rank {
    int rank;
    const char *rendezvous;
    int device;            /* cuda: this rank's GPU, < 0 the default */
    double timeout_s;
    const char *transport; /* "nccl", "shm"; NULL: the default */
} ld_replay_tp_rank;

ld_status ld_replay_engine_join_tp(ld_replay_engine *e, const ld_replay_tp_rank *r, ld_error *err);

/* This process's rank in its group (-1: not a rank of a group of processes). */
int ld_replay_engine_tp_rank(const ld_replay_engine *e);

/* The ranks set by ld_replay_engine_set_tp (0: none). */
int ld_replay_engine_tp(const ld_replay_engine *e);

/* The GPUs the split's ranks run on: fewer than the ranks where they
 * share GPUs, their collectives then through host memory (tp_forward.h's
 * ld_tp_opts.gpus, as the machine resolves it); 0 on the CPU backends,
 * without a split or in a process that is one rank of a group. */
int ld_replay_engine_tp_gpus(const ld_replay_engine *e);

/* The name of the backend the engine runs on ("cpu", "ref",
 * "ref+matmul=bf16"...). */
const char *ld_replay_engine_backend(const ld_replay_engine *e);

/* The tokenizer (NULL when none) and, when none, why ("" when the directory
 * has no tokenizer.json). */
const ld_tok *ld_replay_engine_tok(const ld_replay_engine *e);
const char *ld_replay_engine_tok_error(const ld_replay_engine *e);

/* Vocabulary size and context length (max_position_embeddings) of the model. */
int ld_replay_engine_vocab(const ld_replay_engine *e);
int ld_replay_engine_context(const ld_replay_engine *e);

/* "Qwen3ForCausalLM" ... */
const char *ld_replay_engine_arch(const ld_replay_engine *e);

void ld_replay_engine_close(ld_replay_engine *e);

typedef struct ld_replay_opts {
    int top_k;         /* 0 = LD_REPLAY_TOP_K; at most LD_REPLAY_MAX_TOP_K */
    int max_tokens;    /* greedy continuation length; 0 = LD_REPLAY_MAX_TOKENS, -1 = none */
    double near_tie;   /* nats; NAN or < 0 = LD_REPLAY_NEAR_TIE; 0 = no near-ties */
} ld_replay_opts;

/* A sampled continuation (ld_replay_request_sampled): `params` as
 * replay_sample.h (greedy all the same when they say so: temperature 0 or
 * unknown), the generator keyed by (seed, output position). */
typedef struct ld_replay_sampling {
    uint64_t seed;
    ld_sample_params params;
} ld_replay_sampling;

typedef enum ld_replay_verdict {
    LD_REPLAY_CONSISTENT = 0,
    LD_REPLAY_DIVERGENT = 1,
    LD_REPLAY_NO_OUTPUT = 2
} ld_replay_verdict;

/* The stable kind of a verdict (LD_K_REPLAY_*). */
const char *ld_replay_verdict_kind(ld_replay_verdict v);

typedef enum ld_replay_prompt_source {
    LD_REPLAY_PROMPT_IDS = 0,       /* the log's input_ids */
    LD_REPLAY_PROMPT_TOKENIZED = 1  /* the log's prompt text, tokenized */
} ld_replay_prompt_source;

/* One output position i: the replay predicting output_ids[i]. */
typedef struct ld_replay_pos {
    int32_t id;            /* the logged token */
    double logprob;        /* its log-probability under the replay */
    int64_t rank;          /* 1 + tokens with a larger logit */
    int32_t top1;          /* the replay's top-1 (lowest id among equal logits) */
    double top1_logprob;
    double margin;         /* top-1 logit minus the second best logit (>= 0) */
    double gap;            /* top-1 logit minus the logged token's logit (>= 0) */
    int outside;           /* rank > top_k */
    int near_tie;          /* outside, and gap < near_tie */
} ld_replay_pos;

typedef struct ld_replay_cand {
    int32_t id;
    double logprob;
} ld_replay_cand;

typedef struct ld_replay_result {
    ld_replay_verdict verdict;
    ld_replay_prompt_source prompt_source;
    int top_k;
    double near_tie;
    int32_t *prompt;          /* the prompt ids replayed [n_prompt] */
    size_t n_prompt;
    int32_t *output;          /* the logged output ids [n_output] (NULL when none) */
    size_t n_output;
    ld_replay_pos *pos;       /* [n_output] */
    int64_t divergence;       /* P, or -1 */
    int64_t first_outside;    /* first position outside the top-k (near-tie or not), or -1 */
    int64_t first_not_top1;   /* first position whose logged token is not the top-1, or -1 */
    size_t n_near_ties;       /* positions outside the top-k that are near-ties */
    ld_replay_cand *top;      /* the replay's top_k at the divergence [n_top] */
    size_t n_top;
    int32_t *greedy;          /* the continuation from P (or from the prompt's end
                                 for LD_REPLAY_NO_OUTPUT) [n_greedy]; NULL when none;
                                 greedy unless `sampled` */
    int sampled;              /* the continuation was sampled (a sampling was given
                                 and its parameters are not greedy) */
    uint64_t seed;            /* the sampling's, when one was given */
    ld_sample_params params;
    size_t n_greedy;
    int64_t greedy_from;      /* output position the continuation starts at, or -1 */
    char no_output_reason[160]; /* LD_REPLAY_NO_OUTPUT: why ("" otherwise) */
    int output_cut;           /* the logger cut output_ids: `output` is the head it kept,
                                 the verdict covers that head only */
    int64_t n_output_logged;  /* output_cut: the output's length as logged
                                 (completion_tokens), or -1 when unknown */
} ld_replay_result;

/* Replays `prompt` [n_prompt] then teacher-forces `output` [n_output]
 * (NULL/0: no output; `no_output_reason` is copied into the result).  Ids are
 * checked first: LD_ERR_MISMATCH naming the index ("input_ids[5] = 300 is
 * outside ...", "output_ids[2] ..."), LD_ERR_LIMIT when the prompt and output
 * (and the continuation, which is then shortened, never refused) exceed the
 * model's context (naming the first output index that does not fit),
 * LD_ERR_MISMATCH for an empty prompt, LD_ERR_NOMEM; LD_ERR_NUMERIC for a row
 * of logits (teacher-forced or of the continuation) that is not finite,
 * the message naming where the first non-finite value was computed and
 * err->offset the output position of the row; the engine's errors. */
ld_status ld_replay_ids(ld_replay_engine *e, const int32_t *prompt, size_t n_prompt,
                        const int32_t *output, size_t n_output, const char *no_output_reason,
                        const ld_replay_opts *opts, ld_replay_result *out, ld_error *err);

/* Replays a logged request (read with LD_PAIR_KEEP_VALUES, and
 * LD_PAIR_KEEP_TEXT for the prompt-text fallback): prompt ids as said above,
 * output ids from ld_request_output_ids (a record without them is
 * LD_REPLAY_NO_OUTPUT; a list the logger cut is LD_ERR_TRUNCATED).  Errors
 * as ld_replay_ids, plus LD_ERR_MISMATCH when the log holds neither input_ids
 * nor (with a tokenizer) the prompt text, and the tokenizer's errors. */
ld_status ld_replay_request(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                            ld_replay_result *out, ld_error *err);

/* ld_replay_request with the continuation sampled as `sampling` says (NULL:
 * greedy, as ld_replay_request). */
ld_status ld_replay_request_sampled(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                    const ld_replay_sampling *sampling, ld_replay_result *out, ld_error *err);

void ld_replay_result_free(ld_replay_result *res);

/* The ids a replay of r runs: its prompt (as ld_replay_request finds it)
 * then its logged output ids (their head when the logger cut them; none
 * when it logged none), malloc'd into *seq [*n]; ids outside the model's
 * vocabulary are LD_ERR_MISMATCH.  Errors as ld_replay_request's. */
ld_status ld_replay_request_seq(ld_replay_engine *e, const ld_request *r, int32_t **seq, size_t *n, ld_error *err);

/* ------------------------------------------------------------ layer dumps
 *
 * The hidden states of the replayed sequence at chosen positions, for
 * comparison with another engine (`logdiff replay --dump-layers`).  The
 * replayed sequence is prompt ++ output (positions 0 .. n_prompt +
 * n_output - 1; the prompt alone when there is no output): position p holds
 * token seq[p], and its hidden states are those the engine computes feeding
 * seq[p] after seq[0..p).  When dumping, the last output token (which
 * teacher forcing does not otherwise need) is fed too, so that the whole
 * sequence is there.  Planes: 0 the embeddings, 1 + l the residual stream
 * after decoder layer l, n_layers + 1 the final RMSNorm's output
 * (engine/models/dense/forward.h).  Dumping changes no logit: the engine computes a row
 * the same way whatever the chunking. */

/* Positions as given: ranges [first, last], inclusive; negative numbers
 * count from the end (-1: the last position).  Owns `v`. */
typedef struct ld_replay_range {
    int64_t first, last;
} ld_replay_range;

typedef struct ld_replay_positions {
    ld_replay_range *v;
    size_t n;
} ld_replay_positions;

/* Parses a list such as "0,5,10-20,-3--1": comma-separated numbers or
 * ranges A-B (inclusive), each number optionally negative; blanks around
 * items are allowed.  On success *out owns a malloc'd array (free with
 * ld_replay_positions_free).  Errors: LD_ERR_SYNTAX naming the byte offset
 * and what was expected (an empty list or item, a stray character, a
 * number of more than 18 digits), LD_ERR_NOMEM. */
ld_status ld_replay_positions_parse(const char *list, ld_replay_positions *out, ld_error *err);

/* The positions of `p` (NULL or empty: all) in a sequence of `seq_len`,
 * ascending and distinct, in a malloc'd array *out_pos [*out_n] (caller
 * frees).  Errors: LD_ERR_USAGE naming the number as given and the length
 * ("position 40 is outside the replayed sequence of 26 positions ..."), or
 * a range that runs backwards; LD_ERR_NOMEM. */
ld_status ld_replay_positions_resolve(const ld_replay_positions *p, size_t seq_len, int64_t **out_pos,
                                      size_t *out_n, ld_error *err);

void ld_replay_positions_free(ld_replay_positions *p);

/* A dump: `want`, the planes kept and the state wanted are read, the rest
 * filled by ld_replay_request_dump (and owned by the struct: free with
 * ld_replay_dump_free). */
typedef struct ld_replay_dump {
    const ld_replay_positions *want; /* borrowed; NULL or empty: every position */
    /* in: with some_planes, only planes [plane_lo, plane_hi] are kept
       (without, every plane: they are set to 0 and n_layers + 1); with
       want_state, also the residual state entering layer state_layer
       (lm.h's ld_lm_eval_state: what a layer slice is fed).  A check of a
       few layers of a large model keeps only what it compares. */
    int some_planes, plane_lo, plane_hi;
    int want_state, state_layer;
    size_t seq_len;                  /* positions in the replayed sequence */
    size_t n_prompt;                 /* of which the prompt's */
    int64_t *pos;                    /* [n_pos] ascending, distinct */
    int64_t *tokens;                 /* [n_pos] the token at each */
    size_t n_pos;
    int n_layers, hidden;            /* the model's n_layers + 2 planes of `hidden` floats */
    float *rows;                     /* [plane_hi - plane_lo + 1][n_pos][hidden]: plane
                                        plane_lo + k in block k */
    int state_width;                 /* want_state: floats per row of the state */
    float *state;                    /* want_state: [n_pos][state_width] */
} ld_replay_dump;

/* *d emptied but for what the caller asks (want, the planes, the state) */
void ld_replay_dump_reset(ld_replay_dump *d);

void ld_replay_dump_free(ld_replay_dump *d);

/* ld_replay_request_sampled, also filling *dump (when not NULL) with the
 * hidden states at dump->want's positions.  Only those rows are kept (the
 * sequence is evaluated in chunks).  Errors as ld_replay_request_sampled,
 * plus those of ld_replay_positions_resolve, before anything is computed;
 * on error *dump's outputs are freed. */
ld_status ld_replay_request_dump(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                 const ld_replay_sampling *sampling, ld_replay_dump *dump,
                                 ld_replay_result *out, ld_error *err);

/* ld_replay_ids with a dump, as ld_replay_request_dump. */
ld_status ld_replay_ids_dump(ld_replay_engine *e, const int32_t *prompt, size_t n_prompt, const int32_t *output,
                             size_t n_output, const ld_replay_opts *opts, ld_replay_dump *dump,
                             ld_replay_result *out, ld_error *err);

/* Creates `dir` when it does not exist (one level: the parent must exist)
 * and checks that it is a directory.  Errors: LD_ERR_IO with the system's
 * reason, naming the directory. */
ld_status ld_replay_dump_mkdir(const char *dir, ld_error *err);

/* Writes the dump into `dir` (which must exist): embed.npy, layer_NN.npy
 * (one per decoder layer, NN zero-padded to two digits or more),
 * final_norm.npy, each float32 [n_pos][hidden] ('<f4', C order);
 * positions.npy and tokens.npy (int64 [n_pos]); manifest.json describing
 * them (the model's architecture, n_layers, hidden, the positions, `rid`
 * (may be NULL), each file's meaning).  Existing files of those names are
 * replaced.  Errors: LD_ERR_IO naming the file, LD_ERR_NOMEM. */
ld_status ld_replay_dump_write(const char *dir, const ld_replay_dump *d, const ld_replay_engine *e,
                               const char *rid, ld_error *err);

/* The name of plane k's file ("embed.npy", "layer_00.npy", ...,
 * "final_norm.npy") for a model of n_layers, into buf [cap]; returns buf. */
const char *ld_replay_dump_file(int k, int n_layers, char *buf, size_t cap);

/* The kernels check of `logdiff diff --replay` (replay_check.c): replays r
 * (as ld_replay_request, default options, a continuation of
 * LD_REPLAY_CHECK_TOKENS tokens) and adds one finding to *out:
 *   - LD_K_KERNELS_DIVERGENCE (error) at the divergence P: first_diff = P,
 *     expected_len / actual_len = the logged token's rank / the output's
 *     length, the detail naming the logged token (rank, logprob), the
 *     replay's top-1 (logprob), the gap and the top-two margin;
 *     prompt_excerpt the logged output around P, array_excerpt the replay's
 *     (the same context, then its greedy continuation): decoded with the
 *     engine's tokenizer when there is one, else ids; the context and what
 *     follows P are separated by " | ";
 *   - LD_K_KERNELS_DIVERGENCE (error) too when the replay's logits are not
 *     finite (LD_ERR_NUMERIC of ld_replay_request): first_diff = the output
 *     position of the first such row, actual_len the output's length, the
 *     detail the engine's message naming the layer and op where the first
 *     non-finite value was computed; no excerpts;
 *   - LD_K_KERNELS_CONSISTENT (info) when every logged token is within reach;
 *   - LD_K_KERNELS_NOT_REPLAYED (info) with the reason when the request
 *     cannot be replayed: no output ids (no Finish line, an empty list, a list
 *     the logger cut), ids outside the vocabulary, a context too long, no
 *     input ids and no tokenizer for the prompt text.
 * Records that failed to parse (LD_REQ_ERROR) get nothing.  Strings live in
 * `arena`.  Errors: LD_ERR_NOMEM, the engine's own errors. */
#define LD_REPLAY_CHECK_TOKENS 8
ld_status ld_replay_check(ld_replay_engine *e, const ld_request *r, ld_arena *arena, ld_findings *out,
                          ld_error *err);

#endif /* LD_REPLAY_H */
