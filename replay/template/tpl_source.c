/* tpl_source.c - loading a chat template and its special tokens from a
 * .jinja file, a tokenizer_config.json, a GGUF file or a model directory
 * (tpl_source.h). */
#include "tpl_source.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "parse/input/slurp.h"

#include "engine/formats/gguf.h"

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static char *join_path(const char *dir, const char *file)
{
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* A special token: absent or null -> NULL (None); a string; or a dict with a
 * string "content" (AddedToken as saved by transformers). */
static ld_status read_token(const cJSON *cfg, const char *key, const char *file,
                            char **out, ld_error *err)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, key);
    *out = NULL;
    if (!t || cJSON_IsNull(t)) return LD_OK;
    if (cJSON_IsObject(t)) t = cJSON_GetObjectItemCaseSensitive(t, "content");
    if (!cJSON_IsString(t))
        return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                       "'%s': '%s' is neither a string, null nor a dict with a string 'content'",
                       file, key);
    *out = dup_str(t->valuestring);
    return *out ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
}

/* Picks the template text of a tokenizer_config's chat_template. */
static ld_status pick_template(const cJSON *cfg, const char *file, const char *name,
                               const char **out, ld_error *err)
{
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    const char *want = name ? name : "default";
    if (!ct || cJSON_IsNull(ct))
        return LD_FAIL(err, LD_ERR_MISMATCH, 0, "'%s' has no 'chat_template'", file);
    if (cJSON_IsString(ct)) {
        if (strcmp(want, "default") != 0)
            return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                           "'%s' has a single chat_template, not one named '%s'", file, want);
        *out = ct->valuestring;
        return LD_OK;
    }
    if (!cJSON_IsArray(ct))
        return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                       "'%s': 'chat_template' is neither a string nor a list of named templates",
                       file);
    char names[160] = "";
    size_t used = 0;
    for (const cJSON *e = ct->child; e; e = e->next) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "name");
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "template");
        if (!cJSON_IsString(n) || !cJSON_IsString(t))
            return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                           "'%s': a 'chat_template' entry lacks a string 'name' or 'template'",
                           file);
        if (strcmp(n->valuestring, want) == 0) {
            *out = t->valuestring;
            return LD_OK;
        }
        if (used < sizeof names)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s'%s'",
                                     used ? ", " : "", n->valuestring);
    }
    return LD_FAIL(err, LD_ERR_MISMATCH, 0, "'%s' has no chat_template named '%s' (it has %s)",
                   file, want, used ? names : "none");
}

