/* engine.c - bench_engine: prefill and decode speed of logdiff's engine on a
 * model, and what bounds it: the memory bandwidth of this machine, measured
 * in the same process before the model is opened.  Driven by
 * bench/replay.sh (see bench/README.md).  Two modes, two processes, so that
 * the bandwidth buffer does not count in the engine's peak memory:
 *
 *   bench_engine --bandwidth MB [--threads N]
 *     bandwidth_gbs    the best read of an MB MiB buffer (far above any
 *                      cache) by N threads, one a CPU (membw.h: AVX-512 /
 *                      AVX2 / plain loads, 1, 2 or 4 streams a thread, best
 *                      of 5 each); GB = 10^9 bytes
 *     bandwidth_kernel, bandwidth_streams  the read that gave it
 *
 *   bench_engine --model PATH [--backend cpu|ref] [--kernels SPEC]
 *                [--threads N] [--prompt N] [--decode N] [--batch N]
 *     (any model engine/models/lm.h opens: dense GGUF or HF, DeepSeek V3/V3.2/V4;
 *     --kernels as `logdiff replay --kernels`)
 *     weight_bytes     the bound weights (dense models; 0 otherwise)
 *     decode_bytes     weight bytes one decode step reads (dense; 0 else)
 *     prefill_tps      --prompt random token ids (seed 1) in one call
 *     decode_tps       --decode tokens one at a time after the prompt, each
 *                      with its logits and the greedy choice fed back
 *     decode_cpu_ms    CPU time of the process (all its threads) per
 *                      decode token: with one thread, a figure that a busy
 *                      machine's other work inflates far less than the
 *                      wall time above (waiting threads spin, so with more
 *                      it counts their waits too)
 *     batch_decode_tps with --batch N (N > 1; the dense models and V4):
 *                      N requests of the same prompt, each a session (the
 *                      first's weights shared), prefilled in one batch,
 *                      then --decode steps of one token each, every step
 *                      the N requests in one batch (lm.h's
 *                      ld_lm_eval_batch); tokens of all the requests a
 *                      second (a step's weights read once for N tokens)
 *     kv_bytes         the session's KV cache
 *     rss_peak_bytes   peak resident set of the process (getrusage)
 *
 * Exit status 0, or 2 with a message when something cannot run.
 */
#define _DEFAULT_SOURCE /* getrusage */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "engine/engine.h"
#include "membw.h"
#include "engine/models/dense/model.h"

/* CPU seconds of the process, all its threads */
static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The first index of the largest logit (NaNs never win, as in a loop of
 * `x[i] > x[best]`), in two passes the compiler vectorizes: the largest
 * value lane by lane, then the first index holding it.  The one-pass loop
 * took 55 us on SmolLM2's 49152 logits, counted in a decode step's time
 * (1.5% of one at 2 threads); this takes a few. */
