/* test_ds4.c - DeepSeek-V4 (engine/models/deepseek_v4/) on tiny random models:
 * logits and hidden states against transformers, ablations, bitwise
 * determinism over chunkings and threads, the kernel variants, the errors.
 * The op table's V4 entries against the host leaves: test_ds4_ops.c. */
#include "tests/support/ds4_check.h"

/* ------------------------------------------------------------ against transformers */

static int check_on(const backend_kind *bk, double tol)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    size_t K = (size_t)m->cfg.top_k, L = (size_t)m->cfg.n_layers;
    int bad = 0;
    for (int i = 0; i < 2; i++) {
        seq *q = &seqs[i];
        size_t T = (size_t)q->T;
        float *ref_l = load_f32(MDIR, q->logits_file, T * V), *ref_h = load_f32(MDIR, q->hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        int32_t *ex = malloc(L * T * K * sizeof *ex);
        CHECK(ref_l && ref_h && l && h && ex);
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(run_on(bk, m, 2, MAX_T, 0, q->tokens, q->T, l, h, ex, &err) == LD_OK, "%s", err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx);
        fprintf(stderr, "  %s %s seq %c (%2zu tokens): logits nerr %.3g max|d| %.3g;", bk->name, MDIR + strlen(MROOT),
                'a' + i, T, e, mx);
        if (!(e < tol)) bad = 1;
        for (size_t p = 0; p < P; p++) {
            double eh = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
            fprintf(stderr, " h%zu %.2g", p, eh);
            if (!(eh < tol)) bad = 1;
        }
        int routed = 0, diff = 0;
        for (size_t ly = 0; ly < L; ly++)
            for (size_t t = 0; t < T; t++)
                for (size_t k = 0; k < K; k++) {
                    int32_t want = q->experts[ly][t][k], got = ex[(ly * T + t) * K + k];
                    routed += want >= 0;
                    diff += want != got;
                }
        fprintf(stderr, "; %d expert choices, %d differ\n", routed, diff);
        if (diff || !routed) bad = 1;
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
        free(ex);
    }
    ld_ds4_model_close(m);
    CHECK_MSG(!bad, "%s on %s: error above %g or other experts", MDIR, bk->name, tol);
    return 0;
}

static int test_deepseek_v4_ref(void) { return use_model("deepseek-v4"), check_on(&backends[0], 1e-5); }
static int test_deepseek_v4_cpu(void) { return use_model("deepseek-v4"), check_on(&backends[1], 1e-5); }
/* DeepSeek's released format: its names, FP4 experts, FP8 linears with
 * UE8M0 scales, BF16 compressors; against transformers on the
 * dequantized weights */
static int test_deepseek_v4_fp4(void)
{
    use_model("deepseek-v4-fp4");
    int r = check_on(&backends[0], 1e-5) || check_on(&backends[1], 1e-5);
    ld_ds4_model *m = NULL;
    if (!r && open_model(&m)) r = 1;
    if (!r) {
        CHECK(m->official && m->cfg.quant && m->cfg.expert_fp4 && m->n_owned > 0);
        CHECK(m->layers[0].experts[0].gate.st->dtype == LD_DT_I8 && m->layers[0].wq_a.st->dtype == LD_DT_F8_E4M3);
        /* without the quantization_config the FP8 tensor is an error naming it */
        static ld_ds4_config c;
        c = m->cfg;
        c.quant = 0;
        ld_ds4_model *b = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(err.msg, "layers.0.attn.wq_a.weight") && strstr(err.msg, "F8_E4M3"), "%s", err.msg);
        ld_ds4_model_close(m);
    }
    use_model("deepseek-v4");
    return r;
}

/* ------------------------------------------------------------ ablations */
static int test_deepseek_v4_features_matter(void)
{
    if (check_ablation("Sinkhorn iterations (0)", drop_sinkhorn)) return 1;
    if (check_ablation("the attention sinks", drop_sinks)) return 1;
    if (check_ablation("hash routing (top-k instead)", drop_hash)) return 1;
    if (check_ablation("the compressed entries (CSA/HCA)", drop_compressed)) return 1;
    if (check_ablation("the indexer's top-k (every entry)", drop_indexer)) return 1;
    if (check_ablation("the sliding window (all positions)", drop_window)) return 1;
    if (check_ablation("the SwiGLU clamp", drop_clamp)) return 1;
    if (check_ablation("the correction bias", drop_bias)) return 1;
    if (check_ablation("the compress rope's YaRN", drop_yarn)) return 1;
    return check_ablation("the compress rope (main rope everywhere)", one_rope);
}

