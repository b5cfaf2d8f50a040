/* test_tp_ds.c - tensor parallelism for DeepSeek-V3 / V3.2
 * (engine/tp/tp_ds_shard.h, tp_forward.h's ld_tp_ds_session_create) on
 * simulated ranks over the tiny HF models of testdata/models (written with
 * transformers by tools/gen_tiny_deepseek*.py): TP = 2 and 4 (where the
 * heads and intermediate widths divide) within the same 1e-5 of
 * transformers' logits and hidden states as the single-rank session, in
 * the naive, absorbed and split-K MLA forms; bitwise equal over reruns,
 * threads per rank, node groupings and chunkings; TP = 1 bitwise the plain
 * session; the shard's views and K-slices; the refusals (a size that does
 * not divide, FP8 scale blocks cut, combine=bf16, DeepSeek-V4's fields); the FP8
 * fixture's LD_WQ_F8B weights split on finer (equivalent) blocks; the
 * reduce in place in the backends' memory, bitwise the staging path's
 * (attention_bias included); over NCCL
 * where the build and the machine have it (else a clear refusal). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/backend_cuda.h"
#include "engine/tp/comm.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "tests/support/fixtures.h"
#include "tests/support/ld_test.h"
#include "engine/engine.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ops.h"
#include "engine/tp/tp_ds_shard.h"
#include "engine/tp/tp_forward.h"

#define MDIR LD_TESTDATA_DIR "/models/"
#define MAX_T 64

/* ------------------------------------------------------------ helpers */

/* a sequence of the fixture's ref.json (fixtures.h) */
typedef ld_test_seq seq;

static int open_model(const char *name, ld_ds_model **m)
{
    ld_error err;
    ld_error_clear(&err);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    CHECK_MSG(ld_ds_model_open(dir, m, &err) == LD_OK, "%s: %s", name, err.msg);
    return 0;
}

/* One run of `toks`: a TP session (o != NULL) or a plain one on `plain_be`
 * ("cpu"/"ref", 2 threads), chunks of `batch`, calls of `call` tokens (0:
 * one call); logits [T][V] and hidden [P][T][D] (NULL: not wanted). */
typedef struct run_spec {
    const ld_tp_opts *o;
    const char *plain_be;
    ld_ds_attn attn;
    const char *kspec;
    int batch, call;
} run_spec;

static ld_status eval_calls(ld_tp_session *tp, ld_ds_session *ds, const ld_ds_model *m, int call, const int32_t *toks,
                            int T, float *logits, float *hidden, ld_error *err)
{
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    ld_status st = LD_OK;
    for (int t0 = 0; st == LD_OK && t0 < T;) {
        int n = call ? (T - t0 < call ? T - t0 : call) : T;
        float *h = hidden ? malloc(P * (size_t)n * D * sizeof *h) : NULL; /* per call: scattered */
        if (hidden && !h) return LD_ERR_NOMEM;
        float *l = logits ? logits + (size_t)t0 * V : NULL;
        st = tp ? ld_tp_session_eval(tp, toks + t0, n, l, h, err) : ld_ds_session_eval(ds, toks + t0, n, l, h, NULL, err);
        for (size_t p = 0; h && st == LD_OK && p < P; p++)
            memcpy(hidden + (p * (size_t)T + (size_t)t0) * D, h + p * (size_t)n * D, (size_t)n * D * sizeof *h);
        free(h);
        t0 += n;
    }
    return st;
}

static ld_status run(const ld_ds_model *m, const run_spec *r, const int32_t *toks, int T, float *logits, float *hidden,
                     ld_error *err)
{
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    LD_TRY(ld_cpu_kernels_parse(r->kspec, &k, err));
    ld_tp_session *tp = NULL;
    ld_ds_session *ds = NULL;
    ld_backend *be = NULL;
    ld_status st;
    if (r->o) {
        st = ld_tp_ds_session_create(m, r->o, r->attn, &k, MAX_T, r->batch, &tp, err);
    } else {
        st = ld_backend_cpu_create_ex(2, strcmp(r->plain_be, "cpu") == 0, NULL, &be, err);
        if (st == LD_OK) st = ld_ds_session_create(m, be, MAX_T, r->batch, r->attn, &ds, err);
        if (st == LD_OK) ld_ds_session_set_kernels(ds, &k);
    }
    if (st == LD_OK) st = eval_calls(tp, ds, m, r->call, toks, T, logits, hidden, err);
    if (st == LD_OK && (tp ? ld_tp_session_pos(tp) : ld_ds_session_pos(ds)) != T) st = LD_ERR_MISMATCH;
    ld_tp_session_destroy(tp);
    ld_ds_session_destroy(ds);
    ld_backend_destroy(be);
    return st;
}

static const char *form_name(ld_ds_attn a)
{
    return a == LD_DS_ATTN_NAIVE ? "naive" : a == LD_DS_ATTN_ABSORBED ? "absorbed" : "splitk";
}

/* ------------------------------------------------------------ against transformers */

/* Both sequences of `name` over `n` ranks on `be`: logits and every hidden
 * plane within `tol` normalised error of transformers'; the worst logits
 * error into *worst (max). */
