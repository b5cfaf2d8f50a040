/* test_ds_config.c - DeepSeek-V3 / V3.2's config.json read and refused field
 * by field, and the errors of binding the weights and of a session. */
#include "tests/support/ds_check.h"

/* ------------------------------------------------------------ config */

static const char *cfg_base =
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"vocab_size\": 300, \"hidden_size\": 64,"
    " \"intermediate_size\": 64, \"moe_intermediate_size\": 16, \"num_hidden_layers\": 3,"
    " \"num_attention_heads\": 4, \"q_lora_rank\": 32, \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16,"
    " \"qk_rope_head_dim\": 8, \"v_head_dim\": 16, \"n_routed_experts\": 8, \"n_shared_experts\": 1,"
    " \"num_experts_per_tok\": 2, \"n_group\": 4, \"topk_group\": 2, \"first_k_dense_replace\": 1%s}";

/* cfg_base with the fields of `extra` (", \"k\": v, ...") replacing or
 * added to its own */
static ld_status parse_cfg(const char *extra, ld_ds_config *c, ld_error *err)
{
    char buf[2048];
    snprintf(buf, sizeof buf, cfg_base, "");
    cJSON *base = cJSON_Parse(buf);
    snprintf(buf, sizeof buf, "{%s}", extra[0] ? extra + 1 : "");
    cJSON *over = cJSON_Parse(buf);
    if (!base || !over) {
        cJSON_Delete(base);
        cJSON_Delete(over);
        return LD_ERR_USAGE;
    }
    while (over->child) {
        cJSON *item = cJSON_DetachItemViaPointer(over, over->child);
        cJSON_DeleteItemFromObjectCaseSensitive(base, item->string);
        cJSON_AddItemToObject(base, item->string, item);
    }
    char *text = cJSON_PrintUnformatted(base);
    ld_error_clear(err);
    ld_status st = text ? ld_ds_config_parse(text, strlen(text), c, err) : LD_ERR_NOMEM;
    free(text);
    cJSON_Delete(base);
    cJSON_Delete(over);
    return st;
}