/* ------------------------------------------------------------ determinism */

static int check_deterministic_on(const backend_kind *bk)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q->T * (size_t)m->cfg.hidden;
    size_t ne = (size_t)m->cfg.n_layers * (size_t)q->T * (size_t)m->cfg.top_k;
    float *base = malloc(n * sizeof *base), *l = malloc(n * sizeof *l);
    float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
    int32_t *ebase = malloc(ne * sizeof *ebase), *ex = malloc(ne * sizeof *ex);
    CHECK(base && l && hbase && h && ebase && ex);
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(run_on(bk, m, 1, MAX_T, 0, q->tokens, q->T, base, hbase, ebase, &err) == LD_OK, "%s", err.msg);
    static const int shapes[][2] = {{64, 0}, {1, 0}, {3, 0}, {5, 0}, {64, 1}, {64, 4}, {2, 7}, {64, 11}};
    for (int threads = 1; threads <= 3; threads++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            memset(l, 0, n * sizeof *l);
            memset(h, 0, nh * sizeof *h);
            memset(ex, 0, ne * sizeof *ex);
            CHECK_MSG(run_on(bk, m, threads, shapes[k][0], shapes[k][1], q->tokens, q->T, l, h, ex, &err) == LD_OK,
                      "%s", err.msg);
            CHECK_MSG(memcmp(l, base, n * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0 &&
                          memcmp(ex, ebase, ne * sizeof *ex) == 0,
                      "%s: %d threads, batch %d, calls of %d differ from 1 thread in one prefill", bk->name, threads,
                      shapes[k][0], shapes[k][1]);
        }
    free(base);
    free(l);
    free(hbase);
    free(h);
    free(ebase);
    free(ex);
    ld_ds4_model_close(m);
    return 0;
}

static int test_deepseek_v4_deterministic(void)
{
    static const char *const names[] = {"deepseek-v4", "deepseek-v4-fp4"};
    for (int i = 0; i < 2; i++)
        for (int b = 0; b < N_BACKENDS; b++) {
            use_model(names[i]);
            if (check_deterministic_on(&backends[b])) return 1;
        }
    use_model("deepseek-v4");
    return 0;
}

/* reset: a second run on the same session gives the same bits */
static int test_deepseek_v4_reset(void)
{
    ld_ds4_model *m = NULL;
    if (open_model(&m)) return 1;
    static seq seqs[2];
    CHECK(load_seqs(m->cfg.top_k, seqs, 2) == 2);
    const seq *q = &seqs[1];
    size_t n = (size_t)q->T * (size_t)m->cfg.vocab;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    CHECK(a && b);
    ld_error err;
    ld_error_clear(&err);
    ld_backend *be = NULL;
    ld_ds4_session *s = NULL;
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    CHECK_MSG(ld_ds4_session_create(m, be, q->T, 8, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_ds4_session_eval(s, seqs[0].tokens, 5, NULL, NULL, NULL, &err) == LD_OK);
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_pos(s) == 0);
    CHECK(ld_ds4_session_eval(s, q->tokens, q->T, a, NULL, NULL, &err) == LD_OK);
    /* the session is full: one more token is an error */
    CHECK(ld_ds4_session_eval(s, q->tokens, 1, NULL, NULL, NULL, &err) == LD_ERR_LIMIT);
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_eval(s, q->tokens, q->T, b, NULL, NULL, &err) == LD_OK);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    int32_t bad = m->cfg.vocab;
    ld_ds4_session_reset(s);
    CHECK(ld_ds4_session_eval(s, &bad, 1, NULL, NULL, NULL, &err) == LD_ERR_USAGE);
    ld_ds4_session_destroy(s);
    ld_backend_destroy(be);
    free(a);
    free(b);
    ld_ds4_model_close(m);
    return 0;
}

/* ------------------------------------------------------------ kernels */

