/* test_cuda_determinism.c - the determinism of the CUDA backend (issue 9),
 * through the session API (forward.h) on the tiny models qwen3 (fp32) and
 * qwen3-fp8 (FP8 block-scaled weights, 16x16 blocks: backend_cuda.c's
 * LD_WQ_F8B path end to end), each with every op on its ref kernel
 * ("all=ref") and every op custom:
 *  - replays: one request (ref.json's sequence a as the prompt, then
 *    greedy decode steps) run 100 times, in fresh sessions on four
 *    backend instances, gives the same tokens and bitwise the same logits;
 *  - chunks: the request's tokens run as one prefill, in chunks of 3 and
 *    token by token give bitwise the same logits per position, which are
 *    also the replay's;
 *  - batched: the request batched with two others, as a server's
 *    continuous batching runs them, gives each bitwise its alone logits
 *    (batch_check.h);
 *  - graphs: decode with the launches captured in CUDA graphs gives
 *    bitwise the logits of the launches one by one, and batches in graph
 *    mode pass the batched check (qwen3, qwen3-fp8, V3, V3.2, V4, V4-FP4);
 *  - transformers: the logits of ref.json's sequences are within 1e-5
 *    (normalised, as test_forward.c) of the committed transformers
 *    reference logits.
 * Label gpu: every case skips (77) with the reason when CUDA is not built
 * or no device is present. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "tests/support/batch_check.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/fixtures.h"
#include "engine/models/dense/forward.h"
#include "tests/support/ld_test.h"
#include "engine/engine.h"
#include "engine/models/dense/model.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_TOKENS 64
#define DECODE_STEPS 4
#define BACKENDS 4 /* instances the replays are spread over */
#ifdef LD_CUDA_EMU
/* the emulator (tests/support/cuda_emu) runs a kernel's threads in one fixed order,
 * so replays cannot differ by timing there: one a backend instance still
 * checks that a fresh session and a fresh backend start clean */
#define REPLAYS BACKENDS
#else
#define REPLAYS 100
#endif
#define TOL 1e-5   /* normalised logits error against transformers */

/* the kernel sets: backend_cuda.h specs (NULL: every op custom) */
static const char *const ksets[] = {"all=ref", NULL};
#define N_KSETS 2

static const char *kset_name(int k)
{
    return ksets[k] ? ksets[k] : "all=custom";
}

/* ---------------------------------------------------------------- fixtures */

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

/* the CUDA backend with kernel set k; LD_ERR_UNSUPPORTED (no CUDA, no
 * device) is the caller's to skip on */
static ld_status open_cuda(int k, ld_backend **be, ld_error *err)
{
    return ld_backend_cuda_create(0, ksets[k], be, err);
}

/* ---------------------------------------------------------------- runs */

/* the first index of the largest of n values */
static int32_t argmax(const float *v, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = (int32_t)i;
    return best;
}

/* `toks` [T] through a fresh session on `be` in calls of `call` tokens
 * (also its max_batch): logits [T][vocab] */
static ld_status run_tokens(ld_backend *be, const ld_model *m, const int32_t *toks, int T, int call, float *logits,
                            ld_error *err)
{
    ld_session *s = NULL;
    size_t V = (size_t)m->cfg.vocab;
    ld_status st = ld_session_create(m, be, MAX_TOKENS, call, &s, err);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_session_eval(s, toks + t0, n, logits + (size_t)t0 * V, NULL, err);
    }
    ld_session_destroy(s);
    return st;
}

/* One request on a fresh session: the prompt (q) in one prefill, then
 * DECODE_STEPS greedy steps, each feeding the argmax of the last logits.
 * toks [q->T + DECODE_STEPS] (the prompt, then the chosen tokens), logits
 * [q->T + DECODE_STEPS][vocab]. */