static int check_split(const char *name, int n, const char *be, ld_ds_attn attn, double tol, double *worst)
{
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "%s", name);
    ld_ds_model *m = NULL;
    if (open_model(name, &m)) return 1;
    size_t V = (size_t)m->cfg.vocab, D = (size_t)m->cfg.hidden, P = (size_t)m->cfg.n_layers + 2;
    for (int i = 0; i < 2; i++) {
        seq q;
        CHECK(ld_test_load_seq(dir, i, &q));
        size_t T = (size_t)q.T;
        float *ref_l = load_f32(dir, q.logits_file, T * V), *ref_h = load_f32(dir, q.hidden_file, P * T * D);
        float *l = malloc(T * V * sizeof *l), *h = malloc(P * T * D * sizeof *h);
        CHECK(ref_l && ref_h && l && h);
        ld_error err;
        ld_error_clear(&err);
        ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = be, .kernels = NULL, .threads = 1};
        run_spec r = {&o, NULL, attn, NULL, MAX_T, 0};
        CHECK_MSG(run(m, &r, q.tokens, q.T, l, h, &err) == LD_OK, "%s tp %d: %s", name, n, err.msg);
        double mx, e = nerr(l, ref_l, T * V, &mx), eh = 0;
        for (size_t p = 0; p < P; p++) {
            double x = nerr(h + p * T * D, ref_h + p * T * D, T * D, NULL);
            if (!(x <= eh)) eh = x;
        }
        fprintf(stderr, "  %-16s tp %d %s %-8s seq %c: logits nerr %.3g (max|d| %.3g), worst hidden plane %.3g\n",
                name, n, be, form_name(attn), 'a' + i, e, mx, eh);
        CHECK_MSG(e < tol && eh < tol, "%s tp %d %s %s: error above %g", name, n, be, form_name(attn), tol);
        if (e > *worst) *worst = e;
        free(ref_l);
        free(ref_h);
        free(l);
        free(h);
    }
    ld_ds_model_close(m);
    return 0;
}

/* (a) the same 1e-5 of transformers as TP = 1 (test_deepseek's bound),
 * every MLA form, both CPU backends */
static int test_tp_ds_vs_transformers(void)
{
    static const struct { const char *name; int max_n; } models[] = {
        {"deepseek-v3", 4}, {"deepseek-v3-lite", 2}, {"deepseek-v32", 4}};
    static const ld_ds_attn forms[] = {LD_DS_ATTN_NAIVE, LD_DS_ATTN_ABSORBED, LD_DS_ATTN_SPLITK};
    static const char *const bes[] = {"cpu", "ref"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        for (size_t f = 0; f < sizeof forms / sizeof forms[0]; f++)
            for (size_t b = 0; b < 2; b++) {
                if (b == 1 && f == 2) continue; /* splitk: cpu only */
                double w1 = 0, wn = 0;
                if (check_split(models[i].name, 1, bes[b], forms[f], 1e-5, &w1)) return 1;
                for (int n = 2; n <= models[i].max_n; n *= 2)
                    if (check_split(models[i].name, n, bes[b], forms[f], 1e-5, &wn)) return 1;
                fprintf(stderr, "  %-16s %s %-8s worst logits nerr: tp 1 %.3g, tp 2..%d %.3g\n", models[i].name,
                        bes[b], form_name(forms[f]), w1, models[i].max_n, wn);
            }
    return 0;
}

/* ------------------------------------------------------------ determinism */

/* (b) bitwise equal over reruns, threads per rank (1, 3), node groupings
 * (1, 2), prefill / chunks of 3 / calls of 1 and 5 tokens */
static int test_tp_ds_bitwise_determinism(void)
{
    static const struct { const char *name; int n; ld_ds_attn attn; } runs[] = {
        {"deepseek-v3", 2, LD_DS_ATTN_NAIVE}, {"deepseek-v3", 4, LD_DS_ATTN_ABSORBED},
        {"deepseek-v3-lite", 2, LD_DS_ATTN_NAIVE}, {"deepseek-v32", 2, LD_DS_ATTN_ABSORBED},
        {"deepseek-v32", 4, LD_DS_ATTN_NAIVE}};
    static const char *const bes[] = {"cpu", "ref"};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_ds_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", runs[i].name);
        seq q;
        CHECK(ld_test_load_seq(dir, 1, &q));
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q.T * (size_t)m->cfg.hidden;
        float *base = malloc(nl * sizeof *base), *l = malloc(nl * sizeof *l);
        float *hbase = malloc(nh * sizeof *hbase), *h = malloc(nh * sizeof *h);
        CHECK(base && l && hbase && h);
        for (int b = 0; b < 2; b++) {
            ld_error err;
            ld_error_clear(&err);
            ld_tp_opts o = {.n = runs[i].n, .n_nodes = 1, .backend = bes[b], .kernels = NULL, .threads = 1};
            run_spec r = {&o, NULL, runs[i].attn, NULL, MAX_T, 0};
            CHECK_MSG(run(m, &r, q.tokens, q.T, base, hbase, &err) == LD_OK, "%s", err.msg);
            const struct { int threads, nodes, batch, call; } v[] = {
                {1, 1, MAX_T, 0}, {3, 1, MAX_T, 0}, {1, 2, MAX_T, 0}, {3, 2, 3, 0}, {1, 1, MAX_T, 1}, {3, 2, MAX_T, 5}};
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
                ld_tp_opts ov = {.n = runs[i].n, .n_nodes = v[k].nodes, .backend = bes[b], .kernels = NULL, .threads = v[k].threads};
                run_spec rv = {&ov, NULL, runs[i].attn, NULL, v[k].batch, v[k].call};
                CHECK_MSG(run(m, &rv, q.tokens, q.T, l, h, &err) == LD_OK, "%s", err.msg);
                CHECK_MSG(memcmp(l, base, nl * sizeof *l) == 0 && memcmp(h, hbase, nh * sizeof *h) == 0,
                          "%s tp %d on %s: threads %d, nodes %d, batch %d, call %d differ from the first run",
                          runs[i].name, runs[i].n, bes[b], v[k].threads, v[k].nodes, v[k].batch, v[k].call);
            }
            fprintf(stderr, "  %-16s tp %d %s %-8s: %zu runs bitwise equal (threads 1/3 per rank, nodes 1/2, chunks)\n",
                    runs[i].name, runs[i].n, bes[b], form_name(runs[i].attn), sizeof v / sizeof v[0] + 1);
        }
        free(base);
        free(l);
        free(hbase);
        free(h);
        ld_ds_model_close(m);
    }
    return 0;
}