static int test_deepseek_v4_kernels(void)
{
    /* Sinkhorn: with 20 iterations comb is doubly stochastic to ~1e-5 */
    enum { N = 4, D = 3, HC = (2 + N) * N };
    float X[N * D], fn[HC * N * D], base[HC], scale[3] = {1.0f, 0.7f, 1.3f};
    for (int i = 0; i < N * D; i++) X[i] = sinf((float)i * 0.9f + 0.3f);
    for (int i = 0; i < HC * N * D; i++) fn[i] = 0.5f * cosf((float)i * 0.37f);
    for (int i = 0; i < HC; i++) base[i] = 0.3f * sinf((float)i * 1.7f);
    float post[N], comb[N * N], u[D], scratch[N * D + HC];
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 20, 1e-6f, 1e-6f, post, comb, u, scratch);
    for (int i = 0; i < N; i++) {
        double r = 0, c = 0;
        for (int j = 0; j < N; j++) {
            r += comb[i * N + j];
            c += comb[j * N + i];
        }
        CHECK_MSG(fabs(r - 1) < 1e-4 && fabs(c - 1) < 1e-5, "row %d sums %g, column %g", i, r, c);
        CHECK(post[i] > 0 && post[i] < 2);
    }
    /* iters 0 and 1: only the column normalisation (as transformers) */
    float comb0[N * N], comb1[N * N];
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 0, 1e-6f, 1e-6f, post, comb0, u, scratch);
    ld_ref_ds4_hc_pre(X, N, D, fn, base, scale, 1, 1e-6f, 1e-6f, post, comb1, u, scratch);
    CHECK(memcmp(comb0, comb1, sizeof comb0) == 0);
    /* hc_post uses comb transposed: X'_k = post_k f + sum_j C[j][k] X_j */
    float f[D] = {1, 2, 3}, out[N * D], eye[N * N] = {0}, p1[N] = {0, 0, 0, 0};
    eye[0 * N + 1] = 1; /* stream 0 goes to stream 1 */
    eye[1 * N + 0] = 1;
    eye[2 * N + 2] = 1;
    eye[3 * N + 3] = 1;
    p1[3] = 1;
    ld_ref_ds4_hc_post(out, X, f, p1, eye, N, D);
    CHECK(out[1 * D + 0] == X[0] && out[0 * D + 2] == X[1 * D + 2] && out[3 * D + 1] == X[3 * D + 1] + 2.0f);
    /* top-k: score descending, index ascending, written ascending */
    float sc[6] = {0.5f, 2.0f, 0.5f, -1.0f, 2.0f, 0.5f};
    int32_t idx[6];
    CHECK(ld_ref_ds4_topk(idx, sc, 6, 3) == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 4);
    CHECK(ld_ref_ds4_topk(idx, sc, 6, 4) == 4 && idx[0] == 0 && idx[1] == 1 && idx[2] == 2 && idx[3] == 4);
    CHECK(ld_ref_ds4_topk(idx, sc, 2, 5) == 2 && idx[0] == 0 && idx[1] == 1);
    float scn[4] = {NAN, -5.0f, NAN, 1.0f}; /* NaN last, then by index */
    CHECK(ld_ref_ds4_topk(idx, scn, 4, 3) == 3 && idx[0] == 0 && idx[1] == 1 && idx[2] == 3);
    CHECK(ld_ref_ds4_topk(idx, scn, 4, 0) == 0);
    /* router: hash rows are the experts (ascending), weights from s */
    float logits[4] = {-1.0f, 3.0f, 0.0f, 25.0f}, w[2];
    int32_t row[2] = {2, 0};
    ld_ref_ds4_route(idx, w, logits, NULL, row, 4, 2, 1.5f);
    double s0 = sqrt(log1p(exp(-1.0))), s2 = sqrt(log(2.0));
    CHECK(idx[0] == 0 && idx[1] == 2);
    CHECK(fabs(w[0] - 1.5 * s0 / (s0 + s2)) < 1e-6 && fabs(w[1] - 1.5 * s2 / (s0 + s2)) < 1e-6);
    /* top-k by s (+ bias); softplus is x above 20 */
    float bias[4] = {0, 0, 10.0f, 0};
    ld_ref_ds4_route(idx, w, logits, bias, NULL, 4, 2, 1.0f);
    CHECK(idx[0] == 2 && idx[1] == 3);
    CHECK(fabs(w[1] - 5.0 / (5.0 + s2)) < 1e-6);
    /* clamped SwiGLU */
    float g[3] = {20.0f, -3.0f, 0.5f}, up[3] = {-20.0f, 2.0f, 0.25f}, o[3];
    ld_ref_ds4_clamped_swiglu(o, g, up, 10.0f, 3);
    CHECK(fabs(o[0] - 10.0 / (1 + exp(-10.0)) * -10.0) < 1e-4);
    CHECK(fabs(o[2] - 0.5 / (1 + exp(-0.5)) * 0.25) < 1e-7);
    /* rope then inverse rope: the identity to rounding */
    float inv[2] = {1.0f, 0.1f}, v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, v0[8];
    memcpy(v0, v, sizeof v);
    ld_ref_ds4_rope(v, 2, 4, 4, inv, 1.0f, 7, 0);
    CHECK(v[0] != v0[0]);
    ld_ref_ds4_rope(v, 2, 4, 4, inv, 1.0f, 7, 1);
    for (int i = 0; i < 8; i++) CHECK(fabs(v[i] - v0[i]) < 1e-5);
    /* HCA pooling of a window of equal gates: the mean */
    float kv[4] = {1, 3, 5, 7}, gt[4] = {0}, ape[2] = {0}, pooled;
    ld_ref_ds4_compress(&pooled, kv, gt, ape, 2, 1, 1, 0, 1);
    CHECK(fabs(pooled - 6.0f) < 1e-6);
    /* CSA entry 0 pools only window 0's second halves */
    float kv2[4] = {100, 2, 100, 4}, gt2[4] = {0}, ape2[4] = {0};
    ld_ref_ds4_compress(&pooled, kv2, gt2, ape2, 2, 1, 2, 1, 0);
    CHECK(fabs(pooled - 3.0f) < 1e-6);
    /* FP4 / UE8M0 / dequantization */
    CHECK(ld_ref_ds4_e2m1_to_f32(7) == 6.0f && ld_ref_ds4_e2m1_to_f32(9) == -0.5f && ld_ref_ds4_e2m1_to_f32(3) == 1.5f);
    CHECK(ld_ref_ds4_e8m0_to_f32(127) == 1.0f && ld_ref_ds4_e8m0_to_f32(130) == 8.0f &&
          ld_ref_ds4_e8m0_to_f32(120) == 1.0f / 128 && isnan(ld_ref_ds4_e8m0_to_f32(255)));
    /* 2 x 4 FP4 (bytes: low nibble first), scale grid [2][2] */
    uint8_t q4[4] = {0x71, 0x9A, 0x20, 0x0F};
    float s4[4] = {1.0f, 2.0f, 0.5f, 4.0f}, d4[8];
    ld_ref_ds4_dequant(d4, q4, 1, s4, 2, 4, 2, 2, 0, 2);
    float want4[8] = {0.5f, 6.0f, -1.0f * 2, -0.5f * 2, 0.0f, 1.0f * 0.5f, -6.0f * 4, 0.0f};
    CHECK(memcmp(d4, want4, sizeof d4) == 0);
    /* FP8 E4M3: 0x38 = 1.0, 0xC0 = -2.0; one block */
    uint8_t q8[2] = {0x38, 0xC0};
    float s8 = 0.25f, d8[2];
    ld_ref_ds4_dequant(d8, q8, 0, &s8, 1, 2, 1, 1, 0, 1);
    CHECK(d8[0] == 0.25f && d8[1] == -0.5f);
    /* attention with a sink: a sink of -inf is no sink */
    float q[2] = {1, 0}, k0[2] = {1, 0}, k1[2] = {0, 1}, att[2], att2[2], scs[2], sink = -INFINITY, sink0 = 0.0f;
    const float *keys[2] = {k0, k1};
    ld_ref_ds4_attention(att, q, 1, 2, keys, 2, &sink, 1.0f, scs);
    ld_ref_ds4_attention(att2, q, 1, 2, keys, 2, NULL, 1.0f, scs);
    CHECK(memcmp(att, att2, sizeof att) == 0);
    ld_ref_ds4_attention(att, q, 1, 2, keys, 2, &sink0, 1.0f, scs);
    double e1 = exp(1.0);
    CHECK(fabs(att[0] - e1 / (e1 + 2)) < 1e-6 && fabs(att[1] - 1 / (e1 + 2)) < 1e-6);
    return 0;
}

