/* test_backend_ops.c - every dense op of the table (backend.h) on every backend
 * of this build against the reference backend: FP8 weights where they do not
 * belong refused, every op and shape, the batch-split invariance, the kernel
 * spec's parsing; tests/support/backend_ops_check.h says how.
 *
 *   test_backend_ops [case-filter] */
#include "tests/support/backend_ops_check.h"

/* ---------------------------------------------------------------- FP8 */

/* FP8 block weights where they do not belong, refused as the reference
 * backend refuses them: without their scales or in the rope row order
 * (weight_load), as a norm weight or a bias (LD_ERR_USAGE); and on CUDA,
 * which has no kernel for it, as an embedding table (LD_ERR_UNSUPPORTED). */
static int check_f8b_refusals(bk *b)
{
    if (!b->be) SKIP("%s: %s", b->name, b->skip);
    ld_backend *be = b->be;
    const ld_backend_ops *o = be->ops;
    ld_error err = {0};
    rng = 5;
    const kind *k = &kinds[KIND_F8B16];
    void *wd = rand_weights(k, 32, 32);
    CHECK(wd);
    const float *sc = (const float *)((const unsigned char *)wd + f8b_qbytes(k, 32, 32));
    ld_host_tensor bad[] = {
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale_br = 16, .scale_bc = 16},
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale = sc, .scale_br = 16},
        {.data = wd, .rows = 32, .cols = 32, .quant = LD_WQ_F8B, .scale = sc, .scale_br = 16, .scale_bc = 16,
         .rope_hd = 16},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_weight *w = NULL;
        CHECK_MSG(o->weight_load(be, &bad[i], &w, &err) == LD_ERR_USAGE && !w, "%s: FP8 weight %zu", b->name, i);
    }
    ld_weight *w = load_weight(be, k, wd, 32, 32, 0);
    ld_buf *bx = upload(be, NULL, 32 * 32), *bo = upload(be, NULL, 32 * 32);
    CHECK(w && bx && bo);
    CHECK(o->rmsnorm(be, bo, bx, w, 1, 1e-6f, &err) == LD_ERR_USAGE && strstr(err.msg, "block type"));
    CHECK(o->matmul(be, bo, bx, w, w, 1, &err) == LD_ERR_USAGE && strstr(err.msg, "bias of a block type"));
    int32_t tok = 3;
    ld_status st = o->embed(be, bo, w, &tok, 1, &err);
    if (strncmp(b->name, "cuda", 4) == 0) CHECK_MSG(st == LD_ERR_UNSUPPORTED, "%s: embed %d", b->name, (int)st);
    /* and the weight works as a matmul's */
    CHECK_MSG(o->matmul(be, bo, bx, w, NULL, 32, &err) == LD_OK, "%s: %s", b->name, err.msg);
    o->buf_free(be, bx);
    o->buf_free(be, bo);
    o->weight_free(be, w);
    free(wd);
    return 0;
}