static ld_status compile_into(ld_tpl_source *s, const char *text, size_t len,
                              const char *user_path, const char *file, ld_error *err)
{
    ld_status st = ld_tpl_compile(text, len, &s->tpl, err);
    if (st == LD_OK) {
        free(s->text);
        if (!(s->text = malloc(len + 1))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        memcpy(s->text, text, len);
        s->text[len] = 0;
        s->text_len = len;
    }
    if (st != LD_OK && err) {
        char msg[2 * sizeof err->msg + 64];
        snprintf(msg, sizeof msg, "template of '%.200s': %s", file, err->msg);
        memcpy(err->msg, msg, sizeof err->msg - 1);
        err->msg[sizeof err->msg - 1] = 0;
        err->path = user_path;
    }
    return st;
}

/* Reads tokenizer_config.json `file`: tokens always, the template only when
 * `want_template`.  JSON that is not an object is a syntax error. */
static ld_status load_config(ld_tpl_source *s, const char *file, char *text, size_t len,
                             const char *name, int want_template, const char *user_path,
                             ld_error *err)
{
    cJSON *cfg = cJSON_ParseWithLength(text, len);
    if (!cJSON_IsObject(cfg)) {
        cJSON_Delete(cfg);
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "'%s' is not a JSON object", file);
    }
    ld_status st = read_token(cfg, "bos_token", file, &s->bos_token, err);
    if (st == LD_OK) st = read_token(cfg, "eos_token", file, &s->eos_token, err);
    if (st == LD_OK && want_template) {
        const char *tpl = NULL;
        st = pick_template(cfg, file, name, &tpl, err);
        if (st == LD_OK) st = compile_into(s, tpl, strlen(tpl), user_path, file, err);
    }
    cJSON_Delete(cfg);
    return st;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Puts "'file': " before err->msg (when it does not name the file yet). */
static void name_file(ld_error *err, const char *file)
{
    if (!err || strstr(err->msg, file)) return;
    char msg[sizeof err->msg + 256];
    snprintf(msg, sizeof msg, "'%.200s': %s", file, err->msg);
    memcpy(err->msg, msg, sizeof err->msg - 1);
    err->msg[sizeof err->msg - 1] = 0;
}

/* 1 when the file at `path` starts with the GGUF magic. */
static int has_gguf_magic(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[4];
    int yes = fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    fclose(f);
    return yes;
}

#define GGUF_TEMPLATE_KEY "tokenizer.chat_template"

/* The names of the templates a GGUF file holds: "default" for
 * tokenizer.chat_template, NAME for tokenizer.chat_template.NAME. */
static void gguf_template_names(const ld_gguf *g, char *out, size_t cap)
{
    size_t used = 0, pre = strlen(GGUF_TEMPLATE_KEY);
    out[0] = 0;
    for (uint64_t i = 0; i < g->n_kv && used < cap; i++) {
        ld_gguf_str k = g->kv[i].key;
        if (g->kv[i].value.type != LD_GGUF_STRING || k.len < pre ||
            memcmp(k.ptr, GGUF_TEMPLATE_KEY, pre) != 0)
            continue;
        if (k.len == pre)
            used += (size_t)snprintf(out + used, cap - used, "%s'default'", used ? ", " : "");
        else if (k.ptr[pre] == '.')
            used += (size_t)snprintf(out + used, cap - used, "%s'%.*s'", used ? ", " : "",
                                     (int)(k.len - pre - 1 > 64 ? 64 : k.len - pre - 1),
                                     k.ptr + pre + 1);
    }
}

/* bos/eos: tokenizer.ggml.tokens[tokenizer.ggml.<which>_token_id]; NULL
 * (None) when the file has no such id. */
static ld_status gguf_token(const ld_gguf *g, const char *which, const char *file, char **out,
                            ld_error *err)
{
    char key[64];
    snprintf(key, sizeof key, "tokenizer.ggml.%s_token_id", which);
    *out = NULL;
    if (!ld_gguf_find(g, key)) return LD_OK;
    int64_t id;
    const ld_gguf_str *tokens;
    uint64_t n;
    LD_TRY(ld_gguf_get_int(g, key, &id, err));
    LD_TRY(ld_gguf_get_str_array(g, "tokenizer.ggml.tokens", &tokens, &n, err));
    if (id < 0 || (uint64_t)id >= n)
        return LD_FAIL(err, LD_ERR_MISMATCH, ld_gguf_find(g, key)->offset,
                       "'%s': '%s' is %lld, outside the %llu tokens of 'tokenizer.ggml.tokens'",
                       file, key, (long long)id, (unsigned long long)n);
    *out = ld_gguf_strdup(tokens[id]);
    return *out ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
}

/* A GGUF file: tokenizer.chat_template (or tokenizer.chat_template.NAME when
 * a name other than "default" is asked for) and the bos/eos tokens. */
static ld_status load_gguf(ld_tpl_source *s, const char *file, const char *name,
                           const char *user_path, ld_error *err)
{
    ld_gguf *g = NULL;
    ld_status st = ld_gguf_open(file, &g, err);
    if (st != LD_OK) {
        name_file(err, file);
        return st;
    }
    char key[256];
    int named = name && strcmp(name, "default") != 0;
    if (named) snprintf(key, sizeof key, GGUF_TEMPLATE_KEY ".%s", name);
    else snprintf(key, sizeof key, GGUF_TEMPLATE_KEY);
    ld_gguf_str text;
    if (!ld_gguf_find(g, key)) {
        char names[160];
        gguf_template_names(g, names, sizeof names);
        if (!named && !names[0])
            st = LD_FAIL(err, LD_ERR_MISMATCH, 0, "'%s' has no '" GGUF_TEMPLATE_KEY "'", file);
        else
            st = LD_FAIL(err, LD_ERR_MISMATCH, 0, "'%s' has no chat template named '%s' (it has %s)",
                         file, named ? name : "default", names[0] ? names : "none");
    } else if ((st = ld_gguf_get_str(g, key, &text, err)) != LD_OK) {
        name_file(err, file);
    }
    if (st == LD_OK) st = gguf_token(g, "bos", file, &s->bos_token, err);
    if (st == LD_OK) st = gguf_token(g, "eos", file, &s->eos_token, err);
    if (st != LD_OK) name_file(err, file);
    if (st == LD_OK) st = compile_into(s, text.ptr, (size_t)text.len, user_path, file, err);
    ld_gguf_close(g);
    return st;
}

/* A single file: a GGUF file (by its magic), a JSON object is a
 * tokenizer_config, anything else (or a file not named *.json that fails to
 * parse) is template text. */
static ld_status load_file(ld_tpl_source *s, const char *path, const char *name,
                           ld_error *err)
{
    if (has_gguf_magic(path)) return load_gguf(s, path, name, path, err);
    char *text = NULL;
    size_t len = 0;
    LD_TRY(ld_slurp_file(path, &text, &len, err));
    cJSON *probe = cJSON_ParseWithLength(text, len);
    int is_json = cJSON_IsObject(probe);
    cJSON_Delete(probe);
    ld_status st;
    if (is_json || ends_with(path, ".json")) {
        st = load_config(s, path, text, len, name, 1, path, err);
    } else if (name && strcmp(name, "default") != 0) {
        st = LD_FAIL(err, LD_ERR_MISMATCH, 0,
                     "'%s' is a single template, not a list with one named '%s'", path, name);
    } else {
        st = compile_into(s, text, len, path, path, err);
    }
    free(text);
    return st;
}

static int same_ignoring_case(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

ld_tpl_kind ld_tpl_builtin_by_name(const char *name)
{
    static const struct { const char *name; ld_tpl_kind kind; } names[] = {
        { "deepseek-v3.2", LD_TPL_DEEPSEEK_V32 }, { "deepseek-v32", LD_TPL_DEEPSEEK_V32 },
        { "dsv32", LD_TPL_DEEPSEEK_V32 }, { "deepseek-v4", LD_TPL_DEEPSEEK_V4 },
        { "dsv4", LD_TPL_DEEPSEEK_V4 },
    };
    for (size_t i = 0; name && i < sizeof names / sizeof names[0]; i++)
        if (same_ignoring_case(name, names[i].name)) return names[i].kind;
    return LD_TPL_JINJA;
}

static const char *builtin_label(ld_tpl_kind kind)
{
    return kind == LD_TPL_DEEPSEEK_V32 ? "builtin:deepseek-v3.2" : "builtin:deepseek-v4";
}

/* Makes s the built-in encoder `kind`; DeepSeek's BOS and EOS (U+FF5C and
 * U+2581 in them) stand for the tokens a tokenizer_config.json did not give. */
static ld_status set_builtin(ld_tpl_source *s, ld_tpl_kind kind, ld_error *err)
{
    static const char bos[] = "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    static const char eos[] = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
    s->kind = kind;
    if (!s->bos_token) s->bos_token = dup_str(bos);
    if (!s->eos_token) s->eos_token = dup_str(eos);
    s->template_path = dup_str(builtin_label(kind));
    if (!s->bos_token || !s->eos_token || !s->template_path)
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    return LD_OK;
}

/* The built-in encoder a model directory's config.json asks for (by its
 * `model_type`, as SGLang picks its encoder), else LD_TPL_JINJA. */
static ld_tpl_kind builtin_of_model_dir(const char *dir)
{
    char *path = join_path(dir, "config.json");
    char *text = NULL;
    size_t len = 0;
    ld_tpl_kind kind = LD_TPL_JINJA;
    if (path && exists(path) && ld_slurp_file(path, &text, &len, NULL) == LD_OK) {
        cJSON *cfg = cJSON_ParseWithLength(text, len);
        const cJSON *mt = cJSON_GetObjectItemCaseSensitive(cfg, "model_type");
        if (cJSON_IsString(mt)) {
            if (!strcmp(mt->valuestring, "deepseek_v32")) kind = LD_TPL_DEEPSEEK_V32;
            else if (!strcmp(mt->valuestring, "deepseek_v4")) kind = LD_TPL_DEEPSEEK_V4;
        }
        cJSON_Delete(cfg);
    }
    free(text);
    free(path);
    return kind;
}

/* The one *.gguf file in `dir`: 1 and its path in *out (malloc'd); 0 when
 * there is none; -1 when there are several (their names in `names`). */
static int single_gguf(const char *dir, char **out, char *names, size_t cap)
{
    DIR *d = opendir(dir);
    int count = 0;
    size_t used = 0;
    *out = NULL;
    names[0] = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!ends_with(e->d_name, ".gguf") || e->d_name[0] == '.') continue;
        char *p = join_path(dir, e->d_name);
        if (!p || is_dir(p)) {
            free(p);
            continue;
        }
        if (used < cap)
            used += (size_t)snprintf(names + used, cap - used, "%s'%s'", used ? ", " : "", e->d_name);
        if (++count == 1) *out = p;
        else free(p);
    }
    closedir(d);
    if (count > 1) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return count;
}

