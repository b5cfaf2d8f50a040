/* replay_engine.c - the model, backend and tokenizer a replay runs on
 * (replay.h): an HF directory (config.json, safetensors, tokenizer.json) or
 * a GGUF file, or a directory holding one (engine/models/dense/model_gguf.c), whose
 * vocabulary is the tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "replay_internal.h"

/* e's own backend.  With a split (e->tp) the ranks compute and this one
 * is only named, so a CUDA one is made unbound (graphs=N puts no thread in
 * graph mode: the caller's thread, capturing, could not set up the ranks'
 * sessions on their GPUs) on this process's GPU (a rank of a group of
 * processes: its own, not GPU 0). */
static ld_status open_backend(const ld_replay_engine *e, const char *name, const char *kernels, int n_threads,
                              ld_backend **be, ld_error *err)
{
    if (!name || strcmp(name, "cpu") == 0) return ld_backend_cpu_create_ex(n_threads, 1, kernels, be, err);
    if (strcmp(name, "ref") == 0) return ld_backend_cpu_create_ex(n_threads, 0, kernels, be, err);
    if (strcmp(name, "cuda") == 0) /* op=ref|custom, matmul=tc, graphs=N */
        return e->tp ? ld_backend_cuda_create_unbound(e->world ? e->tpo.device : 0, kernels, be, err)
                     : ld_backend_cuda_create(0, kernels, be, err);
    return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown backend '%.40s' (cpu, ref, cuda)", name);
}

ld_status ld_replay_engine_set_backend(ld_replay_engine *e, const char *backend, const char *kernels,
                                       int n_threads, ld_error *err)
{
    ld_backend *be = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    if (!backend || strcmp(backend, "cuda") != 0) LD_TRY(ld_cpu_kernels_parse(kernels, &k, err));
    LD_TRY(open_backend(e, backend, kernels, n_threads, &be, err));
    ld_backend_destroy(e->be);
    e->be = be;
    e->k = k;
    return LD_OK;
}

ld_status ld_replay_kernels_check(const char *backend, const char *kernels, ld_error *err)
{
    if (backend && strcmp(backend, "cuda") == 0) {
        ld_cuda_kernels k;
        return ld_cuda_kernels_parse(kernels, &k, err);
    }
    ld_cpu_kernels k;
    return ld_cpu_kernels_parse(kernels, &k, err);
}

ld_status ld_replay_engine_open(const char *dir, const char *backend, int n_threads, ld_replay_engine **out,
                                ld_error *err)
{
    *out = NULL;
    if (n_threads < 1) return LD_FAIL(err, LD_ERR_USAGE, 0, "%d threads: give at least 1", n_threads);
    ld_replay_engine *e = calloc(1, sizeof *e);
    if (!e) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    char *gguf = NULL;
    ld_status st = ld_model_find_gguf(dir, &gguf, err);
    if (st == LD_OK) st = ld_lm_open(dir, &e->lm, err);
    if (st == LD_OK) st = open_backend(e, backend, NULL, n_threads, &e->be, err);
    if (st != LD_OK) {
        free(gguf);
        ld_replay_engine_close(e);
        return st;
    }
    if (gguf) { /* the tokenizer from the GGUF vocabulary */
        ld_error terr;
        ld_error_clear(&terr);
        if (ld_tok_load_gguf(gguf, &e->tok, &terr) != LD_OK) {
            e->tok = NULL;
            snprintf(e->tok_error, sizeof e->tok_error, "GGUF vocabulary: %.200s", terr.msg);
        }
        free(gguf);
        *out = e;
        return LD_OK;
    }
    size_t n = strlen(dir);
    char *path = malloc(n + sizeof "/tokenizer.json");
    if (!path) {
        ld_replay_engine_close(e);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    memcpy(path, dir, n);
    memcpy(path + n, "/tokenizer.json", sizeof "/tokenizer.json");
    struct stat sb;
    if (stat(path, &sb) == 0) {
        ld_error terr;
        ld_error_clear(&terr);
        if (ld_tok_load(path, &e->tok, &terr) != LD_OK) {
            e->tok = NULL;
            snprintf(e->tok_error, sizeof e->tok_error, "tokenizer.json: %.200s", terr.msg);
        }
    }
    free(path);
    *out = e;
    return LD_OK;
}

const ld_tok *ld_replay_engine_tok(const ld_replay_engine *e)
{
    return e->tok;
}

const char *ld_replay_engine_tok_error(const ld_replay_engine *e)
{
    return e->tok_error;
}

int ld_replay_engine_vocab(const ld_replay_engine *e)
{
    return ld_lm_info_of(e->lm)->vocab;
}

int ld_replay_engine_context(const ld_replay_engine *e)
{
    return ld_lm_info_of(e->lm)->max_pos;
}

ld_status ld_replay_engine_set_tp(ld_replay_engine *e, int n, int n_nodes, const char *backend, const char *kernels,
                                  int n_threads, ld_error *err)
{
    if (n == 0) {
        e->tp = 0;
        return LD_OK;
    }
    const char *b = backend ? backend : "cpu";
    if (strcmp(b, "cpu") && strcmp(b, "ref") && strcmp(b, "cuda"))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "unknown backend '%.40s' (cpu, ref, cuda)", b);
    if (e->world && (n != ld_comm_size(e->world) || (strcmp(b, "cuda") == 0) != (strcmp(e->tp_backend, "cuda") == 0)))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "this process is a rank of a group of %d over %s: %d ranks on %s "
                       "cannot use it", ld_comm_size(e->world), ld_comm_transport(e->world), n, b);
    if (n_nodes < 0 || (n_nodes > 1 && n % n_nodes))
        return LD_FAIL(err, LD_ERR_USAGE, 0, "%d ranks cannot be grouped into %d nodes of equal size", n, n_nodes);
    LD_TRY(ld_lm_tp_check(e->lm, n, err));
    char *k = NULL;
    if (kernels) {
        size_t len = strlen(kernels) + 1;
        k = malloc(len);
        if (!k) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        memcpy(k, kernels, len);
    }
    free(e->tp_kernels);
    e->tp_kernels = k;
    snprintf(e->tp_backend, sizeof e->tp_backend, "%s", b);
    int per = n_threads / n;
    e->tp = n;
    e->tpo = (ld_tp_opts){n, n_nodes, e->tp_backend, e->tp_kernels, per < 1 ? 1 : per, e->world, e->tpo.device, 0};
    return ld_replay_engine_set_backend(e, b, kernels, n_threads, err); /* e->tp set: unbound (open_backend) */
}

