/* test_tp_dense.c - the dense decoders split over simulated ranks
 * (engine/tp/tp_forward.h, tp_shard.h): the tiny models over 2 (and 4 where
 * the heads allow) ranks against transformers' logits and hidden states
 * (the same 1e-5 as the single-rank forward), bitwise equal over reruns,
 * threads per rank, node groupings and chunkings; TP = 1 bitwise equal to
 * the plain forward; the reduce made in place in the backends' memory,
 * bitwise the staging path's (biases included); quantized GGUF weights;
 * the refusals. */
#include "tests/support/tp_check.h"

/* `name` split over n ranks on both CPU backends: logits and hidden states
 * within `tol` of transformers' on both sequences; *worst gets the largest
 * logits error. */
static int check_split(const char *name, int n, double tol, double *worst)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_model *m = NULL;
    if (open_model(name, &m)) return 1;
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    for (int which = 0; which < 2; which++) {
        seq q;
        load_seq(which, &q);
        if (ref_tokens_match(dir, &q)) return 1;
        size_t T = (size_t)q.T;
        char lf[64], hf[64];
        snprintf(lf, sizeof lf, "ref-%s.logits.f32", q.name);
        snprintf(hf, sizeof hf, "ref-%s.hidden.f32", q.name);
        float *ref_l = load_f32(dir, lf, T * V), *ref_h = load_f32(dir, hf, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        CHECK(ref_l && ref_h && l && h);
        for (int b = 0; b < 2; b++) {
            ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = backends[b], .kernels = NULL, .threads = 1};
            ld_error err;
            ld_error_clear(&err);
            CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, l, h, &err) == LD_OK, "%s tp %d: %s", name, n, err.msg);
            double mx, e = nerr(l, ref_l, T * V, &mx), eh = 0;
            for (size_t p = 0; p < P; p++) {
                double x = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
                if (x > eh) eh = x;
            }
            fprintf(stderr, "  %-12s tp %d %s seq %s: logits nerr %.3g (max|d| %.3g), hidden planes <= %.3g\n", name,
                    n, backends[b], q.name, e, mx, eh);
            CHECK_MSG(e < tol && eh < tol, "%s tp %d on %s: error above %g", name, n, backends[b], tol);
            if (e > *worst) *worst = e;
        }
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
    }
    ld_model_close(m);
    return 0;
}

/* (a) the same 1e-5 normalised error of transformers as TP = 1 */
static int test_tp_models_vs_transformers(void)
{
    static const struct { const char *name; int max_n; } models[] = {
        {"llama3", 2}, {"llama3-bf16", 2}, {"qwen2", 2}, {"qwen3", 2}, {"qwen3-f16", 2}, {"qwen3-fp8", 2},
        {"mistral", 2}, {"llama-yarn", 2}, {"smollm", 4}};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        double w1 = 0, wn = 0;
        if (check_split(models[i].name, 1, 1e-5, &w1)) return 1;
        for (int n = 2; n <= models[i].max_n; n *= 2)
            if (check_split(models[i].name, n, 1e-5, &wn)) return 1;
        fprintf(stderr, "  %-12s worst logits nerr: tp 1 %.3g, tp 2..%d %.3g\n", models[i].name, w1, models[i].max_n,
                wn);
    }
    return 0;
}

/* (b) bitwise equal over reruns, threads per rank, node groupings and
 * chunkings (prefill, chunks of 3, calls of 1 and 5 tokens) */