/* A directory with neither chat_template.jinja nor tokenizer_config.json nor
 * a built-in encoder: its single *.gguf. */
static ld_status load_dir_gguf(ld_tpl_source *s, const char *dir, const char *name, ld_error *err)
{
    char *file = NULL, names[200];
    int n = single_gguf(dir, &file, names, sizeof names);
    if (n == 0)
        return LD_FAIL(err, LD_ERR_IO, 0,
                       "'%s' holds neither chat_template.jinja nor tokenizer_config.json "
                       "nor a .gguf file", dir);
    if (n < 0)
        return LD_FAIL(err, LD_ERR_MISMATCH, 0,
                       "'%s' holds several .gguf files (%s) and no chat_template.jinja or "
                       "tokenizer_config.json: name the file", dir, names);
    ld_status st = load_gguf(s, file, name, dir, err);
    if (st == LD_OK) s->template_path = file;
    else free(file);
    return st;
}

static ld_status load_dir(ld_tpl_source *s, const char *dir, const char *name, ld_error *err)
{
    char *jinja = join_path(dir, "chat_template.jinja");
    char *cfg = join_path(dir, "tokenizer_config.json");
    ld_status st = LD_OK;
    int have_jinja = jinja && exists(jinja), have_cfg = cfg && exists(cfg);
    ld_tpl_kind builtin = have_jinja ? LD_TPL_JINJA : builtin_of_model_dir(dir);
    if (!jinja || !cfg) {
        st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    } else if (!have_jinja && !have_cfg && builtin == LD_TPL_JINJA) {
        free(jinja);
        free(cfg);
        return load_dir_gguf(s, dir, name, err);
    }
    if (st == LD_OK && have_cfg) {
        char *text = NULL;
        size_t len = 0;
        st = ld_slurp_file(cfg, &text, &len, err);
        if (st == LD_OK)
            st = load_config(s, cfg, text, len, name, !have_jinja && builtin == LD_TPL_JINJA,
                             dir, err);
        free(text);
    }
    if (st == LD_OK && have_jinja) {
        char *text = NULL;
        size_t len = 0;
        st = ld_slurp_file(jinja, &text, &len, err);
        if (st == LD_OK) st = compile_into(s, text, len, dir, jinja, err);
        free(text);
    }
    if (st == LD_OK && builtin != LD_TPL_JINJA) {
        st = set_builtin(s, builtin, err);
    } else if (st == LD_OK) {
        s->template_path = have_jinja ? jinja : cfg;
        if (have_jinja) jinja = NULL;
        else cfg = NULL;
    }
    free(jinja);
    free(cfg);
    return st;
}

ld_status ld_tpl_source_load(const char *path, const char *name,
                             ld_tpl_source **out, ld_error *err)
{
    *out = NULL;
    ld_tpl_source *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st;
    ld_tpl_kind builtin = exists(path) ? LD_TPL_JINJA : ld_tpl_builtin_by_name(path);
    if (builtin != LD_TPL_JINJA) {
        st = set_builtin(s, builtin, err);
    } else if (is_dir(path)) {
        st = load_dir(s, path, name, err);
    } else {
        st = load_file(s, path, name, err);
        if (st == LD_OK && !(s->template_path = dup_str(path)))
            st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    if (st != LD_OK) {
        if (err) err->path = path;
        ld_tpl_source_free(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

void ld_tpl_source_free(ld_tpl_source *src)
{
    if (!src) return;
    ld_tpl_free(src->tpl);
    free(src->bos_token);
    free(src->eos_token);
    free(src->template_path);
    free(src->text);
    free(src);
}