static int with_backend(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_backend(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_ops_cpu(void) { return with_backend(0); }
static int test_ops_cuda_ref(void) { return with_backend(1); }
static int test_ops_cuda_custom(void) { return with_backend(2); }

static int with_backend_split(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_split(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_split_cpu(void) { return with_backend_split(0); }
static int test_split_cuda_ref(void) { return with_backend_split(1); }
static int test_split_cuda_custom(void) { return with_backend_split(2); }

static int with_backend_f8b(int which)
{
    bk b[3];
    int n = 0;
    CHECK(!open_backends(b, &n));
    int rc = check_f8b_refusals(&b[which]);
    close_backends(b, n);
    return rc;
}

static int test_f8b_refusals_cpu(void) { return with_backend_f8b(0); }
static int test_f8b_refusals_cuda_ref(void) { return with_backend_f8b(1); }
static int test_f8b_refusals_cuda_custom(void) { return with_backend_f8b(2); }

/* ---------------------------------------------------------------- spec */

static int test_spec_parse(void)
{
    ld_cuda_kernels k;
    ld_error err = {0};
    CHECK(ld_cuda_kernels_parse(NULL, &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == 1);
    CHECK(ld_cuda_kernels_parse("", &k, &err) == LD_OK);
    CHECK(ld_cuda_kernels_parse("matmul=ref,attention=custom", &k, &err) == LD_OK);
    CHECK(k.custom[LD_CUDA_OP_MATMUL] == 0 && k.custom[LD_CUDA_OP_ATTENTION] == 1 && k.custom[LD_CUDA_OP_EMBED] == 1);
    CHECK(ld_cuda_kernels_parse("all=ref,softmax=custom", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == (i == LD_CUDA_OP_SOFTMAX));
    for (int i = 0; i < LD_CUDA_N_OPS; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "all=custom,%s=ref", ld_cuda_op_name(i));
        CHECK(ld_cuda_kernels_parse(spec, &k, &err) == LD_OK);
        for (int j = 0; j < LD_CUDA_N_OPS; j++) CHECK(k.custom[j] == (j != i));
    }
    /* tc: matmul alone, on top of anything; a later item still wins */
    CHECK(ld_cuda_kernels_parse("all=ref,matmul=tc", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++)
        CHECK(k.custom[i] == (i == LD_CUDA_OP_MATMUL ? LD_CUDA_KERNEL_TC : LD_CUDA_KERNEL_REF));
    CHECK(ld_cuda_kernels_parse("matmul=tc", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++)
        CHECK(k.custom[i] == (i == LD_CUDA_OP_MATMUL ? LD_CUDA_KERNEL_TC : LD_CUDA_KERNEL_CUSTOM));
    CHECK(ld_cuda_kernels_parse("matmul=tc,all=ref", &k, &err) == LD_OK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == LD_CUDA_KERNEL_REF);
    CHECK(ld_cuda_op_name(LD_CUDA_N_OPS) == NULL && ld_cuda_op_name(-1) == NULL);
    /* graphs: not an op, untouched by all=; off by default */
    CHECK(ld_cuda_kernels_parse(NULL, &k, &err) == LD_OK && k.graphs == 0);
    CHECK(ld_cuda_kernels_parse("graphs=on,all=ref", &k, &err) == LD_OK && k.graphs == LD_CUDA_GRAPH_CHUNK);
    for (int i = 0; i < LD_CUDA_N_OPS; i++) CHECK(k.custom[i] == LD_CUDA_KERNEL_REF);
    CHECK(ld_cuda_kernels_parse("matmul=ref,graphs=100", &k, &err) == LD_OK && k.graphs == 100);
    CHECK(k.custom[LD_CUDA_OP_MATMUL] == LD_CUDA_KERNEL_REF && k.custom[LD_CUDA_OP_EMBED] == LD_CUDA_KERNEL_CUSTOM);
    CHECK(ld_cuda_kernels_parse("graphs=on,graphs=off", &k, &err) == LD_OK && k.graphs == 0);
    CHECK(ld_cuda_kernels_parse("graphs=1", &k, &err) == LD_OK && k.graphs == 1);
    return 0;
}

static int test_spec_errors(void)
{
    struct {
        const char *spec, *needle;
        uint64_t off;
    } bad[] = {
        {"bogus=ref", "unknown op 'bogus'", 0},
        {"matmul=ref,matmull=ref", "unknown op 'matmull'", 11},
        {"matmul=fast", "unknown kernel variant 'fast' for 'matmul'", 7},
        {"matmul=", "unknown kernel variant ''", 7},
        {"matmul", "is not op=variant", 0},
        {"matmul=ref,", "ends with ','", 11},
        {",matmul=ref", "is not op=variant", 0},
        {"=ref", "unknown op ''", 0},
        {"all=REF", "unknown kernel variant 'REF'", 4},
        {"rmsnorm=tc", "'tc' is for matmul only, not 'rmsnorm'", 8},
        {"matmul=tc,all=tc", "'tc' is for matmul only, not 'all'", 14},
        {"matmul=TC", "unknown kernel variant 'TC' for 'matmul' (ref, custom, or tc", 7},
        {"graphs=yes", "graphs=yes: on, off, or the operations a graph", 7},
        {"all=ref,graphs=0", "graphs=0: on, off", 15},
        {"graphs=100001", "graphs=100001", 7},
        {"graphs=", "graphs=: on, off", 7},
        {"graphs=8x", "graphs=8x", 7},
        {"graphs=on,", "ends with ','", 10},
    };
    ld_cuda_kernels k;
    memset(&k, 7, sizeof k);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ld_error err = {0};
        CHECK_MSG(ld_cuda_kernels_parse(bad[i].spec, &k, &err) == LD_ERR_USAGE, "%s", bad[i].spec);
        CHECK_MSG(strstr(err.msg, bad[i].needle), "'%s': '%s'", bad[i].spec, err.msg);
        CHECK_MSG(err.offset == bad[i].off, "'%s': offset %llu", bad[i].spec, (unsigned long long)err.offset);
        CHECK(k.custom[0] == 7); /* untouched on error */
        /* the backend refuses it first, with or without CUDA or a GPU */
        ld_backend *be = (ld_backend *)&k;
        CHECK(ld_backend_cuda_create(0, bad[i].spec, &be, &err) == LD_ERR_USAGE && !be);
        CHECK(strstr(err.msg, bad[i].needle));
    }
    return 0;
}

/* without CUDA or a device the backend says why, as LD_ERR_UNSUPPORTED */
static int test_cuda_unavailable(void)
{
    ld_backend *be = NULL;
    ld_error err = {0};
    ld_status st = ld_backend_cuda_create(0, NULL, &be, &err);
    if (st == LD_OK) {
        ld_backend_destroy(be);
        SKIP("a CUDA device is present");
    }
    CHECK_MSG(st == LD_ERR_UNSUPPORTED && !be, "%d: %s", (int)st, err.msg);
    CHECK(strstr(err.msg, "built without CUDA") || strstr(err.msg, "no CUDA device"));
    printf("  cuda: %s\n", err.msg);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_ops_cpu), LD_CASE(test_ops_cuda_ref), LD_CASE(test_ops_cuda_custom), LD_CASE(test_split_cpu),
    LD_CASE(test_split_cuda_ref), LD_CASE(test_split_cuda_custom), LD_CASE(test_f8b_refusals_cpu),
    LD_CASE(test_f8b_refusals_cuda_ref), LD_CASE(test_f8b_refusals_cuda_custom), LD_CASE(test_spec_parse),
    LD_CASE(test_spec_errors), LD_CASE(test_cuda_unavailable),
};

LD_TEST_MAIN(tests)
