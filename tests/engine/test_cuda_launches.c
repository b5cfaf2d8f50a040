/* test_cuda_launches.c - what a decode token costs in GPU operations on
 * the CUDA backend (issue 9's decode-step target): each kernel launch or
 * copy costs the GPU a few microseconds whatever it computes, and a decode
 * step at batch 1 is dozens of small ones a layer, so their count bounds
 * the step from below as much as the weights' bytes do.  Built over the
 * CPU emulator only (tests/cuda_emu, which counts every launch, copy and
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

#include "backend.h"
#include "backend_cuda.h"
#include "deepseek_v4_forward.h"
#include "emu_sched.h"
#include "fixtures.h"
#include "ld_test.h"

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
 * (its row tiles' last blocks norm them: matmul_fanout's norms).  Lower
 * it with each fusion. */
#define V4_OPS 104

/* the backend's table without the optional entries that fuse ops
 * (ld_test_unfuse): the session makes the calls they replace (the
 * fusions inside an entry, such as the combine's, are checked kernel by
 * kernel in test_cuda_deepseek.c) */
static void unfuse(ld_backend *be)
{
    static ld_backend_ops ops;
    ops = *be->ops;
    ld_test_unfuse(&ops);
    be->ops = &ops;
}

/* tokens [P + DECODE] through a fresh session on be: P in one call, then
 * one at a time, ops[i] the GPU operations of decode token i (NULL: not
 * counted); the census printed for the last one when `show` */
static ld_status run(ld_backend *be, const ld_ds4_model *m, const int32_t *toks, int P, float *logits, long *ops,
                     int show, ld_error *err)
{
    ld_ds4_session *s = NULL;
    size_t V = (size_t)m->cfg.vocab;
    LD_TRY(ld_ds4_session_create(m, be, MAX_TOKENS, P, &s, err));
    ld_status st = ld_ds4_session_eval(s, toks, P, logits, NULL, NULL, err);
    for (int i = 0; st == LD_OK && i < DECODE; i++) {
        if (show && i == DECODE - 1) ld_emu_census_reset();
        long before = ld_emu_launches(NULL);
        st = ld_ds4_session_eval(s, toks + P + i, 1, logits + (size_t)(P + i) * V, NULL, NULL, err);
        if (ops) ops[i] = ld_emu_launches(NULL) - before;
    }
    if (st == LD_OK && show) {
        printf("  the last decode token's ");
        ld_emu_census(stdout);
    }
    ld_ds4_session_destroy(s);
    return st;
}

static int test_v4_decode_ops(void)
{
    const char *dir = MDIR "deepseek-v4-fp4";
    ld_error err = {0};
    ld_backend *be = NULL, *plain = NULL;
    ld_status st = ld_backend_cuda_create(0, NULL, &be, &err);
    if (st == LD_ERR_UNSUPPORTED) SKIP("%s", err.msg);
    CHECK_MSG(st == LD_OK, "cuda backend: %s", err.msg);
    CHECK_MSG(ld_backend_cuda_create(0, NULL, &plain, &err) == LD_OK, "%s", err.msg);
    unfuse(plain);
    ld_ds4_model *m = NULL;
    CHECK_MSG(ld_ds4_model_open(dir, &m, &err) == LD_OK, "%s", err.msg);
    ld_test_seq q;
    CHECK_MSG(ld_test_load_seq(dir, 0, &q) && q.T > DECODE + 4, "%s/ref.json: sequence 0", dir);
    int P = q.T - DECODE, L = m->cfg.n_layers;
    size_t n = (size_t)q.T * (size_t)m->cfg.vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    CHECK(a && b && c);
    long fused[DECODE], unfused[DECODE];
    CHECK_MSG(run(be, m, q.tokens, P, a, fused, 1, &err) == LD_OK, "decode: %s", err.msg);
    CHECK_MSG(run(plain, m, q.tokens, P, b, unfused, 0, &err) == LD_OK, "unfused decode: %s", err.msg);
    ld_ds4_session *s = NULL;
    CHECK_MSG(ld_ds4_session_create(m, be, MAX_TOKENS, q.T, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(ld_ds4_session_eval(s, q.tokens, q.T, c, NULL, NULL, &err) == LD_OK, "one prefill: %s", err.msg);
    ld_ds4_session_destroy(s);
    printf("  deepseek-v4-fp4 (%d layers), decode after %d tokens, GPU operations a token:", L, P);
    for (int i = 0; i < DECODE; i++) printf(" %ld", fused[i]);
    printf(" (%.1f a layer with the head's); without the fused entries:", (double)fused[DECODE - 1] / L);
    for (int i = 0; i < DECODE; i++) printf(" %ld", unfused[i]);
    printf("\n");
    int same_fused = !memcmp(a, b, n * sizeof *a), same_prefill = !memcmp(a, c, n * sizeof *a);
    free(a);
    free(b);
    free(c);
    ld_ds4_model_close(m);
    ld_backend_destroy(be);
    ld_backend_destroy(plain);
    CHECK_MSG(same_fused, "the fused entries change the logits");
    CHECK_MSG(same_prefill, "decode token by token differs from one prefill");
    for (int i = 0; i < DECODE; i++) {
        CHECK_MSG(fused[i] <= V4_OPS, "decode token %d: %ld GPU operations, the design's %d", i, fused[i], V4_OPS);
        CHECK_MSG(fused[i] < unfused[i], "decode token %d: the fused entries save nothing (%ld, %ld)", i, fused[i],
                  unfused[i]);
    }
    return 0;
}

static const ld_test_case tests[] = {LD_CASE(test_v4_decode_ops)};

LD_TEST_MAIN(tests)