static int test_tp_bitwise_determinism(void)
{
    static const struct { const char *name; int n; int nodes; } runs[] = {
        {"qwen2", 2, 2}, {"qwen3", 2, 1}, {"smollm", 4, 2}, {"smollm", 4, 4}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        seq q;
        load_seq(1, &q);
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        float *base = malloc(nl * sizeof *base), *l = malloc(nl * sizeof *l);
        CHECK(base && l);
        for (int b = 0; b < 2; b++) {
            ld_error err;
            ld_error_clear(&err);
            ld_tp_opts o = {.n = runs[i].n, .n_nodes = 1, .backend = backends[b], .kernels = NULL, .threads = 1};
            CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, base, NULL, &err) == LD_OK, "%s", err.msg);
            const struct { int threads, nodes, batch, call; } v[] = {
                {1, 1, 64, 0}, {2, 1, 64, 0}, {3, 1, 64, 0}, {1, runs[i].nodes, 64, 0}, {2, runs[i].nodes, 3, 0},
                {1, 1, 64, 1}, {3, runs[i].nodes, 64, 5}};
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
                ld_tp_opts ov = {.n = runs[i].n, .n_nodes = v[k].nodes, .backend = backends[b], .kernels = NULL, .threads = v[k].threads};
                CHECK_MSG(run_tp(m, &ov, v[k].batch, v[k].call, q.tokens, q.T, l, NULL, &err) == LD_OK, "%s",
                          err.msg);
                CHECK_MSG(memcmp(l, base, nl * sizeof *l) == 0,
                          "%s tp %d on %s: threads %d, nodes %d, batch %d, call %d differ from the first run",
                          runs[i].name, runs[i].n, backends[b], v[k].threads, v[k].nodes, v[k].batch, v[k].call);
            }
            fprintf(stderr, "  %-8s tp %d %s: %zu runs bitwise equal (threads 1-3 per rank, nodes 1/%d, chunks)\n",
                    runs[i].name, runs[i].n, backends[b], sizeof v / sizeof v[0] + 1, runs[i].nodes);
        }
        free(base);
        free(l);
        ld_model_close(m);
    }
    return 0;
}

/* (c) TP = 1 through the TP path is the plain forward, bit for bit */
static int test_tp_one_is_plain_forward(void)
{
    static const char *const names[] = {"llama3", "qwen2", "qwen3", "qwen3-fp8", "mistral", "smollm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ld_model *m = NULL;
        if (open_model(names[i], &m)) return 1;
        seq q;
        load_seq(0, &q);
        size_t T = (size_t)q.T, nl = T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * T * (size_t)m->cfg.hidden;
        float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
        float *ha = malloc(nh * sizeof *ha), *hb = malloc(nh * sizeof *hb);
        CHECK(a && b && ha && hb);
        for (int k = 0; k < 2; k++) {
            ld_error err;
            ld_error_clear(&err);
            CHECK_MSG(run_plain(m, backends[k], q.tokens, q.T, a, ha, &err) == LD_OK, "%s", err.msg);
            ld_tp_opts o = {.n = 1, .n_nodes = 1, .backend = backends[k], .kernels = NULL, .threads = 2};
            CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, b, hb, &err) == LD_OK, "%s", err.msg);
            CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0 && memcmp(ha, hb, nh * sizeof *ha) == 0,
                      "%s on %s: tp 1 differs from the plain forward", names[i], backends[k]);
        }
        free(a);
        free(b);
        free(ha);
        free(hb);
        ld_model_close(m);
    }
    return 0;
}

/* m's layers with made-up row-parallel biases (o_proj, down_proj) of
 * 0.25 f(k i), each an F32 [hidden] vector whose tensor name it borrows:
 * *bias and *layers (a copy of m->layers holding them) to free; m->layers
 * is left as it was */
static int made_up_biases(ld_model *m, float (*f)(float), float k, float **bias, ld_model_layer **layers)
{
    int L = m->cfg.n_layers, D = m->cfg.hidden;
    *bias = malloc((size_t)(2 * L * D) * sizeof **bias);
    *layers = malloc((size_t)L * sizeof **layers);
    CHECK(*bias && *layers);
    memcpy(*layers, m->layers, (size_t)L * sizeof **layers);
    for (int i = 0; i < 2 * L * D; i++) (*bias)[i] = 0.25f * f(k * (float)i);
    for (int l = 0; l < L; l++) {
        ld_model_tensor t = (*layers)[l].attn_norm;
        t.host.data = *bias + (size_t)(2 * l) * (size_t)D;
        (*layers)[l].bo = t;
        t.host.data = *bias + (size_t)(2 * l + 1) * (size_t)D;
        (*layers)[l].b_down = t;
    }
    return 0;
}