/* (c) TP = 1 through the TP path is the plain session, bit for bit
 * (logits and every hidden plane; the FP8 fixture and attention_bias too) */
static int test_tp_ds_one_is_plain(void)
{
    static const char *const names[] = {"deepseek-v3", "deepseek-v3-fp8", "deepseek-v3-lite", "deepseek-v32"};
    static const ld_ds_attn forms[] = {LD_DS_ATTN_NAIVE, LD_DS_ATTN_ABSORBED};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ld_ds_model *m = NULL;
        if (open_model(names[i], &m)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", names[i]);
        seq q;
        CHECK(ld_test_load_seq(dir, 0, &q));
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        size_t nh = ((size_t)m->cfg.n_layers + 2) * (size_t)q.T * (size_t)m->cfg.hidden;
        float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
        float *ha = malloc(nh * sizeof *ha), *hb = malloc(nh * sizeof *hb);
        CHECK(a && b && ha && hb);
        for (size_t f = 0; f < 2; f++) {
            ld_error err;
            ld_error_clear(&err);
            ld_tp_opts o = {.n = 1, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 2};
            run_spec rt = {&o, NULL, forms[f], NULL, MAX_T, 0}, rp = {NULL, "cpu", forms[f], NULL, MAX_T, 0};
            CHECK_MSG(run(m, &rt, q.tokens, q.T, a, ha, &err) == LD_OK, "%s", err.msg);
            CHECK_MSG(run(m, &rp, q.tokens, q.T, b, hb, &err) == LD_OK, "%s", err.msg);
            CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0 && memcmp(ha, hb, nh * sizeof *ha) == 0,
                      "%s %s: tp 1 differs from the plain session", names[i], form_name(forms[f]));
        }
        fprintf(stderr, "  %-16s tp 1 = the plain session bitwise (naive, absorbed)\n", names[i]);
        free(a);
        free(b);
        free(ha);
        free(hb);
        ld_ds_model_close(m);
    }
    return 0;
}

/* ------------------------------------------------------------ the shard */

/* (d) rank 1 of 2 on deepseek-v3: views of its heads' q_b / kv_b rows and
 * its intermediate rows, o_proj's and the down projections' K-slices
 * copied, the router and the latent projections the model's own */
