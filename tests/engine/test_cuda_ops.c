/* test_cuda_ops.c - the GPU-only checks of the CUDA backend (ctest label
 * gpu; every case skips, 77, with the reason when CUDA is not built or no
 * device is present):
 *  - every op and shape of test_backend_ops.c on cuda-ref and cuda-custom
 *    against the reference backend, and the batch-split invariance;
 *  - the "ref" kernels equal the C reference bitwise where no
 *    transcendental is involved (embed, matmul of every type, rmsnorm,
 *    kv_store, add), and the custom kernels where the arithmetic is the
 *    same (embed, kv_store, add; rope and swiglu equal to the CUDA ref);
 *  - errors: ranges, token ids, an unsupported head_dim, an allocation
 *    the device cannot make, each naming the op;
 *  - the forward pass (forward.h) of the tiny models (safetensors and
 *    quantized GGUF) on both kernel sets: logits near the reference
 *    backend's, and prefill, chunks of 3 and token-by-token bitwise
 *    equal. */
#define LD_BACKEND_OPS_NO_MAIN
#include "test_backend_ops.c"

#include "forward.h"
#include "model.h"

/* the two CUDA backends (b[1], b[2]) or a skip */
#define OPEN_CUDA(b, n)                                                    \
    bk b[3];                                                               \
    int n = 0;                                                             \
    CHECK(!open_backends(b, &n));                                          \
    if (!b[1].be) {                                                        \
        char why_[300];                                                    \
        snprintf(why_, sizeof why_, "%s", b[1].skip);                      \
        close_backends(b, n);                                              \
        SKIP("%s", why_);                                                  \
    }

static int test_cuda_ops_table(void)
{
    OPEN_CUDA(b, n);
    int rc = check_backend(&b[1]);
    if (!rc) rc = check_backend(&b[2]);
    close_backends(b, n);
    return rc;
}

static int test_cuda_split(void)
{
    OPEN_CUDA(b, n);
    int rc = check_split(&b[1]);
    if (!rc) rc = check_split(&b[2]);
    close_backends(b, n);
    return rc;
}

/* 1 when the case's output on `x` equals that on `y` bitwise */
static int same_bits(ld_backend *x, ld_backend *y, const ocase *c, uint64_t seed, char *name, size_t cap)
{
    float *a = NULL, *r = NULL;
    size_t na = 0, nr = 0;
    case_name(c, name, cap);
    int ok = !run_case(x, c, seed, &a, &na) && !run_case(y, c, seed, &r, &nr) && na == nr &&
             !memcmp(a, r, na * sizeof *a);
    free(a);
    free(r);
    return ok;
}

static int test_cuda_bitwise(void)
{
    OPEN_CUDA(b, n);
    build_cases();
    int bad = 0, checked = 0;
    for (int i = 0; i < n_cases; i++) {
        const ocase *c = &cases[i];
        uint64_t seed = 0xC0FFEEull + (uint64_t)i;
        char name[160];
        int ref_exact = c->op == OP_EMBED || c->op == OP_MATMUL || c->op == OP_RMSNORM || c->op == OP_KV ||
                        c->op == OP_ADD;
        if (ref_exact) {
            checked++;
            if (!same_bits(b[1].be, ref_be, c, seed, name, sizeof name)) {
                printf("  cuda-ref    %s: not bitwise equal to the reference\n", name);
                bad++;
            }
        }
        if (c->op == OP_EMBED || c->op == OP_KV || c->op == OP_ADD) {
            checked++;
            if (!same_bits(b[2].be, ref_be, c, seed, name, sizeof name)) {
                printf("  cuda-custom %s: not bitwise equal to the reference\n", name);
                bad++;
            }
        }
        if (c->op == OP_ROPE || c->op == OP_SWIGLU) {
            checked++;
            if (!same_bits(b[2].be, b[1].be, c, seed, name, sizeof name)) {
                printf("  cuda-custom %s: not bitwise equal to cuda-ref\n", name);
                bad++;
            }
        }
    }
    printf("  %d bitwise comparisons, %d differ\n", checked, bad);
    free(cases);
    cases = NULL;
    cap_cases = 0;
    close_backends(b, n);
    CHECK(!bad);
    return 0;
}

static int test_cuda_errors(void)
{
    OPEN_CUDA(b, n);
    int rc = 1;
    ld_backend *be = b[2].be;
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    ld_buf *small = upload(be, NULL, 10), *big = upload(be, NULL, 1000);
    float w1[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ld_weight *w = load_weight(be, &kinds[0], w1, 1, 8, 0);
    ld_buf *huge = NULL;
    if (!small || !big || !w) goto done;
    /* ranges */
    if (o->add(be, small, big, 100, &err) != LD_ERR_USAGE || !strstr(err.msg, "outside a buffer")) goto done;
    if (o->buf_read(be, small, 5, w1, 100, &err) != LD_ERR_USAGE) goto done;
    if (o->matmul(be, small, big, w, NULL, 100, &err) != LD_ERR_USAGE) goto done;
    /* token ids */
    int32_t tok = 1;
    if (o->embed(be, big, w, &tok, 1, &err) != LD_ERR_USAGE || !strstr(err.msg, "token id 1")) goto done;
    /* the custom attention's head_dim limit */
    if (o->attention(be, big, big, big, big, 1, 0, 1, 1, 300, 0, 1.0f, &err) != LD_ERR_UNSUPPORTED ||
        !strstr(err.msg, "head_dim 300"))
        goto done;
    /* ... which the ref kernel does not have */
    if (b[1].be->ops->attention(b[1].be, big, big, big, big, 1, 0, 1, 1, 300, 0, 1.0f, &err) != LD_OK) goto done;
    /* an allocation no device makes: an error naming buf_alloc */
    ld_status st = o->buf_alloc(be, (size_t)1 << 45, &huge, &err);
    if (st == LD_OK || huge || !strstr(err.msg, "buf_alloc")) goto done;
    printf("  huge buf_alloc: %s\n", err.msg);
    /* the device still works after it */
    if (o->add(be, big, big, 1000, &err) != LD_OK) goto done;
    float out[4];
    if (o->buf_read(be, big, 0, out, 4, &err) != LD_OK || out[0] != 0.0f) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "  last error: %s\n", err.msg);
    o->buf_free(be, small);
    o->buf_free(be, big);
    if (w) o->weight_free(be, w);
    close_backends(b, n);
    return rc;
}

