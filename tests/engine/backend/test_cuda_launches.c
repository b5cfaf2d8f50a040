/* test_cuda_launches.c - what a decode token costs in GPU operations on
 * the CUDA backend (issue 9's decode-step target): each kernel launch or
 * copy costs the GPU a few microseconds whatever it computes, and a decode
 * step at batch 1 is dozens of small ones a layer, so their count bounds
 * the step from below as much as the weights' bytes do.  Built over the
 * CPU emulator only (tests/support/cuda_emu, which counts every launch, copy and
 * memset by name: emu_census.c).
 *
 * DeepSeek-V4 (testdata/models/deepseek-v4-fp4: FP4 experts, FP8 linears,
 * a sliding, two CSA and an HCA layer), every op custom: a prefill of
 * ref.json's first sequence less DECODE tokens, then those one at a time.
 * Asserted:
 *  - every decode token's operations (they vary with the compressed
 *    windows a token completes) stay within V4_OPS, the count of the
 *    design: a change that adds some fails here and says so, one that
 *    removes some lowers the constant;
 *  - the same tokens on the backend without its fused entries
 *    (ld_test_unfuse: the session's own sequence of calls) give bitwise
 *    the same logits, with the number of operations that saves printed;
 *  - the decode's logits equal those of the same tokens as one prefill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "kernels/cuda/cuda_ops.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "tests/support/cuda_emu/emu_sched.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define DECODE 6
#define MAX_TOKENS 64

/* GPU operations of one V4 decode token on the 4-layer fixture, all=custom:
 * the most of the DECODE tokens (the first, whose new row count the
 * tables kept on the device take once, and which completes a CSA window).
 * A token completing no window, 2026-11-30: 232 before the fused entries;
 * 212 with the grouped output projection (matmul_blockdiag); 196 with
 * hc_pre in two launches; 192 with the shared expert's gate and up in one;
 * 187 with a compressor's ring rows put in one launch and its entries read
 * in place; 175 with V4's q and kv normed, rotated and put in the ring in
 * one launch; 167 with the MoE's combine from zero and the shared add in
 * it; 159 with the attention and FFN input norms in hc_pre's collapse
 * (hc_pre_norm); 155 with the streams embedded in place; 147 with the
 * MoE's route, plan and tables in one launch; 139 with the experts'
 * activation in their gate/up launch.  2026-11-30: 129 with wq_a and wkv
 * in one launch, q_norm and kv_norm in one, wq_b and the indexer's wq_b
 * in one (matmul_fanout, rmsnorm2); 123 with the fused scale and the hash
 * rows' token indices kept on the device; 119 with the attention output's
 * inverse RoPE in the split-K merge; 115 with the experts reading their
 * tokens' rows in place (no gather); 103 with wo_b, and the shared
 * expert's down with the routed combine, writing the new streams in their
 * epilogue (matmul_hc_post, ds4_route_moe_post); 96 with the compressors'
 * kv and gate and the indexer's weights in one launch a weight type
 * (matmul_fanout over plain types, ld_cu_matmul_fanout); 88 with hc_pre
 * in one launch (each token's last mixing block runs its Sinkhorn,
 * collapse and norm); 84 with the attention's split and merge in one
 * launch (the last block of a token's 8 heads merges them); 76 with the
 * routed (FP4) and shared (FP8) experts' gate/up in one launch and their
 * downs with the combine and hc_post in another (ld_cu_grouped_glu2,
 * ld_cu_moe_down_post); 72 with q_norm and kv_norm in the wq_a/wkv launch
 * (its row tiles' last blocks norm them: matmul_fanout's norms).
 * 2026-12-01: 68 with the router's matmul in the route's launch
 * (ld_cu_ds4_router_route_plan_tables: its blocks compute the logits, the
 * last one done routes them); 64 with the indexer's RoPE, scores and
 * top-k in one launch (ld_cu_ds4_index_pick: its blocks rotate their copy
 * of the query and score their keys, the last one done writes the query
 * back and picks); 63 with the head's collapse and the final norm in one
 * launch (ld_cu_ds4_hc_head_norm).  Lower it with each fusion. */
#define V4_OPS 95

/* the backend's table without the optional entries that fuse ops
 * (ld_test_unfuse): the session makes the calls they replace (the
 * fusions inside an entry, such as the combine's, are checked kernel by
 * kernel in test_cuda_ds.c) */
