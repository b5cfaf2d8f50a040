/* tp_forward.c - see tp_forward.h.
 *
 * Ranks 1..N-1 run on threads started with the session (rank 0 on the
 * caller's thread); an eval wakes them and waits for them.  Each runs
 * ld_session_eval on its shard, and the
 * session's reduce hook (forward.h) does the all-reduce of the partial
 * [T][hidden], summed across ranks in rank order, then adds the
 * row-parallel bias.  Where the backend says where its buffer lives
 * (buf_mem) and the communicator reduces that memory in place
 * (all_reduce_sum_mem: the CPU backends' host memory over the simulated
 * communicator, the CUDA backend's device memory over NCCL), the sum is
 * made there, and a bias is added in place on host memory; on device
 * memory the reduced partial is read out, the bias added on the host and
 * written back (only the dense shards of attention_bias / mlp_bias Llamas
 * and DeepSeek's attention_bias have one: two copies on those reduces
 * rather than a device op for a rare case).  Otherwise (no buf_mem, a kind
 * the communicator refuses) the partial is staged: read out of the
 * backend into a host buffer, reduced there, the bias added, written back.
 * The sum and the bias are the same arithmetic on every path (the ordered
 * sum, then one rounding of x + b), so the paths give the same bits; every
 * rank has a backend of the same type, so all take the same path (comm.h).
 * A rank that fails aborts the communicator, so the others leave their
 * collective with an error instead of waiting; the first failure is the
 * one reported. */
#include "tp_forward.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "engine/models/dense/forward.h"
#include "engine/models/session_args.h"
#include "tp_ds_shard.h"
#include "tp_ds4_shard.h"
#include "tp_shard.h"

typedef struct tp_rank {
    struct ld_tp_session *tp;
    int rank;                 /* in the group */
    ld_tp_shard *shard;       /* a dense decoder's, or */
    ld_tp_ds_shard *ds_shard; /* DeepSeek-V3/V3.2's, or */
    ld_tp_ds4_shard *ds4_shard; /* DeepSeek-V4's */
    ld_backend *be;
    ld_session *sess;         /* the shard's session (one of the three) */
    ld_ds_session *ds_sess;
    ld_ds4_session *ds4_sess;
    ld_comm *comm;
    float *stage;          /* host staging of the partial [T][hidden], where it is not reduced in place */
    size_t stage_cap;
    /* the eval in progress: one sequence on the sessions of `who` (this
       rank of the session evaluated: the group's own or a sibling's), or a
       batch: nb parts of this rank's family ([nb] ld_session_part,
       ld_ds_session_part or ld_ds4_session_part) */
    const struct tp_rank *who;
    void *bparts;
    int nb;
    const int32_t *tokens;
    int T;
    float *logits, *hidden;
    float *streams;         /* V4, rank 0: the streams entering layer tap (NULL: none) */
    int tap;
    ld_status st;
    ld_error err;
    ld_status enter_st; /* its thread's entry into graph mode (own_threads) */
    ld_error enter_err;
} tp_rank;

/* what every rank of a group runs */
typedef struct tp_model {
    const ld_model *m;        /* the dense model, or */
    const ld_ds_model *dm;    /* the DeepSeek one, */
    ld_ds_attn attn;          /* its MLA form, or */
    const ld_ds4_model *d4;   /* the DeepSeek-V4 one; */
    ld_cpu_kernels k;         /* DeepSeek's session-level variants */
    int hidden, vocab;
} tp_model;

struct ld_tp_session {
    tp_model mod;
    int n, broken;
    int max_seq; /* its ranks' sessions' */
    /* the ranks this process runs: all n (threads), or one of a group of
       processes (ld_tp_opts.comm: ranks[0].rank is its rank) */
    int n_local;
    int comm_borrowed; /* the communicator is the caller's (ld_tp_opts.comm) */
    int gpus;          /* cuda: the GPUs the local ranks run on (rank k on GPU k % gpus,
                          or a process's own); 0 on the CPU backends */
    /* every local rank on a thread of its own, the caller's thread only
       waiting: CUDA graphs (graphs=N), graph mode being a thread's */
    int own_threads;
    tp_rank *ranks;    /* [n_local] */
    atomic_int first_fail; /* the local index of the rank that failed first */
    /* the threads of ranks 1..n-1, started once: an eval bumps `gen` and
     * waits until `pending` is back to 0; `quit` ends them */
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned gen;
    int pending, quit;
    /* a sibling (ld_tp_session_create_sibling): its own ranks' sessions on
       the group's backends, communicators and threads; NULL: a group */
    struct ld_tp_session *group;
    /* a group: its live siblings, and whether it was destroyed while some
       lived (then the last sibling's destroy frees it) */
    int n_siblings, closed;
};

