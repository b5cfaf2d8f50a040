/* tok_json.c - loading a HF tokenizer.json (or a directory holding one)
 * into an ld_tok_spec for ld_tok_from_tables.
 *
 * Handled: model BPE (vocab; merges as "a b" strings or [a, b] pairs;
 * ignore_merges; unk_token), added_tokens, normalizer NFC/NFD/NFKC/NFKD/
 * Sequence/null, pre_tokenizer ByteLevel/Split/Digits/Sequence,
 * post_processor TemplateProcessing/BertProcessing/RobertaProcessing/
 * ByteLevel/Sequence/null (the ids of the single-sequence template),
 * decoder ByteLevel/null.  Anything else is LD_ERR_UNSUPPORTED, naming
 * it.  `truncation` and `padding` are ignored: the ids are never cut. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>

#include "parse/input/slurp.h"
#include "tok_internal.h"

#define JS_MAX_DEPTH 16

typedef struct jspec {
    ld_tok_spec sp;
    ld_tok_str *tokens, *merges;
    ld_tok_added_spec *added;
    ld_tok_norm *norm;
    ld_tok_pre_spec *pre;
    int32_t *prefix, *suffix;
    size_t cap_norm, cap_pre, cap_prefix, cap_suffix;
} jspec;

static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap) return 1;
    size_t c = *cap ? 2 * *cap : 8;
    void *nv = realloc(*v, c * elem);
    if (!nv) return 0;
    *v = nv;
    *cap = c;
    return 1;
}

static const char *type_of(const cJSON *o)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : "";
}

/* A boolean member: its value, or `dflt` when absent or null. */
static int flag(const cJSON *o, const char *key, int dflt)
{
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(b) ? cJSON_IsTrue(b) : dflt;
}

static int as_id(const cJSON *v, int32_t *id)
{
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < (double)(1 << 26)) ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
        return 0;
    *id = (int32_t)v->valuedouble;
    return 1;
}

static ld_tok_str str_of(const cJSON *s) { return (ld_tok_str){ s->valuestring, strlen(s->valuestring) }; }

static ld_status load_vocab(jspec *j, const cJSON *vocab, ld_error *err)
{
    if (!cJSON_IsObject(vocab)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "model.vocab is not an object");
    size_t n = 0;
    int32_t id = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        if (!as_id(e, &id)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "model.vocab: bad id for '%.60s'", e->string);
        if ((size_t)id >= n) n = (size_t)id + 1;
    }
    if (!(j->tokens = calloc(n + 1, sizeof *j->tokens))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (const cJSON *e = vocab->child; e; e = e->next) {
        as_id(e, &id);
        j->tokens[id] = (ld_tok_str){ e->string, strlen(e->string) };
    }
    j->sp.tokens = j->tokens;
    j->sp.n_tokens = n;
    return LD_OK;
}

static ld_status load_merges(jspec *j, const cJSON *merges, ld_error *err)
{
    if (!merges || cJSON_IsNull(merges)) return LD_OK;
    if (!cJSON_IsArray(merges)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "model.merges is not an array");
    size_t n = (size_t)cJSON_GetArraySize(merges), i = 0;
    if (!(j->merges = calloc(2 * n + 1, sizeof *j->merges))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (const cJSON *m = merges->child; m; m = m->next, i++) {
        ld_tok_str *p = &j->merges[2 * i];
        if (cJSON_IsString(m)) { /* "a b": exactly one space, as HF */
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return LD_FAIL(err, LD_ERR_SYNTAX, i, "merge %zu '%.60s' is not two tokens", i, s);
            p[0] = (ld_tok_str){ s, (size_t)(sp - s) };
            p[1] = (ld_tok_str){ sp + 1, strlen(sp + 1) };
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
            p[0] = str_of(m->child);
            p[1] = str_of(m->child->next);
        } else {
            return LD_FAIL(err, LD_ERR_SYNTAX, i, "merge %zu is neither \"a b\" nor [a, b]", i);
        }
    }
    j->sp.merges = j->merges;
    j->sp.n_merges = n;
    return LD_OK;
}

static ld_status load_model(jspec *j, const cJSON *model, ld_error *err)
{
    if (!cJSON_IsObject(model)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "no 'model' object");
    const char *type = type_of(model);
    if (*type && strcmp(type, "BPE"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "model type '%.40s' is not supported (only BPE)", type);
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(d) && d->valuedouble > 0)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "BPE dropout is not supported");
    static const char *const affixes[] = { "continuing_subword_prefix", "end_of_word_suffix" };
    for (int i = 0; i < 2; i++) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(model, affixes[i]);
        if (cJSON_IsString(a) && *a->valuestring)
            return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "BPE %s is not supported", affixes[i]);
    }
    LD_TRY(load_vocab(j, cJSON_GetObjectItemCaseSensitive(model, "vocab"), err));
    LD_TRY(load_merges(j, cJSON_GetObjectItemCaseSensitive(model, "merges"), err));
    j->sp.ignore_merges = flag(model, "ignore_merges", 0);
    j->sp.unk_id = -1;
    const cJSON *unk = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (cJSON_IsString(unk)) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(model, "vocab"),
                                                           unk->valuestring);
        if (!as_id(id, &j->sp.unk_id))
            return LD_FAIL(err, LD_ERR_MISMATCH, 0, "unk_token '%.60s' is not in the vocabulary", unk->valuestring);
    }
    return LD_OK;
}