/* A CUDA rank's GPU: as asked, else over NCCL GPU `rank` (NCCL refuses
 * two ranks of a group on one device, so a rank past this machine's GPUs
 * is an error that says what to do), over shm GPU rank mod the GPUs, so
 * that ranks share them as a one-process split does. */
static ld_status pick_device(int rank, int asked, int nccl, int *out, ld_error *err)
{
    int have = ld_backend_cuda_device_count();
    *out = asked >= 0 ? asked : !nccl && have > 0 ? rank % have : rank;
    if (asked < 0 && nccl && have > 0 && rank >= have)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "rank %d over NCCL takes GPU %d, and this machine has %d: give its GPU "
                       "(--tp-device, LOCAL_RANK), or the transport shm for ranks that share GPUs", rank, rank, have);
    return LD_OK;
}

/* The transport is as asked (ld_comm_join refuses a name it does not
 * know), else NCCL for CUDA ranks where this build has it, else the shared
 * mapping (host memory: a CUDA rank's reduce then goes through a host
 * copy, tp_forward.c's stage).  Every rank runs the same build with the
 * same options, so all pick alike. */
ld_status ld_replay_engine_join_tp(ld_replay_engine *e, const ld_replay_tp_rank *r, ld_error *err)
{
    if (!e->tp) return LD_FAIL(err, LD_ERR_USAGE, 0, "a rank of a group needs the split first (--tp N)");
    if (e->world) return LD_FAIL(err, LD_ERR_USAGE, 0, "this process is a rank of a group already");
    int cuda = strcmp(e->tp_backend, "cuda") == 0, device = 0;
    const char *transport = r->transport ? r->transport : cuda && ld_comm_nccl_available() ? "nccl" : "shm";
    int nccl = strcmp(transport, "nccl") == 0;
    if (nccl && !cuda)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "NCCL carries CUDA ranks: the cpu and ref ranks meet over shm");
    if (cuda) LD_TRY(pick_device(r->rank, r->device, nccl, &device, err));
    ld_comm_join_opts o = {transport, r->rendezvous, e->tp, r->rank, device, r->timeout_s};
    LD_TRY(ld_comm_join(&o, &e->world, err));
    e->tpo.comm = e->world;
    e->tpo.device = device;
    if (!cuda) return LD_OK;
    return ld_replay_engine_set_backend(e, "cuda", e->tp_kernels, 1, err); /* onto this rank's GPU */
}

int ld_replay_engine_tp_rank(const ld_replay_engine *e)
{
    return e->world ? ld_comm_rank(e->world) : -1;
}

int ld_replay_engine_tp(const ld_replay_engine *e)
{
    return e->tp;
}

int ld_replay_engine_tp_gpus(const ld_replay_engine *e)
{
    int gpus = 0, nccl;
    if (!e->tp || e->world || strcmp(e->tp_backend, "cuda")) return 0;
    ld_error err;
    return ld_tp_cuda_placement(&e->tpo, &gpus, &nccl, &err) == LD_OK ? gpus : 0;
}

const char *ld_replay_engine_backend(const ld_replay_engine *e)
{
    return ld_backend_name(e->be);
}

const char *ld_replay_engine_arch(const ld_replay_engine *e)
{
    return ld_lm_info_of(e->lm)->arch;
}

void ld_replay_engine_close(ld_replay_engine *e)
{
    if (!e) return;
    ld_tok_free(e->tok);
    free(e->tp_kernels);
    ld_backend_destroy(e->be);
    ld_comm_destroy(e->world); /* after every session made with it */
    ld_lm_close(e->lm);
    free(e);
}