static int test_tp_ds_shard_layout(void)
{
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v3", &m)) return 1;
    const ld_ds_config *c = &m->cfg; /* 4 heads, I 64, Im 16, 1 shared, 8 experts, 1 dense layer */
    ld_error err;
    ld_error_clear(&err);
    ld_tp_ds_shard *sh = NULL;
    CHECK_MSG(ld_tp_ds_shard_create(m, 2, 1, &sh, &err) == LD_OK, "%s", err.msg);
    const ld_ds_model *s = ld_tp_ds_shard_model(sh);
    CHECK(s->cfg.n_heads == 2 && s->cfg.intermediate == 32 && s->cfg.moe_intermediate == 8 && s->cfg.hidden == 64);
    CHECK(s->cfg.kv_lora_rank == c->kv_lora_rank && s->cfg.n_routed == c->n_routed);
    int64_t qh = c->qk_nope + c->qk_rope, kvh = c->qk_nope + c->v_head;
    for (int l = 0; l < c->n_layers; l++) {
        const ld_ds_layer *a = &m->layers[l], *b = &s->layers[l];
        CHECK(b->q_b.host.rows == 2 * qh &&
              b->q_b.host.data == (const float *)a->q_b.host.data + 2 * qh * c->q_lora_rank);
        CHECK(b->kv_b.host.rows == 2 * kvh &&
              b->kv_b.host.data == (const float *)a->kv_b.host.data + 2 * kvh * c->kv_lora_rank);
        CHECK(b->q_a.host.data == a->q_a.host.data && b->kv_a.host.data == a->kv_a.host.data);
        CHECK(b->o.host.cols == 2 * c->v_head && b->o.host.rows == c->hidden);
        /* o_proj [D][H*dv]: rank 1's row 3 starts at column 2*dv */
        CHECK(((const float *)b->o.host.data)[3 * 2 * c->v_head] ==
              ((const float *)a->o.host.data)[3 * 4 * c->v_head + 2 * c->v_head]);
        if (!a->moe) {
            CHECK(b->mlp.gate.host.rows == 32 && b->mlp.down.host.cols == 32);
            continue;
        }
        CHECK(b->router.host.data == a->router.host.data && b->router.host.rows == c->n_routed);
        CHECK(b->mlp.up.host.rows == 8 && b->mlp.up.host.data == (const float *)a->mlp.up.host.data + 8 * c->hidden);
        for (int e = 0; e < c->n_routed; e++) {
            CHECK(b->experts[e].gate.host.rows == 8 && b->experts[e].down.host.cols == 8);
            CHECK(((const float *)b->experts[e].down.host.data)[1] == ((const float *)a->experts[e].down.host.data)[9]);
        }
        CHECK(m->layers[l].experts[0].down.host.cols == 16); /* the model is untouched */
    }
    /* copies: per layer o_proj's slice [D][2*dv], the down slices [D][I/2] or
     * (shared + experts) [D][Im/2] each */
    size_t D = (size_t)c->hidden, want = 0;
    for (int l = 0; l < c->n_layers; l++)
        want += D * 2 * (size_t)c->v_head + (m->layers[l].moe ? (size_t)(1 + c->n_routed) * D * 8 : D * 32);
    CHECK_MSG(ld_tp_ds_shard_copied_bytes(sh) == want * sizeof(float), "copied %zu, want %zu",
              ld_tp_ds_shard_copied_bytes(sh), want * sizeof(float));
    ld_tp_ds_shard_free(sh);
    ld_ds_model_close(m);
    return 0;
}

/* (e) attention_bias (deepseek-v3-lite): o_proj's bias is kept out of the
 * split matmul and added once after the sum */
static int test_tp_ds_bias_after_reduce(void)
{
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v3-lite", &m)) return 1;
    ld_error err;
    ld_error_clear(&err);
    ld_tp_ds_shard *sh = NULL;
    CHECK(m->cfg.attention_bias && m->layers[0].o_bias.st);
    CHECK_MSG(ld_tp_ds_shard_create(m, 2, 0, &sh, &err) == LD_OK, "%s", err.msg);
    const float *b = ld_tp_ds_shard_bias(sh, 0, 0);
    CHECK(b && !ld_tp_ds_shard_model(sh)->layers[0].o_bias.st && !ld_tp_ds_shard_bias(sh, 0, 1));
    float want[4];
    ld_ref_to_f32(want, m->layers[0].o_bias.host.data, (ld_kdt)m->layers[0].o_bias.host.dtype, 0, 4);
    CHECK(memcmp(b, want, sizeof want) == 0);
    ld_tp_ds_shard_free(sh);
    CHECK(ld_tp_ds_shard_create(m, 1, 0, &sh, &err) == LD_OK); /* TP = 1: the matmul adds it */
    CHECK(!ld_tp_ds_shard_bias(sh, 0, 0) && ld_tp_ds_shard_model(sh)->layers[0].o_bias.st);
    ld_tp_ds_shard_free(sh);
    ld_ds_model_close(m);
    return 0;
}

/* (e2) the reduce points: one all-reduce of [T][hidden] after o_proj and
 * one after the FFN, per layer and chunk, nothing else: a flat simulated
 * group of N receives 2 L N (N - 1) T D floats per chunk of T tokens */
static int test_tp_ds_reduce_points(void)
{
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v32", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v32", 0, &q));
    ld_error err;
    ld_error_clear(&err);
    for (int n = 2; n <= 4; n += 2) {
        ld_tp_opts o = {.n = n, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
        ld_tp_session *s = NULL;
        CHECK_MSG(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, NULL, MAX_T, 5, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_tp_session_eval(s, q.tokens, q.T, NULL, NULL, &err) == LD_OK, "%s", err.msg);
        double intra = -1, inter = -1;
        ld_comm_sim_traffic(ld_tp_session_comm(s, 0), &intra, &inter);
        double want = 2.0 * m->cfg.n_layers * n * (n - 1) * q.T * m->cfg.hidden * sizeof(float);
        CHECK_MSG(intra == want && inter == 0, "tp %d: %.0f bytes gathered, want %.0f", n, intra, want);
        ld_tp_session_destroy(s);
    }
    ld_ds_model_close(m);
    return 0;
}

/* One run of q through a TP session of m over 2 ranks on `be`, calls of 4
 * tokens; staged: every rank's backend without buf_mem (tp_forward.h), so
 * the reduce goes through the host stage.  Logits [T][V], the group's
 * in-place and buffer all-reduces. */
static int run_path(const ld_ds_model *m, const char *be, ld_ds_attn attn, int staged, const seq *q, float *logits,
                    uint64_t *n_in_place, uint64_t *n_buffer)
{
    static ld_backend_ops staged_ops[2];
    ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = be, .kernels = NULL, .threads = 1};
    ld_tp_session *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tp_ds_session_create(m, &o, attn, NULL, MAX_T, MAX_T, &s, &err) == LD_OK, "%s", err.msg);
    if (staged && ld_test_tp_staged(s, 2, staged_ops)) return 1;
    CHECK_MSG(eval_calls(s, NULL, m, 4, q->tokens, q->T, logits, NULL, &err) == LD_OK, "%s", err.msg);
    ld_comm_sim_reduces(ld_tp_session_comm(s, 0), n_in_place, n_buffer);
    ld_tp_session_destroy(s);
    return 0;
}