/* ------------------------------------------------------------ the reduce */

/* the row-parallel bias [hidden] of (layer, which), NULL: none */
static const float *rank_bias(const tp_rank *r, int layer, int which)
{
    return r->shard      ? ld_tp_shard_bias(r->shard, layer, which)
           : r->ds_shard ? ld_tp_ds_shard_bias(r->ds_shard, layer, which)
                         : NULL; /* V4: no biases */
}

/* x [T][D] += b [D] per row, one rounding each */
static void add_bias(float *x, const float *b, size_t T, size_t D)
{
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < D; i++) x[t * D + i] = x[t * D + i] + b[i];
}

static ld_status stage_grow(tp_rank *r, size_t n, ld_error *err)
{
    if (n <= r->stage_cap) return LD_OK;
    float *p = realloc(r->stage, n * sizeof *p);
    if (!p) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    r->stage = p;
    r->stage_cap = n;
    return LD_OK;
}

/* x's T rows through the host stage: read, reduced across the ranks when
 * `reduce`, the bias b (NULL: none) added, written back */
static ld_status via_stage(tp_rank *r, ld_backend *be, ld_buf *x, size_t T, int reduce, const float *b,
                           ld_error *err)
{
    size_t D = (size_t)r->tp->mod.hidden, n = T * D;
    LD_TRY(stage_grow(r, n, err));
    LD_TRY(be->ops->buf_read(be, x, 0, r->stage, n, err));
    if (reduce) LD_TRY(ld_comm_all_reduce_sum(r->comm, r->stage, n, err));
    if (b) add_bias(r->stage, b, T, D);
    return be->ops->buf_write(be, x, 0, r->stage, n, err);
}

/* The all-reduce of x's first n floats where they live; *out_done = 0
 * (nothing done, err untouched) when the backend has no buf_mem or the
 * communicator refuses its kind of memory.  *out_m: where they are. */
static ld_status reduce_in_place(tp_rank *r, ld_backend *be, ld_buf *x, size_t n, ld_mem *out_m, int *out_done,
                                 ld_error *err)
{
    *out_done = 0;
    if (!be->ops->buf_mem) return LD_OK;
    LD_TRY(be->ops->buf_mem(be, x, 0, n, out_m, err));
    ld_error e; /* a refusal is not this reduce's error: the stage takes over */
    ld_error_clear(&e);
    ld_status st = ld_comm_all_reduce_sum_mem(r->comm, out_m, n, &e);
    if (st == LD_ERR_UNSUPPORTED) return LD_OK;
    if (st != LD_OK) {
        if (err) *err = e;
        return st;
    }
    *out_done = 1;
    return LD_OK;
}

static ld_status tp_reduce(void *ctx, ld_backend *be, ld_buf *x, int T, int layer, int which, ld_error *err)
{
    tp_rank *r = ctx;
    size_t D = (size_t)r->tp->mod.hidden, n = (size_t)T * D;
    const float *b = rank_bias(r, layer, which);
    ld_mem m;
    int done;
    LD_TRY(reduce_in_place(r, be, x, n, &m, &done, err));
    if (!done) return via_stage(r, be, x, (size_t)T, 1, b, err);
    if (!b) return LD_OK;
    if (m.kind == LD_MEM_HOST) {
        add_bias(m.p, b, (size_t)T, D);
        return LD_OK;
    }
    return via_stage(r, be, x, (size_t)T, 0, b, err); /* device memory: the bias on the host */
}

/* ------------------------------------------------------------ ranks */

/* r's index in its session's ranks[] (0: the caller's thread runs it,
 * unless own_threads) */
static int local_of(const tp_rank *r)
{
    return (int)(r - r->tp->ranks);
}

