/* test_nonfinite.c - engine.h's ld_lm_eval_checked on the tiny models of
 * testdata/models/ with one weight damaged in a copy (a NaN or an
 * infinity planted in one element): the first non-finite value named by
 * its layer, op and position on both CPU backends (every op of a dense
 * decoder; each layer's output on DeepSeek-V3 and on a split session), the
 * intact models checked clean, and the plain evals left unchecked. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/formats/safetensors.h"
#include "tests/support/damaged_model.h"
#include "tests/support/ld_test.h"

#define MDIR LD_TESTDATA_DIR "/models/"

/* ref.json's sequence "a" of the dense models (ids < 300) */
static const int32_t SEQ[] = {1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200};
#define T_SEQ ((int)(sizeof SEQ / sizeof SEQ[0]))

/* ------------------------------------------------------------ damaged copies */

/* A copy of model `name` in a new directory `dir` [64], element `elem` of
 * `tensor` set to v; 0 on success. */
static int damaged(const char *name, const char *tensor, size_t elem, float v, char *dir)
{
    char model[256];
    snprintf(model, sizeof model, MDIR "%s", name);
    return ld_test_damaged_model(model, tensor, elem, v, dir);
}

/* A session of the model at `dir` on the CPU backend `fast` (0: ref, 1:
 * cpu), split over `tp` ranks of it when tp > 0, chunks of 4 tokens so
 * that the checks run over several; the backend into *be (NULL with tp). */
static ld_status open_session(const char *dir, int fast, int tp, ld_lm **lm, ld_backend **be, ld_lm_session **s,
                              ld_error *err)
{
    *lm = NULL, *be = NULL, *s = NULL;
    LD_TRY(ld_lm_open(dir, lm, err));
    if (tp) {
        ld_tp_opts o = {.n = tp, .backend = fast ? "cpu" : "ref", .threads = 1};
        return ld_lm_session_create_tp(*lm, &o, 64, 4, s, err);
    }
    LD_TRY(ld_backend_cpu_create_ex(2, fast, NULL, be, err));
    return ld_lm_session_create(*lm, *be, NULL, 64, 4, s, err);
}

static void close_session(ld_lm *lm, ld_backend *be, ld_lm_session *s)
{
    ld_lm_session_destroy(s);
    ld_backend_destroy(be);
    ld_lm_close(lm);
}

/* ld_lm_eval_checked of T ids on the model at dir (as open_session) */
static ld_status checked(const char *dir, int fast, int tp, const int32_t *ids, int T, ld_error *err)
{
    ld_lm *lm;
    ld_backend *be;
    ld_lm_session *s;
    ld_status st = open_session(dir, fast, tp, &lm, &be, &s, err);
    if (st == LD_OK) st = ld_lm_eval_checked(s, ids, T, err);
    close_session(lm, be, s);
    return st;
}

/* ------------------------------------------------------------ cases */

typedef struct planted {
    const char *tensor;
    size_t elem;
    float v;
    const char *want; /* in the message */
    int pos;          /* err->offset */
} planted;

/* Each damage to the tiny Qwen3 (2 layers, hidden 64, q/k norms), found at
 * the op whose output first holds it, on ref and cpu. */