/* ---------------------------------------------------------------- forward */

#define MDIR LD_TESTDATA_DIR "/models/"
#define QDIR LD_TESTDATA_DIR "/engine/quant/"
#define FT 20 /* tokens */

/* logits [FT][vocab] of `toks` on be in chunks of `batch` (malloc'd) */
static float *forward_on(ld_backend *be, const ld_model *m, const int32_t *toks, int batch, ld_error *err)
{
    ld_session *s = NULL;
    float *logits = malloc((size_t)FT * (size_t)m->cfg.vocab * sizeof *logits);
    ld_status st = ld_session_create(m, be, 64, batch, &s, err);
    for (int t0 = 0; st == LD_OK && t0 < FT; t0 += batch) {
        int nt = FT - t0 < batch ? FT - t0 : batch;
        st = ld_session_eval(s, toks + t0, nt, logits + (size_t)t0 * (size_t)m->cfg.vocab, NULL, err);
    }
    ld_session_destroy(s);
    if (st != LD_OK) {
        free(logits);
        return NULL;
    }
    return logits;
}

static int check_model(bk *b, const char *label, const ld_model *m)
{
    int V = m->cfg.vocab;
    int32_t toks[FT];
    rng = 7;
    for (int t = 0; t < FT; t++) toks[t] = (int32_t)(next_u32() % (uint32_t)V);
    ld_error err = {0};
    float *ref = forward_on(ref_be, m, toks, FT, &err);
    CHECK_MSG(ref, "%s on ref: %s", label, err.msg);
    for (int i = 1; i < 3; i++) {
        float *pre = forward_on(b[i].be, m, toks, FT, &err);
        CHECK_MSG(pre, "%s on %s: %s", label, b[i].name, err.msg);
        double mx, e = nmse(pre, ref, (size_t)FT * (size_t)V, &mx);
        printf("  %-12s %-14s logits nmse %.3g max|d| %.3g\n", b[i].name, label, e, mx);
        CHECK_MSG(e >= 0 && e <= 1e-9, "%s on %s: nmse %g", label, b[i].name, e);
        int batches[] = {3, 1};
        for (int k = 0; k < 2; k++) {
            float *ch = forward_on(b[i].be, m, toks, batches[k], &err);
            CHECK_MSG(ch, "%s on %s: %s", label, b[i].name, err.msg);
            CHECK_MSG(!memcmp(ch, pre, (size_t)FT * (size_t)V * sizeof *ch),
                      "%s on %s: chunks of %d differ from the prefill", label, b[i].name, batches[k]);
            free(ch);
        }
        free(pre);
    }
    free(ref);
    return 0;
}

static int test_cuda_forward(void)
{
    OPEN_CUDA(b, n);
    const char *hf[] = {"smollm", "llama3", "llama3-bf16", "qwen2", "qwen3", "qwen3-f16", "mistral", "qwen2-yarn"};
    const char *gg[] = {"llama-q", "qwen2-q", "qwen3-q"};
    int rc = 0;
    for (size_t i = 0; !rc && i < sizeof hf / sizeof hf[0] + sizeof gg / sizeof gg[0]; i++) {
        char path[512];
        ld_model *m = NULL;
        ld_error err = {0};
        ld_status st;
        const char *label;
        if (i < sizeof hf / sizeof hf[0]) {
            label = hf[i];
            snprintf(path, sizeof path, MDIR "%s", label);
            st = ld_model_open(path, &m, &err);
        } else {
            label = gg[i - sizeof hf / sizeof hf[0]];
            snprintf(path, sizeof path, QDIR "%s.gguf", label);
            st = ld_model_open_gguf(path, &m, &err);
        }
        if (st != LD_OK) {
            fprintf(stderr, "  %s: %s\n", path, err.msg);
            rc = 1;
            break;
        }
        rc = check_model(b, label, m);
        ld_model_close(m);
    }
    close_backends(b, n);
    return rc;
}

static const ld_test_case tests[] = {
    LD_CASE(test_cuda_ops_table), LD_CASE(test_cuda_split),   LD_CASE(test_cuda_bitwise),
    LD_CASE(test_cuda_errors),    LD_CASE(test_cuda_forward),
};

LD_TEST_MAIN(tests)