/* Row-parallel biases (o_proj, down_proj: Llama's attention_bias /
 * mlp_bias; no tiny fixture has them) are added once, after the sum: the
 * llama3 model with biases made up for both, split over 2 ranks, stays
 * within rounding of the plain forward with the same biases, which the
 * biases move far (so adding them on each rank, or never, would show). */
static int test_tp_row_parallel_bias(void)
{
    ld_model *m = NULL;
    if (open_model("llama3", &m)) return 1;
    int D = m->cfg.hidden;
    float *bias = NULL;
    ld_model_layer *layers = NULL, *orig = m->layers;
    if (made_up_biases(m, sinf, 0.37f, &bias, &layers)) return 1;
    seq q;
    load_seq(1, &q);
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    float *plain = malloc(nl * sizeof *plain), *nobias = malloc(nl * sizeof *nobias), *tp = malloc(nl * sizeof *tp);
    CHECK(plain && nobias && tp);
    ld_error err;
    ld_error_clear(&err);
    CHECK(run_plain(m, "ref", q.tokens, q.T, nobias, NULL, &err) == LD_OK);
    m->layers = layers;
    CHECK_MSG(run_plain(m, "ref", q.tokens, q.T, plain, NULL, &err) == LD_OK, "%s", err.msg);
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "ref", .kernels = NULL, .threads = 1};
    CHECK_MSG(run_tp(m, &o, 64, 0, q.tokens, q.T, tp, NULL, &err) == LD_OK, "%s", err.msg);
    ld_tp_shard *sh = NULL;
    CHECK(ld_tp_shard_create(m, 2, 0, &sh, &err) == LD_OK);
    CHECK(ld_tp_shard_bias(sh, 1, 1)[3] == bias[(size_t)3 * D + 3] && !present_in(ld_tp_shard_model(sh), 1));
    ld_tp_shard_free(sh);
    m->layers = orig;
    double moved = nerr(nobias, plain, nl, NULL), e = nerr(tp, plain, nl, NULL);
    fprintf(stderr, "  llama3 + o/down biases: tp 2 vs plain nerr %.3g; the biases move the logits by %.3g\n", e,
            moved);
    CHECK(moved > 1e-2 && e < 1e-6);
    free(plain);
    free(nobias);
    free(tp);
    free(layers);
    free(bias);
    ld_model_close(m);
    return 0;
}

/* `m` over o->n ranks: in place (the CPU backends have buf_mem, the
 * simulated communicator reduces host memory) and staged (no buf_mem), the
 * same logits and hidden planes bit for bit, each path counted: 2 reduces
 * per layer, rank and eval, all of one kind. */