static int test_deepseek_config_fields(void)
{
    ld_ds_config c;
    ld_error err;
    CHECK_MSG(parse_cfg("", &c, &err) == LD_OK, "%s", err.msg);
    CHECK(c.q_lora_rank == 32 && c.kv_lora_rank == 32 && c.n_group == 4 && c.topk_group == 2 && !c.yarn);
    CHECK(c.rope_interleave && c.score_bias && !c.norm_topk_prob && c.routed_scaling == 1.0f);
    CHECK(c.rms_eps == 1e-6f && c.rope_theta == 10000.0 && !c.tie_embeddings);
    CHECK(fabs(ld_ds_softmax_scale(&c) - 1.0 / sqrt(24.0)) < 1e-7);
    /* transformers 4 style, V3's own numbers: softmax scale 0.135234 for
     * dn + dr = 192 (engine-notes 1.4); here dn + dr = 24 */
    CHECK(parse_cfg(", \"q_lora_rank\": null, \"rope_theta\": 10000, \"rope_scaling\": {\"type\": \"yarn\","
                    " \"factor\": 40, \"original_max_position_embeddings\": 4096, \"beta_fast\": 32,"
                    " \"beta_slow\": 1, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}",
                    &c, &err) == LD_OK);
    CHECK(c.q_lora_rank == 0 && c.yarn && c.rope_factor == 40 && c.rope_orig_max_pos == 4096);
    double m = 0.1 * log(40.0) + 1.0;
    CHECK(fabs(ld_ds_softmax_scale(&c) - m * m / sqrt(24.0)) < 1e-7 && ld_ds_rope_attn_factor(&c) == 1.0f);
    c.qk_nope = 128;
    c.qk_rope = 64;
    CHECK(fabs(ld_ds_softmax_scale(&c) - 0.135234) < 1e-6);
    /* V3's YaRN frequencies (d = 64, orig 4096, factor 40): i <= 10 kept,
     * i >= 23 divided by 40 (engine-notes 1.6) */
    float f[32];
    ld_ds_rope_inv_freq(&c, f);
    CHECK(f[10] == 1.0f / powf(10000.0f, 20.0f / 64.0f));
    CHECK(fabsf(f[23] - 1.0f / powf(10000.0f, 46.0f / 64.0f) / 40.0f) < 1e-9f);
    CHECK(f[16] < 1.0f / powf(10000.0f, 32.0f / 64.0f) && f[16] > 1.0f / powf(10000.0f, 32.0f / 64.0f) / 40.0f);
    /* mscale != mscale_all_dim: transformers' cos/sin factor */
    CHECK(parse_cfg(", \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 100, \"factor\": 4,"
                    " \"original_max_position_embeddings\": 32, \"mscale\": 0.5, \"mscale_all_dim\": 1.0}",
                    &c, &err) == LD_OK);
    CHECK(fabs(ld_ds_rope_attn_factor(&c) - (0.05 * log(4.0) + 1) / (0.1 * log(4.0) + 1)) < 1e-7);
    /* an mscale_all_dim whose square overflows a float (the fuzzer's find): refused, not an inf scale */
    CHECK(parse_cfg(", \"rope_parameters\": {\"rope_type\": \"yarn\", \"rope_theta\": 100, \"factor\": 4,"
                    " \"original_max_position_embeddings\": 32, \"mscale\": 1, \"mscale_all_dim\": 1e90}",
                    &c, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "'rope_parameters.mscale_all_dim' = 1e+90"), "%s", err.msg);
    /* model_type alone, V3's flags spelled out */
    const char *mt = "{\"model_type\": \"deepseek_v3\", \"vocab_size\": 3, \"hidden_size\": 8, \"intermediate_size\": 8,"
                     " \"moe_intermediate_size\": 4, \"num_hidden_layers\": 1, \"num_attention_heads\": 1,"
                     " \"kv_lora_rank\": 4, \"qk_nope_head_dim\": 2, \"qk_rope_head_dim\": 2, \"v_head_dim\": 2,"
                     " \"n_routed_experts\": 2, \"num_experts_per_tok\": 1, \"scoring_func\": \"sigmoid\","
                     " \"topk_method\": \"noaux_tc\", \"moe_layer_freq\": 1, \"num_nextn_predict_layers\": 1}";
    CHECK_MSG(ld_ds_config_parse(mt, strlen(mt), &c, &err) == LD_OK, "%s", err.msg);
    CHECK(ld_ds_config_detect(mt, strlen(mt)) == 1);
    const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"]}";
    CHECK(ld_ds_config_detect(llama, strlen(llama)) == 0 && ld_ds_config_detect("{", 1) == 0);
    /* the generated checkpoints' config.json */
    CHECK(ld_ds_config_load(MDIR "deepseek-v3/config.json", &c, &err) == LD_OK);
    CHECK(c.yarn && c.rope_factor == 4.0 && c.mscale == 1.0 && c.mscale_all_dim == 1.0 && c.norm_topk_prob &&
          c.routed_scaling == 2.5f && c.first_k_dense == 1 && !c.fp8);
    /* V3's FP8 quantization_config (V3.1's scale_fmt too) */
    CHECK_MSG(parse_cfg(", \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\","
                        " \"quant_method\": \"fp8\", \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}",
                        &c, &err) == LD_OK,
              "%s", err.msg);
    CHECK(c.fp8 && c.fp8_block[0] == 128 && c.fp8_block[1] == 128);
    CHECK(ld_ds_config_load(MDIR "deepseek-v3-fp8/config.json", &c, &err) == LD_OK);
    CHECK(c.fp8 && c.fp8_block[0] == 16 && c.fp8_block[1] == 16);
    /* a full V3/R1 config.json (transformers 4 style, the values of
     * engine-notes 1.1, the fields neither implementation reads included) */
    const char *v3 =
        "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
        " \"auto_map\": {\"AutoConfig\": \"configuration_deepseek.DeepseekV3Config\"}, \"aux_loss_alpha\": 0.001,"
        " \"bos_token_id\": 0, \"eos_token_id\": 1, \"ep_size\": 1, \"first_k_dense_replace\": 3,"
        " \"hidden_act\": \"silu\", \"hidden_size\": 7168, \"initializer_range\": 0.02, \"intermediate_size\": 18432,"
        " \"kv_lora_rank\": 512, \"max_position_embeddings\": 163840, \"model_type\": \"deepseek_v3\","
        " \"moe_intermediate_size\": 2048, \"moe_layer_freq\": 1, \"n_group\": 8, \"n_routed_experts\": 256,"
        " \"n_shared_experts\": 1, \"norm_topk_prob\": true, \"num_attention_heads\": 128,"
        " \"num_experts_per_tok\": 8, \"num_hidden_layers\": 61, \"num_key_value_heads\": 128,"
        " \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 1536, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64,"
        " \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", \"quant_method\": \"fp8\","
        " \"weight_block_size\": [128, 128]}, \"rms_norm_eps\": 1e-06, \"rope_scaling\": {\"beta_fast\": 32,"
        " \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, \"mscale_all_dim\": 1.0,"
        " \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}, \"rope_theta\": 10000,"
        " \"routed_scaling_factor\": 2.5, \"scoring_func\": \"sigmoid\", \"seq_aux\": true,"
        " \"tie_word_embeddings\": false, \"topk_group\": 4, \"topk_method\": \"noaux_tc\","
        " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.33.1\", \"use_cache\": true,"
        " \"v_head_dim\": 128, \"vocab_size\": 129280}";
    CHECK_MSG(ld_ds_config_parse(v3, strlen(v3), &c, &err) == LD_OK, "%s", err.msg);
    CHECK(c.n_layers == 61 && c.first_k_dense == 3 && c.n_routed == 256 && c.top_k == 8 && c.topk_group == 4);
    CHECK(c.fp8 && c.fp8_block[0] == 128 && c.yarn && c.rope_factor == 40 && c.rms_eps == 1e-6f);
    CHECK(fabs(ld_ds_softmax_scale(&c) - 0.135234) < 1e-6 && ld_ds_rope_attn_factor(&c) == 1.0f);
    CHECK(!c.v32);
    /* V3.2: the generated config.json (transformers' fields: mlp_layer_types,
     * layer_types, mlp_bias), transformers' defaults, model_type alone */
    CHECK_MSG(ld_ds_config_load(MDIR "deepseek-v32/config.json", &c, &err) == LD_OK, "%s", err.msg);
    CHECK(c.v32 && c.index_n_heads == 4 && c.index_head_dim == 16 && c.index_topk == 4 && c.q_lora_rank == 24);
    CHECK(c.first_k_dense == 1 && c.n_layers == 3 && c.rope_interleave && c.yarn);
    CHECK_MSG(parse_cfg(", \"architectures\": [\"DeepseekV32ForCausalLM\"]", &c, &err) == LD_OK, "%s", err.msg);
    CHECK(c.v32 && c.index_n_heads == 64 && c.index_head_dim == 128 && c.index_topk == 2048);
    CHECK_MSG(parse_cfg(", \"architectures\": [\"DeepseekV32ForCausalLM\"], \"index_topk\": 100000000,"
                        " \"mlp_layer_types\": [\"dense\", \"sparse\", \"sparse\"], \"mlp_bias\": false,"
                        " \"layer_types\": [\"indexed_attention\", \"indexed_attention\", \"indexed_attention\"]",
                        &c, &err) == LD_OK,
              "%s", err.msg);
    CHECK(c.index_topk == 100000000);
    const char *v32 = "{\"model_type\": \"deepseek_v32\"}";
    CHECK(ld_ds_config_detect(v32, strlen(v32)) == 1);
    const char *v32a = "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"model_type\": \"x\"}";
    CHECK(ld_ds_config_detect(v32a, strlen(v32a)) == 1);
    const char *v4 = "{\"model_type\": \"deepseek_v4\"}";
    CHECK(ld_ds_config_detect(v4, strlen(v4)) == 0);
    return 0;
}