static void unfuse(ld_backend *be)
{
    static ld_backend_ops ops;
    ops = *be->ops;
    ld_test_unfuse(&ops);
    be->ops = &ops;
}

/* what a decode token did on the GPU, token by token */
typedef struct decode_log {
    long ops[DECODE];         /* GPU operations run (launches, copies, memsets, graph launches) */
    long graphs[DECODE];      /* graph launches among them */
    long captured[DECODE];    /* operations captured in graphs (cuda_ops.h's ld_cu_graph_stats) */
    ld_emu_op *journal[DECODE]; /* the operations run, in order (emu_sched.h's journal) */
    size_t n_journal[DECODE];
} decode_log;

static void log_free(decode_log *log)
{
    for (int i = 0; i < DECODE; i++) free(log->journal[i]);
}

/* decode token i's copies to the host */
static long to_host(const decode_log *log, int i)
{
    long n = 0;
    for (size_t j = 0; j < log->n_journal[i]; j++) n += !strcmp(log->journal[i][j].name, "memcpy DtoH");
    return n;
}

/* b's operations against a's: -1 (printed) where a kernel or a launch
 * shape differs, which a kept CUDA graph could not take by an update;
 * else the number of operations whose arguments differ, named in
 * `varying` ("ds4_qkv_custom(7)": the argument's index) */
static int journal_compare(const ld_emu_op *a, size_t na, const ld_emu_op *b, size_t nb, char *varying, size_t cap)
{
    int d = 0;
    size_t k = 0;
    varying[0] = 0;
    if (na != nb) {
        printf("    %zu operations, then %zu\n", na, nb);
        return -1;
    }
    for (size_t i = 0; i < na; i++) {
        const ld_emu_op *x = a + i, *y = b + i;
        if (strcmp(x->name, y->name) || memcmp(x->grid, y->grid, sizeof x->grid) ||
            memcmp(x->block, y->block, sizeof x->block) || x->smem != y->smem) {
            printf("    operation %zu: %s, then %s (or its shape)\n", i, x->name, y->name);
            return -1;
        }
        int first = 1;
        for (int j = 0; j < x->n_args; j++)
            if (x->arg[j] != y->arg[j] && k + 64 < cap) {
                k += first ? (size_t)snprintf(varying + k, cap - k, " %s(%d", x->name, j)
                           : (size_t)snprintf(varying + k, cap - k, ",%d", j);
                first = 0;
            }
        if (!first) {
            k += (size_t)snprintf(varying + k, cap - k, ")");
            d++;
        }
    }
    return d;
}

/* tokens [P + DECODE] through a fresh session on be: P in one call, then
 * one at a time, each recorded in *log; the census printed for the last
 * one when `show` */
static ld_status run(ld_backend *be, const ld_ds4_model *m, const int32_t *toks, int P, float *logits,
                     decode_log *log, int show, ld_error *err)
{
    ld_ds4_session *s = NULL;
    size_t V = (size_t)m->cfg.vocab;
    memset(log, 0, sizeof *log);
    LD_TRY(ld_ds4_session_create(m, be, MAX_TOKENS, P, &s, err));
    ld_status st = ld_ds4_session_eval(s, toks, P, logits, NULL, NULL, err);
    for (int i = 0; st == LD_OK && i < DECODE; i++) {
        if (show && i == DECODE - 1) ld_emu_census_reset();
        long before = ld_emu_launches(NULL), graphs = ld_emu_launches("graph launch");
        ld_cu_graph_stats g0, g1;
        ld_cu_graph_stats_get(&g0);
        ld_emu_journal_start();
        st = ld_ds4_session_eval(s, toks + P + i, 1, logits + (size_t)(P + i) * V, NULL, NULL, err);
        log->n_journal[i] = ld_emu_journal_stop(&log->journal[i]);
        ld_cu_graph_stats_get(&g1);
        log->ops[i] = ld_emu_launches(NULL) - before;
        log->graphs[i] = ld_emu_launches("graph launch") - graphs;
        log->captured[i] = g1.ops - g0.ops;
    }
    if (st == LD_OK && show) {
        printf("  the last decode token's ");
        ld_emu_census(stdout);
    }
    ld_ds4_session_destroy(s);
    return st;
}