/* A rank's work on its own thread (rank > 0) is queued where the caller's
 * is not ordered with it (the CUDA backend: a stream a thread), and the
 * caller made and loaded the rank's backend, and resets its caches: the
 * device's work is waited for before the rank runs and after. */
static ld_status rank_finish(tp_rank *r)
{
    if ((local_of(r) == 0 && !r->tp->own_threads) || !r->be || !r->be->ops->finish) return LD_OK;
    return r->be->ops->finish(r->be, &r->err);
}

/* the rank's share of the eval in progress */
static ld_status rank_eval(tp_rank *r)
{
    const tp_rank *w = r->who;
    if (r->nb) {
        const tp_model *md = &r->tp->mod;
        return md->d4   ? ld_ds4_session_eval_batch(r->bparts, r->nb, &r->err)
               : md->dm ? ld_ds_session_eval_batch(r->bparts, r->nb, &r->err)
                        : ld_session_eval_batch(r->bparts, r->nb, &r->err);
    }
    if (w->sess) return ld_session_eval(w->sess, r->tokens, r->T, r->logits, r->hidden, &r->err);
    if (w->ds_sess) return ld_ds_session_eval(w->ds_sess, r->tokens, r->T, r->logits, r->hidden, NULL, &r->err);
    if (r->streams)
        return ld_ds4_session_eval_streams(w->ds4_sess, r->tokens, r->T, r->logits, r->hidden, r->tap, r->streams,
                                           &r->err);
    return ld_ds4_session_eval(w->ds4_sess, r->tokens, r->T, r->logits, r->hidden, NULL, &r->err);
}

static void run_rank(tp_rank *r)
{
    ld_error_clear(&r->err);
    r->st = r->enter_st;
    if (r->st != LD_OK) r->err = r->enter_err;
    if (r->st == LD_OK) r->st = rank_finish(r);
    if (r->st == LD_OK) r->st = rank_eval(r);
    if (r->st == LD_OK) r->st = rank_finish(r);
    /* a collective aborted while queued (a process's NCCL rank: another
       process's rank stalled or gone) let the work after it run on what
       it left: the eval is void */
    if (r->st == LD_OK) r->st = ld_comm_check(r->comm, &r->err);
    if (r->st != LD_OK) {
        int none = -1;
        atomic_compare_exchange_strong(&r->tp->first_fail, &none, local_of(r));
        ld_comm_abort(r->comm);
    }
}

/* A rank's thread: enters graph mode for its backend (graphs=N: made
 * unbound, tp_forward.c's open_backend), then runs each eval, until quit. */
static void *rank_thread(void *arg)
{
    tp_rank *r = arg;
    ld_tp_session *s = r->tp;
    unsigned seen = 0;
    r->enter_st = ld_backend_cuda_graphs_thread(r->be, 1, &r->enter_err);
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->gen == seen && !s->quit) pthread_cond_wait(&s->go, &s->mu);
        if (s->quit) {
            pthread_mutex_unlock(&s->mu);
            if (r->enter_st == LD_OK) {
                ld_error e;
                (void)ld_backend_cuda_graphs_thread(r->be, 0, &e); /* nothing left to report it to */
            }
            return NULL;
        }
        seen = s->gen;
        pthread_mutex_unlock(&s->mu);
        run_rank(r);
        pthread_mutex_lock(&s->mu);
        if (--s->pending == 0) pthread_cond_signal(&s->done);
        pthread_mutex_unlock(&s->mu);
    }
}

/* The error of the rank that failed first (the others failed because it
 * aborted the group), its rank named. */
static ld_status first_error(ld_tp_session *s, int f, ld_error *err)
{
    s->broken = 1;
    if (err) {
        *err = s->ranks[f].err;
        if (s->n > 1) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "tensor-parallel rank %d: %.200s", s->ranks[f].rank, s->ranks[f].err.msg);
            memcpy(err->msg, msg, sizeof msg);
        }
    }
    return s->ranks[f].st;
}

ld_status ld_tp_session_eval(ld_tp_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                             ld_error *err)
{
    return ld_tp_session_eval_streams(s, tokens, T, logits, hidden, 0, NULL, err);
}

/* the refusals every rank would make alike, made before any rank runs (a
 * rank's failure aborts the group's communicator): a group that failed,
 * ids outside the vocabulary, tokens past s's positions */