/* (e3) the reduce made in place (the CPU backends' buf_mem, the simulated
 * communicator's host memory) gives the staging path's bits, o_proj's bias
 * (deepseek-v3-lite's attention_bias) added in place after it; each path
 * counted: 2 reduces per layer, rank and call, all of one kind. */
static int test_tp_ds_reduce_in_place(void)
{
    static const struct { const char *name; ld_ds_attn attn; const char *be; } runs[] = {
        {"deepseek-v3-lite", LD_DS_ATTN_NAIVE, "cpu"}, {"deepseek-v3-lite", LD_DS_ATTN_ABSORBED, "ref"},
        {"deepseek-v32", LD_DS_ATTN_NAIVE, "cpu"}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        ld_ds_model *m = NULL;
        if (open_model(runs[i].name, &m)) return 1;
        char dir[512];
        snprintf(dir, sizeof dir, MDIR "%s", runs[i].name);
        seq q;
        CHECK(ld_test_load_seq(dir, 1, &q));
        size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
        float *l[2] = {malloc(nl * sizeof(float)), malloc(nl * sizeof(float))};
        uint64_t in_place[2], buffer[2];
        CHECK(l[0] && l[1]);
        for (int staged = 0; staged < 2; staged++)
            if (run_path(m, runs[i].be, runs[i].attn, staged, &q, l[staged], &in_place[staged], &buffer[staged]))
                return 1;
        uint64_t want = 2u * (uint64_t)m->cfg.n_layers * 2u * (uint64_t)((q.T + 3) / 4);
        fprintf(stderr, "  %-16s tp 2 %s %-8s: %llu reduces in place, %llu staged: the same bits\n", runs[i].name,
                runs[i].be, form_name(runs[i].attn), (unsigned long long)in_place[0], (unsigned long long)buffer[1]);
        CHECK_MSG(in_place[0] == want && buffer[0] == 0 && in_place[1] == 0 && buffer[1] == want,
                  "in place %llu/%llu, staged %llu/%llu, want %llu", (unsigned long long)in_place[0],
                  (unsigned long long)buffer[0], (unsigned long long)in_place[1], (unsigned long long)buffer[1],
                  (unsigned long long)want);
        CHECK_MSG(memcmp(l[0], l[1], nl * sizeof(float)) == 0, "%s %s: in place and staged differ", runs[i].name,
                  form_name(runs[i].attn));
        free(l[0]);
        free(l[1]);
        ld_ds_model_close(m);
    }
    return 0;
}

/* ------------------------------------------------------------ the lm interface, the refusals */

/* (f) ld_lm's TP session on DeepSeek: the MLA form from the kernel spec,
 * the same bits as the TP session made directly */