static int check_paths(const ld_model *m, const ld_tp_opts *o, const char *name)
{
    seq q;
    load_seq(1, &q);
    const int call = 5, last = q.T - (q.T - 1) / call * call; /* prefill-sized and decode-sized calls */
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)last * (size_t)m->cfg.hidden;
    float *l[2], *h[2];
    uint64_t in_place[2], buffer[2];
    for (int staged = 0; staged < 2; staged++) {
        l[staged] = malloc(nl * sizeof **l);
        h[staged] = malloc(nh * sizeof **h);
        CHECK(l[staged] && h[staged]);
        if (run_path(m, o, staged, call, &q, l[staged], h[staged], &in_place[staged], &buffer[staged])) return 1;
    }
    uint64_t want = 2u * (uint64_t)m->cfg.n_layers * (uint64_t)o->n * (uint64_t)((q.T + call - 1) / call);
    fprintf(stderr, "  %-8s tp %d (%d node%s) %s: %llu reduces in place, %llu staged: the same bits\n", name, o->n,
            o->n_nodes, o->n_nodes > 1 ? "s" : "", o->backend, (unsigned long long)in_place[0],
            (unsigned long long)buffer[1]);
    CHECK_MSG(in_place[0] == want && buffer[0] == 0, "%s in place: %llu in place, %llu buffer, want %llu", name,
              (unsigned long long)in_place[0], (unsigned long long)buffer[0], (unsigned long long)want);
    CHECK_MSG(in_place[1] == 0 && buffer[1] == want, "%s staged: %llu in place, %llu buffer, want %llu", name,
              (unsigned long long)in_place[1], (unsigned long long)buffer[1], (unsigned long long)want);
    CHECK_MSG(memcmp(l[0], l[1], nl * sizeof **l) == 0 && memcmp(h[0], h[1], nh * sizeof **h) == 0,
              "%s tp %d on %s: in place and staged differ", name, o->n, o->backend);
    for (int k = 0; k < 2; k++) {
        free(l[k]);
        free(h[k]);
    }
    return 0;
}

/* The reduce runs in place on the CPU backends and gives the staging
 * path's bits (which a backend without buf_mem still takes): qwen2 (q/k/v
 * biases, column-parallel) and smollm on both backends, 1, 2 and 4 ranks,
 * flat and in nodes. */
static int test_tp_reduce_in_place(void)
{
    static const struct { const char *name; int n, nodes; } runs[] = {
        {"qwen2", 1, 1}, {"qwen2", 2, 1}, {"qwen2", 2, 2}, {"smollm", 4, 2}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        for (int b = 0; b < 2; b++) {
            ld_tp_opts o = {.n = runs[i].n, .n_nodes = runs[i].nodes, .backend = backends[b], .kernels = NULL, .threads = 1};
            if (check_paths(m, &o, runs[i].name)) return 1;
        }
        ld_model_close(m);
    }
    return 0;
}

/* Row-parallel biases, added in place after the in-place reduce: llama3
 * with made-up o/down biases (as test_tp_row_parallel_bias) gives the
 * staging path's bits, at TP = 2 and TP = 1. */
static int test_tp_reduce_in_place_bias(void)
{
    ld_model *m = NULL;
    if (open_model("llama3", &m)) return 1;
    float *bias = NULL;
    ld_model_layer *layers = NULL, *orig = m->layers;
    if (made_up_biases(m, cosf, 0.29f, &bias, &layers)) return 1;
    m->layers = layers;
    int rc = 0;
    for (int n = 1; n <= 2 && !rc; n++) {
        ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = n == 1 ? "ref" : "cpu", .kernels = NULL, .threads = 1};
        rc = check_paths(m, &o, "llama3+b");
    }
    m->layers = orig;
    free(layers);
    free(bias);
    ld_model_close(m);
    return rc;
}

/* The quantized GGUF models (Q8_0... weights, Llama's q/k rows reordered):
 * TP = 2 against transformers where the blocks allow the split, a clear
 * refusal naming the tensor where a K-slice would cut a block. */
static int test_tp_gguf_quantized(void)
{
    static const char *const names[] = {"llama-q", "qwen2-q", "qwen3-q"};
    int ran = 0, refused = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, QDIR "%s.gguf", names[i]);
        ld_model *m = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_model_open_gguf(path, &m, &err) == LD_OK, "%s", err.msg);
        seq q;
        load_seq(0, &q);
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab, got = 0;
        snprintf(path, sizeof path, QDIR "%s-a.logits.f32", names[i]);
        float *ref = (float *)ld_test_read_bytes(path, &got), *l = malloc(nl * sizeof *l);
        CHECK(ref && got == nl * sizeof *ref && l);
        ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
        ld_status st = run_tp(m, &o, 64, 0, q.tokens, q.T, l, NULL, &err);
        if (st == LD_OK) {
            double mx, e = nerr(l, ref, nl, &mx);
            fprintf(stderr, "  %-8s tp 2 cpu: logits nerr %.3g (max|d| %.3g) vs transformers\n", names[i], e, mx);
            CHECK(e < 1e-5);
            ran++;
        } else {
            fprintf(stderr, "  %-8s tp 2: refused: %s\n", names[i], err.msg);
            CHECK_MSG(st == LD_ERR_UNSUPPORTED && strstr(err.msg, "blocks of"), "%s", err.msg);
            refused++;
        }
        free(ref);
        free(l);
        ld_model_close(m);
    }
    CHECK(ran > 0);
    (void)refused;
    return 0;
}