static int expect_cfg_error(const char *extra, ld_status code, const char *needle)
{
    ld_ds_config c;
    ld_error err;
    ld_status st = parse_cfg(extra, &c, &err);
    CHECK_MSG(st == code, "%s: status %d, want %d (%s)", extra, (int)st, (int)code, err.msg);
    CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: '%s' lacks '%s'", extra, err.msg, needle);
    return 0;
}

static int test_deepseek_config_errors(void)
{
    static const struct {
        const char *extra;
        ld_status code;
        const char *needle;
    } cases[] = {
        {", \"scoring_func\": \"softmax\"", LD_ERR_UNSUPPORTED, "'scoring_func' = 'softmax'"},
        {", \"topk_method\": \"greedy\"", LD_ERR_UNSUPPORTED, "'topk_method'"},
        {", \"topk_group\": 5", LD_ERR_SYNTAX, "'topk_group' (5) exceeds 'n_group' (4)"},
        {", \"n_group\": 3", LD_ERR_SYNTAX, "'n_routed_experts' (8) is not a multiple of 'n_group' (3)"},
        {", \"n_group\": 8, \"topk_group\": 2", LD_ERR_SYNTAX, "fewer than 2 experts per group"},
        {", \"num_experts_per_tok\": 5", LD_ERR_SYNTAX, "'num_experts_per_tok' (5)"},
        {", \"num_key_value_heads\": 2", LD_ERR_SYNTAX, "'num_key_value_heads'"},
        {", \"qk_rope_head_dim\": 7", LD_ERR_SYNTAX, "'qk_rope_head_dim' (7) is not even"},
        {", \"head_dim\": 16", LD_ERR_SYNTAX, "'head_dim' (16) is not qk_rope_head_dim (8)"},
        {", \"qk_head_dim\": 16", LD_ERR_SYNTAX, "'qk_head_dim'"},
        {", \"hidden_act\": \"gelu\"", LD_ERR_UNSUPPORTED, "'hidden_act' = 'gelu'"},
        {", \"quantization_config\": {\"quant_method\": \"fp8\"}", LD_ERR_SYNTAX,
         "'quantization_config.weight_block_size' is not a list of 2 integers"},
        {", \"quantization_config\": {\"quant_method\": \"awq\", \"weight_block_size\": [128, 128]}", LD_ERR_UNSUPPORTED,
         "'quantization_config.quant_method' = 'awq'"},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"activation_scheme\": \"static\","
         " \"weight_block_size\": [128, 128]}",
         LD_ERR_UNSUPPORTED, "'quantization_config.activation_scheme' = 'static'"},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 0]}", LD_ERR_SYNTAX,
         "'quantization_config.weight_block_size'"},
        {", \"quantization_config\": {\"quant_method\": \"fp8\", \"ignored_layers\": [],"
         " \"weight_block_size\": [128, 128]}",
         LD_ERR_UNSUPPORTED, "'quantization_config.ignored_layers'"},
        {", \"quantization_config\": {\"fmt\": \"e4m3\"}", LD_ERR_SYNTAX, "'quantization_config.quant_method' is missing"},
        {", \"moe_layer_freq\": 2", LD_ERR_SYNTAX, "'moe_layer_freq'"},
        {", \"routed_scaling_factor\": -1", LD_ERR_SYNTAX, "'routed_scaling_factor'"},
        {", \"norm_topk_prob\": 1", LD_ERR_SYNTAX, "'norm_topk_prob' is not a boolean"},
        {", \"kv_lora_rank\": 0", LD_ERR_SYNTAX, "'kv_lora_rank'"},
        {", \"n_routed_experts\": 2000", LD_ERR_SYNTAX, "'n_routed_experts'"},
        {", \"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 4}", LD_ERR_UNSUPPORTED,
         "'rope_scaling.rope_type' = 'dynamic'"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4}", LD_ERR_SYNTAX,
         "'rope_parameters.original_max_position_embeddings' is missing"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 0, \"original_max_position_embeddings\": 8}",
         LD_ERR_SYNTAX, "'rope_parameters.factor'"},
        {", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": 8,"
         " \"mscale\": \"x\"}",
         LD_ERR_SYNTAX, "'rope_parameters.mscale'"},
        /* DeepSeek-V3.2 */