static int test_nonfinite_dense_names_layer_and_op(void)
{
    const planted cases[] = {
        {"model.layers.1.self_attn.o_proj.weight", 5, NAN,
         "non-finite values: first at layer 1, op attn_out (NaN at position 0)", 0},
        {"model.layers.0.self_attn.q_proj.weight", 0, NAN, "first at layer 0, op q_proj (NaN at position 0)", 0},
        {"model.layers.0.self_attn.v_proj.weight", 64, NAN, "first at layer 0, op v_proj (NaN at position 0)", 0},
        {"model.layers.1.self_attn.k_norm.weight", 3, NAN, "first at layer 1, op k_norm (NaN at position 0)", 0},
        {"model.layers.0.post_attention_layernorm.weight", 9, NAN, "first at layer 0, op ffn_norm (NaN at", 0},
        {"model.layers.0.mlp.up_proj.weight", 1, NAN, "first at layer 0, op ffn_up (NaN at position 0)", 0},
        {"model.layers.1.mlp.down_proj.weight", 2, NAN, "first at layer 1, op ffn_down (NaN at position 0)", 0},
        /* token 254's row: the first row it is in is position 2 */
        {"model.embed_tokens.weight", 254 * 64 + 10, NAN, "first at the embeddings, op embed (NaN at position 2)", 2},
        {"model.norm.weight", 4, INFINITY, "first at the head, op final_norm (", 0},
        {"lm_head.weight", 7 * 64, NAN, "first at the head, op logits (NaN at position 0)", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const planted *c = &cases[i];
        char dir[64];
        CHECK_MSG(damaged("qwen3", c->tensor, c->elem, c->v, dir) == 0, "%s", c->tensor);
        for (int fast = 0; fast < 2; fast++) {
            ld_error err;
            ld_error_clear(&err);
            ld_status st = checked(dir, fast, 0, SEQ, T_SEQ, &err);
            int ok = st == LD_ERR_NUMERIC && strstr(err.msg, c->want) && err.offset == (uint64_t)c->pos;
            if (!ok) ld_test_remove_model_copy(dir);
            CHECK_MSG(ok, "%s on %s: status %d, offset %llu: %s", c->tensor, fast ? "cpu" : "ref", (int)st,
                      (unsigned long long)err.offset, err.msg);
        }
        ld_test_remove_model_copy(dir);
    }
    return 0;
}

/* +inf times a row's values: an infinity of either sign, or a NaN where the
 * value is 0; the message says which it met first */
static int test_nonfinite_infinity_named(void)
{
    char dir[64];
    CHECK(damaged("qwen3", "model.layers.0.mlp.gate_proj.weight", 0, INFINITY, dir) == 0);
    ld_error err;
    ld_status st = checked(dir, 0, 0, SEQ, T_SEQ, &err);
    ld_test_remove_model_copy(dir);
    CHECK_MSG(st == LD_ERR_NUMERIC && strstr(err.msg, "first at layer 0, op ffn_gate (") &&
                  strstr(err.msg, "inf at position 0)"),
              "%s", err.msg);
    return 0;
}

/* The plain eval looks at nothing: the damaged model's logits come back NaN
 * and the call succeeds (the callers look: replay.h). */
static int test_nonfinite_plain_eval_unchecked(void)
{
    char dir[64];
    CHECK(damaged("qwen3", "model.layers.1.self_attn.o_proj.weight", 5, NAN, dir) == 0);
    ld_lm *lm;
    ld_backend *be;
    ld_lm_session *s;
    ld_error err;
    float *logits = malloc((size_t)T_SEQ * 300 * sizeof *logits);
    ld_status st = logits ? open_session(dir, 1, 0, &lm, &be, &s, &err) : LD_ERR_NOMEM;
    if (st == LD_OK) st = ld_lm_eval(s, SEQ, T_SEQ, logits, NULL, &err);
    int all_nan = st == LD_OK;
    for (int i = 0; all_nan && i < T_SEQ * 300; i++) all_nan = isnan(logits[i]);
    if (logits) close_session(lm, be, s);
    free(logits);
    ld_test_remove_model_copy(dir);
    CHECK_MSG(st == LD_OK, "%s", err.msg);
    CHECK(all_nan);
    return 0;
}

/* Intact models: nothing to find, and the session has run the tokens. */
static int test_nonfinite_intact_models_pass(void)
{
    const char *models[] = {"qwen3", "llama3", "deepseek-v3"};
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char dir[256];
        snprintf(dir, sizeof dir, MDIR "%s", models[i]);
        for (int fast = 0; fast < 2; fast++) {
            ld_lm *lm;
            ld_backend *be;
            ld_lm_session *s;
            ld_error err;
            ld_status st = open_session(dir, fast, 0, &lm, &be, &s, &err);
            if (st == LD_OK) st = ld_lm_eval_checked(s, SEQ, T_SEQ, &err);
            int pos = st == LD_OK ? ld_lm_pos(s) : -1;
            close_session(lm, be, s);
            CHECK_MSG(st == LD_OK, "%s: %s", models[i], err.msg);
            CHECK_EQ_INT(pos, T_SEQ);
        }
    }
    char dir[256];
    snprintf(dir, sizeof dir, MDIR "qwen3");
    ld_error err;
    CHECK_MSG(checked(dir, 0, 2, SEQ, T_SEQ, &err) == LD_OK, "tp 2: %s", err.msg);
    return 0;
}

/* DeepSeek-V3 and a split session: the layer whose output first holds one
 * (the ops within a layer are not checked one by one there). */
static int test_nonfinite_layer_output_elsewhere(void)
{
    char dir[64];
    ld_error err;
    CHECK(damaged("deepseek-v3", "model.layers.1.self_attn.o_proj.weight", 5, NAN, dir) == 0);
    ld_status st = checked(dir, 0, 0, SEQ, T_SEQ, &err);
    ld_test_remove_model_copy(dir);
    CHECK_MSG(st == LD_ERR_NUMERIC && strstr(err.msg, "non-finite values: first at layer 1's output (NaN at position 0)"),
              "deepseek-v3: %s", err.msg);
    CHECK(damaged("qwen3", "model.layers.1.mlp.down_proj.weight", 2, NAN, dir) == 0);
    for (int fast = 0; fast < 2; fast++) {
        st = checked(dir, fast, 2, SEQ, T_SEQ, &err);
        int ok = st == LD_ERR_NUMERIC && strstr(err.msg, "first at layer 1's output (NaN at position 0)");
        if (!ok) ld_test_remove_model_copy(dir);
        CHECK_MSG(ok, "tp 2 on %s: %s", fast ? "cpu" : "ref", err.msg);
    }
    ld_test_remove_model_copy(dir);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_nonfinite_dense_names_layer_and_op),
    LD_CASE(test_nonfinite_infinity_named),
    LD_CASE(test_nonfinite_plain_eval_unchecked),
    LD_CASE(test_nonfinite_intact_models_pass),
    LD_CASE(test_nonfinite_layer_output_elsewhere),
};

LD_TEST_MAIN(cases)
