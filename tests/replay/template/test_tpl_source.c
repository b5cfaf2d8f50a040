/* test_tpl_source.c - loading chat templates and special tokens from .jinja
 * files, tokenizer_config.json variants, GGUF files and model directories.
 * The inputs are written into LD_BUILD_DIR at test time, or are the GGUF
 * fixtures of testdata/engine/gguf (tools/gen_gguf_fixtures.py); the
 * expectations are those literal inputs. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay/template/chat_render.h"
#include "tests/support/ld_test.h"
#include "replay/template/tpl_source.h"

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

#define GGUF_DIR LD_TESTDATA_DIR "/engine/gguf/"

/* Copies `n` bytes of `from` (all when n is 0) to DIR/sub/name. */
static const char *copy_file(const char *from, size_t n, const char *sub, const char *name)
{
    FILE *f = fopen(from, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t got = fread(buf, 1, sizeof buf, f);
    fclose(f);
    if (n == 0 || n > got) n = got;
    const char *p = put(sub, name, "");
    FILE *o = p ? fopen(p, "wb") : NULL;
    if (!o) return NULL;
    int ok = fwrite(buf, 1, n, o) == n;
    return fclose(o) == 0 && ok ? p : NULL;
}

/* Renders one user message "hi" through the source (chat_render.h). */
static char *chat(const ld_tpl_source *s)
{
    cJSON *req = cJSON_Parse("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
    char *out = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    ld_status st = ld_chat_render(s, req, NULL, &out, &n, &err);
    cJSON_Delete(req);
    return st == LD_OK ? out : NULL;
}

static int test_tpl_source_gguf_file(void)
{
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_tpl_source_load(GGUF_DIR "chat.gguf", NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(s->kind == LD_TPL_JINJA && s->tpl);
    CHECK(same(s->bos_token, "<s>") && same(s->eos_token, "</s>"));
    CHECK(same(s->template_path, GGUF_DIR "chat.gguf"));
    char *out = chat(s);
    CHECK_MSG(same(out, "<s>[user]hi[assistant]"), "%s", out ? out : "(error)");
    free(out);
    ld_tpl_source_free(s);
    /* named templates: tokenizer.chat_template.NAME; "default" is the plain key */
    CHECK_MSG(ld_tpl_source_load(GGUF_DIR "chat.gguf", "tool_use", &s, &err) == LD_OK, "%s", err.msg);
    out = chat(s);
    CHECK_MSG(same(out, "tool:1</s>"), "%s", out ? out : "(error)");
    free(out);
    ld_tpl_source_free(s);
    CHECK(ld_tpl_source_load(GGUF_DIR "chat.gguf", "default", &s, &err) == LD_OK);
    ld_tpl_source_free(s);
    CHECK(ld_tpl_source_load(GGUF_DIR "chat.gguf", "rag", &s, &err) == LD_ERR_MISMATCH && !s);
    CHECK_MSG(strstr(err.msg, "no chat template named 'rag' (it has ") &&
              strstr(err.msg, "'default'") && strstr(err.msg, "'tool_use'"), "%s", err.msg);
    /* v2 files too */
    CHECK_MSG(ld_tpl_source_load(GGUF_DIR "v2.gguf", NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(same(s->bos_token, "<s>"));
    ld_tpl_source_free(s);
    /* found by the magic, not the name */
    const char *p = copy_file(GGUF_DIR "chat.gguf", 0, "gguf-magic", "model.bin");
    CHECK(p);
    CHECK_MSG(ld_tpl_source_load(p, NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK(same(s->eos_token, "</s>"));
    ld_tpl_source_free(s);
    return 0;
}

static int test_tpl_source_gguf_errors(void)
{
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    /* a GGUF without a chat template */
    CHECK(ld_tpl_source_load(GGUF_DIR "all_types.gguf", NULL, &s, &err) == LD_ERR_MISMATCH && !s);
    CHECK_MSG(strstr(err.msg, "all_types.gguf' has no 'tokenizer.chat_template'"), "%s", err.msg);
    /* a truncated one: the reader's error, naming the file */
    const char *p = copy_file(GGUF_DIR "chat.gguf", 100, "gguf-cut", "cut.gguf");
    CHECK(p);
    CHECK(ld_tpl_source_load(p, NULL, &s, &err) == LD_ERR_TRUNCATED && !s);
    CHECK_MSG(strstr(err.msg, "cut.gguf': gguf key/value count 12 at byte 16 needs at least"),
              "%s", err.msg);
    CHECK(err.offset <= 100 && same(err.path, p));
    /* a bos id outside the vocabulary */
    static const unsigned char bad[] =
        "GGUF\3\0\0\0" "\0\0\0\0\0\0\0\0" "\3\0\0\0\0\0\0\0"
        "\27\0\0\0\0\0\0\0" "tokenizer.chat_template" "\10\0\0\0" "\1\0\0\0\0\0\0\0" "x"
        "\25\0\0\0\0\0\0\0" "tokenizer.ggml.tokens" "\11\0\0\0" "\10\0\0\0" "\1\0\0\0\0\0\0\0"
        "\1\0\0\0\0\0\0\0" "a"
        "\33\0\0\0\0\0\0\0" "tokenizer.ggml.bos_token_id" "\4\0\0\0" "\5\0\0\0";
    p = put("gguf-badbos", "bad.gguf", "");
    FILE *f = p ? fopen(p, "wb") : NULL;
    CHECK(f);
    CHECK(fwrite(bad, 1, sizeof bad - 1, f) == sizeof bad - 1);
    fclose(f);
    ld_status st = ld_tpl_source_load(p, NULL, &s, &err);
    CHECK_MSG(st == LD_ERR_MISMATCH && !s, "%d %s", (int)st, err.msg);
    CHECK_MSG(strstr(err.msg, "'tokenizer.ggml.bos_token_id' is 5, outside the 1 tokens"), "%s",
              err.msg);
    return 0;
}

static int test_tpl_source_gguf_model_dir(void)
{
    ld_tpl_source *s = NULL;
    ld_error err;
    ld_error_clear(&err);
    /* a directory holding a single .gguf (and a config.json without a
     * built-in model_type) uses it */
    CHECK(copy_file(GGUF_DIR "chat.gguf", 0, "gguf-dir", "tiny-Q8_0.gguf"));
    CHECK(put("gguf-dir", "config.json", "{\"model_type\": \"llama\"}"));
    CHECK_MSG(ld_tpl_source_load(DIR "/gguf-dir", NULL, &s, &err) == LD_OK, "%s", err.msg);
    CHECK_MSG(same(s->template_path, DIR "/gguf-dir/tiny-Q8_0.gguf"), "%s", s->template_path);
    CHECK(same(s->bos_token, "<s>") && same(s->eos_token, "</s>"));
    char *out = chat(s);
    CHECK(same(out, "<s>[user]hi[assistant]"));
    free(out);
    ld_tpl_source_free(s);
    CHECK_MSG(ld_tpl_source_load(DIR "/gguf-dir", "tool_use", &s, &err) == LD_OK, "%s", err.msg);
    ld_tpl_source_free(s);
    /* a tokenizer_config.json beside it wins */
    CHECK(copy_file(GGUF_DIR "chat.gguf", 0, "gguf-cfg", "m.gguf"));
    CHECK(put("gguf-cfg", "tokenizer_config.json", "{\"chat_template\": \"cfg\"}"));
    CHECK_MSG(ld_tpl_source_load(DIR "/gguf-cfg", NULL, &s, &err) == LD_OK, "%s", err.msg);
    out = render(s);
    CHECK(same(out, "cfg") && s->bos_token == NULL);
    free(out);
    ld_tpl_source_free(s);
    /* several .gguf files: which one is not guessed */
    CHECK(copy_file(GGUF_DIR "chat.gguf", 0, "gguf-two", "a.gguf"));
    CHECK(copy_file(GGUF_DIR "v2.gguf", 0, "gguf-two", "b.gguf"));
    CHECK(ld_tpl_source_load(DIR "/gguf-two", NULL, &s, &err) == LD_ERR_MISMATCH && !s);
    CHECK_MSG(strstr(err.msg, "several .gguf files") && strstr(err.msg, "'a.gguf'") &&
              strstr(err.msg, "'b.gguf'"), "%s", err.msg);
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
    LD_CASE(test_tpl_source_gguf_file),
    LD_CASE(test_tpl_source_gguf_errors),
    LD_CASE(test_tpl_source_gguf_model_dir),
};

LD_TEST_MAIN(cases)