static ld_status check_eval(const ld_tp_session *g, const ld_tp_session *s, const int32_t *tokens, int T,
                            ld_error *err)
{
    if (g->broken)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "this tensor-parallel session failed before: create a new one");
    return ld_session_check_eval(tokens, T, ld_tp_session_pos(s), s->max_seq, g->mod.vocab, err);
}

/* the group's ranks run what their fields say (the first on this thread,
 * unless each has its own) */
static ld_status run_group(ld_tp_session *s, ld_error *err)
{
    atomic_store(&s->first_fail, -1);
    pthread_mutex_lock(&s->mu);
    s->pending = s->own_threads ? s->n_local : s->n_local - 1;
    s->gen++;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->mu);
    if (!s->own_threads) run_rank(&s->ranks[0]);
    pthread_mutex_lock(&s->mu);
    while (s->pending > 0) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    int f = atomic_load(&s->first_fail);
    return f < 0 ? LD_OK : first_error(s, f, err);
}

/* the group whose threads run s: its own, or a sibling's group */
static ld_tp_session *group_of(ld_tp_session *s)
{
    return s->group ? s->group : s;
}

ld_status ld_tp_session_eval_streams(ld_tp_session *s, const int32_t *tokens, int T, float *logits, float *hidden,
                                     int layer, float *streams, ld_error *err)
{
    if (streams && !s->mod.d4)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "residual streams: DeepSeek-V4 sessions only (the others have one, "
                       "their hidden planes)");
    if (streams && (layer < 0 || layer > s->mod.d4->cfg.n_layers)) /* before rank 0 would fail alone */
        return LD_FAIL(err, LD_ERR_USAGE, 0, "streams entering layer %d: the model has %d layers", layer,
                       s->mod.d4->cfg.n_layers);
    ld_tp_session *g = group_of(s);
    LD_TRY(check_eval(g, s, tokens, T, err));
    for (int k = 0; k < g->n_local; k++) { /* the outputs from the first (rank 0 of a whole group) */
        tp_rank *r = &g->ranks[k];
        r->who = &s->ranks[k];
        r->nb = 0;
        r->tokens = tokens;
        r->T = T;
        r->logits = k == 0 ? logits : NULL;
        r->hidden = k == 0 ? hidden : NULL;
        r->streams = k == 0 ? streams : NULL;
        r->tap = layer;
    }
    return run_group(g, err);
}

/* local rank k's family parts of the batch `p` [n] (logits and hidden
 * planes on the first only) */
static void *rank_parts(const ld_tp_session_part *p, int n, int k)
{
    const tp_model *md = &group_of(p[0].s)->mod;
    size_t sz = md->d4 ? sizeof(ld_ds4_session_part) : md->dm ? sizeof(ld_ds_session_part) : sizeof(ld_session_part);
    void *out = calloc((size_t)n, sz);
    for (int i = 0; out && i < n; i++) {
        const tp_rank *r = &p[i].s->ranks[k];
        float *lg = k == 0 ? p[i].logits : NULL, *hid = k == 0 ? p[i].hidden : NULL;
        if (md->d4)
            ((ld_ds4_session_part *)out)[i] = (ld_ds4_session_part){r->ds4_sess, p[i].tokens, p[i].T, lg, hid};
        else if (md->dm)
            ((ld_ds_session_part *)out)[i] = (ld_ds_session_part){r->ds_sess, p[i].tokens, p[i].T, lg, hid};
        else ((ld_session_part *)out)[i] = (ld_session_part){r->sess, p[i].tokens, p[i].T, lg, hid};
    }
    return out;
}