/* the fixture: the model, its first sequence, logits for it */
typedef struct fixture {
    ld_ds4_model *m;
    ld_test_seq q;
    int P;    /* tokens prefilled before the DECODE decoded */
    size_t n; /* logits of the sequence */
} fixture;

static int fixture_open(fixture *f, ld_error *err)
{
    const char *dir = MDIR "deepseek-v4-fp4";
    memset(f, 0, sizeof *f);
    if (ld_ds4_model_open(dir, &f->m, err) != LD_OK) return 0;
    if (!ld_test_load_seq(dir, 0, &f->q) || f->q.T <= DECODE + 4) {
        snprintf(err->msg, sizeof err->msg, "%s/ref.json: sequence 0", dir);
        return 0;
    }
    f->P = f->q.T - DECODE;
    f->n = (size_t)f->q.T * (size_t)f->m->cfg.vocab;
    return 1;
}

static ld_status cuda(const char *spec, ld_backend **be, ld_error *err)
{
    return ld_backend_cuda_create(0, spec, be, err);
}

/* the CUDA backend (every op custom) and the fixture: 0, LD_SKIP without
 * CUDA or a device, or a failure */
static int open_all(ld_backend **be, fixture *f, ld_error *err)
{
    ld_status st = cuda(NULL, be, err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err->msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err->msg);
    CHECK_MSG(fixture_open(f, err), "%s", err->msg);
    return 0;
}

static int test_v4_decode_ops(void)
{
    ld_error err = {0};
    ld_backend *be = NULL, *plain = NULL;
    fixture f;
    int rc = open_all(&be, &f, &err);
    if (rc) return rc;
    CHECK_MSG(cuda(NULL, &plain, &err) == LD_OK, "%s", err.msg);
    unfuse(plain);
    int L = f.m->cfg.n_layers;
    float *a = malloc(f.n * sizeof *a), *b = malloc(f.n * sizeof *b), *c = malloc(f.n * sizeof *c);
    CHECK(a && b && c);
    decode_log fused, unfused;
    CHECK_MSG(run(be, f.m, f.q.tokens, f.P, a, &fused, 1, &err) == LD_OK, "decode: %s", err.msg);
    CHECK_MSG(run(plain, f.m, f.q.tokens, f.P, b, &unfused, 0, &err) == LD_OK, "unfused decode: %s", err.msg);
    ld_ds4_session *s = NULL;
    CHECK_MSG(ld_ds4_session_create(f.m, be, MAX_TOKENS, f.q.T, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_ds4_session_eval(s, f.q.tokens, f.q.T, c, NULL, NULL, &err) == LD_OK, "one prefill: %s", err.msg);
    ld_ds4_session_destroy(s);
    printf("  deepseek-v4-fp4 (%d layers), decode after %d tokens, GPU operations a token:", L, f.P);
    for (int i = 0; i < DECODE; i++) printf(" %ld", fused.ops[i]);
    printf(" (%.1f a layer with the head's); without the fused entries:", (double)fused.ops[DECODE - 1] / L);
    for (int i = 0; i < DECODE; i++) printf(" %ld", unfused.ops[i]);
    printf("\n");
    int same_fused = !memcmp(a, b, f.n * sizeof *a), same_prefill = !memcmp(a, c, f.n * sizeof *a);
    free(a);
    free(b);
    free(c);
    ld_ds4_model_close(f.m);
    ld_backend_destroy(be);
    ld_backend_destroy(plain);
    log_free(&fused);
    log_free(&unfused);
    CHECK_MSG(same_fused, "the fused entries change the logits");
    CHECK_MSG(same_prefill, "decode token by token differs from one prefill");
    for (int i = 0; i < DECODE; i++) {
        CHECK_MSG(fused.ops[i] <= V4_OPS, "decode token %d: %ld GPU operations, the design's %d", i, fused.ops[i],
                  V4_OPS);
        CHECK_MSG(fused.ops[i] < unfused.ops[i], "decode token %d: the fused entries save nothing (%ld, %ld)", i,
                  fused.ops[i], unfused.ops[i]);
    }
    return 0;
}

/* Two decode tokens that complete the same compressor windows (the same
 * number of operations) run the same kernels in the same launch shapes:
 * what lets a CUDA graph kept from one token be updated with the next
 * one's arguments instead of instantiated again (kernels/cuda/cuda_graph.cu).
 * The arguments that still change from token to token (positions, ring
 * slots, the uploads' host buffers) are printed: those a graph replayed
 * without capture would need read from the device. */
static int test_v4_decode_steps_alike(void)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    fixture f;
    int rc = open_all(&be, &f, &err);
    if (rc) return rc;
    float *a = malloc(f.n * sizeof *a);
    CHECK(a);
    decode_log log;
    CHECK_MSG(run(be, f.m, f.q.tokens, f.P, a, &log, 0, &err) == LD_OK, "decode: %s", err.msg);
    int pairs = 0, bad = 0;
    char varying[2048];
    for (int i = 1; i < DECODE; i++)
        for (int k = i - 1; k >= 0; k--) {
            if (log.n_journal[k] != log.n_journal[i]) continue;
            int d = journal_compare(log.journal[k], log.n_journal[k], log.journal[i], log.n_journal[i], varying,
                                    sizeof varying);
            pairs++;
            if (d < 0) bad++;
            if (d >= 0 && i == DECODE - 1)
                printf("  decode tokens %d and %d: %zu operations alike, %d with other arguments:%s\n", k, i,
                       log.n_journal[i], d, varying);
            break;
        }
    free(a);
    log_free(&log);
    ld_ds4_model_close(f.m);
    ld_backend_destroy(be);
    CHECK_MSG(log.n_journal[1] > 0, "the journal recorded nothing");
    CHECK_MSG(pairs >= 2, "only %d pairs of decode tokens of the same operations", pairs);
    CHECK_MSG(!bad, "%d pairs of decode tokens differ in their kernels or launch shapes", bad);
    return 0;
}

