/* test_tpl_source.c - loading chat templates and special tokens from .jinja
 * files, tokenizer_config.json variants and model directories.  The inputs
 * are written into LD_BUILD_DIR at test time; the expectations are those
 * literal inputs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ld_test.h"
#include "tpl_source.h"

#define DIR LD_BUILD_DIR "/tpl_source_test"

/* Writes `text` to DIR/sub/name (creating DIR and DIR/sub); returns the path
 * in a static buffer, or NULL. */
static const char *put(const char *sub, const char *name, const char *text)
{
    static char path[1024];
    mkdir(DIR, 0777);
    snprintf(path, sizeof path, "%s/%s", DIR, sub);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", DIR, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fputs(text, f);
    return fclose(f) == 0 ? path : NULL;
}

/* Renders the source's template with no variables. */
static char *render(const ld_tpl_source *s)
{
    char *out = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tpl_render(s->tpl, NULL, NULL, &out, &n, &err) != LD_OK) return NULL;
    return out;
}

static int same(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

static int test_tpl_source_jinja_file(void)
{
    const char *p = put("jinja", "t.jinja", "A{{ 1 + 1 }}\n");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    char *out = render(s);
    CHECK_MSG(same(out, "A2"), "%s", out ? out : "(error)");
    CHECK(s->bos_token == NULL && s->eos_token == NULL);
    CHECK(same(s->template_path, p));
    free(out);
    ld_tpl_source_free(s);
    return 0;
}

static int test_tpl_source_string_template(void)
{
    const char *p = put("string", "tokenizer_config.json",
                        "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
                        "\"chat_template\": \"X{{ 'y' }}\"}");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    char *out = render(s);
    CHECK(same(out, "Xy"));
    CHECK(same(s->bos_token, "<s>"));
    CHECK(same(s->eos_token, "</s>"));
    free(out);
    ld_tpl_source_free(s);
    /* a name other than default of a single template is refused */
    CHECK(ld_tpl_source_load(p, "tool_use", &s, &err) == LD_ERR_MISMATCH);
    CHECK(s == NULL && strstr(err.msg, "tool_use"));
    return 0;
}

static int test_tpl_source_named_list(void)
{
    const char *p = put("list", "tokenizer_config.json",
                        "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, "
                        "{\"name\": \"tool_use\", \"template\": \"T\"}], \"eos_token\": \"E\"}");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    char *out = render(s);
    CHECK(same(out, "D"));
    free(out);
    ld_tpl_source_free(s);
    CHECK(ld_tpl_source_load(p, "tool_use", &s, &err) == LD_OK);
    out = render(s);
    CHECK(same(out, "T"));
    CHECK(same(s->eos_token, "E") && s->bos_token == NULL);
    free(out);
    ld_tpl_source_free(s);
    CHECK(ld_tpl_source_load(p, "rag", &s, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'rag'") && strstr(err.msg, "'tool_use'"), "%s", err.msg);
    /* a list without a "default" entry, the default asked for */
    p = put("list-nodefault", "tokenizer_config.json",
            "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}]}");
    CHECK(p);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'default'"), "%s", err.msg);
    return 0;
}

static int test_tpl_source_added_token_dicts(void)
{
    const char *p = put("added", "tokenizer_config.json",
                        "{\"chat_template\": \"c\", "
                        "\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<|begin|>\", "
                        "\"lstrip\": false, \"normalized\": true}, "
                        "\"eos_token\": {\"content\": \"<|end|>\"}}");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(same(s->bos_token, "<|begin|>"));
    CHECK(same(s->eos_token, "<|end|>"));
    ld_tpl_source_free(s);
    /* a token of another type is an error naming it */
    p = put("badtok", "tokenizer_config.json", "{\"chat_template\": \"c\", \"bos_token\": 5}");
    CHECK(p);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'bos_token'"), "%s", err.msg);
    return 0;
}

static int test_tpl_source_null_tokens(void)
{
    const char *p = put("null", "tokenizer_config.json",
                        "{\"chat_template\": \"c\", \"bos_token\": null, \"eos_token\": null}");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(s->bos_token == NULL && s->eos_token == NULL);
    ld_tpl_source_free(s);
    return 0;
}

static int test_tpl_source_missing_chat_template(void)
{
    const char *p = put("missing", "tokenizer_config.json", "{\"bos_token\": \"<s>\"}");
    CHECK(p);
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_MISMATCH);
    CHECK(s == NULL);
    CHECK_MSG(strstr(err.msg, "has no 'chat_template'") && strstr(err.msg, "missing/tokenizer_config.json"),
              "%s", err.msg);
    /* a .json that is not JSON, a file that does not exist, an empty directory */
    p = put("broken", "tokenizer_config.json", "{\"chat_template\": ");
    CHECK(p);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_SYNTAX);
    CHECK(ld_tpl_source_load(DIR "/none/x.jinja", NULL, &s, &err) == LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "x.jinja"), "%s", err.msg);
    mkdir(DIR "/empty", 0777);
    CHECK(ld_tpl_source_load(DIR "/empty", NULL, &s, &err) == LD_ERR_IO);
    CHECK_MSG(strstr(err.msg, "neither chat_template.jinja nor tokenizer_config.json"), "%s", err.msg);
    /* a template that does not compile: the template's line */
    p = put("syntax", "t.jinja", "ok\n{% if %}");
    CHECK(p);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_SYNTAX);
    CHECK_EQ_INT(err.line, 2);
    return 0;
}

static int test_tpl_source_model_dir(void)
{
    /* only tokenizer_config.json */
    CHECK(put("model-a", "tokenizer_config.json",
              "{\"chat_template\": \"cfg\", \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}"));
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(DIR "/model-a", NULL, &s, &err) == LD_OK, "%s", err.msg);
    char *out = render(s);
    CHECK(same(out, "cfg"));
    CHECK(same(s->bos_token, "<s>"));
    free(out);
    ld_tpl_source_free(s);
    /* chat_template.jinja beside the config wins; tokens still from the config */
    CHECK(put("model-b", "tokenizer_config.json",
              "{\"chat_template\": \"cfg\", \"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"</s>\"}}"));
    CHECK(put("model-b", "chat_template.jinja", "jinja file"));
    CHECK_MSG(ld_tpl_source_load(DIR "/model-b", NULL, &s, &err) == LD_OK, "%s", err.msg);
    out = render(s);
    CHECK(same(out, "jinja file"));
    CHECK(same(s->bos_token, "<s>") && same(s->eos_token, "</s>"));
    CHECK(strstr(s->template_path, "model-b/chat_template.jinja"));
    free(out);
    ld_tpl_source_free(s);
    /* chat_template.jinja alone: no tokens */
    CHECK(put("model-c", "chat_template.jinja", "only"));
    CHECK_MSG(ld_tpl_source_load(DIR "/model-c", NULL, &s, &err) == LD_OK, "%s", err.msg);
    out = render(s);
    CHECK(same(out, "only") && s->bos_token == NULL && s->eos_token == NULL);
    free(out);
    ld_tpl_source_free(s);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tpl_source_jinja_file),
    LD_CASE(test_tpl_source_string_template),
    LD_CASE(test_tpl_source_named_list),
    LD_CASE(test_tpl_source_added_token_dicts),
    LD_CASE(test_tpl_source_null_tokens),
    LD_CASE(test_tpl_source_missing_chat_template),
    LD_CASE(test_tpl_source_model_dir),
};

LD_TEST_MAIN(cases)