ld_status ld_tp_session_eval_batch(const ld_tp_session_part *parts, int n, ld_error *err)
{
    if (n < 1 || !parts[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    ld_tp_session *g = group_of(parts[0].s);
    for (int i = 0; i < n; i++) {
        if (!parts[i].s || group_of(parts[i].s) != g)
            return LD_FAIL(err, LD_ERR_USAGE, 0, "batch part %d: not a session of the first part's tensor-parallel "
                           "group (ld_tp_session_create_sibling)", i);
        for (int j = 0; j < i; j++)
            if (parts[j].s == parts[i].s)
                return LD_FAIL(err, LD_ERR_USAGE, 0, "batch parts %d and %d: the same session", j, i);
        LD_TRY(check_eval(g, parts[i].s, parts[i].tokens, parts[i].T, err));
    }
    ld_status st = LD_OK;
    for (int k = 0; k < g->n_local; k++) {
        tp_rank *r = &g->ranks[k];
        r->bparts = rank_parts(parts, n, k);
        r->nb = n;
        if (!r->bparts) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    if (st == LD_OK) st = run_group(g, err);
    for (int k = 0; k < g->n_local; k++) {
        free(g->ranks[k].bparts);
        g->ranks[k].bparts = NULL;
        g->ranks[k].nb = 0;
    }
    return st;
}

int ld_tp_session_pos(const ld_tp_session *s)
{
    const tp_rank *r = &s->ranks[0];
    return r->sess ? ld_session_pos(r->sess) : r->ds_sess ? ld_ds_session_pos(r->ds_sess)
                                                          : ld_ds4_session_pos(r->ds4_sess);
}

void ld_tp_session_reset(ld_tp_session *s)
{
    for (int k = 0; k < s->n_local; k++) {
        tp_rank *r = &s->ranks[k];
        if (r->sess) ld_session_reset(r->sess);
        else if (r->ds_sess) ld_ds_session_reset(r->ds_sess);
        else ld_ds4_session_reset(r->ds4_sess);
    }
}

const char *ld_tp_session_backend(const ld_tp_session *s)
{
    return s->ranks[0].be->ops->name;
}

int ld_tp_session_gpus(const ld_tp_session *s)
{
    return s->group ? s->group->gpus : s->gpus;
}

/* rank's entry in ranks[], NULL where this process does not run it */
static tp_rank *local_rank(const ld_tp_session *s, int rank)
{
    int k = rank - s->ranks[0].rank;
    return k >= 0 && k < s->n_local ? &s->ranks[k] : NULL;
}

const ld_comm *ld_tp_session_comm(const ld_tp_session *s, int rank)
{
    const tp_rank *r = local_rank(s, rank);
    return r ? r->comm : NULL;
}

ld_backend *ld_tp_session_rank_backend(ld_tp_session *s, int rank)
{
    tp_rank *r = local_rank(s, rank);
    return r ? r->be : NULL;
}

static void stop_threads(ld_tp_session *s)
{
    pthread_mutex_lock(&s->mu);
    s->quit = 1;
    pthread_cond_broadcast(&s->go);
    pthread_mutex_unlock(&s->mu);
    for (int k = 0; k < s->n_started; k++) pthread_join(s->threads[k], NULL);
    s->n_started = 0;
}

/* s and what it owns (a sibling: its ranks' sessions only) */
static void session_free(ld_tp_session *s)
{
    stop_threads(s);
    free(s->threads);
    pthread_cond_destroy(&s->go);
    pthread_cond_destroy(&s->done);
    pthread_mutex_destroy(&s->mu);
    for (int k = 0; s->ranks && k < s->n_local; k++) {
        tp_rank *r = &s->ranks[k];
        ld_session_destroy(r->sess);
        ld_ds_session_destroy(r->ds_sess);
        ld_ds4_session_destroy(r->ds4_sess);
        if (s->group) continue; /* a sibling's backends, shards and communicators are its group's */
        ld_backend_destroy(r->be);
        ld_tp_shard_free(r->shard);
        ld_tp_ds_shard_free(r->ds_shard);
        ld_tp_ds4_shard_free(r->ds4_shard);
        if (!s->comm_borrowed) ld_comm_destroy(r->comm);
        free(r->stage);
    }
    free(s->ranks);
    free(s);
}

/* A group outlived by siblings of its is closed, not freed: its backends,
 * shards, communicators and threads run them, until the last goes. */
void ld_tp_session_destroy(ld_tp_session *s)
{
    if (!s) return;
    ld_tp_session *g = s->group;
    if (!g) {
        pthread_mutex_lock(&s->mu);
        int keep = s->n_siblings > 0;
        s->closed = keep;
        pthread_mutex_unlock(&s->mu);
        if (!keep) session_free(s);
        return;
    }
    session_free(s);
    pthread_mutex_lock(&g->mu);
    int last = --g->n_siblings == 0 && g->closed;
    pthread_mutex_unlock(&g->mu);
    if (last) session_free(g);
}

/* ------------------------------------------------------------ creation */

/* rank's backend, on GPU `device` for cuda */
static ld_status open_backend(const ld_tp_opts *o, int device, ld_backend **be, ld_error *err)
{
    const char *name = o->backend ? o->backend : "cpu";
    if (strcmp(name, "cpu") == 0 || strcmp(name, "ref") == 0) {
        if (o->threads < 1) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d threads per rank: give at least 1", o->threads);
        return ld_backend_cpu_create_ex(o->threads, name[0] == 'c', o->kernels, be, err);
    }
    /* unbound: graphs=N is entered by the rank's own thread */
    if (strcmp(name, "cuda") == 0)
        return ld_backend_cuda_create_unbound(device, o->kernels, be, err);
    return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown backend '%.40s' (cpu, ref, cuda)", name);
}

/* A bad kernel spec, before anything is made; *graphs: CUDA graphs asked
 * for (graph mode is a thread's, kernels/cuda/cuda_ops.h: every rank then runs
 * on a thread of its own, which enters it; the communicator holds the
 * capture around its collectives, comm_nccl.c). */
static ld_status check_opts(const ld_tp_opts *o, int *graphs, ld_error *err)
{
    *graphs = 0;
    if (!o->backend || strcmp(o->backend, "cuda") != 0) return LD_OK;
    ld_cuda_kernels k;
    LD_TRY(ld_cuda_kernels_parse(o->kernels, &k, err));
    *graphs = k.graphs != 0;
    return LD_OK;
}

/* No device seen: one GPU, so that the first rank's backend (or NCCL's
 * device check) says why there is none. */
ld_status ld_tp_cuda_placement(const ld_tp_opts *o, int *gpus, int *nccl, ld_error *err)
{
    int have = ld_backend_cuda_device_count();
    if (o->gpus < 0 || (have > 0 && o->gpus > have))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "%d GPUs asked for: this machine has %d", o->gpus, have);
    int g = o->gpus > 0 ? o->gpus : have;
    *gpus = g < 1 ? 1 : g > o->n ? o->n : g;
    *nccl = *gpus == o->n && ld_comm_nccl_available();
    return LD_OK;
}

/* cuda ranks on threads: s->gpus GPUs as ld_tp_opts.gpus says, and the
 * communicators c [s->n]: NCCL when every rank has a GPU of its own and
 * the build has NCCL (which refuses two ranks on one device), else the
 * simulated ranks' host memory (the reduce then goes through a host copy,
 * via_stage): the same ordered sum, the same bits. */
static ld_status cuda_comms(ld_tp_session *s, const ld_tp_opts *o, ld_comm **c, ld_error *err)
{
    int nccl;
    LD_TRY(ld_tp_cuda_placement(o, &s->gpus, &nccl, err));
    return nccl ? ld_comm_nccl_create_all(s->n, NULL, c, err) : ld_comm_sim_create(s->n, 1, c, err);
}

/* The group's communicators, one per rank, into the ranks (a process of
 * a group: the caller's). */
static ld_status open_comms(ld_tp_session *s, const ld_tp_opts *o, ld_error *err)
{
    int cuda = o->backend && strcmp(o->backend, "cuda") == 0;
    if (o->comm) {
        s->ranks[0].comm = o->comm;
        s->comm_borrowed = 1;
        s->gpus = cuda;
        return LD_OK;
    }
    int nodes = o->n_nodes > 1 ? o->n_nodes : 1;
    ld_comm **c = calloc((size_t)s->n, sizeof *c);
    if (!c) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st;
    if (cuda) {
        st = nodes > 1 ? LD_FAIL(err, LD_ERR_USAGE, 0, "the CUDA tensor-parallel group runs on one machine: "
                                 "several nodes run one process each (engine/README.md, tensor parallelism)")
                       : cuda_comms(s, o, c, err);
    } else {
        st = ld_comm_sim_create(s->n, nodes, c, err);
    }
    if (st == LD_OK)
        for (int k = 0; k < s->n; k++) s->ranks[k].comm = c[k];
    free(c);
    return st;
}

static ld_status open_rank(ld_tp_session *s, const ld_tp_opts *o, int k, int max_seq, int max_batch, ld_error *err)
{
    tp_rank *r = &s->ranks[k];
    int rank = r->rank, device = o->comm ? o->device : s->gpus ? rank % s->gpus : rank;
    const tp_model *md = &s->mod;
    if (md->d4) {
        LD_TRY(ld_tp_ds4_shard_create(md->d4, s->n, rank, &r->ds4_shard, err));
        LD_TRY(open_backend(o, device, &r->be, err));
        LD_TRY(ld_ds4_session_create(ld_tp_ds4_shard_model(r->ds4_shard), r->be, max_seq, max_batch, &r->ds4_sess,
                                     err));
        ld_ds4_session_set_kernels(r->ds4_sess, &md->k);
        ld_ds4_session_set_reduce(r->ds4_sess, tp_reduce, r);
        return LD_OK;
    }
    if (md->dm) {
        LD_TRY(ld_tp_ds_shard_create(md->dm, s->n, rank, &r->ds_shard, err));
        LD_TRY(open_backend(o, device, &r->be, err));
        LD_TRY(ld_ds_session_create(ld_tp_ds_shard_model(r->ds_shard), r->be, max_seq, max_batch, md->attn,
                                    &r->ds_sess, err));
        ld_ds_session_set_kernels(r->ds_sess, &md->k);
        ld_ds_session_set_reduce(r->ds_sess, tp_reduce, r);
        return LD_OK;
    }
    LD_TRY(ld_tp_shard_create(md->m, s->n, rank, &r->shard, err));
    LD_TRY(open_backend(o, device, &r->be, err));
    LD_TRY(ld_session_create(ld_tp_shard_model(r->shard), r->be, max_seq, max_batch, &r->sess, err));
    ld_session_set_reduce(r->sess, tp_reduce, r);
    return LD_OK;
}

/* local ranks 1.. on threads of their own (the first runs on the caller's,
 * unless own_threads) */
static ld_status start_threads(ld_tp_session *s, ld_error *err)
{
    s->threads = calloc((size_t)s->n_local, sizeof *s->threads);
    if (!s->threads) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int k = s->own_threads ? 0 : 1; k < s->n_local; k++) {
        if (pthread_create(&s->threads[s->n_started], NULL, rank_thread, &s->ranks[k]) != 0)
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "could not start the thread of rank %d", k);
        s->n_started++;
    }
    return LD_OK;
}