/* The same decode with the backend's work captured in CUDA graphs
 * (graphs=N: kernels/cuda/cuda_graph.cu): bitwise the logits of the launches
 * one by one; every operation of a decode token but the logits' copy to
 * the host runs inside a graph; after the first tokens the kept graphs
 * are updated, not instantiated again.  Three chunk sizes: several graphs
 * a token, and one. */
static int test_v4_decode_graphs(void)
{
    ld_error err = {0};
    ld_backend *be = NULL;
    fixture f;
    int rc = open_all(&be, &f, &err);
    if (rc) return rc;
    float *a = malloc(f.n * sizeof *a), *b = malloc(f.n * sizeof *b);
    CHECK(a && b);
    decode_log plain, graphs;
    CHECK_MSG(run(be, f.m, f.q.tokens, f.P, a, &plain, 0, &err) == LD_OK, "decode: %s", err.msg);
    ld_backend_destroy(be);
    static const char *const specs[] = {"graphs=16", "graphs=on", "all=ref,graphs=7"};
    for (size_t c = 0; c < sizeof specs / sizeof *specs; c++) {
        if (c == 2) { /* the reference kernels: their own plain run (before the graphs' backend: graph
                       * mode is the thread's) */
            CHECK_MSG(cuda("all=ref", &be, &err) == LD_OK, "%s", err.msg);
            log_free(&plain);
            CHECK_MSG(run(be, f.m, f.q.tokens, f.P, a, &plain, 0, &err) == LD_OK, "decode: %s", err.msg);
            ld_backend_destroy(be);
        }
        ld_backend *g = NULL;
        CHECK_MSG(cuda(specs[c], &g, &err) == LD_OK, "%s: %s", specs[c], err.msg);
        ld_cu_graph_stats s0, s1;
        ld_cu_graph_stats_get(&s0);
        memset(b, 0, f.n * sizeof *b);
        CHECK_MSG(run(g, f.m, f.q.tokens, f.P, b, &graphs, 0, &err) == LD_OK, "%s decode: %s", specs[c], err.msg);
        ld_cu_graph_stats_get(&s1);
        ld_backend_destroy(g);
        long launched = s1.launched - s0.launched, made = s1.instantiated - s0.instantiated;
        long updated = s1.updated - s0.updated;
        printf("  %s: graphs a decode token:", specs[c]);
        for (int i = 0; i < DECODE; i++) printf(" %ld", graphs.graphs[i]);
        printf(" (%ld launched in all, %ld instantiated, %ld updated)\n", launched, made, updated);
        CHECK_MSG(!memcmp(a, b, f.n * sizeof *a), "%s: the logits differ from the launches one by one", specs[c]);
        for (int i = 0; i < DECODE; i++) {
            long reads = to_host(&graphs, i);
            CHECK_MSG(graphs.graphs[i] > 0, "%s: decode token %d ran no graph", specs[c], i);
            /* what ran: the graphs, their operations, and the copies to the host (the logits') between them */
            CHECK_MSG(graphs.ops[i] == graphs.graphs[i] + graphs.captured[i] + reads,
                      "%s: decode token %d: %ld operations run, %ld graphs of %ld operations, %ld copies to the "
                      "host: some ran outside",
                      specs[c], i, graphs.ops[i], graphs.graphs[i], graphs.captured[i], reads);
            CHECK_MSG(graphs.captured[i] + reads == plain.ops[i],
                      "%s: decode token %d: %ld captured, %ld without graphs", specs[c], i, graphs.captured[i],
                      plain.ops[i]);
        }
        CHECK_MSG(updated > 0 && made < launched, "%s: no kept graph was updated (%ld made, %ld launched)", specs[c],
                  made, launched);
        log_free(&graphs);
    }
    free(a);
    free(b);
    log_free(&plain);
    ld_ds4_model_close(f.m);
    return 0;
}

