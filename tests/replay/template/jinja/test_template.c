/* test_template.c - differential test of the template interpreter against
 * the goldens of ../shared/templates/goldens/ (rendered by Python jinja2
 * 3.1.6 set up as transformers sets it up).  Pairs in `must_match` must be
 * byte-identical (or fail like Python for ERROR entries); the others print
 * "not yet supported: ..." and count as skipped. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/replay/tokenizer/golden_tokens.h"
#include "tests/support/ld_test.h"
#include "replay/template/jinja/tpl.h"

/* (template, case) pairs known to match; keep sorted by template */
static const char *const must_match[] = {
    "GLM-4.6/basic",
    "GLM-4.6/reasoning_history",
    "GLM-4.6/think_in_content",
    "GLM-4.6/tool_call_args_str",
    "GLM-4.6/tool_call_args_obj",
    "GLM-4.7-Flash/basic",
    "GLM-4.7-Flash/reasoning_history",
    "GLM-4.7-Flash/think_in_content",
    "GLM-4.7-Flash/tool_call_args_str",
    "GLM-4.7-Flash/tool_call_args_obj",
    "Kimi-K2-Thinking/basic",
    "Kimi-K2-Thinking/reasoning_history",
    "Kimi-K2-Thinking/think_in_content",
    "Kimi-K2-Thinking/tool_call_args_str",
    "Kimi-K2-Thinking/tool_call_args_obj",
    "Mistral-Small-3.2-24B-Instruct-2506/basic",
    "Mistral-Small-3.2-24B-Instruct-2506/reasoning_history",
    "Mistral-Small-3.2-24B-Instruct-2506/think_in_content",
    "Mistral-Small-3.2-24B-Instruct-2506/tool_call_args_str",
    "Mistral-Small-3.2-24B-Instruct-2506/tool_call_args_obj",
    "Qwen-Qwen2.5-7B-Instruct/basic",
    "Qwen-Qwen2.5-7B-Instruct/reasoning_history",
    "Qwen-Qwen2.5-7B-Instruct/think_in_content",
    "Qwen-Qwen2.5-7B-Instruct/tool_call_args_str",
    "Qwen-Qwen2.5-7B-Instruct/tool_call_args_obj",
    "Qwen-Qwen3-0.6B/basic",
    "Qwen-Qwen3-0.6B/reasoning_history",
    "Qwen-Qwen3-0.6B/think_in_content",
    "Qwen-Qwen3-0.6B/tool_call_args_str",
    "Qwen-Qwen3-0.6B/tool_call_args_obj",
    "Qwen3-Coder/basic",
    "Qwen3-Coder/reasoning_history",
    "Qwen3-Coder/think_in_content",
    "Qwen3-Coder/tool_call_args_str",
    "Qwen3-Coder/tool_call_args_obj",
    "Qwen3.5-4B/basic",
    "Qwen3.5-4B/reasoning_history",
    "Qwen3.5-4B/think_in_content",
    "Qwen3.5-4B/tool_call_args_str",
    "Qwen3.5-4B/tool_call_args_obj",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/basic",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/reasoning_history",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/think_in_content",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/tool_call_args_str",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/tool_call_args_obj",
    "deepseek-ai-DeepSeek-V3.1/basic",
    "deepseek-ai-DeepSeek-V3.1/reasoning_history",
    "deepseek-ai-DeepSeek-V3.1/think_in_content",
    "deepseek-ai-DeepSeek-V3.1/tool_call_args_str",
    "deepseek-ai-DeepSeek-V3.1/tool_call_args_obj",
    "deepseek-ai-DeepSeek-V3.2/basic",
    "deepseek-ai-DeepSeek-V3.2/reasoning_history",
    "deepseek-ai-DeepSeek-V3.2/think_in_content",
    "deepseek-ai-DeepSeek-V3.2/tool_call_args_str",
    "deepseek-ai-DeepSeek-V3.2/tool_call_args_obj",
    "google-gemma-2-2b-it/basic",
    "google-gemma-2-2b-it/reasoning_history",
    "google-gemma-2-2b-it/think_in_content",
    "google-gemma-2-2b-it/tool_call_args_str",
    "google-gemma-2-2b-it/tool_call_args_obj",
    "google-gemma-4-31B-it/basic",
    "google-gemma-4-31B-it/reasoning_history",
    "google-gemma-4-31B-it/think_in_content",
    "google-gemma-4-31B-it/tool_call_args_str",
    "google-gemma-4-31B-it/tool_call_args_obj",
    "llama-cpp-deepseek-r1/basic",
    "llama-cpp-deepseek-r1/reasoning_history",
    "llama-cpp-deepseek-r1/think_in_content",
    "llama-cpp-deepseek-r1/tool_call_args_str",
    "llama-cpp-deepseek-r1/tool_call_args_obj",
    "meta-llama-Llama-3.1-8B-Instruct/basic",
    "meta-llama-Llama-3.1-8B-Instruct/reasoning_history",
    "meta-llama-Llama-3.1-8B-Instruct/think_in_content",
    "meta-llama-Llama-3.1-8B-Instruct/tool_call_args_str",
    "meta-llama-Llama-3.1-8B-Instruct/tool_call_args_obj",
    "meta-llama-Llama-3.2-3B-Instruct/basic",
    "meta-llama-Llama-3.2-3B-Instruct/reasoning_history",
    "meta-llama-Llama-3.2-3B-Instruct/think_in_content",
    "meta-llama-Llama-3.2-3B-Instruct/tool_call_args_str",
    "meta-llama-Llama-3.2-3B-Instruct/tool_call_args_obj",
    "microsoft-Phi-3.5-mini-instruct/basic",
    "microsoft-Phi-3.5-mini-instruct/reasoning_history",
    "microsoft-Phi-3.5-mini-instruct/think_in_content",
    "microsoft-Phi-3.5-mini-instruct/tool_call_args_str",
    "microsoft-Phi-3.5-mini-instruct/tool_call_args_obj",
    "mistralai-Ministral-3-14B-Reasoning-2512/basic",
    "mistralai-Ministral-3-14B-Reasoning-2512/reasoning_history",
    "mistralai-Ministral-3-14B-Reasoning-2512/think_in_content",
    "mistralai-Ministral-3-14B-Reasoning-2512/tool_call_args_str",
    "mistralai-Ministral-3-14B-Reasoning-2512/tool_call_args_obj",
    "mistralai-Mistral-Nemo-Instruct-2407/basic",
    "mistralai-Mistral-Nemo-Instruct-2407/reasoning_history",
    "mistralai-Mistral-Nemo-Instruct-2407/think_in_content",
    "mistralai-Mistral-Nemo-Instruct-2407/tool_call_args_str",
    "mistralai-Mistral-Nemo-Instruct-2407/tool_call_args_obj",
    "moonshotai-Kimi-K2-Thinking/basic",
    "moonshotai-Kimi-K2-Thinking/reasoning_history",
    "moonshotai-Kimi-K2-Thinking/think_in_content",
    "moonshotai-Kimi-K2-Thinking/tool_call_args_str",
    "moonshotai-Kimi-K2-Thinking/tool_call_args_obj",
    "moonshotai-Kimi-K2/basic",
    "moonshotai-Kimi-K2/reasoning_history",
    "moonshotai-Kimi-K2/think_in_content",
    "moonshotai-Kimi-K2/tool_call_args_str",
    "moonshotai-Kimi-K2/tool_call_args_obj",
    "openai-gpt-oss-120b/basic",
    "openai-gpt-oss-120b/reasoning_history",
    "openai-gpt-oss-120b/think_in_content",
    "openai-gpt-oss-120b/tool_call_args_str",
    "openai-gpt-oss-120b/tool_call_args_obj",
    "orig__Qwen3-Coder/basic",
    "orig__Qwen3-Coder/reasoning_history",
    "orig__Qwen3-Coder/think_in_content",
    "orig__Qwen3-Coder/tool_call_args_str",
    "orig__Qwen3-Coder/tool_call_args_obj",
    "orig__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/basic",
    "orig__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/reasoning_history",
    "orig__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/think_in_content",
    "orig__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/tool_call_args_str",
    "orig__deepseek-ai-DeepSeek-R1-Distill-Qwen-32B/tool_call_args_obj",
    "orig__deepseek-ai-DeepSeek-V3.1/basic",
    "orig__deepseek-ai-DeepSeek-V3.1/reasoning_history",
    "orig__deepseek-ai-DeepSeek-V3.1/think_in_content",
    "orig__deepseek-ai-DeepSeek-V3.1/tool_call_args_str",
    "orig__deepseek-ai-DeepSeek-V3.1/tool_call_args_obj",
    NULL};