static int test_tp_ds_lm(void)
{
    ld_error err;
    ld_error_clear(&err);
    ld_lm *lm = NULL;
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v32", &lm, &err) == LD_OK, "%s", err.msg);
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v32", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v32", 0, &q));
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    CHECK(a && b);
    static const struct { const char *spec; ld_ds_attn attn; } v[] = {
        {NULL, LD_DS_ATTN_NAIVE}, {"mla=absorbed", LD_DS_ATTN_ABSORBED}, {"mla=splitk,router=bf16", LD_DS_ATTN_SPLITK}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ld_tp_opts o = {.n = 2, .n_nodes = 1, .backend = "cpu", .kernels = v[i].spec, .threads = 1};
        CHECK_MSG(ld_lm_tp_check(lm, 2, &err) == LD_OK, "%s", err.msg);
        ld_lm_session *s = NULL;
        CHECK_MSG(ld_lm_session_create_tp(lm, &o, MAX_T, 4, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_lm_eval(s, q.tokens, q.T, a, NULL, &err) == LD_OK, "%s", err.msg);
        CHECK(ld_lm_pos(s) == q.T);
        ld_lm_session_destroy(s);
        run_spec r = {&o, NULL, v[i].attn, v[i].spec, MAX_T, 0};
        CHECK_MSG(run(m, &r, q.tokens, q.T, b, NULL, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "lm tp 2 with '%s' differs", v[i].spec ? v[i].spec : "");
    }
    free(a);
    free(b);
    ld_ds_model_close(m);
    ld_lm_close(lm);
    return 0;
}

/* (g) the refusals: sizes that do not divide (naming the field), FP8
 * scale blocks cut (the FP8 fixture's 16x16 blocks allow only TP = 1),
 * combine=bf16, DeepSeek-V4's o_groups */
static int test_tp_ds_errors(void)
{
    ld_error err;
    ld_error_clear(&err);
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v3", &m)) return 1;
    ld_tp_session *s = NULL;
    ld_tp_opts o = {.n = 3, .n_nodes = 1, .backend = "cpu", .kernels = NULL, .threads = 1};
    if (ld_test_expect_fail(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, NULL, 16, 16, &s, &err), LD_ERR_USAGE, &err,
                    "tensor parallel size 3 does not divide the model's num_attention_heads (4)"))
        return 1;
    CHECK(!s);
    ld_ds_config c = m->cfg;
    c.intermediate = 42;
    if (ld_test_expect_fail(ld_tp_ds_check_config(&c, 4, &err), LD_ERR_USAGE, &err, "intermediate_size (42)")) return 1;
    c.first_k_dense = 0; /* no dense layer: its width does not matter */
    CHECK(ld_tp_ds_check_config(&c, 4, &err) == LD_OK);
    c.moe_intermediate = 18;
    if (ld_test_expect_fail(ld_tp_ds_check_config(&c, 4, &err), LD_ERR_USAGE, &err, "moe_intermediate_size (18)")) return 1;
    c.first_k_dense = c.n_layers; /* no MoE layer */
    c.intermediate = 64;
    CHECK(ld_tp_ds_check_config(&c, 4, &err) == LD_OK);
    CHECK(ld_tp_ds_check_config(&m->cfg, 0, &err) == LD_ERR_USAGE);
    o.n = 2;
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    CHECK(ld_cpu_kernels_parse("combine=bf16", &k, &err) == LD_OK);
    if (ld_test_expect_fail(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, &k, 16, 16, &s, &err), LD_ERR_UNSUPPORTED,
                    &err, "combine=bf16"))
        return 1;
    o.n = 1; /* one rank holds the whole sum */
    CHECK_MSG(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, &k, 16, 16, &s, &err) == LD_OK, "%s", err.msg);
    ld_tp_session_destroy(s);
    o.n = 2;
    o.n_nodes = 3;
    CHECK(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, NULL, 16, 16, &s, &err) == LD_ERR_USAGE && !s);
    ld_ds_model_close(m);

    /* FP8: q_b_proj [24][16] in 16x16 blocks, 12 rows per rank of 2 */
    if (open_model("deepseek-v3-fp8", &m)) return 1;
    o.n_nodes = 1;
    if (ld_test_expect_fail(ld_tp_ds_session_create(m, &o, LD_DS_ATTN_NAIVE, NULL, 16, 16, &s, &err), LD_ERR_UNSUPPORTED,
                    &err, "'model.layers.0.self_attn.q_b_proj.weight' is FP8 with scale blocks of 16x16"))
        return 1;
    CHECK_MSG(strstr(err.msg, "12 rows"), "%s", err.msg);
    CHECK(ld_tp_ds_check(m, 1, &err) == LD_OK);
    ld_ds_model *q = NULL; /* o_proj [32][16]: 8 columns per rank cut its blocks */
    if (open_model("deepseek-v3-fp8", &q)) return 1;
    q->layers[0].q_b.st = NULL; /* the test's copy: q_b out of the way */
    q->layers[1].q_b.st = NULL;
    if (ld_test_expect_fail(ld_tp_ds_check(q, 2, &err), LD_ERR_UNSUPPORTED, &err,
                    "'model.layers.0.self_attn.o_proj.weight' is FP8"))
        return 1;
    CHECK_MSG(strstr(err.msg, "8 columns") && strstr(err.msg, "multiple of 16 columns"), "%s", err.msg);
    ld_ds_model_close(q);
    ld_ds_model_close(m);
    ld_lm *lm = NULL;
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v3-fp8", &lm, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_lm_tp_check(lm, 2, &err) == LD_ERR_UNSUPPORTED && ld_lm_tp_check(lm, 1, &err) == LD_OK);
    ld_lm_close(lm);

    /* DeepSeek-V4 (test_tp_ds4.c): its own fields, o_groups (2) here */
    CHECK_MSG(ld_lm_open(MDIR "deepseek-v4", &lm, &err) == LD_OK, "%s", err.msg);
    ld_lm_session *ls = NULL;
    o.n = 4;
    if (ld_test_expect_fail(ld_lm_session_create_tp(lm, &o, 16, 16, &ls, &err), LD_ERR_USAGE, &err, "o_groups (2)"))
        return 1;
    CHECK(!ls);
    ld_lm_close(lm);
    return 0;
}

/* ------------------------------------------------------------ FP8 on block boundaries */

/* The FP8 fixture re-expressed with scale blocks of b x b (b dividing 16):
 * each fine block takes the scale of the 16 x 16 block it lies in, so the
 * LD_WQ_F8B weights are the same numbers and transformers' logits still
 * hold, but TP = 2 may now cut on the finer blocks.  A copy of the model
 * whose layers, expert tables and scale grids the test owns. */
typedef struct fine_model {
    ld_ds_model m;
    ld_ds_layer *layers;
    ld_ds_expert *experts;
    float *grids[256];
    size_t n_grids;
} fine_model;

static int refine_tensor(fine_model *f, ld_model_tensor *t, int b)
{
    ld_host_tensor *h = &t->host;
    if (h->quant != LD_WQ_F8B) return 0;
    CHECK(h->scale_br == 16 && h->scale_bc == 16 && f->n_grids < sizeof f->grids / sizeof f->grids[0]);
    int64_t fr = (h->rows + b - 1) / b, fc = (h->cols + b - 1) / b, cc = (h->cols + 15) / 16;
    float *g = malloc((size_t)(fr * fc) * sizeof *g);
    CHECK(g);
    f->grids[f->n_grids++] = g;
    for (int64_t i = 0; i < fr; i++)
        for (int64_t j = 0; j < fc; j++) g[i * fc + j] = h->scale[(i * b / 16) * cc + j * b / 16];
    h->scale = g;
    h->scale_br = h->scale_bc = b;
    return 0;
}