/* Graph mode's uploads past its pinned arena (8 MiB): 24 uploads of 1 MiB,
 * each a different pattern into its own device range, captured in graphs
 * of 4 operations.  A copy node reads its host bytes when its graph runs
 * (the emulator runs a launched graph at the stream's next operation or
 * wait), so the arena is reused only after a wait: every range holds its
 * own pattern, and at least two waits emptied the arena. */
static int test_graph_arena_full(void)
{
    enum { UPLOADS = 24, WORDS = (1 << 20) / 4 };
    uint32_t *host = malloc((size_t)WORDS * sizeof *host), *back = malloc((size_t)UPLOADS * WORDS * sizeof *back);
    void *dev = NULL;
    CHECK(host && back);
    int n_dev = 0;
    if (ld_cu_device_count(&n_dev) || n_dev < 1) SKIP("no CUDA device");
    CHECK(ld_cu_malloc(&dev, (size_t)UPLOADS * WORDS * sizeof *host) == 0);
    ld_cu_graph_stats s0, s1;
    ld_cu_graph_stats_get(&s0);
    CHECK(ld_cu_graphs_begin(4) == 0);
    for (int u = 0; u < UPLOADS; u++) {
        for (int i = 0; i < WORDS; i++) host[i] = (uint32_t)u * 2654435761u + (uint32_t)i;
        CHECK(ld_cu_h2d((uint32_t *)dev + (size_t)u * WORDS, host, (size_t)WORDS * sizeof *host) == 0);
    }
    CHECK(ld_cu_d2h(back, dev, (size_t)UPLOADS * WORDS * sizeof *back) == 0);
    CHECK(ld_cu_graphs_end() == 0);
    ld_cu_graph_stats_get(&s1);
    int bad = -1;
    for (int u = 0; u < UPLOADS && bad < 0; u++)
        for (int i = 0; i < WORDS; i++)
            if (back[(size_t)u * WORDS + i] != (uint32_t)u * 2654435761u + (uint32_t)i) {
                bad = u;
                break;
            }
    printf("  %d uploads of 1 MiB in graphs of 4: %ld graphs, %ld waits\n", UPLOADS, s1.launched - s0.launched,
           s1.syncs - s0.syncs);
    CHECK(ld_cu_free(dev) == 0);
    free(host);
    free(back);
    CHECK_MSG(bad < 0, "upload %d holds another upload's bytes: the arena was reused before its graph ran", bad);
    CHECK_MSG(s1.launched - s0.launched >= UPLOADS / 4, "the uploads did not run in graphs");
    CHECK_MSG(s1.syncs - s0.syncs >= 2, "the full arena was not waited for (%ld waits)", s1.syncs - s0.syncs);
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_v4_decode_ops), LD_CASE(test_v4_decode_steps_alike),
                                     LD_CASE(test_v4_decode_graphs), LD_CASE(test_graph_arena_full)};

LD_TEST_MAIN(tests)
