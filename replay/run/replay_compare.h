/* replay_compare.h - `logdiff replay --compare-kernels`: the request replayed
 * on the reference backend, then once per kernel variant
 * (engine/backend/cpu_kernels.h: ld_cpu_kernel_variants, each alone; on the CUDA
 * backend each custom kernel alone among reference kernels), every hidden
 * row and every logged token's numbers compared with the reference's.  It
 * shows on a CPU how much each precision choice a production stack makes
 * (bf16 operands, bf16 activations, split-K, the fast reorderings) moves a
 * real request: where it first departs, and what it does to the logged
 * tokens' ranks and to the verdict. */
#ifndef LD_REPLAY_COMPARE_H
#define LD_REPLAY_COMPARE_H

#include "replay.h"

#define LD_KCMP_TOL 1e-5 /* a hidden row departs beyond this normalised error */

typedef struct ld_kernel_cmp {
    char variant[48];        /* "matmul=bf16" */
    int first_plane;         /* first plane with a departing row: 0 the
                                embeddings, 1 + l after layer l, n_layers + 1
                                the final norm; -1 when none departs */
    int64_t first_pos;       /* the first departing row's position there */
    double first_nerr;       /* its normalised error */
    double max_nerr;         /* the largest normalised error of the final norm's rows */
    double max_dlogprob;     /* largest |logprob - the reference's| of a logged token */
    size_t rank_changes;     /* logged tokens whose rank changed */
    ld_replay_verdict verdict;
    int64_t divergence;      /* the variant's divergence, or -1 */
    char refused[256];       /* not "": the engine refused the variant here
                                (LD_ERR_UNSUPPORTED: e.g. under --tp), why;
                                the numbers above are then unset */
} ld_kernel_cmp;

typedef struct ld_kernel_cmp_report {
    ld_replay_result base;   /* the reference's replay */
    int n_layers;
    int cuda;                /* 1: the CUDA backend's kernels (below) */
    int tp;                  /* the replays' tensor-parallel ranks (0: not split) */
    ld_kernel_cmp *v;        /* [n] */
    size_t n;
} ld_kernel_cmp_report;

/* One replay of a comparison: the backend and kernel spec it runs with, and
 * the label it is reported under. */
typedef struct ld_kernel_run {
    const char *backend;     /* "ref" or "cuda" */
    char spec[96];           /* the kernel spec ("" : the backend's own) */
    char label[48];
} ld_kernel_run;

/* The replays --compare-kernels makes, run 0 the baseline, into runs[cap];
 * returns how many (at most cap).  On the CPU (`backend` "cpu" or "ref"):
 * the reference backend, then each variant of ld_cpu_kernel_variants that
 * acts on a model with `features` (LD_KF_*, ld_lm_info) alone.  On "cuda": every op on its reference kernel
 * ("all=ref"), then each op's custom kernel alone among reference ones
 * ("all=ref,OP=custom", labelled "OP=custom"), then every custom kernel
 * ("all=custom", the backend's default), so that a custom kernel's departure
 * is its own and not its neighbours'. */
size_t ld_replay_kernel_plan(const char *backend, unsigned features, ld_kernel_run *runs, size_t cap);

/* Replays `r` (n_threads threads) once per run of ld_replay_kernel_plan on
 * `backend`, compares each with run 0; leaves `e` on `backend` with its
 * default kernels.  Errors as ld_replay_request_dump's, and the backend's
 * (no CUDA device). */
ld_status ld_replay_compare_kernels(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                    const char *backend, int n_threads, ld_kernel_cmp_report *out, ld_error *err);

void ld_kernel_cmp_report_free(ld_kernel_cmp_report *rep);

/* `logdiff replay --check OTHER`: the request on the engine's backend
 * `backend` and on `other` (each "cpu", "ref" or "cuda"), every hidden row
 * compared, per plane (embeddings, each layer, final norm), as llm.c and
 * llama.cpp compare backends. */
typedef struct ld_backend_cmp_plane {
    double max_nerr;   /* the largest normalised error of a row */
    double max_abs;    /* the largest |a - b| of an element */
    int64_t worst_pos; /* the position of that row (the first such), -1 when
                          every row is equal */
} ld_backend_cmp_plane;

typedef struct ld_backend_cmp {
    ld_replay_result a, b;      /* the two replays (b empty for a slice) */
    char name_a[96], name_b[96];
    char kernels_a[128];        /* the variants `backend` ran with ("" none) */
    int tp_a;                   /* its tensor-parallel ranks (0: not split) */
    int n_layers;
    ld_backend_cmp_plane *plane; /* [n_layers + 2], compared in [plane_lo, plane_hi] */
    int plane_lo, plane_hi;
    int first, last;            /* a slice's layers [first, last); last 0: the whole model */
    size_t n_pos;
    double max_dlogprob;
    size_t rank_changes;
} ld_backend_cmp;

/* r replayed on `backend` with `kernels` (NULL: its own; e.g. the CUDA
 * backend with its launches in graphs, or a CPU variant) and on `other`
 * with its defaults, compared plane by plane.  Leaves `e` on `backend`
 * with `kernels`.  last > 0: the check backend runs layers [first, last)
 * alone (lm.h's layer slice: their weights only, for a model too large for
 * it), fed `backend`'s residual state entering layer `first` at every
 * position (DeepSeek V4: its hc_mult streams) and the tokens; planes
 * first + 1 .. last compared, only those kept of the whole replay, no
 * logits on the check side. */
ld_status ld_replay_check_backends(ld_replay_engine *e, const ld_request *r, const ld_replay_opts *opts,
                                   const char *backend, const char *kernels, const char *other, int first, int last,
                                   int n_threads, ld_backend_cmp *out, ld_error *err);

void ld_backend_cmp_free(ld_backend_cmp *c);

#endif /* LD_REPLAY_COMPARE_H */