/* Where HF puts an added token: the id of a token with the same content
 * (an added one, else the model's), else one past the largest added id, or
 * the model vocabulary's size (the "id" written in the file is only
 * checked by HF, with a warning). */
typedef struct vocab_index {
    const ld_tok_str *tok;
    int32_t *slot;
    size_t mask;
} vocab_index;

static int32_t index_get(const vocab_index *x, const char *s, size_t n)
{
    for (size_t i = ld_tok_hash_bytes(s, n) & x->mask; x->slot[i] >= 0; i = (i + 1) & x->mask)
        if (x->tok[x->slot[i]].n == n && !memcmp(x->tok[x->slot[i]].s, s, n)) return x->slot[i];
    return -1;
}

static ld_status index_build(vocab_index *x, const ld_tok_str *tok, size_t n)
{
    x->tok = tok;
    x->mask = 15;
    while (x->mask < 2 * n) x->mask = 2 * x->mask + 1;
    if (!(x->slot = malloc((x->mask + 1) * sizeof *x->slot))) return LD_ERR_NOMEM;
    memset(x->slot, 0xff, (x->mask + 1) * sizeof *x->slot);
    for (size_t id = 0; id < n; id++) {
        if (!tok[id].s || index_get(x, tok[id].s, tok[id].n) >= 0) continue;
        size_t i = ld_tok_hash_bytes(tok[id].s, tok[id].n) & x->mask;
        while (x->slot[i] >= 0) i = (i + 1) & x->mask;
        x->slot[i] = (int32_t)id;
    }
    return LD_OK;
}

static void assign_added_ids(jspec *j, const vocab_index *vocab, size_t n)
{
    int32_t max = -1, size = (int32_t)j->sp.n_tokens;
    for (size_t i = 0; i < n; i++) {
        ld_tok_added_spec *a = &j->added[i];
        int32_t id = -1;
        for (size_t k = 0; k < i && id < 0; k++)
            if (j->added[k].content.n == a->content.n && !memcmp(j->added[k].content.s, a->content.s, a->content.n))
                id = j->added[k].id;
        if (id < 0) id = index_get(vocab, a->content.s, a->content.n);
        if (id < 0) id = max < 0 ? size : max >= size || size == 0 ? max + 1 : size;
        a->id = id;
        if (id > max) max = id;
    }
}

static ld_status load_added(jspec *j, const cJSON *arr, ld_error *err)
{
    if (!arr || cJSON_IsNull(arr)) return LD_OK;
    if (!cJSON_IsArray(arr)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "added_tokens is not an array");
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    if (!(j->added = calloc(n + 1, sizeof *j->added))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (const cJSON *a = arr->child; a; a = a->next, i++) {
        ld_tok_added_spec *s = &j->added[i];
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (!as_id(cJSON_GetObjectItemCaseSensitive(a, "id"), &s->id) || !cJSON_IsString(content))
            return LD_FAIL(err, LD_ERR_SYNTAX, i, "added token %zu has no id or content", i);
        s->content = str_of(content);
        s->flags = (flag(a, "special", 0) ? LD_TOK_A_SPECIAL : 0) | (flag(a, "lstrip", 0) ? LD_TOK_A_LSTRIP : 0) |
                   (flag(a, "rstrip", 0) ? LD_TOK_A_RSTRIP : 0) |
                   (flag(a, "normalized", 1) ? LD_TOK_A_NORMALIZED : 0) |
                   (flag(a, "single_word", 0) ? LD_TOK_A_SINGLE_WORD : 0);
    }
    vocab_index vocab;
    if (index_build(&vocab, j->tokens, j->sp.n_tokens) != LD_OK) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    assign_added_ids(j, &vocab, n);
    free(vocab.slot);
    j->sp.added = j->added;
    j->sp.n_added = n;
    return LD_OK;
}

static ld_status load_norm(jspec *j, const cJSON *o, int depth, ld_error *err)
{
    if (!o || cJSON_IsNull(o)) return LD_OK;
    if (depth > JS_MAX_DEPTH) return LD_FAIL(err, LD_ERR_LIMIT, 0, "normalizers nested too deeply");
    static const char *const names[] = { "NFC", "NFD", "NFKC", "NFKD" };
    const char *type = type_of(o);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "normalizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            LD_TRY(load_norm(j, e, depth + 1, err));
        return LD_OK;
    }
    for (int k = 0; k < 4; k++) {
        if (strcmp(type, names[k])) continue;
        if (!grow((void **)&j->norm, &j->cap_norm, j->sp.n_norm, sizeof *j->norm))
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        j->norm[j->sp.n_norm++] = (ld_tok_norm)k;
        j->sp.norm = j->norm;
        return LD_OK;
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "normalizer type '%.40s' is not supported", type);
}