/* ------------------------------------------------------------ errors */

static char *config_text(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", MDIR);
    return ld_test_slurp(path);
}

/* the config with `key` set to `value` (JSON text; NULL: removed) */
static ld_status parse_with(const char *key, const char *value, ld_ds4_config *c, ld_error *err)
{
    char *text = config_text();
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(j, key);
    if (value) cJSON_AddItemToObject(j, key, cJSON_Parse(value));
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    ld_error_clear(err);
    ld_status st = ld_ds4_config_parse(out, strlen(out), c, err);
    free(out);
    return st;
}

static int expect_config_error(const char *key, const char *value, ld_status code, const char *needle)
{
    static ld_ds4_config c;
    ld_error err;
    ld_status st = parse_with(key, value, &c, &err);
    CHECK_MSG(st == code && strstr(err.msg, needle), "%s = %s: status %d, '%s' (want %d naming '%s')", key,
              value ? value : "(removed)", (int)st, err.msg, (int)code, needle);
    return 0;
}

static int test_deepseek_v4_config_errors(void)
{
    static ld_ds4_config c;
    ld_error err;
    char *text = config_text();
    CHECK(text);
    CHECK(ld_ds4_config_detect(text, strlen(text)) == 1);
    CHECK(ld_ds4_config_parse(text, strlen(text), &c, &err) == LD_OK);
    free(text);
    CHECK(c.n_layers == 4 && c.hc_mult == 4 && c.hc_sinkhorn_iters == 20 && c.rope_dim == 8);
    CHECK(c.layer_type[0] == LD_DS4_SLIDING && c.layer_type[1] == LD_DS4_CSA && c.layer_type[2] == LD_DS4_HCA);
    CHECK(c.mlp_type[0] == LD_DS4_HASH && c.mlp_type[3] == LD_DS4_MOE);
    CHECK(c.ratio_csa == 2 && c.ratio_hca == 4 && c.rope_compress.yarn && c.rope_compress.attention_factor == 1.0);
    if (expect_config_error("layer_types",
                            "[\"sliding_attention\",\"full_attention\",\"heavily_compressed_attention\","
                            "\"compressed_sparse_attention\"]",
                            LD_ERR_UNSUPPORTED, "layer_types[1]"))
        return 1;
    if (expect_config_error("layer_types", "[\"sliding_attention\"]", LD_ERR_SYNTAX, "layer_types")) return 1;
    if (expect_config_error("mlp_layer_types", "[\"hash_moe\",\"dense\",\"moe\",\"moe\"]", LD_ERR_UNSUPPORTED,
                            "mlp_layer_types[1]"))
        return 1;
    if (expect_config_error("hidden_size", NULL, LD_ERR_SYNTAX, "hidden_size")) return 1;
    if (expect_config_error("hc_mult", "0", LD_ERR_SYNTAX, "hc_mult")) return 1;
    if (expect_config_error("num_key_value_heads", "4", LD_ERR_UNSUPPORTED, "num_key_value_heads")) return 1;
    if (expect_config_error("scoring_func", "\"softmax\"", LD_ERR_UNSUPPORTED, "scoring_func")) return 1;
    if (expect_config_error("quantization_config", "{\"quant_method\": \"awq\"}", LD_ERR_UNSUPPORTED,
                            "quantization_config.quant_method"))
        return 1;
    if (expect_config_error("quantization_config", "{\"quant_method\": \"fp8\", \"expert_dtype\": \"nvfp4\"}",
                            LD_ERR_UNSUPPORTED, "quantization_config.expert_dtype"))
        return 1;
    if (expect_config_error("expert_dtype", "\"fp4\"", LD_ERR_UNSUPPORTED, "expert_dtype")) return 1;
    if (expect_config_error("o_groups", "3", LD_ERR_SYNTAX, "o_groups")) return 1;
    if (expect_config_error("qk_rope_head_dim", "4", LD_ERR_SYNTAX, "qk_rope_head_dim")) return 1;
    if (expect_config_error("compress_rates", "{\"sliding_attention\": 2}", LD_ERR_UNSUPPORTED, "compress_rates"))
        return 1;
    if (expect_config_error("rope_parameters", "{\"main\": {\"rope_type\": \"llama3\"}, \"compress\": {}}",
                            LD_ERR_UNSUPPORTED, "rope_parameters.main.rope_type"))
        return 1;
    if (expect_config_error("rope_parameters",
                            "{\"main\": {\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": "
                            "32, \"mscale\": 1e40, \"mscale_all_dim\": 1}, \"compress\": {}}",
                            LD_ERR_SYNTAX, "'rope_parameters.main.mscale' = 1e+40"))
        return 1;
    if (expect_config_error("n_shared_experts", "2", LD_ERR_UNSUPPORTED, "n_shared_experts")) return 1;
    if (expect_config_error("architectures", "[\"DeepseekV3ForCausalLM\"]", LD_ERR_UNSUPPORTED, "DeepSeek-V4"))
        return 1;
    /* legacy fields: compress_ratios and num_hash_layers */
    text = config_text();
    cJSON *j = cJSON_Parse(text);
    free(text);
    cJSON_DeleteItemFromObjectCaseSensitive(j, "layer_types");
    cJSON_DeleteItemFromObjectCaseSensitive(j, "mlp_layer_types");
    cJSON_AddItemToObject(j, "compress_ratios", cJSON_Parse("[0, 4, 128, 4]"));
    cJSON_AddItemToObject(j, "num_hash_layers", cJSON_CreateNumber(1));
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    CHECK_MSG(ld_ds4_config_parse(s, strlen(s), &c, &err) == LD_OK, "%s", err.msg);
    free(s);
    CHECK(c.layer_type[1] == LD_DS4_CSA && c.layer_type[2] == LD_DS4_HCA && c.mlp_type[0] == LD_DS4_HASH &&
          c.mlp_type[1] == LD_DS4_MOE);
    return 0;
}