/* an empty session of n ranks running `mod`, of which this process runs
 * n_local from `first`, sessions of max_seq positions (a group's or a
 * sibling's; ld_tp_session_destroy takes either) */
static ld_status session_new(const tp_model *mod, int n, int n_local, int first, int max_seq, ld_tp_session **out,
                             ld_error *err)
{
    ld_tp_session *s = calloc(1, sizeof *s);
    if (s) s->ranks = calloc((size_t)n_local, sizeof *s->ranks);
    if (!s || !s->ranks) {
        free(s);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->mod = *mod;
    s->n = n;
    s->n_local = n_local;
    for (int k = 0; k < n_local; k++) {
        s->ranks[k].tp = s;
        s->ranks[k].rank = first + k;
    }
    s->max_seq = max_seq;
    atomic_init(&s->first_fail, -1);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->go, NULL);
    pthread_cond_init(&s->done, NULL);
    *out = s;
    return LD_OK;
}

/* The group running `tmpl`: its communicators, ranks and threads. */
static ld_status tp_create(const tp_model *tmpl, const ld_tp_opts *o, int max_seq, int max_batch,
                           ld_tp_session **out, ld_error *err)
{
    *out = NULL;
    int graphs;
    LD_TRY(check_opts(o, &graphs, err));
    if (o->n_nodes < 0 || (o->n_nodes > 1 && o->n % o->n_nodes))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "%d ranks cannot be grouped into %d nodes of equal size", o->n,
                       o->n_nodes);
    if (o->comm && o->comm->size != o->n)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "%d ranks over a communicator of %d", o->n, o->comm->size);
    ld_tp_session *s;
    LD_TRY(session_new(tmpl, o->n, o->comm ? 1 : o->n, o->comm ? o->comm->rank : 0, max_seq, &s, err));
    s->own_threads = graphs;
    ld_status st;
    /* the communicators first: for cuda they say whether the build has NCCL
     * and the machine enough GPUs before any backend is made */
    st = open_comms(s, o, err);
    for (int k = 0; k < s->n_local && st == LD_OK; k++) st = open_rank(s, o, k, max_seq, max_batch, err);
    if (st == LD_OK) st = start_threads(s, err);
    if (st != LD_OK) {
        ld_tp_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_tp_session_create(const ld_model *m, const ld_tp_opts *o, int max_seq, int max_batch,
                               ld_tp_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_check_config(&m->cfg, o->n, err));
    tp_model t = {.m = m, .hidden = m->cfg.hidden, .vocab = m->cfg.vocab};
    return tp_create(&t, o, max_seq, max_batch, out, err);
}