static bool listed(const char *tpl, const char *c)
{
    char key[256];
    snprintf(key, sizeof key, "%s/%s", tpl, c);
    for (int i = 0; must_match[i]; i++) if (strcmp(must_match[i], key) == 0) return true;
    return false;
}

static ld_tpl_value *tok_value(ld_arena *a, const char *s)
{
    return s ? ld_tpl_value_str(a, s, strlen(s)) : ld_tpl_value_none(a);
}

/* Renders one pair; returns 0 = match, 1 = differs (why in `why`). */
static int run_pair(const char *dir, const char *name, const char *cname, const cJSON *cse, const char *result,
                    char *why, size_t why_len)
{
    char path[1024];
    bool orig = strncmp(name, "orig__", 6) == 0;
    snprintf(path, sizeof path, "%s/templates/%s%s.jinja", dir, orig ? "orig/" : "", orig ? name + 6 : name);
    char *src = ld_test_slurp(path);
    if (!src) return snprintf(why, why_len, "cannot read %.200s", path), 1;
    ld_tpl *t = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tpl_compile(src, strlen(src), &t, &err) != LD_OK) {
        free(src);
        return snprintf(why, why_len, "compile: line %llu: %.200s", (unsigned long long)err.line, err.msg), 1;
    }
    free(src);
    ld_arena a;
    ld_arena_init(&a, 0);
    ld_tpl_value *ctx = ld_tpl_value_dict(&a);
    const char *bos, *eos;
    ld_golden_tokens(name, &bos, &eos);
    for (const cJSON *c = cse->child; c; c = c->next) ld_tpl_dict_set(&a, ctx, c->string, ld_tpl_value_from_json(&a, c));
    ld_tpl_dict_set(&a, ctx, "bos_token", tok_value(&a, bos));
    ld_tpl_dict_set(&a, ctx, "eos_token", tok_value(&a, eos));
    char *out = NULL;
    size_t out_len = 0;
    ld_status s = ld_tpl_render(t, ctx, NULL, &out, &out_len, &err);
    int rc = 0;
    if (strncmp(result, "ERROR", 5) == 0) {
        const char *m = strchr(result, ':');
        if (s == LD_OK) rc = 1, snprintf(why, why_len, "rendered, but Python raised %s", result);
        else if (strstr(result, "TemplateError:") && m) {
            char want[300];
            snprintf(want, sizeof want, "'%s'", m + 2);
            if (!strstr(err.msg, want)) rc = 1, snprintf(why, why_len, "error '%.200s' instead of %.200s", err.msg, want);
        }
    } else if (s != LD_OK) {
        rc = 1;
        snprintf(why, why_len, "error: line %llu: %.200s", (unsigned long long)err.line, err.msg);
    } else {
        snprintf(path, sizeof path, "%s/templates/goldens/%s/%s.txt", dir, name, cname);
        FILE *f = fopen(path, "rb");
        char *want = NULL;
        size_t wn = 0;
        if (f) {
            fseek(f, 0, SEEK_END);
            wn = (size_t)ftell(f);
            fseek(f, 0, SEEK_SET);
            want = malloc(wn + 1);
            if (want && fread(want, 1, wn, f) != wn) wn = 0;
            fclose(f);
        }
        if (!want) rc = 1, snprintf(why, why_len, "cannot read %.200s", path);
        else if (wn != out_len || memcmp(want, out, wn) != 0) {
            size_t i = 0;
            while (i < wn && i < out_len && want[i] == out[i]) i++;
            rc = 1;
            snprintf(why, why_len, "first difference at byte %zu: want \"%.30s\" got \"%.30s\"", i,
                     i < wn ? want + i : "<end>", i < out_len ? out + i : "<end>");
            for (char *p = why; *p; p++) if (*p == '\n') *p = '|';
        }
        free(want);
    }
    free(out);
    ld_arena_release(&a);
    ld_tpl_free(t);
    return rc;
}