#define V32 ", \"architectures\": [\"DeepseekV32ForCausalLM\"]"
        {V32 ", \"index_topk\": 0", LD_ERR_SYNTAX, "'index_topk' is not an integer in [1, "},
        {V32 ", \"index_topk\": -5", LD_ERR_SYNTAX, "'index_topk'"},
        {V32 ", \"index_topk\": 2.5", LD_ERR_SYNTAX, "'index_topk'"},
        {V32 ", \"index_n_heads\": 0", LD_ERR_SYNTAX, "'index_n_heads'"},
        {V32 ", \"index_head_dim\": \"x\"", LD_ERR_SYNTAX, "'index_head_dim'"},
        {V32 ", \"index_head_dim\": 4", LD_ERR_SYNTAX, "'index_head_dim' (4) is smaller than qk_rope_head_dim (8)"},
        {V32 ", \"q_lora_rank\": null", LD_ERR_SYNTAX, "'q_lora_rank' is missing or 0"},
        {V32 ", \"rope_interleave\": false", LD_ERR_UNSUPPORTED, "'rope_interleave' = false"},
        {V32 ", \"mlp_bias\": true", LD_ERR_UNSUPPORTED, "'mlp_bias' = true"},
        {V32 ", \"mlp_layer_types\": [\"dense\", \"dense\", \"sparse\"]", LD_ERR_UNSUPPORTED,
         "'mlp_layer_types[1]' = 'dense' is not supported (sparse)"},
        {V32 ", \"mlp_layer_types\": [\"dense\"]", LD_ERR_SYNTAX, "'mlp_layer_types' is not a list of 3 strings"},
        {V32 ", \"layer_types\": [\"indexed_attention\", \"full_attention\", \"indexed_attention\"]",
         LD_ERR_UNSUPPORTED, "'layer_types[1]' = 'full_attention'"},