ld_status ld_tp_ds_session_create(const ld_ds_model *m, const ld_tp_opts *o, ld_ds_attn attn,
                                  const ld_cpu_kernels *k, int max_seq, int max_batch, ld_tp_session **out,
                                  ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_ds_check(m, o->n, err));
    tp_model t = {.dm = m, .attn = attn, .k = k ? *k : ld_cpu_kernels_default(0), .hidden = m->cfg.hidden,
                       .vocab = m->cfg.vocab};
    /* combine=bf16 rounds the running expert sum to bf16 after every
     * expert: on a rank's partial sums that is another function, not a
     * rounding of the same one */
    if (o->n > 1 && t.k.v[LD_KOP_COMBINE] == LD_KV_BF16)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "combine=bf16 rounds each token's whole expert sum to bf16; "
                       "under tensor parallelism a rank holds a partial sum (use combine=ref or fused)");
    return tp_create(&t, o, max_seq, max_batch, out, err);
}

/* rank k of sibling s: a sibling of the group's rank session, reducing
 * through the group's rank (its communicator and stage) */
static ld_status open_sibling_rank(ld_tp_session *s, const ld_tp_session *g, int k, int max_seq, ld_error *err)
{
    tp_rank *r = &s->ranks[k], *gr = &g->ranks[k];
    r->be = gr->be;
    r->comm = gr->comm;
    if (gr->ds4_sess) {
        LD_TRY(ld_ds4_session_create_sibling(gr->ds4_sess, max_seq, &r->ds4_sess, err));
        ld_ds4_session_set_reduce(r->ds4_sess, tp_reduce, gr);
    } else if (gr->ds_sess) {
        LD_TRY(ld_ds_session_create_sibling(gr->ds_sess, max_seq, &r->ds_sess, err));
        ld_ds_session_set_reduce(r->ds_sess, tp_reduce, gr);
    } else {
        LD_TRY(ld_session_create_sibling(gr->sess, max_seq, &r->sess, err));
        ld_session_set_reduce(r->sess, tp_reduce, gr);
    }
    return LD_OK;
}