/* The refusals: a size that does not divide the heads (naming the field),
 * a K-slice cutting a quantization block (DeepSeek-V4 where a size does not
 * divide), a bad node
 * count or backend; cuda where the build or machine has no NCCL / GPUs. */
static int test_tp_errors(void)
{
    ld_model *m = NULL;
    if (open_model("qwen2", &m)) return 1; /* 4 heads, 2 KV heads, intermediate 128 */
    ld_error err;
    ld_error_clear(&err);
    ld_tp_session *s = NULL;
    ld_tp_opts o = {.n = 3, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
    CHECK(ld_tp_session_create(m, &o, 16, 16, &s, &err) == LD_ERR_USAGE && !s);
    CHECK_MSG(strstr(err.msg, "num_attention_heads (4)"), "%s", err.msg);
    o.n = 4;
    CHECK(ld_tp_session_create(m, &o, 16, 16, &s, &err) == LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "num_key_value_heads (2)"), "%s", err.msg);
    o.n = 2;
    o.n_nodes = 3;
    CHECK(ld_tp_session_create(m, &o, 16, 16, &s, &err) == LD_ERR_USAGE);
    o.n_nodes = 1;
    o.backend = "tpu";
    CHECK(ld_tp_session_create(m, &o, 16, 16, &s, &err) == LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "tpu"), "%s", err.msg);

    /* a K-slice through Q4_K blocks of 256: down_proj's 128 columns in 2 */
    ld_model q = *m;
    ld_model_layer *layers = malloc((size_t)m->cfg.n_layers * sizeof *layers);
    CHECK(layers);
    memcpy(layers, m->layers, (size_t)m->cfg.n_layers * sizeof *layers);
    q.layers = layers;
    layers[0].w_down.host.quant = LD_WQ_Q4_K;
    ld_tp_shard *sh = NULL;
    CHECK(ld_tp_shard_create(&q, 2, 1, &sh, &err) == LD_ERR_UNSUPPORTED && !sh);
    CHECK_MSG(strstr(err.msg, "model.layers.0.mlp.down_proj.weight") && strstr(err.msg, "Q4_K blocks of 256"), "%s",
              err.msg);
    /* FP8 scale blocks of 48 rows: q_proj's 64 rows per rank cut them */
    memcpy(layers, m->layers, (size_t)m->cfg.n_layers * sizeof *layers);
    layers[1].wq.host.quant = LD_WQ_F8B;
    layers[1].wq.host.scale_br = layers[1].wq.host.scale_bc = 48;
    CHECK(ld_tp_shard_create(&q, 2, 1, &sh, &err) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(err.msg, "q_proj") && strstr(err.msg, "FP8 scale blocks of 48"), "%s", err.msg);
    /* FP8 scale blocks of 48 columns: o_proj's 32-column K-slices cut them
     * (refused before any byte or scale is copied) */
    memcpy(layers, m->layers, (size_t)m->cfg.n_layers * sizeof *layers);
    layers[1].wo.host.quant = LD_WQ_F8B;
    layers[1].wo.host.scale_br = layers[1].wo.host.scale_bc = 48;
    CHECK(ld_tp_shard_create(&q, 2, 0, &sh, &err) == LD_ERR_UNSUPPORTED && !sh);
    CHECK_MSG(strstr(err.msg, "o_proj") && strstr(err.msg, "FP8 scale blocks of 48 columns") &&
                  strstr(err.msg, "multiple of 48 columns"), "%s", err.msg);
    free(layers);

    /* the shard: views for the column-parallel weights, copies of the K-slices */
    CHECK(ld_tp_shard_create(m, 2, 1, &sh, &err) == LD_OK);
    const ld_model *sm = ld_tp_shard_model(sh);
    CHECK(sm->cfg.n_heads == 2 && sm->cfg.n_kv_heads == 1 && sm->cfg.intermediate == 64 && sm->cfg.hidden == 64);
    const ld_host_tensor *wq = &sm->layers[0].wq.host, *bq = &sm->layers[0].bq.host;
    CHECK(wq->rows == 2 * sm->cfg.head_dim && wq->data == (const float *)m->layers[0].wq.host.data + 2 * 16 * 64);
    CHECK(bq->cols == 32 && bq->data == (const float *)m->layers[0].bq.host.data + 32);
    CHECK(sm->layers[0].wo.host.cols == 32 && sm->layers[0].w_down.host.cols == 64);
    CHECK(ld_tp_shard_copied_bytes(sh) == 2 * (64 * 32 + 64 * 64) * sizeof(float));
    CHECK(((const float *)sm->layers[0].wo.host.data)[1] == ((const float *)m->layers[0].wo.host.data)[32 + 1]);
    ld_tp_shard_free(sh);
    ld_model_close(m);

    /* DeepSeek-V4 through the lm interface: split where the sizes divide,
     * else refused naming the field (V3/V3.2: test_tp_ds.c; V4:
     * test_tp_ds4.c) */
    ld_lm *lm = NULL;
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v4", &lm, &err) == LD_OK, "%s", err.msg);
    ld_lm_session *ls = NULL;
    ld_tp_opts od = {.n = 3, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
    CHECK(ld_lm_session_create_tp(lm, &od, 16, 16, &ls, &err) == LD_ERR_USAGE && !ls);
    CHECK_MSG(strstr(err.msg, "num_attention_heads (4)"), "%s", err.msg);
    od.n = 2;
    CHECK_MSG(ld_lm_session_create_tp(lm, &od, 16, 16, &ls, &err) == LD_OK && ls, "%s", err.msg);
    ld_lm_session_destroy(ls);
    /* a bad kernel spec: refused before anything is made, with or without a GPU */
    ld_tp_opts og = {.n = 2, .n_nodes = 1, .backend = "cuda", .kernels = "graphs=maybe", .threads = 1};
    CHECK(ld_lm_session_create_tp(lm, &og, 16, 16, &ls, &err) == LD_ERR_USAGE && !ls);
    CHECK_MSG(strstr(err.msg, "graphs=maybe"), "%s", err.msg);
    ld_lm_close(lm);
    return 0;
}

/* cuda: over NCCL where the build has it and the machine has the GPUs;
 * else a clear refusal.  With a GPU, TP = 1 over NCCL is the plain CUDA
 * forward bit for bit, and TP = 2 (two GPUs; one GPU:
 * test_tp_cuda_shared_gpu) within 1e-5 of transformers;
 * both the same bits with the reduce on the device (the CUDA backend's
 * buf_mem) and through the host (a table without it). */

static const ld_test_case tests[] = {
    LD_CASE(test_tp_models_vs_transformers), LD_CASE(test_tp_bitwise_determinism),
    LD_CASE(test_tp_one_is_plain_forward), LD_CASE(test_tp_row_parallel_bias),
    LD_CASE(test_tp_reduce_in_place), LD_CASE(test_tp_reduce_in_place_bias), LD_CASE(test_tp_gguf_quantized),
    LD_CASE(test_tp_errors),
};

LD_TEST_MAIN(tests)