static ld_status run_request(ld_backend *be, const ld_model *m, const seq *q, int32_t *toks, float *logits,
                             ld_error *err)
{
    ld_session *s = NULL;
    int V = m->cfg.vocab, T = q->T;
    memcpy(toks, q->tokens, (size_t)T * sizeof *toks);
    ld_status st = ld_session_create(m, be, MAX_TOKENS, T, &s, err);
    if (st == LD_OK) st = ld_session_eval(s, toks, T, logits, NULL, err);
    for (int i = 0; st == LD_OK && i < DECODE_STEPS; i++) {
        int p = T + i;
        toks[p] = argmax(logits + (size_t)(p - 1) * (size_t)V, V);
        st = ld_session_eval(s, toks + p, 1, logits + (size_t)p * (size_t)V, NULL, err);
    }
    ld_session_destroy(s);
    return st;
}

/* ---------------------------------------------------------------- checks */

typedef int (*model_check)(int k, const ld_model *m, const char *name, const char *dir);

/* `fn` for each kernel set on model `name`, or a skip without a device */
static int with_model(const char *name, model_check fn)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = open_cuda(0, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    ld_backend_destroy(be);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    CHECK_MSG(ld_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    int rc = 0;
    for (int k = 0; !rc && k < N_KSETS; k++) rc = fn(k, m, name, dir);
    ld_model_close(m);
    return rc;
}

/* REPLAYS runs of one request, spread over BACKENDS backend instances:
 * the same tokens and bitwise the same logits as the first */
static int check_replays(int k, const ld_model *m, const char *name, const char *dir)
{
    seq q;
    CHECK_MSG(ld_test_load_seqs(dir, &q, 1) == 1, "%s/ref.json", dir);
    CHECK(q.T + DECODE_STEPS <= MAX_TOKENS);
    int P = q.T + DECODE_STEPS;
    size_t n = (size_t)P * (size_t)m->cfg.vocab;
    int32_t first_t[MAX_TOKENS], toks[MAX_TOKENS];
    float *first = malloc(n * sizeof *first), *l = malloc(n * sizeof *l);
    CHECK(first && l);
    ld_error err = {0};
    ld_backend *be = NULL;
    int differ = 0;
    for (int r = 0; r < REPLAYS; r++) {
        if (r % (REPLAYS / BACKENDS) == 0) {
            ld_backend_destroy(be);
            be = NULL;
            CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
        }
        CHECK_MSG(run_request(be, m, &q, r ? toks : first_t, r ? l : first, &err) == LD_OK, "%s replay %d: %s",
                  kset_name(k), r, err.msg);
        if (r && (memcmp(toks, first_t, (size_t)P * sizeof *toks) || memcmp(l, first, n * sizeof *l))) {
            if (!differ) fprintf(stderr, "  %s: replay %d differs from replay 0\n", kset_name(k), r);
            differ++;
        }
    }
    ld_backend_destroy(be);
    printf("  %-10s %-10s %d replays of %d + %d tokens: %d differ (decoded", name, kset_name(k),
           REPLAYS, q.T, DECODE_STEPS, differ);
    for (int i = q.T; i < P; i++) printf(" %d", (int)first_t[i]);
    printf(")\n");
    free(first);
    free(l);
    CHECK_MSG(!differ, "%s: %d of %d replays differ", kset_name(k), differ, REPLAYS);
    return 0;
}

/* the request's tokens as one prefill, in chunks of 3 and token by token:
 * bitwise the same logits per position, and the same as the request's
 * (prefill, then decode steps) */
static int check_chunks(int k, const ld_model *m, const char *name, const char *dir)
{
    seq q;
    CHECK_MSG(ld_test_load_seqs(dir, &q, 1) == 1, "%s/ref.json", dir);
    CHECK(q.T + DECODE_STEPS <= MAX_TOKENS);
    int P = q.T + DECODE_STEPS, V = m->cfg.vocab;
    size_t n = (size_t)P * (size_t)V;
    int32_t toks[MAX_TOKENS];
    float *req = malloc(n * sizeof *req), *l = malloc(n * sizeof *l);
    CHECK(req && l);
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(run_request(be, m, &q, toks, req, &err) == LD_OK, "%s: %s", kset_name(k), err.msg);
    const int calls[] = {P, 3, 1};
    for (int c = 0; c < 3; c++) {
        CHECK_MSG(run_tokens(be, m, toks, P, calls[c], l, &err) == LD_OK, "%s: %s", kset_name(k), err.msg);
        int bad = -1;
        for (int p = P - 1; p >= 0; p--)
            if (memcmp(l + (size_t)p * (size_t)V, req + (size_t)p * (size_t)V, (size_t)V * sizeof *l)) bad = p;
        printf("  %-10s %-10s %d tokens in calls of %2d: %s\n", name, kset_name(k), P, calls[c],
               bad < 0 ? "bitwise equal" : "differ");
        CHECK_MSG(bad < 0, "%s: calls of %d: position %d differs from the request's", kset_name(k), calls[c], bad);
    }
    ld_backend_destroy(be);
    free(req);
    free(l);
    return 0;
}

/* ref.json's sequences in one prefill: within TOL of transformers */
static int check_transformers(int k, const ld_model *m, const char *name, const char *dir)
{
    seq seqs[4];
    int ns = ld_test_load_seqs(dir, seqs, 4);
    CHECK_MSG(ns == 2, "%s/ref.json: %d sequences", dir, ns);
    ld_error err = {0};
    ld_backend *be = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    size_t V = (size_t)m->cfg.vocab;
    int bad = 0;
    for (int i = 0; i < ns; i++) {
        size_t n = (size_t)seqs[i].T * V;
        float *ref = load_f32(dir, seqs[i].logits_file, n), *l = malloc(n * sizeof *l);
        CHECK_MSG(ref && l, "%s/%s", dir, seqs[i].logits_file);
        CHECK_MSG(run_tokens(be, m, seqs[i].tokens, seqs[i].T, seqs[i].T, l, &err) == LD_OK, "%s: %s",
                  kset_name(k), err.msg);
        double mx, e = nerr(l, ref, n, &mx);
        printf("  %-10s %-10s seq %d (%2d tokens): logits nerr %.3g max|d| %.3g (tol %.0e)\n", name,
               kset_name(k), i, seqs[i].T, e, mx, TOL);
        if (!(e < TOL)) bad++;
        free(ref);
        free(l);
    }
    ld_backend_destroy(be);
    CHECK_MSG(!bad, "%s: %d sequences above %g", kset_name(k), bad, TOL);
    return 0;
}

/* ref.json's requests and a third batched together (batch_check.h):
 * each bitwise its alone logits, with every kernel set (dir: the fixture) */
static int check_batched_dir(const char *name)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    ld_status st = open_cuda(0, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    ld_backend_destroy(be);
    char dir[512], label[64];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    for (int k = 0; k < N_KSETS; k++) {
        CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
        snprintf(label, sizeof label, "%s %s", name, kset_name(k));
        int rc = ld_test_check_batch(be, dir, NULL, label);
        ld_backend_destroy(be);
        if (rc) return rc;
    }
    return 0;
}

/* CUDA graphs (graphs=N: kernels/cuda/cuda_graph.cu): ref.json's first
 * sequence prefilled but for its last 4 tokens, those decoded one at a
 * time: bitwise the logits of the launches one by one, for two graph
 * sizes (several graphs a token, and one graph cut by the copies to the
 * host); then the batch check with the backend in graph mode (a batch's
 * launches captured as one request's are) */
#define GRAPH_DECODE 4
static ld_status lm_decode(ld_backend *be, const ld_lm *lm, const seq *q, float *logits, ld_error *err)
{
    ld_lm_session *s = NULL;
    size_t V = (size_t)ld_lm_info_of(lm)->vocab;
    int P = q->T - GRAPH_DECODE;
    LD_TRY(ld_lm_session_create(lm, be, NULL, MAX_TOKENS, P, &s, err));
    ld_status st = ld_lm_eval(s, q->tokens, P, logits, NULL, err);
    for (int p = P; st == LD_OK && p < q->T; p++) st = ld_lm_eval(s, q->tokens + p, 1, logits + (size_t)p * V, NULL, err);
    ld_lm_session_destroy(s);
    return st;
}

static int check_graphs_dir(const char *name)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    ld_status st = open_cuda(1, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    char dir[512], label[64];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_lm *lm = NULL;
    CHECK_MSG(ld_lm_open(dir, &lm, &err) == LD_OK, "%s: %s", name, err.msg);
    seq q;
    CHECK_MSG(ld_test_load_seqs(dir, &q, 1) == 1 && q.T > GRAPH_DECODE && q.T <= MAX_TOKENS, "%s/ref.json", dir);
    size_t n = (size_t)q.T * (size_t)ld_lm_info_of(lm)->vocab;
    float *plain = malloc(n * sizeof *plain), *g = malloc(n * sizeof *g);
    CHECK(plain && g);
    CHECK_MSG(lm_decode(be, lm, &q, plain, &err) == LD_OK, "%s: %s", name, err.msg);
    ld_backend_destroy(be);
    static const char *const specs[] = {"graphs=16", "graphs=on"};
    int rc = 0;
    for (int i = 0; !rc && i < 2; i++) {
        CHECK_MSG(ld_backend_cuda_create(0, specs[i], &be, &err) == LD_OK, "%s", err.msg);
        memset(g, 0, n * sizeof *g);
        st = lm_decode(be, lm, &q, g, &err);
        int same = st == LD_OK && !memcmp(plain, g, n * sizeof *g);
        printf("  %-16s %-10s %d tokens, the last %d decoded: %s\n", name, specs[i], q.T, GRAPH_DECODE,
               same ? "bitwise the launches one by one" : "differ");
        if (i == 0 && same) {
            snprintf(label, sizeof label, "%s %s", name, specs[i]);
            rc = ld_test_check_batch(be, dir, NULL, label);
        }
        ld_backend_destroy(be);
        CHECK_MSG(st == LD_OK, "%s %s: %s", name, specs[i], err.msg);
        CHECK_MSG(same, "%s %s: the logits differ from the launches one by one", name, specs[i]);
    }
    free(plain);
    free(g);
    ld_lm_close(lm);
    return rc;
}

static int test_cuda_graphs_qwen3(void) { return check_graphs_dir("qwen3"); }
static int test_cuda_graphs_qwen3_fp8(void) { return check_graphs_dir("qwen3-fp8"); }
static int test_cuda_graphs_deepseek_v3(void) { return check_graphs_dir("deepseek-v3"); }
static int test_cuda_graphs_deepseek_v32(void) { return check_graphs_dir("deepseek-v32"); }
static int test_cuda_graphs_deepseek_v4(void) { return check_graphs_dir("deepseek-v4"); }
static int test_cuda_graphs_deepseek_v4_fp4(void) { return check_graphs_dir("deepseek-v4-fp4"); }

static int test_cuda_replays_qwen3(void) { return with_model("qwen3", check_replays); }
static int test_cuda_replays_qwen3_fp8(void) { return with_model("qwen3-fp8", check_replays); }
static int test_cuda_chunks_qwen3(void) { return with_model("qwen3", check_chunks); }
static int test_cuda_chunks_qwen3_fp8(void) { return with_model("qwen3-fp8", check_chunks); }
static int test_cuda_transformers_qwen3(void) { return with_model("qwen3", check_transformers); }
static int test_cuda_transformers_qwen3_fp8(void) { return with_model("qwen3-fp8", check_transformers); }
static int test_cuda_batched_qwen3(void) { return check_batched_dir("qwen3"); }
static int test_cuda_batched_qwen3_fp8(void) { return check_batched_dir("qwen3-fp8"); }
static int test_cuda_batched_deepseek_v4(void) { return check_batched_dir("deepseek-v4"); }
static int test_cuda_batched_deepseek_v4_fp4(void) { return check_batched_dir("deepseek-v4-fp4"); }
static int test_cuda_batched_deepseek_v3(void) { return check_batched_dir("deepseek-v3"); }
static int test_cuda_batched_deepseek_v32(void) { return check_batched_dir("deepseek-v32"); }

/* ---------------------------------------------------------------- the moe entry */

#define MOE_D 64
#define MOE_I 32
#define MOE_IS 48
#define MOE_E 8
#define MOE_K 3
#define MOE_T 11

static float moe_frand(void)
{
    return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f;
}

/* a random rows x cols host weight of kind 0 (F32), 1 (BF16) or 2 (FP8
 * E4M3 with 16x16 fp32 block scales); its data malloc'd in h */
static int moe_host(ld_host_tensor *h, int kind, int rows, int cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    memset(h, 0, sizeof *h);
    h->rows = rows;
    h->cols = cols;
    if (kind == 0) {
        float *p = malloc(n * sizeof *p);
        for (size_t i = 0; p && i < n; i++) p[i] = moe_frand() * 0.3f;
        h->dtype = LD_DT_F32;
        h->data = p;
    } else if (kind == 1) {
        uint16_t *p = malloc(n * sizeof *p);
        for (size_t i = 0; p && i < n; i++) {
            float f = moe_frand() * 0.3f;
            uint32_t u;
            memcpy(&u, &f, sizeof u);
            p[i] = (uint16_t)(u >> 16);
        }
        h->dtype = LD_DT_BF16;
        h->data = p;
    } else {
        uint8_t *q = malloc(n);
        size_t ns = (size_t)((rows + 15) / 16) * (size_t)((cols + 15) / 16);
        float *sc = malloc(ns * sizeof *sc);
        for (size_t i = 0; q && i < n; i++) {
            uint8_t b = (uint8_t)(next_u32() & 0xff);
            q[i] = (b & 0x7f) == 0x7f ? 0x38 : b; /* no NaN codes */
        }
        for (size_t i = 0; sc && i < ns; i++) sc[i] = 0.002f + 0.002f * (moe_frand() + 1.0f);
        h->quant = LD_WQ_F8B;
        h->data = q;
        h->scale = sc;
        h->scale_br = h->scale_bc = 16;
        if (!sc) return 1;
    }
    return h->data == NULL;
}

static void moe_host_free(ld_host_tensor *h)
{
    free((void *)h->data);
    free((void *)h->scale);
}

/* the experts (expert 5 absent) and the shared one on backend be */
static ld_status moe_load(ld_backend *be, ld_host_tensor (*h)[3], ld_moe_expert *ex, ld_moe_expert *sh, ld_error *err)
{
    for (int e = 0; e <= MOE_E; e++) {
        ld_moe_expert *x = e == MOE_E ? sh : &ex[e];
        memset(x, 0, sizeof *x);
        if (e == 5) continue;
        LD_TRY(be->ops->weight_load(be, &h[e][0], &x->gate, err));
        LD_TRY(be->ops->weight_load(be, &h[e][1], &x->up, err));
        LD_TRY(be->ops->weight_load(be, &h[e][2], &x->down, err));
    }
    return LD_OK;
}

static void moe_unload(ld_backend *be, ld_moe_expert *ex, ld_moe_expert *sh)
{
    for (int e = 0; e <= MOE_E; e++) {
        ld_moe_expert *x = e == MOE_E ? sh : &ex[e];
        ld_weight *ws[3] = {x->gate, x->up, x->down};
        for (int i = 0; i < 3; i++)
            if (ws[i]) be->ops->weight_free(be, ws[i]);
    }
}

/* y [T][D] = the entry on rows [t0, t0 + T) of x */
static ld_status moe_run(ld_backend *be, const float *x, const int32_t *idx, const float *w, int t0, int T,
                         const ld_moe_expert *ex, const ld_moe_expert *sh, int act, int comb, float *y, ld_error *err)
{
    const ld_backend_ops *o = be->ops;
    ld_buf *bx = NULL, *by = NULL;
    size_t n = (size_t)T * MOE_D;
    ld_status st = o->buf_alloc(be, n, &bx, err);
    if (st == LD_OK) st = o->buf_alloc(be, n, &by, err);
    if (st == LD_OK) st = o->buf_write(be, bx, 0, x + (size_t)t0 * MOE_D, n, err);
    if (st == LD_OK)
        st = o->moe(be, by, bx, idx + t0 * MOE_K, w + t0 * MOE_K, T, MOE_K, ex, MOE_E, sh, act, 0.4f, comb, 2.5f,
                    err);
    if (st == LD_OK) st = o->buf_read(be, by, 0, y, n, err);
    if (bx) o->buf_free(be, bx);
    if (by) o->buf_free(be, by);
    return st;
}

/* MOE_T tokens' routes: MOE_K distinct experts ascending (never 5) */
static void moe_route(int32_t *idx, float *w)
{
    for (int t = 0; t < MOE_T; t++) {
        int chosen[MOE_E] = {0}, n = 0;
        while (n < MOE_K) {
            int e = (int)(next_u32() % MOE_E);
            if (e != 5 && !chosen[e]) chosen[e] = 1, n++;
        }
        for (int e = 0, k = 0; e < MOE_E; e++)
            if (chosen[e]) idx[t * MOE_K + k] = e, w[t * MOE_K + k++] = moe_frand() + 1.0f;
    }
}

/* the CUDA entry against the ref backend's for one weight kind and kernel
 * set: every activation, combine ref / fused, with and without the shared
 * expert, within rounding; combine=bf16 refused; a token's bits the same
 * alone as with the others */
static int check_moe_kind(int k, int kind, ld_backend *ref, const float *x, const int32_t *idx, const float *w)
{
    ld_host_tensor h[MOE_E + 1][3];
    memset(h, 0, sizeof h);
    for (int e = 0; e <= MOE_E; e++) {
        int I = e == MOE_E ? MOE_IS : MOE_I;
        CHECK(!moe_host(&h[e][0], kind, I, MOE_D) && !moe_host(&h[e][1], kind, I, MOE_D) &&
              !moe_host(&h[e][2], kind, MOE_D, I));
    }
    ld_backend *cu = NULL;
    ld_error err = {0};
    CHECK_MSG(open_cuda(k, &cu, &err) == LD_OK, "%s", err.msg);
    ld_moe_expert rex[MOE_E], rsh, cex[MOE_E], csh;
    CHECK_MSG(moe_load(ref, h, rex, &rsh, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(moe_load(cu, h, cex, &csh, &err) == LD_OK, "%s", err.msg);
    static float want[MOE_T * MOE_D], got[MOE_T * MOE_D], one[MOE_T * MOE_D];
    size_t n = (size_t)MOE_T * MOE_D;
    for (int act = 0; act < 2; act++)
        for (int comb = 0; comb < 2; comb++)
            for (int sh = 0; sh < 2; sh++) {
                CHECK_MSG(moe_run(ref, x, idx, w, 0, MOE_T, rex, sh ? &rsh : NULL, act, comb, want, &err) == LD_OK,
                          "%s", err.msg);
                CHECK_MSG(moe_run(cu, x, idx, w, 0, MOE_T, cex, sh ? &csh : NULL, act, comb, got, &err) == LD_OK,
                          "%s", err.msg);
                double mx, e = nerr(got, want, n, &mx);
                fprintf(stderr, "  %s, weights %d, act %d, combine %d, shared %d: nerr %.3g max|d| %.3g\n",
                        kset_name(k), kind, act, comb, sh, e, mx);
                CHECK_MSG(e < 1e-5, "cuda moe against ref: nerr %.3g", e);
                for (int t = 0; t < MOE_T; t++)
                    CHECK(moe_run(cu, x, idx, w, t, 1, cex, sh ? &csh : NULL, act, comb, one + (size_t)t * MOE_D,
                                  &err) == LD_OK);
                CHECK_MSG(memcmp(one, got, n * sizeof *got) == 0, "cuda moe: a token alone differs");
            }
    CHECK(moe_run(cu, x, idx, w, 0, MOE_T, cex, &csh, 1, LD_MOE_COMBINE_BF16, got, &err) == LD_ERR_UNSUPPORTED);
    moe_unload(ref, rex, &rsh);
    moe_unload(cu, cex, &csh);
    ld_backend_destroy(cu);
    for (int e = 0; e <= MOE_E; e++)
        for (int i = 0; i < 3; i++) moe_host_free(&h[e][i]);
    return 0;
}

/* the moe entry on the device (F32, BF16 and FP8 weights, both kernel
 * sets) against the reference backend's */
static int test_cuda_moe_entry_matches_ref(void)
{
    ld_backend *cu = NULL, *ref = NULL;
    ld_error err = {0};
    ld_status st = open_cuda(0, &cu, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    CHECK(cu->ops->moe != NULL);
    ld_backend_destroy(cu);
    CHECK(ld_backend_ref_create(1, &ref, &err) == LD_OK);
    static float x[MOE_T * MOE_D], w[MOE_T * MOE_K];
    static int32_t idx[MOE_T * MOE_K];
    for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = moe_frand() * 2.0f;
    moe_route(idx, w);
    int rc = 0;
    for (int k = 0; !rc && k < N_KSETS; k++)
        for (int kind = 0; !rc && kind < 3; kind++) rc = check_moe_kind(k, kind, ref, x, idx, w);
    ld_backend_destroy(ref);
    return rc;
}

/* ---------------------------------------------------------------- DeepSeek-V4
 * V4's attention (KV ring, compressor, indexer, sinks) and final stream
 * collapse on the CUDA backend's entries: ref.json's sequences in one
 * prefill, in calls of 3 and token by token give bitwise the same logits;
 * they are within V4_TOL of the reference backend's host path under the
 * same session variants (indexer=bf16: the entries refuse it and the
 * session falls back to the host leaves), and within TOL of transformers. */
#define V4_TOL 1e-4

static const char *const v4_specs[] = {NULL, "rope=bf16", "indexer=bf16"};

/* `toks` through a fresh V4 session on `be` in calls of `call` */
static ld_status run_ds4(ld_backend *be, const ld_ds4_model *m, const char *spec, const int32_t *toks, int T,
                         int call, float *logits, ld_error *err)
{
    ld_ds4_session *s = NULL;
    ld_cpu_kernels kk = ld_cpu_kernels_default(0);
    ld_status st = ld_cpu_kernels_parse(spec, &kk, err);
    if (st == LD_OK) st = ld_ds4_session_create(m, be, MAX_TOKENS, call, &s, err);
    if (st == LD_OK) ld_ds4_session_set_kernels(s, &kk);
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += call) {
        int n = T - t0 < call ? T - t0 : call;
        st = ld_ds4_session_eval(s, toks + t0, n, logits + (size_t)t0 * (size_t)m->cfg.vocab, NULL, NULL, err);
    }
    ld_ds4_session_destroy(s);
    return st;
}

static int check_ds4_seq(int k, const ld_ds4_model *m, const char *name, const char *dir, const seq *q,
                         const char *spec)
{
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    float *l[4], *ref = load_f32(dir, q->logits_file, n);
    for (int i = 0; i < 4; i++) l[i] = malloc(n * sizeof *l[i]);
    CHECK(ref && l[0] && l[1] && l[2] && l[3]);
    ld_error err = {0};
    ld_backend *be = NULL, *rb = NULL;
    CHECK_MSG(open_cuda(k, &be, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(be->ops->ds4_attention && be->ops->ds4_hc_head, "the cuda backend lacks V4's attention entries");
    CHECK_MSG(ld_backend_ref_create(1, &rb, &err) == LD_OK, "%s", err.msg);
    int calls[3] = {q->T, 3, 1};
    for (int c = 0; c < 3; c++)
        CHECK_MSG(run_ds4(be, m, spec, q->tokens, q->T, calls[c], l[c], &err) == LD_OK, "%s %s: %s", name,
                  kset_name(k), err.msg);
    CHECK_MSG(run_ds4(rb, m, spec, q->tokens, q->T, q->T, l[3], &err) == LD_OK, "%s: %s", name, err.msg);
    CHECK_MSG(!memcmp(l[0], l[1], n * sizeof *l[0]) && !memcmp(l[0], l[2], n * sizeof *l[0]),
              "%s %s '%s': chunks or token by token differ from one prefill", name, kset_name(k), spec ? spec : "");
    double mx, e = nerr(l[0], l[3], n, &mx), et = nerr(l[0], ref, n, NULL);
    printf("  %-16s %-10s '%s' (%2d tokens): vs ref backend nerr %.3g max|d| %.3g, vs transformers %.3g\n", name,
           kset_name(k), spec ? spec : "", q->T, e, mx, et);
    CHECK_MSG(e < V4_TOL, "%s %s '%s': %g from the ref backend", name, kset_name(k), spec ? spec : "", e);
    CHECK_MSG(spec || et < TOL, "%s %s: %g from transformers", name, kset_name(k), et);
    ld_backend_destroy(be);
    ld_backend_destroy(rb);
    for (int i = 0; i < 4; i++) free(l[i]);
    free(ref);
    return 0;
}

static int with_ds4(const char *name)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = open_cuda(0, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    ld_backend_destroy(be);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds4_model *m = NULL;
    CHECK_MSG(ld_ds4_model_open(dir, &m, &err) == LD_OK, "%s: %s", name, err.msg);
    seq seqs[4];
    int ns = ld_test_load_seqs(dir, seqs, 4), rc = ns == 2 ? 0 : 1;
    for (int k = 0; !rc && k < N_KSETS; k++)
        for (int i = 0; !rc && i < ns; i++)
            for (size_t v = 0; !rc && v < sizeof v4_specs / sizeof v4_specs[0]; v++)
                rc = check_ds4_seq(k, m, name, dir, &seqs[i], v4_specs[v]);
    ld_ds4_model_close(m);
    return rc;
}

static int test_cuda_deepseek_v4(void) { return with_ds4("deepseek-v4"); }
static int test_cuda_deepseek_v4_fp4(void) { return with_ds4("deepseek-v4-fp4"); }

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_transformers_qwen3), LD_CASE(test_cuda_transformers_qwen3_fp8),
    LD_CASE(test_cuda_replays_qwen3),      LD_CASE(test_cuda_replays_qwen3_fp8),
    LD_CASE(test_cuda_chunks_qwen3),       LD_CASE(test_cuda_chunks_qwen3_fp8),
    LD_CASE(test_cuda_batched_qwen3),      LD_CASE(test_cuda_batched_qwen3_fp8),
    LD_CASE(test_cuda_deepseek_v4),        LD_CASE(test_cuda_deepseek_v4_fp4),
    LD_CASE(test_cuda_batched_deepseek_v4), LD_CASE(test_cuda_batched_deepseek_v4_fp4),
    LD_CASE(test_cuda_batched_deepseek_v3), LD_CASE(test_cuda_batched_deepseek_v32),
    LD_CASE(test_cuda_moe_entry_matches_ref),
    LD_CASE(test_cuda_graphs_qwen3),        LD_CASE(test_cuda_graphs_qwen3_fp8),
    LD_CASE(test_cuda_graphs_deepseek_v3),  LD_CASE(test_cuda_graphs_deepseek_v32),
    LD_CASE(test_cuda_graphs_deepseek_v4),  LD_CASE(test_cuda_graphs_deepseek_v4_fp4),
};

LD_TEST_MAIN(tests)