#undef V32
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (expect_cfg_error(cases[i].extra, cases[i].code, cases[i].needle)) return 1;
    ld_ds_config c;
    ld_error err;
    const char *missing = "{\"model_type\": \"deepseek_v3\", \"vocab_size\": 3}";
    CHECK(ld_ds_config_parse(missing, strlen(missing), &c, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "'hidden_size' is missing"), "%s", err.msg);
    const char *llama = "{\"architectures\": [\"LlamaForCausalLM\"]}";
    CHECK(ld_ds_config_parse(llama, strlen(llama), &c, &err) == LD_ERR_UNSUPPORTED);
    CHECK(ld_ds_config_parse("[1]", 3, &c, &err) == LD_ERR_SYNTAX);
    CHECK(ld_ds_config_parse("{", 1, &c, &err) == LD_ERR_SYNTAX);
    CHECK(ld_ds_config_load(MDIR "nonexistent/config.json", &c, &err) == LD_ERR_IO);
    return 0;
}

/* ------------------------------------------------------------ binding and session errors */

static int expect_bind_error(const ld_ds_model *m, void (*change)(ld_ds_config *), const char *needle)
{
    ld_ds_config c = m->cfg;
    change(&c);
    ld_ds_model *b = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_ds_model_bind(&c, m->st, &b, &err) == LD_ERR_MISMATCH && !b);
    CHECK_MSG(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
    return 0;
}

static void want_qlora(ld_ds_config *c) { c->q_lora_rank = 16; }
static void want_no_qlora(ld_ds_config *c) { c->q_lora_rank = 0; }
static void want_more_experts(ld_ds_config *c) { c->n_routed = 8; c->n_group = 2; }
static void want_wider_shared(ld_ds_config *c) { c->n_shared = 3; }
static void want_untied(ld_ds_config *c) { c->tie_embeddings = 0; }
static void want_smaller_latent(ld_ds_config *c) { c->kv_lora_rank = 8; }
static void want_more_dense(ld_ds_config *c) { c->first_k_dense = 2; }
static void want_wider_index(ld_ds_config *c) { c->index_head_dim = 32; }
static void want_more_index_heads(ld_ds_config *c) { c->index_n_heads = 5; }
static void want_indexer(ld_ds_config *c)
{
    c->v32 = 1;
    c->index_n_heads = 4;
    c->index_head_dim = 16;
    c->index_topk = 4;
}