static int argmax(const float *x, int n)
{
    enum { L = 16 };
    if (n < 1 || x[0] != x[0]) return 0;
    float lane[L], m = x[0];
    for (int l = 0; l < L; l++) lane[l] = x[0];
    int i = 0;
    for (; i + L <= n; i += L)
        for (int l = 0; l < L; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    for (int l = 0; l < L; l++) m = lane[l] > m ? lane[l] : m;
    for (i = 0; i < n && x[i] != m; i++) {}
    return i;
}

/* --batch: B sessions over lead's weights (the lead among them, reset),
 * the prompt in one batch, then `decode` batched steps; the steps' seconds
 * (< 0: an error, in err) */
static double batch_decode(ld_lm_session *lead, int B, int max_seq, const int32_t *prompt, int P, int decode, int V,
                           ld_error *err)
{
    ld_lm_session **s = calloc((size_t)B, sizeof *s);
    ld_lm_part *parts = calloc((size_t)B, sizeof *parts);
    float *logits = malloc((size_t)B * (size_t)V * sizeof *logits);
    int32_t *next = malloc((size_t)B * sizeof *next);
    double secs = -1;
    ld_status st = s && parts && logits && next ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_lm_reset(lead);
    s[0] = lead;
    for (int i = 1; i < B && st == LD_OK; i++) st = ld_lm_session_create_sibling(lead, max_seq, &s[i], err);
    /* the prompts but their last token, then the last with logits */
    for (int i = 0; i < B; i++) parts[i] = (ld_lm_part){s[i], prompt, P - 1, NULL, NULL};
    if (st == LD_OK && P > 1) st = ld_lm_eval_batch(parts, B, err);
    for (int i = 0; i < B; i++) parts[i] = (ld_lm_part){s[i], prompt + P - 1, 1, logits + (size_t)i * (size_t)V, NULL};
    if (st == LD_OK) st = ld_lm_eval_batch(parts, B, err);
    double t0 = ld_bench_now();
    for (int k = 0; st == LD_OK && k < decode; k++) {
        for (int i = 0; i < B; i++) {
            next[i] = argmax(logits + (size_t)i * (size_t)V, V);
            parts[i].tokens = &next[i];
        }
        st = ld_lm_eval_batch(parts, B, err);
    }
    if (st == LD_OK) secs = ld_bench_now() - t0;
    for (int i = 1; s && i < B; i++) ld_lm_session_destroy(s[i]);
    free(s);
    free(parts);
    free(logits);
    free(next);
    return secs;
}

int main(int argc, char **argv)
{
    const char *model = NULL, *backend = "cpu", *kernels = NULL;
    int threads = 2, prompt = 128, decode = 64, batch = 1;
    long bw_mb = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--backend")) backend = argv[i + 1];
        else if (!strcmp(argv[i], "--kernels")) kernels = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--prompt")) prompt = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--decode")) decode = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) batch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bandwidth")) bw_mb = atol(argv[i + 1]);
        else {
            fprintf(stderr, "bench_engine: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (threads >= 1 && bw_mb > 0) {
        ld_bench_bw bw;
        if (ld_bench_read_bandwidth_ex((size_t)bw_mb, threads, &bw) <= 0) {
            fprintf(stderr, "bench_engine: cannot map %ld MiB\n", bw_mb);
            return 2;
        }
        printf("bandwidth_gbs %.3f\nbandwidth_kernel %s\nbandwidth_streams %d\nthreads %d\n", bw.gbs, bw.kernel,
               bw.streams, threads);
        return 0;
    }
    if (!model || threads < 1 || prompt < 1 || decode < 1 || batch < 1 || batch > 1024) {
        fprintf(stderr, "usage: bench_engine --bandwidth MB [--threads N]\n"
                        "       bench_engine --model PATH [--backend cpu|ref] [--kernels SPEC] [--threads N] "
                        "[--prompt N] [--decode N] [--batch N]\n");
        return 2;
    }
    ld_error err;
    ld_error_clear(&err);
    ld_lm *m = NULL;
    ld_backend *be = NULL;
    ld_lm_session *s = NULL;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    int max_seq = prompt + decode;
    ld_status st = ld_lm_open(model, &m, &err);
    if (st == LD_OK) st = ld_cpu_kernels_parse(kernels, &k, &err);
    if (st == LD_OK) st = ld_backend_cpu_create_ex(threads, strcmp(backend, "ref") != 0, kernels, &be, &err);
    if (st == LD_OK && max_seq > ld_lm_info_of(m)->max_pos) max_seq = ld_lm_info_of(m)->max_pos;
    if (st == LD_OK) st = ld_lm_session_create(m, be, &k, max_seq, prompt, &s, &err);
    if (st != LD_OK) {
        fprintf(stderr, "bench_engine: %s: %s\n", model, err.msg);
        return 2;
    }
    int V = ld_lm_info_of(m)->vocab;
    int32_t *toks = malloc((size_t)prompt * sizeof *toks);
    float *logits = malloc((size_t)V * sizeof *logits);
    if (!toks || !logits) return 2;
    uint64_t r = 1;
    for (int i = 0; i < prompt; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        toks[i] = (int32_t)((r >> 33) % (uint64_t)V);
    }
    /* the prompt but its last token in one call, then the last with logits */
    double t0 = ld_bench_now();
    st = prompt > 1 ? ld_lm_eval(s, toks, prompt - 1, NULL, NULL, &err) : LD_OK;
    if (st == LD_OK) st = ld_lm_eval(s, toks + prompt - 1, 1, logits, NULL, &err);
    double t_prefill = ld_bench_now() - t0;
    int n_dec = 0;
    double c0 = cpu_seconds();
    t0 = ld_bench_now();
    for (; st == LD_OK && n_dec < decode && ld_lm_pos(s) < max_seq; n_dec++) {
        int32_t next = argmax(logits, V);
        st = ld_lm_eval(s, &next, 1, logits, NULL, &err);
    }
    double t_decode = ld_bench_now() - t0, c_decode = cpu_seconds() - c0;
    if (st != LD_OK) {
        fprintf(stderr, "bench_engine: %s\n", err.msg);
        return 2;
    }
    /* the batched decode's steps: as many as the single run made */
    double t_batch = batch > 1 ? batch_decode(s, batch, max_seq, toks, prompt, n_dec, V, &err) : 0;
    if (t_batch < 0) {
        fprintf(stderr, "bench_engine: --batch %d: %s\n", batch, err.msg);
        return 2;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    /* the dense models' weight bytes and KV cache, from their description */
    uint64_t kv = 0, dec_bytes = 0, w_bytes = 0;
    ld_model *dense = NULL;
    ld_error derr;
    if (ld_model_open_any(model, &dense, &derr) == LD_OK) {
        const ld_model_config *c = &dense->cfg;
        kv = 2ull * (uint64_t)c->n_layers * (uint64_t)max_seq * (uint64_t)c->n_kv_heads * (uint64_t)c->head_dim *
             sizeof(float);
        dec_bytes = ld_model_decode_bytes(dense);
        w_bytes = ld_model_weight_bytes(dense);
        ld_model_close(dense);
    }
    printf("backend %s\nthreads %d\n", be->ops->name, threads);
    printf("weight_bytes %llu\n", (unsigned long long)w_bytes);
    printf("decode_bytes %llu\n", (unsigned long long)dec_bytes);
    printf("prompt_tokens %d\nprefill_tps %.2f\n", prompt, prompt / t_prefill);
    printf("decode_tokens %d\ndecode_tps %.2f\n", n_dec, n_dec / t_decode);
    printf("decode_cpu_ms %.3f\n", n_dec ? 1e3 * c_decode / n_dec : 0.0);
    if (batch > 1) printf("batch %d\nbatch_decode_tps %.2f\n", batch, (double)batch * n_dec / t_batch);
    printf("kv_bytes %llu\n", (unsigned long long)kv);
    printf("rss_peak_bytes %lld\n", (long long)ru.ru_maxrss * 1024);
    free(toks);
    free(logits);
    ld_lm_session_destroy(s);
    ld_backend_destroy(be);
    ld_lm_close(m);
    return 0;
}