ld_status ld_tp_session_create_sibling(ld_tp_session *lead, int max_seq, ld_tp_session **out, ld_error *err)
{
    *out = NULL;
    ld_tp_session *g = group_of(lead), *s;
    LD_TRY(session_new(&g->mod, g->n, g->n_local, g->ranks[0].rank, max_seq, &s, err));
    s->group = g; /* its lock and threads stay unused: the group's run it */
    ld_status st = LD_OK;
    for (int k = 0; k < s->n_local && st == LD_OK; k++) st = open_sibling_rank(s, g, k, max_seq, err);
    pthread_mutex_lock(&g->mu);
    g->n_siblings++; /* counted before the destroy below, which uncounts it */
    pthread_mutex_unlock(&g->mu);
    if (st != LD_OK) {
        ld_tp_session_destroy(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_tp_ds4_session_create(const ld_ds4_model *m, const ld_tp_opts *o, const ld_cpu_kernels *k, int max_seq,
                                   int max_batch, ld_tp_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_tp_ds4_check(m, o->n, err));
    /* combine=bf16 is not V4's (its forward computes ref): nothing to refuse */
    tp_model t = {.d4 = m, .k = k ? *k : ld_cpu_kernels_default(0), .hidden = m->cfg.hidden, .vocab = m->cfg.vocab};
    return tp_create(&t, o, max_seq, max_batch, out, err);
}