static int test_deepseek_bind_errors(void)
{
    ld_ds_model *m = NULL, *v3 = NULL;
    ld_error err8;
    if (open_model("deepseek-v3-lite", &m) || open_model("deepseek-v3", &v3)) return 1;
    if (expect_bind_error(m, want_qlora, "'model.layers.0.self_attn.q_a_proj.weight' [16, 32] is missing")) return 1;
    if (expect_bind_error(v3, want_no_qlora, "'model.layers.0.self_attn.q_proj.weight' [96, 64] is missing"))
        return 1;
    if (expect_bind_error(m, want_more_experts, "'model.layers.0.mlp.gate.weight' has shape [6, 32], expected [8, 32]"))
        return 1;
    if (expect_bind_error(m, want_wider_shared,
                          "'model.layers.0.mlp.shared_experts.gate_proj.weight' has shape [16, 32], expected [24, 32]"))
        return 1;
    if (expect_bind_error(m, want_untied, "'lm_head.weight' [300, 32] is missing")) return 1;
    if (expect_bind_error(m, want_smaller_latent, "'model.layers.0.self_attn.kv_a_proj_with_mqa.weight' has shape [20, 32], expected [12, 32]"))
        return 1;
    if (expect_bind_error(v3, want_more_dense, "'model.layers.1.mlp.gate_proj.weight' [64, 64] is missing")) return 1;
    /* V3.2: the indexer's tensors by name and shape */
    ld_ds_model *v32 = NULL;
    if (open_model("deepseek-v32", &v32)) return 1;
    if (expect_bind_error(v32, want_wider_index,
                          "'model.layers.0.self_attn.indexer.wq_b.weight' has shape [64, 24], expected [128, 24]"))
        return 1;
    if (expect_bind_error(v32, want_more_index_heads,
                          "'model.layers.0.self_attn.indexer.wq_b.weight' has shape [64, 24], expected [80, 24]"))
        return 1;
    if (expect_bind_error(v3, want_indexer, "'model.layers.0.self_attn.indexer.wq_b.weight' [64, 32] is missing"))
        return 1;
    ld_ds_model_close(v32);
    /* FP8: scales of another block size; FP8 without a quantization_config */
    ld_ds_model *f8 = NULL, *b8 = NULL;
    if (open_model("deepseek-v3-fp8", &f8)) return 1;
    ld_ds_config c8 = f8->cfg;
    c8.fp8_block[0] = 8;
    ld_error_clear(&err8);
    CHECK(ld_ds_model_bind(&c8, f8->st, &b8, &err8) == LD_ERR_MISMATCH && !b8);
    CHECK_MSG(strstr(err8.msg, "'model.layers.0.self_attn.q_a_proj.weight_scale_inv' has shape [1, 2], expected [2, 2]"),
              "%s", err8.msg);
    c8 = f8->cfg;
    c8.fp8 = 0;
    CHECK(ld_ds_model_bind(&c8, f8->st, &b8, &err8) == LD_ERR_UNSUPPORTED && !b8);
    CHECK_MSG(strstr(err8.msg, "'model.layers.0.self_attn.q_a_proj.weight' has dtype F8_E4M3"), "%s", err8.msg);
    ld_ds_model_close(f8);
    /* sessions: bad sizes, tokens outside the vocabulary, too many tokens */
    ld_backend *be = NULL;
    ld_ds_session *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_backend_ref_create(1, &be, &err) == LD_OK);
    CHECK(ld_ds_session_create(m, be, m->cfg.max_pos + 1, 4, LD_DS_ATTN_NAIVE, &s, &err) == LD_ERR_USAGE && !s);
    CHECK(ld_ds_session_create(m, be, 8, 4, (ld_ds_attn)7, &s, &err) == LD_ERR_USAGE && !s);
    CHECK(ld_ds_session_create(m, be, 8, 4, LD_DS_ATTN_ABSORBED, &s, &err) == LD_OK);
    int32_t toks[9] = {1, 2, 300, 4, 5, 6, 7, 8, 9};
    CHECK(ld_ds_session_eval(s, toks, 3, NULL, NULL, NULL, &err) == LD_ERR_USAGE);
    CHECK_MSG(strstr(err.msg, "token id 300"), "%s", err.msg);
    toks[2] = 3;
    CHECK(ld_ds_session_eval(s, toks, 9, NULL, NULL, NULL, &err) == LD_ERR_LIMIT);
    CHECK(ld_ds_session_eval(s, toks, 8, NULL, NULL, NULL, &err) == LD_OK);
    CHECK(ld_ds_session_eval(s, toks, 1, NULL, NULL, NULL, &err) == LD_ERR_LIMIT);
    ld_ds_session_reset(s);
    CHECK(ld_ds_session_pos(s) == 0 && ld_ds_session_eval(s, toks, 1, NULL, NULL, NULL, &err) == LD_OK);
    ld_ds_session_destroy(s);
    ld_backend_destroy(be);
    ld_ds_model_close(m);
    ld_ds_model_close(v3);
    /* a directory without a model; a dense model's directory */
    ld_ds_model *b = NULL;
    CHECK(ld_ds_model_open(MDIR "nonexistent", &b, &err) == LD_ERR_IO && !b);
    CHECK(ld_ds_model_open(MDIR "llama3", &b, &err) == LD_ERR_UNSUPPORTED && !b);
    return 0;
}

static const ld_test_case tests[] = {
    LD_CASE(test_deepseek_config_fields), LD_CASE(test_deepseek_config_errors),
    LD_CASE(test_deepseek_bind_errors),
};

LD_TEST_MAIN(tests)