static int test_template_goldens(void)
{
    const char *dir = LD_SHARED_DIR;
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/templates/goldens/SUMMARY.json", dir);
    if (stat(path, &st) != 0) SKIP("%s absent", path);
    char *js = ld_test_slurp(path);
    cJSON *sum = js ? cJSON_Parse(js) : NULL;
    free(js);
    CHECK(sum);
    const cJSON *cases = cJSON_GetObjectItem(sum, "cases"), *results = cJSON_GetObjectItem(sum, "results");
    int total = 0, ok = 0, failed = 0, skipped = 0, ok_goldens = 0;
    for (const cJSON *tr = results ? results->child : NULL; tr; tr = tr->next) {
        for (const cJSON *cr = tr->child; cr; cr = cr->next) {
            const cJSON *cse = cJSON_GetObjectItem(cases, cr->string);
            char why[512] = "";
            total++;
            int rc = cse ? run_pair(dir, tr->string, cr->string, cse, cr->valuestring, why, sizeof why) : 1;
            if (rc == 0) {
                ok++;
                if (strncmp(cr->valuestring, "ok", 2) == 0) ok_goldens++;
                if (!listed(tr->string, cr->string)) printf("  newly passing: \"%s/%s\",\n", tr->string, cr->string);
            } else if (listed(tr->string, cr->string)) {
                failed++;
                printf("  REGRESSION: %s/%s: %s\n", tr->string, cr->string, why);
            } else {
                skipped++;
                printf("  not yet supported: %s/%s: %s\n", tr->string, cr->string, why);
            }
        }
    }
    cJSON_Delete(sum);
    printf("  %d of 111 goldens byte-identical; %d of %d pairs as Python (incl. errors); %d not yet supported\n",
           ok_goldens, ok, total, skipped);
    CHECK(failed == 0);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_template_goldens),
};

LD_TEST_MAIN(cases)