static int refine_mlp(fine_model *f, ld_ds_expert *x, int b)
{
    return refine_tensor(f, &x->gate, b) || refine_tensor(f, &x->up, b) || refine_tensor(f, &x->down, b);
}

static void fine_free(fine_model *f)
{
    for (size_t i = 0; i < f->n_grids; i++) free(f->grids[i]);
    free(f->layers);
    free(f->experts);
}

static int refine(const ld_ds_model *src, int b, fine_model *f)
{
    memset(f, 0, sizeof *f);
    const ld_ds_config *c = &src->cfg;
    f->m = *src;
    f->m.cfg.fp8_block[0] = f->m.cfg.fp8_block[1] = b; /* kv_b_proj (dequantized) is checked on these */
    f->layers = malloc((size_t)c->n_layers * sizeof *f->layers);
    f->experts = malloc((size_t)c->n_layers * (size_t)c->n_routed * sizeof *f->experts);
    CHECK(f->layers && f->experts);
    f->m.layers = f->layers;
    for (int l = 0; l < c->n_layers; l++) {
        ld_ds_layer *L = &f->layers[l];
        *L = src->layers[l];
        ld_model_tensor *ts[] = {&L->q_a, &L->q_b, &L->q, &L->kv_a, &L->o, &L->idx_wq_b, &L->idx_wk};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (refine_tensor(f, ts[i], b)) return 1;
        if (refine_mlp(f, &L->mlp, b)) return 1;
        if (!L->moe) continue;
        L->experts = f->experts + (size_t)l * (size_t)c->n_routed;
        memcpy(L->experts, src->layers[l].experts, (size_t)c->n_routed * sizeof *L->experts);
        for (int e = 0; e < c->n_routed; e++)
            if (refine_mlp(f, &L->experts[e], b)) return 1;
    }
    return 0;
}

/* element [r][k] of an LD_WQ_F8B matrix, from its definition */
static float f8b_at(const ld_host_tensor *h, int64_t r, int64_t k)
{
    int64_t bc = (h->cols + h->scale_bc - 1) / h->scale_bc;
    return ld_ref_fp8_e4m3_to_f32(((const uint8_t *)h->data)[r * h->cols + k]) *
           h->scale[(r / h->scale_br) * bc + k / h->scale_bc];
}

/* TP = 2 of the FP8 fixture's LD_WQ_F8B weights on 4 x 4 scale blocks:
 * rank 1's q_b_proj rows and o_proj's K-slice (scale columns along) are
 * the full matrices' elements; its logits within 1e-5 of transformers'.
 * With 8 x 8 blocks, q_b_proj's 12 rows a rank cut them: refused. */
static int test_tp_ds_fp8_blocks(void)
{
    ld_ds_model *src = NULL;
    if (open_model("deepseek-v3-fp8", &src)) return 1;
    ld_error err;
    ld_error_clear(&err);
    fine_model f;
    if (refine(src, 8, &f)) return 1;
    if (ld_test_expect_fail(ld_tp_ds_check(&f.m, 2, &err), LD_ERR_UNSUPPORTED, &err,
                    "'model.layers.0.self_attn.q_b_proj.weight' is FP8 with scale blocks of 8x8"))
        return 1;
    CHECK_MSG(strstr(err.msg, "12 rows") && strstr(err.msg, "multiple of 8 rows"), "%s", err.msg);
    fine_free(&f);
    if (refine(src, 4, &f)) return 1;
    CHECK_MSG(ld_tp_ds_check(&f.m, 2, &err) == LD_OK, "%s", err.msg);
    ld_tp_ds_shard *sh = NULL;
    CHECK_MSG(ld_tp_ds_shard_create(&f.m, 2, 1, &sh, &err) == LD_OK, "%s", err.msg);
    const ld_ds_model *s = ld_tp_ds_shard_model(sh);
    const ld_host_tensor *qb = &s->layers[0].q_b.host, *o = &s->layers[1].o.host;
    const ld_host_tensor *fqb = &f.layers[0].q_b.host, *fo = &f.layers[1].o.host;
    CHECK(qb->quant == LD_WQ_F8B && qb->rows == 12 && qb->data == (const uint8_t *)fqb->data + 12 * fqb->cols);
    CHECK(o->quant == LD_WQ_F8B && o->cols == fo->cols / 2 && o->rows == fo->rows);
    for (int64_t r = 0; r < qb->rows; r++)
        for (int64_t k = 0; k < qb->cols; k++) CHECK(f8b_at(qb, r, k) == f8b_at(fqb, 12 + r, k));
    for (int64_t r = 0; r < o->rows; r++)
        for (int64_t k = 0; k < o->cols; k++) CHECK(f8b_at(o, r, k) == f8b_at(fo, r, o->cols + k));
    ld_tp_ds_shard_free(sh);
    char dir[512];
    snprintf(dir, sizeof dir, MDIR "deepseek-v3-fp8");
    size_t V = (size_t)src->cfg.vocab;
    for (int i = 0; i < 2; i++) {
        seq q;
        CHECK(ld_test_load_seq(dir, i, &q));
        float *ref = load_f32(dir, q.logits_file, (size_t)q.T * V), *l = malloc((size_t)q.T * V * sizeof *l);
        CHECK(ref && l);
        for (int a = 0; a < 2; a++) {
            ld_tp_opts op = {.n = 2, .n_nodes = 1, .backend = a ? "ref" : "cpu", .kernels = NULL, .threads = 1};
            run_spec r = {&op, NULL, a ? LD_DS_ATTN_ABSORBED : LD_DS_ATTN_NAIVE, NULL, MAX_T, 0};
            CHECK_MSG(run(&f.m, &r, q.tokens, q.T, l, NULL, &err) == LD_OK, "%s", err.msg);
            double mx, e = nerr(l, ref, (size_t)q.T * V, &mx);
            fprintf(stderr, "  deepseek-v3-fp8 4x4 blocks tp 2 %s %s seq %c: logits nerr %.3g (max|d| %.3g)\n", op.backend,
                    form_name(r.attn), 'a' + i, e, mx);
            CHECK(e < 1e-5);
        }
        free(ref);
        free(l);
    }
    fine_free(&f);
    ld_ds_model_close(src);
    return 0;
}