static ld_status split_spec(const cJSON *o, ld_tok_pre_spec *p, ld_error *err)
{
    static const char *const behaviours[] = { "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext",
                                              "Contiguous" };
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *str = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "behavior");
    if (!cJSON_IsString(str) && !cJSON_IsString(re))
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "Split pattern is neither {\"String\"} nor {\"Regex\"}");
    p->kind = LD_TOK_PRE_SPLIT;
    p->literal = cJSON_IsString(str);
    p->pattern = str_of(p->literal ? str : re);
    p->invert = flag(o, "invert", 0);
    for (int k = 0; k < 5; k++)
        if (cJSON_IsString(b) && !strcmp(b->valuestring, behaviours[k])) {
            p->behaviour = (ld_tok_behaviour)k;
            return LD_OK;
        }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "Split behavior '%.40s' is not supported",
                   cJSON_IsString(b) ? b->valuestring : "?");
}

static ld_status load_pre(jspec *j, const cJSON *o, int depth, ld_error *err)
{
    if (!o || cJSON_IsNull(o)) return LD_OK;
    if (depth > JS_MAX_DEPTH) return LD_FAIL(err, LD_ERR_LIMIT, 0, "pre-tokenizers nested too deeply");
    const char *type = type_of(o);
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            LD_TRY(load_pre(j, e, depth + 1, err));
        return LD_OK;
    }
    if (j->sp.n_pre >= 64) return LD_FAIL(err, LD_ERR_LIMIT, 0, "more than 64 pre-tokenizers");
    if (!grow((void **)&j->pre, &j->cap_pre, j->sp.n_pre, sizeof *j->pre))
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_tok_pre_spec *p = &j->pre[j->sp.n_pre];
    memset(p, 0, sizeof *p);
    j->sp.pre = j->pre;
    if (!strcmp(type, "ByteLevel")) {
        p->kind = LD_TOK_PRE_BYTELEVEL;
        p->add_prefix_space = flag(o, "add_prefix_space", 1);
        p->use_regex = flag(o, "use_regex", 1);
    } else if (!strcmp(type, "Digits")) {
        p->kind = LD_TOK_PRE_DIGITS;
        p->individual_digits = flag(o, "individual_digits", 0);
    } else if (!strcmp(type, "Split")) {
        LD_TRY(split_spec(o, p, err));
    } else {
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "pre-tokenizer type '%.40s' is not supported", type);
    }
    j->sp.n_pre++;
    return LD_OK;
}

static ld_status push_ids(int32_t **v, size_t *cap, size_t *n, const cJSON *ids, ld_error *err)
{
    int32_t id;
    for (const cJSON *e = cJSON_IsArray(ids) ? ids->child : NULL; e; e = e->next) {
        if (!as_id(e, &id)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "post_processor: bad token id");
        if (!grow((void **)v, cap, *n, sizeof **v)) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        (*v)[(*n)++] = id;
    }
    return LD_OK;
}

/* TemplateProcessing's `single`: special tokens before $A to prefix, after to suffix. */
static ld_status load_template(jspec *j, const cJSON *o, ld_error *err)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    int seen_seq = 0;
    for (const cJSON *e = cJSON_IsArray(single) ? single->child : NULL; e; e = e->next) {
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(e, "SpecialToken");
        if (cJSON_GetObjectItemCaseSensitive(e, "Sequence")) {
            if (seen_seq++) return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "post_processor: two sequences in 'single'");
            continue;
        }
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(st, "id");
        const cJSON *def = cJSON_IsString(name) ? cJSON_GetObjectItemCaseSensitive(specials, name->valuestring) : NULL;
        if (!def) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "post_processor: a special token of 'single' is not defined");
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(def, "ids");
        if (seen_seq) LD_TRY(push_ids(&j->suffix, &j->cap_suffix, &j->sp.n_suffix, ids, err));
        else LD_TRY(push_ids(&j->prefix, &j->cap_prefix, &j->sp.n_prefix, ids, err));
    }
    return LD_OK;
}