/* weights: a missing tensor, a wrong shape, tid2eid out of range or repeated */
static int test_deepseek_v4_weight_errors(void)
{
    ld_ds4_model *m = NULL, *b = NULL;
    if (open_model(&m)) return 1;
    static ld_ds4_config c;
    ld_error err;
    c = m->cfg;
    c.layer_type[0] = LD_DS4_HCA; /* layer 0 has no compressor */
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.0.attn.compressor.wkv.weight"), "%s", err.msg);
    c = m->cfg;
    c.o_lora_rank = 8;
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.0.attn.wo_a.weight"), "%s", err.msg);
    c = m->cfg;
    c.mlp_type[2] = LD_DS4_HASH; /* layer 2 has no tid2eid */
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "model.layers.2.ffn.gate.tid2eid"), "%s", err.msg);
    /* tid2eid with an expert id >= n_routed_experts: the same checkpoint
     * with fewer experts */
    c = m->cfg;
    c.n_routed = 3;
    ld_error_clear(&err);
    ld_status st = ld_ds4_model_bind(&c, m->st, &b, &err);
    CHECK_MSG(st == LD_ERR_MISMATCH || st == LD_ERR_SYNTAX, "%d %s", (int)st, err.msg);
    /* patch the file's bytes: one tid2eid entry = 99 */
    const ld_st_tensor *t = ld_st_find(m->st, "model.layers.1.ffn.gate.tid2eid");
    CHECK(t && t->dtype == LD_DT_I64);
    char path[1100];
    snprintf(path, sizeof path, "%s/model.safetensors", MDIR);
    FILE *f = fopen(path, "rb");
    CHECK(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    CHECK(buf && fread(buf, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    ld_safetensors *st0 = NULL, *st1 = NULL;
    CHECK(ld_st_parse(buf, (size_t)len, &st0, &err) == LD_OK);
    const ld_st_tensor *t0 = ld_st_find(st0, "model.layers.1.ffn.gate.tid2eid");
    CHECK(t0);
    size_t off = (size_t)(t0->data - buf) + 8 * 5; /* row 2, column 1 */
    ld_st_close(st0);
    int64_t v = 99;
    memcpy(buf + off, &v, 8);
    CHECK(ld_st_parse(buf, (size_t)len, &st1, &err) == LD_OK);
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&m->cfg, st1, &b, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "model.layers.1.ffn.gate.tid2eid") && strstr(err.msg, "[2][1]"), "%s", err.msg);
    ld_st_close(st1);
    /* a row naming one expert twice: column 1 = column 0 (the MoE gathers
     * an expert's tokens once; a repeat would overflow its rows) */
    memcpy(&v, buf + off - 8, 8);
    memcpy(buf + off, &v, 8);
    CHECK(ld_st_parse(buf, (size_t)len, &st1, &err) == LD_OK);
    ld_error_clear(&err);
    CHECK(ld_ds4_model_bind(&m->cfg, st1, &b, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "model.layers.1.ffn.gate.tid2eid") && strstr(err.msg, "row 2") &&
                  strstr(err.msg, "twice"),
              "%s", err.msg);
    ld_st_close(st1);
    free(buf);
    ld_ds4_model_close(m);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_deepseek_v4_ref), LD_CASE(test_deepseek_v4_cpu), LD_CASE(test_deepseek_v4_fp4),
    LD_CASE(test_deepseek_v4_features_matter), LD_CASE(test_deepseek_v4_deterministic),
    LD_CASE(test_deepseek_v4_reset), LD_CASE(test_deepseek_v4_kernels),
    LD_CASE(test_deepseek_v4_config_errors), LD_CASE(test_deepseek_v4_weight_errors),
};

LD_TEST_MAIN(tests)