/* (h) cuda: over NCCL where the build has it and the machine has the GPUs,
 * else a clear refusal.  With a GPU, TP = 1 over NCCL is the plain CUDA
 * DeepSeek session bit for bit (V3.2: MLA, indexer, MoE), and TP = 2 (two
 * GPUs) within 1e-5 of transformers and the same bits token by token. */
static int test_tp_ds_cuda_nccl(void)
{
    ld_ds_model *m = NULL;
    if (open_model("deepseek-v32", &m)) return 1;
    seq q;
    CHECK(ld_test_load_seq(MDIR "deepseek-v32", 0, &q));
    size_t nl = (size_t)q.T * (size_t)m->cfg.vocab;
    float *a = malloc(nl * sizeof *a), *b = malloc(nl * sizeof *b);
    CHECK(a && b);
    ld_error err;
    ld_error_clear(&err);
    ld_tp_opts o = {.n = 1, .n_nodes = 1, .backend = "cuda", .kernels = NULL, .threads = 1};
    run_spec r = {&o, NULL, LD_DS_ATTN_ABSORBED, NULL, MAX_T, 0};
    ld_status st = run(m, &r, q.tokens, q.T, a, NULL, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  cuda tp 1: %s\n", err.msg);
        CHECK_MSG(st == LD_ERR_UNSUPPORTED && (strstr(err.msg, "CUDA") || strstr(err.msg, "NCCL")), "%s", err.msg);
    } else {
        ld_backend *be = NULL;
        ld_ds_session *s = NULL;
        CHECK_MSG(ld_backend_cuda_create(0, NULL, &be, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_ds_session_create(m, be, MAX_T, MAX_T, LD_DS_ATTN_ABSORBED, &s, &err) == LD_OK, "%s", err.msg);
        CHECK_MSG(ld_ds_session_eval(s, q.tokens, q.T, b, NULL, NULL, &err) == LD_OK, "%s", err.msg);
        ld_ds_session_destroy(s);
        ld_backend_destroy(be);
        CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 1 over NCCL differs from the plain CUDA session");
        fprintf(stderr, "  cuda tp 1 over NCCL: bitwise the plain CUDA session\n");
        o.n = 2;
        st = run(m, &r, q.tokens, q.T, a, NULL, &err);
        if (st == LD_OK) {
            float *ref = load_f32(MDIR "deepseek-v32", q.logits_file, nl);
            CHECK(ref);
            double mx, e = nerr(a, ref, nl, &mx);
            fprintf(stderr, "  cuda tp 2 over NCCL: logits nerr %.3g (max|d| %.3g) vs transformers\n", e, mx);
            CHECK(e < 1e-5);
            r.call = 1;
            CHECK(run(m, &r, q.tokens, q.T, b, NULL, &err) == LD_OK);
            CHECK_MSG(memcmp(a, b, nl * sizeof *a) == 0, "cuda tp 2: prefill and token by token differ");
            free(ref);
        } else {
            fprintf(stderr, "  cuda tp 2: %s\n", err.msg);
            CHECK(st == LD_ERR_UNSUPPORTED);
        }
    }
    free(a);
    free(b);
    ld_ds_model_close(m);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tp_ds_vs_transformers), LD_CASE(test_tp_ds_bitwise_determinism), LD_CASE(test_tp_ds_one_is_plain),
    LD_CASE(test_tp_ds_shard_layout),    LD_CASE(test_tp_ds_bias_after_reduce),   LD_CASE(test_tp_ds_reduce_points),
    LD_CASE(test_tp_ds_reduce_in_place), LD_CASE(test_tp_ds_lm),
    LD_CASE(test_tp_ds_errors),          LD_CASE(test_tp_ds_fp8_blocks),          LD_CASE(test_tp_ds_cuda_nccl),
};

LD_TEST_MAIN(cases)