static ld_status load_post(jspec *j, const cJSON *o, int depth, ld_error *err)
{
    if (!o || cJSON_IsNull(o)) return LD_OK;
    if (depth > JS_MAX_DEPTH) return LD_FAIL(err, LD_ERR_LIMIT, 0, "post-processors nested too deeply");
    const char *type = type_of(o);
    if (!strcmp(type, "ByteLevel")) return LD_OK;
    if (!strcmp(type, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "processors");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            LD_TRY(load_post(j, e, depth + 1, err));
        return LD_OK;
    }
    if (!strcmp(type, "TemplateProcessing")) return load_template(j, o, err);
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "cls"), *sep = cJSON_GetObjectItemCaseSensitive(o, "sep");
        int32_t c, e; /* cls and sep are [content, id] */
        if (!as_id(cJSON_GetArrayItem(cls, 1), &c) || !as_id(cJSON_GetArrayItem(sep, 1), &e))
            return LD_FAIL(err, LD_ERR_SYNTAX, 0, "%s: bad cls or sep", type);
        if (!grow((void **)&j->prefix, &j->cap_prefix, j->sp.n_prefix, sizeof *j->prefix) ||
            !grow((void **)&j->suffix, &j->cap_suffix, j->sp.n_suffix, sizeof *j->suffix))
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        j->prefix[j->sp.n_prefix++] = c;
        j->suffix[j->sp.n_suffix++] = e;
        return LD_OK;
    }
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "post_processor type '%.40s' is not supported", type);
}

static ld_status load_decoder(jspec *j, const cJSON *o, ld_error *err)
{
    j->sp.decoder = LD_TOK_DEC_NONE;
    if (!o || cJSON_IsNull(o)) return LD_OK;
    if (strcmp(type_of(o), "ByteLevel"))
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "decoder type '%.40s' is not supported", type_of(o));
    j->sp.decoder = LD_TOK_DEC_BYTELEVEL;
    return LD_OK;
}

static ld_status load_root(jspec *j, const cJSON *root, ld_tok **out, ld_error *err)
{
    if (!cJSON_IsObject(root)) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "not a JSON object");
    LD_TRY(load_model(j, cJSON_GetObjectItemCaseSensitive(root, "model"), err));
    LD_TRY(load_added(j, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err));
    LD_TRY(load_norm(j, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), 0, err));
    LD_TRY(load_pre(j, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), 0, err));
    LD_TRY(load_post(j, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), 0, err));
    LD_TRY(load_decoder(j, cJSON_GetObjectItemCaseSensitive(root, "decoder"), err));
    j->sp.prefix = j->prefix;
    j->sp.suffix = j->suffix;
    return ld_tok_from_tables(&j->sp, out, err);
}

ld_status ld_tok_load_json(const char *json, size_t len, ld_tok **out, ld_error *err)
{
    *out = NULL;
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root) return LD_FAIL(err, LD_ERR_SYNTAX, 0, "not valid JSON");
    jspec j;
    memset(&j, 0, sizeof j);
    ld_status st = load_root(&j, root, out, err);
    free(j.tokens);
    free(j.merges);
    free(j.added);
    free(j.norm);
    free(j.pre);
    free(j.prefix);
    free(j.suffix);
    cJSON_Delete(root);
    return st;
}

/* 1 when the file at `path` begins with the GGUF magic. */
static int is_gguf(const char *path)
{
    FILE *f = fopen(path, "rb");
    char magic[4] = { 0 };
    int yes = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f) fclose(f);
    return yes;
}

/* A directory's tokenizer: tokenizer.json, else its only *.gguf. */
static ld_status dir_file(const char *dir, char *file, size_t size, ld_error *err)
{
    struct stat st;
    snprintf(file, size, "%s/tokenizer.json", dir);
    if (stat(file, &st) == 0) return LD_OK;
    DIR *d = opendir(dir);
    int found = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".gguf")) continue;
        if (found++) break;
        snprintf(file, size, "%s/%s", dir, e->d_name);
    }
    if (d) closedir(d);
    if (found == 1) return LD_OK;
    return LD_FAIL(err, LD_ERR_IO, 0, found ? "'%s' holds several .gguf files: name the file"
                                            : "'%s' holds neither tokenizer.json nor a .gguf file", dir);
}

ld_status ld_tok_load(const char *path, ld_tok **out, ld_error *err)
{
    struct stat st;
    char joined[4096];
    const char *file = path;
    *out = NULL;
    ld_status s = LD_OK;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        s = dir_file(path, joined, sizeof joined, err);
        file = joined;
    }
    if (s == LD_OK && is_gguf(file)) {
        s = ld_tok_load_gguf(file, out, err);
    } else if (s == LD_OK) {
        char *buf = NULL;
        size_t len = 0;
        s = ld_slurp_file(file, &buf, &len, err);
        if (s == LD_OK) {
            s = ld_tok_load_json(buf, len, out, err);
            free(buf);
        }
    }
    if (s != LD_OK && err) err->path = path;
    return s;
}
