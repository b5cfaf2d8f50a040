/* test_gguf.c - the GGUF reader (engine/formats/gguf.h) against what gguf-py's
 * GGUFReader reads from the same files (testdata/engine/gguf/NAME.json, written
 * by tools/gen_gguf_fixtures.py with the pinned gguf package), against the
 * facts it reports about the real vocab files in ../shared/tokenizers (skipped
 * when absent), and on hand-built malformed files: every prefix of every
 * fixture, and one damaged field at a time. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/formats/gguf.h"
#include "tests/support/ld_test.h"

#define GDIR LD_TESTDATA_DIR "/engine/gguf/"

static const char *const fixtures[] = { "all_types", "chat", "big_endian", "align64", "v2" };

/* ------------------------------------------------------------ helpers */

static cJSON *load_json(const char *path)
{
    char *text = ld_test_slurp(path);
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

static int64_t jint(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) return strtoll(v->valuestring, NULL, 10);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static void hex(const char *p, uint64_t n, char *out, size_t cap)
{
    static const char digits[] = "0123456789abcdef";
    size_t k = 0;
    for (uint64_t i = 0; i < n && k + 2 < cap; i++) {
        out[k++] = digits[(uint8_t)p[i] >> 4];
        out[k++] = digits[(uint8_t)p[i] & 15];
    }
    out[k] = 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#define FNV0 0xcbf29ce484222325ull

/* Compares one leaf: `type` is the scalar type, `u`/`i`/`f`/`s` its value
 * read by the C reader; `want` the oracle's encoding.  Returns 0 when equal
 * and writes what differs into `why`. */
static int leaf_eq(ld_gguf_type type, uint64_t u, int64_t i, double f, ld_gguf_str s,
                   const cJSON *want, char *why, size_t cap)
{
    char got[512];
    switch (type) {
    case LD_GGUF_BOOL:
        if (!cJSON_IsBool(want) || (cJSON_IsTrue(want) != (u != 0))) {
            snprintf(why, cap, "bool %d", (int)u);
            return 1;
        }
        return 0;
    case LD_GGUF_FLOAT32: case LD_GGUF_FLOAT64: {
        double w = cJSON_IsString(want) ? strtod(want->valuestring, NULL) : NAN;
        int same = (isnan(w) && isnan(f)) || memcmp(&w, &f, sizeof w) == 0;
        if (!same) snprintf(why, cap, "float %a, want %s", f, cJSON_IsString(want) ? want->valuestring : "?");
        return !same;
    }
    case LD_GGUF_STRING:
        hex(s.ptr, s.len, got, sizeof got);
        break;
    case LD_GGUF_INT8: case LD_GGUF_INT16: case LD_GGUF_INT32: case LD_GGUF_INT64:
        snprintf(got, sizeof got, "%" PRId64, i);
        break;
    default:
        snprintf(got, sizeof got, "%" PRIu64, u);
        break;
    }
    if (!cJSON_IsString(want) || strcmp(got, want->valuestring) != 0) {
        snprintf(why, cap, "%s '%s', want '%s'", ld_gguf_type_name(type), got,
                 cJSON_IsString(want) ? want->valuestring : "?");
        return 1;
    }
    return 0;
}

static int value_leaf_eq(const ld_gguf_value *v, const cJSON *want, char *why, size_t cap)
{
    return leaf_eq(v->type, v->v.u, v->v.i, v->v.f, v->v.s, want, why, cap);
}

static int array_item_eq(const ld_gguf *g, const ld_gguf_array *a, uint64_t k,
                         const cJSON *want, char *why, size_t cap)
{
    ld_gguf_str s = { "", 0 };
    uint64_t u = 0;
    int64_t i = 0;
    double f = 0;
    if (a->type == LD_GGUF_STRING) s = a->strs[k];
    else if (a->type == LD_GGUF_FLOAT32 || a->type == LD_GGUF_FLOAT64) {
        if (!ld_gguf_array_float(g, a, k, &f)) return snprintf(why, cap, "float accessor"), 1;
    } else if (a->type == LD_GGUF_INT8 || a->type == LD_GGUF_INT16 ||
               a->type == LD_GGUF_INT32 || a->type == LD_GGUF_INT64) {
        if (!ld_gguf_array_int(g, a, k, &i)) return snprintf(why, cap, "int accessor"), 1;
    } else if (!ld_gguf_array_uint(g, a, k, &u)) {
        return snprintf(why, cap, "uint accessor"), 1;
    }
    return leaf_eq(a->type, u, i, f, s, want, why, cap);
}

/* Walks an array's leaves in order (as GGUFReader flattens them) against
 * the oracle's list; *k is the index into `want`. */
static int flat_eq(const ld_gguf *g, const ld_gguf_array *a, const cJSON *want, int *k,
                   char *why, size_t cap)
{
    for (uint64_t j = 0; j < a->n; j++) {
        if (a->type == LD_GGUF_ARRAY) {
            if (flat_eq(g, &a->items[j].v.a, want, k, why, cap)) return 1;
            continue;
        }
        const cJSON *w = cJSON_GetArrayItem(want, *k);
        if (!w) return snprintf(why, cap, "more leaves than the oracle's %d", *k), 1;
        if (array_item_eq(g, a, j, w, why, cap)) return 1;
        (*k)++;
    }
    return 0;
}

/* The nested structure as written (lists of lists). */
static int nested_eq(const ld_gguf *g, const ld_gguf_array *a, const cJSON *want, char *why,
                     size_t cap)
{
    if (!cJSON_IsArray(want) || (uint64_t)cJSON_GetArraySize(want) != a->n)
        return snprintf(why, cap, "nested length %" PRIu64, a->n), 1;
    for (uint64_t j = 0; j < a->n; j++) {
        const cJSON *w = cJSON_GetArrayItem(want, (int)j);
        if (a->type == LD_GGUF_ARRAY) {
            if (nested_eq(g, &a->items[j].v.a, w, why, cap)) return 1;
        } else if (array_item_eq(g, a, j, w, why, cap)) {
            return 1;
        }
    }
    return 0;
}

/* GGUFReader's `types` of a value: ARRAY, then the first item's types. */
static int types_of(const ld_gguf_value *v, int *out, int max)
{
    int n = 0;
    const ld_gguf_value *cur = v;
    while (n < max) {
        out[n++] = (int)cur->type;
        if (cur->type != LD_GGUF_ARRAY) break;
        if (cur->v.a.type != LD_GGUF_ARRAY) {
            if (n < max) out[n++] = (int)cur->v.a.type;
            break;
        }
        if (cur->v.a.n == 0) break;
        cur = &cur->v.a.items[0];
    }
    return n;
}

/* ------------------------------------------------------------ oracle */

static int check_against_oracle(const ld_gguf *g, const cJSON *o, const char *name)
{
    CHECK_EQ_INT(g->version, jint(o, "version"));
    CHECK_MSG(g->big_endian == !strcmp(jstr(o, "byte_order"), "big"), "%s", name);
    CHECK_EQ_INT(g->n_kv, jint(o, "kv_count"));
    CHECK_EQ_INT(g->n_tensors, jint(o, "tensor_count"));
    CHECK_EQ_INT(g->alignment, jint(o, "alignment"));
    CHECK_EQ_INT(g->data_offset, jint(o, "data_offset"));
    CHECK_EQ_INT(g->size, jint(o, "size"));
    const cJSON *fields = cJSON_GetObjectItemCaseSensitive(o, "fields");
    const cJSON *nested = cJSON_GetObjectItemCaseSensitive(o, "nested");
    CHECK_EQ_INT(cJSON_GetArraySize(fields), g->n_kv);
    char why[700];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const ld_gguf_kv *kv = &g->kv[i];
        const cJSON *f = cJSON_GetArrayItem(fields, (int)i);
        const char *key = jstr(f, "key");
        CHECK_MSG(ld_gguf_str_eq(kv->key, key), "%s: key %" PRIu64 " is not '%s'", name, i, key);
        CHECK_MSG(ld_gguf_find(g, key) == kv, "%s: find('%s')", name, key);
        CHECK_MSG(kv->offset == (uint64_t)jint(f, "offset"), "%s: '%s' at %" PRIu64, name, key,
                  kv->offset);
        int types[16];
        int nt = types_of(&kv->value, types, 16);
        const cJSON *wt = cJSON_GetObjectItemCaseSensitive(f, "types");
        CHECK_MSG(nt == cJSON_GetArraySize(wt), "%s: '%s' has %d types", name, key, nt);
        for (int k = 0; k < nt; k++)
            CHECK_MSG(types[k] == cJSON_GetArrayItem(wt, k)->valueint, "%s: '%s' type %d", name,
                      key, k);
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(f, "value");
        if (kv->value.type == LD_GGUF_ARRAY) {
            int k = 0;
            CHECK_MSG(!flat_eq(g, &kv->value.v.a, want, &k, why, sizeof why), "%s: '%s': %s",
                      name, key, why);
            CHECK_MSG(k == cJSON_GetArraySize(want), "%s: '%s': %d leaves", name, key, k);
            const cJSON *nest = cJSON_GetObjectItemCaseSensitive(nested, key);
            if (nest)
                CHECK_MSG(!nested_eq(g, &kv->value.v.a, nest, why, sizeof why), "%s: '%s': %s",
                          name, key, why);
        } else {
            CHECK_MSG(!value_leaf_eq(&kv->value, want, why, sizeof why), "%s: '%s': %s", name,
                      key, why);
        }
    }
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(o, "tensors");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const ld_gguf_tensor *t = &g->tensors[i];
        const cJSON *w = cJSON_GetArrayItem(tensors, (int)i);
        const char *tn = jstr(w, "name");
        CHECK_MSG(ld_gguf_str_eq(t->name, tn), "%s: tensor %" PRIu64, name, i);
        CHECK(ld_gguf_find_tensor(g, tn) == t);
        CHECK_EQ_INT(t->type, jint(w, "type"));
        const char *type_name = ld_gguf_ggml_type(t->type, NULL, NULL);
        CHECK_MSG(type_name && !strcmp(type_name, jstr(w, "type_name")), "%s", tn);
        const cJSON *dims = cJSON_GetObjectItemCaseSensitive(w, "dims");
        CHECK_EQ_INT(t->n_dims, cJSON_GetArraySize(dims));
        for (uint32_t d = 0; d < t->n_dims; d++)
            CHECK_EQ_INT(t->dims[d], cJSON_GetArrayItem(dims, (int)d)->valuedouble);
        CHECK_EQ_INT(t->n_elements, jint(w, "n_elements"));
        CHECK_EQ_INT(t->n_bytes, jint(w, "n_bytes"));
        CHECK_EQ_INT(t->offset, jint(w, "offset"));
        CHECK_EQ_INT(g->data_offset + t->offset, jint(w, "data_offset"));
        char h[17];
        snprintf(h, sizeof h, "%016" PRIx64, fnv(FNV0, ld_gguf_tensor_data(g, t), (size_t)t->n_bytes));
        CHECK_MSG(!strcmp(h, jstr(w, "fnv1a64")), "%s: tensor '%s' data hash %s", name, tn, h);
    }
    CHECK(ld_gguf_find(g, "no.such.key") == NULL);
    CHECK(ld_gguf_find_tensor(g, "no.such.tensor") == NULL);
    return 0;
}

static int test_gguf_matches_gguf_py(void)
{
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char path[512], jpath[512];
        snprintf(path, sizeof path, GDIR "%s.gguf", fixtures[f]);
        snprintf(jpath, sizeof jpath, GDIR "%s.json", fixtures[f]);
        cJSON *o = load_json(jpath);
        CHECK_MSG(o, "cannot read %s", jpath);
        ld_gguf *g = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_gguf_open(path, &g, &err) == LD_OK, "%s: %s", path, err.msg);
        int rc = check_against_oracle(g, o, fixtures[f]);
        ld_gguf_close(g);
        /* the same from an exact-size buffer */
        size_t n;
        uint8_t *buf = ld_test_read_bytes(path, &n);
        CHECK(buf);
        CHECK_MSG(ld_gguf_parse(buf, n, &g, &err) == LD_OK, "%s: %s", path, err.msg);
        if (rc == 0) rc = check_against_oracle(g, o, fixtures[f]);
        ld_gguf_close(g);
        free(buf);
        cJSON_Delete(o);
        if (rc) return rc;
    }
    return 0;
}

static int test_gguf_typed_lookups(void)
{
    ld_gguf *g = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_gguf_open(GDIR "chat.gguf", &g, &err) == LD_OK, "%s", err.msg);
    ld_gguf_str s;
    CHECK(ld_gguf_get_str(g, "general.name", &s, &err) == LD_OK && ld_gguf_str_eq(s, "tiny-chat"));
    CHECK(ld_gguf_get_str(g, "tokenizer.chat_template.tool_use", &s, &err) == LD_OK);
    char *t = ld_gguf_strdup(s);
    CHECK(t && !strcmp(t, "tool:{{ messages | length }}{{ eos_token }}"));
    free(t);
    int64_t bos = -1, eos = -1;
    CHECK(ld_gguf_get_int(g, "tokenizer.ggml.bos_token_id", &bos, &err) == LD_OK && bos == 1);
    CHECK(ld_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos, &err) == LD_OK && eos == 2);
    const ld_gguf_str *toks;
    uint64_t n;
    CHECK(ld_gguf_get_str_array(g, "tokenizer.ggml.tokens", &toks, &n, &err) == LD_OK);
    CHECK_EQ_INT(n, 10);
    CHECK(ld_gguf_str_eq(toks[1], "<s>") && ld_gguf_str_eq(toks[6], "\xc4\xa0the"));
    /* wrong types and absent keys name the key and what was found */
    CHECK(ld_gguf_get_int(g, "general.name", &bos, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "'general.name'") && strstr(err.msg, "is a string, expected an integer"),
              "%s", err.msg);
    CHECK(ld_gguf_get_str_array(g, "tokenizer.ggml.token_type", &toks, &n, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "an array of int32"), "%s", err.msg);
    CHECK(ld_gguf_get_str(g, "tokenizer.ggml.tokens", &s, &err) == LD_ERR_MISMATCH);
    CHECK(ld_gguf_get_str(g, "nope", &s, &err) == LD_ERR_MISMATCH);
    CHECK_MSG(strstr(err.msg, "no key 'nope'"), "%s", err.msg);
    ld_gguf_close(g);
    /* uint64 over int64 */
    CHECK_MSG(ld_gguf_open(GDIR "all_types.gguf", &g, &err) == LD_OK, "%s", err.msg);
    int64_t v;
    CHECK(ld_gguf_get_int(g, "t.u64", &v, &err) == LD_ERR_NUMERIC);
    CHECK(ld_gguf_get_int(g, "t.i64", &v, &err) == LD_OK && v == INT64_MIN);
    CHECK(ld_gguf_get_int(g, "t.u8", &v, &err) == LD_OK && v == 255);
    CHECK(ld_gguf_get_int(g, "t.bool_t", &v, &err) == LD_ERR_MISMATCH);
    const ld_gguf_kv *kv = ld_gguf_find(g, "a.i8");
    uint64_t u;
    CHECK(kv && !ld_gguf_array_uint(g, &kv->value.v.a, 0, &u)); /* -1 */
    CHECK(ld_gguf_array_uint(g, &kv->value.v.a, 2, &u) && u == 127);
    CHECK(!ld_gguf_array_int(g, &kv->value.v.a, 3, &v)); /* out of range */
    double d;
    CHECK(!ld_gguf_array_float(g, &kv->value.v.a, 0, &d));
    ld_gguf_close(g);
    /* open errors carry the path */
    CHECK(ld_gguf_open(GDIR "missing.gguf", &g, &err) == LD_ERR_IO && g == NULL);
    CHECK(err.path && strstr(err.path, "missing.gguf"));
    CHECK(ld_gguf_open(GDIR "chat.json", &g, &err) == LD_ERR_SYNTAX);
    CHECK_MSG(strstr(err.msg, "magic 'GGUF'") && err.path, "%s", err.msg);
    return 0;
}

/* Every proper prefix of a fixture is refused as truncated, at an offset
 * inside the prefix, without reading past it. */
static int test_gguf_every_prefix_truncated(void)
{
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        char path[512];
        snprintf(path, sizeof path, GDIR "%s.gguf", fixtures[f]);
        size_t n;
        uint8_t *full = ld_test_read_bytes(path, &n);
        CHECK(full);
        /* the file is whole once its last tensor's data is there (the
         * padding after it is optional) */
        ld_gguf *whole = NULL;
        CHECK(ld_gguf_parse(full, n, &whole, NULL) == LD_OK && whole->n_tensors > 0);
        size_t end = 0;
        for (uint64_t t = 0; t < whole->n_tensors; t++) {
            const ld_gguf_tensor *ti = &whole->tensors[t];
            if (whole->data_offset + ti->offset + ti->n_bytes > end)
                end = (size_t)(whole->data_offset + ti->offset + ti->n_bytes);
        }
        ld_gguf_close(whole);
        for (size_t len = 0; len < n; len++) {
            uint8_t *b = malloc(len ? len : 1);
            CHECK(b);
            memcpy(b, full, len);
            ld_gguf *g = NULL;
            ld_error err;
            ld_error_clear(&err);
            ld_status st = ld_gguf_parse(b, len, &g, &err);
            free(b);
            ld_gguf_close(g);
            if (len >= end) {
                CHECK_MSG(st == LD_OK, "%s[:%zu]: %s", fixtures[f], len, err.msg);
                continue;
            }
            CHECK_MSG(st == LD_ERR_TRUNCATED && g == NULL, "%s[:%zu]: %d %s", fixtures[f], len,
                      (int)st, err.msg);
            CHECK_MSG(err.offset <= len, "%s[:%zu]: offset %" PRIu64, fixtures[f], len, err.offset);
        }
        free(full);
    }
    return 0;
}

/* ------------------------------------------------------------ hand-built */

typedef struct wb {
    uint8_t b[8192];
    size_t n;
} wb;

static void put(wb *w, const void *p, size_t n)
{
    if (w->n + n <= sizeof w->b) memcpy(w->b + w->n, p, n);
    w->n += n;
}
static void u8(wb *w, uint8_t v) { put(w, &v, 1); }
static void u32(wb *w, uint32_t v)
{
    for (int k = 0; k < 4; k++) u8(w, (uint8_t)(v >> (8 * k)));
}
static void u64(wb *w, uint64_t v)
{
    for (int k = 0; k < 8; k++) u8(w, (uint8_t)(v >> (8 * k)));
}
static void str(wb *w, const char *s)
{
    u64(w, strlen(s));
    put(w, s, strlen(s));
}
static void header(wb *w, uint64_t n_tensors, uint64_t n_kv)
{
    w->n = 0;
    put(w, "GGUF", 4);
    u32(w, 3);
    u64(w, n_tensors);
    u64(w, n_kv);
}
static void pad_to(wb *w, size_t align)
{
    while (w->n % align) u8(w, 0);
}

/* Parses w's bytes (an exact-size copy); returns the status, with err. */
static ld_status parse_wb(const wb *w, ld_error *err)
{
    uint8_t *b = malloc(w->n ? w->n : 1);
    if (!b) return LD_ERR_NOMEM;
    memcpy(b, w->b, w->n);
    ld_gguf *g = NULL;
    ld_error_clear(err);
    ld_status st = ld_gguf_parse(b, w->n, &g, err);
    if (st == LD_OK && !g) st = LD_ERR_USAGE;
    if (st != LD_OK && g) st = LD_ERR_USAGE;
    if (st != LD_OK && err->offset > w->n) st = LD_ERR_USAGE; /* offset outside */
    ld_gguf_close(g);
    free(b);
    return st;
}

#define EXPECT(w, code, off, text)                                                  \
    do {                                                                            \
        ld_error e_;                                                                \
        ld_status s_ = parse_wb((w), &e_);                                          \
        CHECK_MSG(s_ == (code), "status %d (want %d): %s", (int)s_, (int)(code), e_.msg); \
        if ((code) != LD_OK) {                                                      \
            CHECK_MSG(e_.offset == (uint64_t)(off), "offset %" PRIu64 " (want %llu): %s", \
                      e_.offset, (unsigned long long)(off), e_.msg);                \
            CHECK_MSG(strstr(e_.msg, (text)), "'%s' lacks '%s'", e_.msg, (text));   \
        }                                                                           \
    } while (0)

static int test_gguf_header_errors(void)
{
    wb w = { .n = 0 };
    EXPECT(&w, LD_ERR_TRUNCATED, 0, "expected the magic 'GGUF' (4 bytes), 0 left");
    put(&w, "GGUX", 4);
    EXPECT(&w, LD_ERR_SYNTAX, 0, "not a gguf file");
    header(&w, 0, 0);
    EXPECT(&w, LD_OK, 0, "");
    w.b[4] = 1;
    EXPECT(&w, LD_ERR_UNSUPPORTED, 4, "version 1");
    w.b[4] = 4;
    EXPECT(&w, LD_ERR_UNSUPPORTED, 4, "version 4 at byte 4");
    w.b[4] = 2;
    EXPECT(&w, LD_OK, 0, "");
    w.n = 20;
    EXPECT(&w, LD_ERR_TRUNCATED, 16, "expected the key/value count (8 bytes), 4 left");
    /* absurd counts fail before anything is allocated */
    header(&w, 0, (uint64_t)1 << 62);
    EXPECT(&w, LD_ERR_LIMIT, 16, "over the limit");
    header(&w, (uint64_t)1 << 62, 0);
    EXPECT(&w, LD_ERR_LIMIT, 8, "tensor count");
    header(&w, 0, 1000);
    put(&w, "0123456789", 10);
    EXPECT(&w, LD_ERR_TRUNCATED, 16, "needs at least 13000 bytes, 10 left");
    header(&w, 1000, 0);
    EXPECT(&w, LD_ERR_TRUNCATED, 8, "tensor count 1000");
    /* a big-endian file: version 3 byte-swapped, counts too */
    w.n = 0;
    put(&w, "GGUF", 4);
    put(&w, "\0\0\0\3", 4);
    put(&w, "\0\0\0\0\0\0\0\0", 8);
    put(&w, "\0\0\0\0\0\0\0\1", 8);
    put(&w, "\0\0\0\0\0\0\0\1k", 9);
    put(&w, "\0\0\0\4", 4);
    put(&w, "\1\2\3\4", 4);
    {
        ld_gguf *g = NULL;
        ld_error err;
        CHECK(ld_gguf_parse(w.b, w.n, &g, &err) == LD_OK);
        CHECK(g->big_endian && g->version == 3 && g->n_kv == 1);
        CHECK(g->kv[0].value.v.u == 0x01020304u);
        ld_gguf_close(g);
    }
    return 0;
}

static int test_gguf_kv_errors(void)
{
    wb w;
    /* key length over the limit, and longer than the file */
    header(&w, 0, 1);
    u64(&w, (uint64_t)1 << 40);
    put(&w, "xxxxxxxx", 8);
    EXPECT(&w, LD_ERR_LIMIT, 24, "key at byte 24 is 1099511627776 bytes long");
    header(&w, 0, 1);
    u64(&w, 100);
    put(&w, "abcdef", 6);
    EXPECT(&w, LD_ERR_TRUNCATED, 32, "expected key of 100 bytes, 6 left");
    header(&w, 0, 1);
    str(&w, "");
    u32(&w, LD_GGUF_UINT8);
    u8(&w, 1);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "is empty");
    header(&w, 0, 1);
    u64(&w, 3);
    put(&w, "a\0b", 3);
    u32(&w, LD_GGUF_UINT8);
    u8(&w, 1);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "contains a NUL byte");
    /* unknown value type, at its own offset */
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, 13);
    u8(&w, 0);
    EXPECT(&w, LD_ERR_SYNTAX, 33, "value type at byte 33 is 13, expected a value type 0-12");
    /* bools are 0 or 1 */
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_BOOL);
    u8(&w, 2);
    EXPECT(&w, LD_ERR_SYNTAX, 37, "bool at byte 37 is 2");
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, LD_GGUF_BOOL);
    u64(&w, 3);
    put(&w, "\1\0\7", 3);
    EXPECT(&w, LD_ERR_SYNTAX, 51, "bool at byte 51 is 7");
    /* a value cut short */
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_UINT64);
    put(&w, "\1\2\3", 3);
    EXPECT(&w, LD_ERR_TRUNCATED, 37, "expected uint64 (8 bytes), 3 left");
    /* an absurd array length fails before allocating */
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, LD_GGUF_STRING);
    u64(&w, (uint64_t)1 << 60);
    u64(&w, 0);
    EXPECT(&w, LD_ERR_TRUNCATED, 41, "claims 1152921504606846976 string items");
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, LD_GGUF_UINT32);
    u64(&w, 3);
    u32(&w, 1);
    EXPECT(&w, LD_ERR_TRUNCATED, 41, "claims 3 uint32 items (at least 12 bytes), 4 bytes left");
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, 99);
    EXPECT(&w, LD_ERR_SYNTAX, 37, "array item type at byte 37 is 99");
    /* empty arrays, and empty nested arrays, are fine */
    header(&w, 0, 2);
    str(&w, "e");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, LD_GGUF_STRING);
    u64(&w, 0);
    str(&w, "n");
    u32(&w, LD_GGUF_ARRAY);
    u32(&w, LD_GGUF_ARRAY);
    u64(&w, 1);
    u32(&w, LD_GGUF_INT32);
    u64(&w, 0);
    EXPECT(&w, LD_OK, 0, "");
    /* duplicate keys */
    header(&w, 0, 2);
    str(&w, "dup");
    u32(&w, LD_GGUF_UINT8);
    u8(&w, 1);
    str(&w, "dup");
    u32(&w, LD_GGUF_UINT8);
    u8(&w, 2);
    EXPECT(&w, LD_ERR_MISMATCH, 40, "key 'dup' at byte 40 was already set at byte 24");
    return 0;
}

/* Arrays nest up to LD_GGUF_MAX_DEPTH levels. */
static int test_gguf_nesting_limit(void)
{
    wb w;
    for (int levels = LD_GGUF_MAX_DEPTH; levels <= LD_GGUF_MAX_DEPTH + 1; levels++) {
        header(&w, 0, 1);
        str(&w, "deep");
        u32(&w, LD_GGUF_ARRAY);
        for (int l = 1; l < levels; l++) {
            u32(&w, LD_GGUF_ARRAY);
            u64(&w, 1);
        }
        u32(&w, LD_GGUF_UINT8);
        u64(&w, 1);
        u8(&w, 42);
        if (levels == LD_GGUF_MAX_DEPTH) {
            EXPECT(&w, LD_OK, 0, "");
        } else {
            /* the array whose items would be the ninth level */
            EXPECT(&w, LD_ERR_LIMIT, 40 + 12 * (LD_GGUF_MAX_DEPTH - 1), "deeper than 8");
        }
    }
    return 0;
}

/* One tensor info after a general.alignment key (`align` 0 = none). */
static void tensor_file(wb *w, uint32_t align_type, uint64_t align, const char *name,
                        uint32_t n_dims, const uint64_t *dims, uint32_t type, uint64_t offset,
                        size_t data_bytes)
{
    header(w, 1, align ? 1 : 0);
    if (align) {
        str(w, "general.alignment");
        u32(w, align_type);
        if (align_type == LD_GGUF_UINT64) u64(w, align);
        else u32(w, (uint32_t)align);
    }
    str(w, name);
    u32(w, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) u64(w, dims[d]);
    u32(w, type);
    u64(w, offset);
    pad_to(w, align && align_type == LD_GGUF_UINT32 && !(align & (align - 1)) ? (size_t)align : 32);
    for (size_t k = 0; k < data_bytes; k++) u8(w, (uint8_t)k);
}

static int test_gguf_tensor_errors(void)
{
    wb w;
    uint64_t d2[2] = { 3, 2 };
    tensor_file(&w, 0, 0, "t", 2, d2, 0, 0, 24);
    EXPECT(&w, LD_OK, 0, "");
    {
        ld_gguf *g = NULL;
        ld_error err;
        CHECK(ld_gguf_parse(w.b, w.n, &g, &err) == LD_OK);
        CHECK(g->data_offset == 96 && g->tensors[0].n_bytes == 24);
        CHECK(g->tensors[0].dims[2] == 1 && g->tensors[0].dims[3] == 1);
        CHECK((const uint8_t *)ld_gguf_tensor_data(g, &g->tensors[0]) == w.b + 96);
        ld_gguf_close(g);
    }
    /* data one byte short */
    tensor_file(&w, 0, 0, "t", 2, d2, 0, 0, 23);
    EXPECT(&w, LD_ERR_TRUNCATED, 24, "data at 96 + 24 bytes ends past the file's 119 bytes");
    /* tensor infos end, the data section would start past the end */
    tensor_file(&w, 0, 0, "t", 2, d2, 0, 0, 0);
    w.n = 80;
    EXPECT(&w, LD_ERR_TRUNCATED, 65, "gguf truncated at byte 65: expected the data section at byte 96");
    uint64_t d5[5] = { 1, 1, 1, 1, 1 };
    tensor_file(&w, 0, 0, "t", 5, d5, 0, 0, 4);
    EXPECT(&w, LD_ERR_SYNTAX, 33, "n_dims at byte 33 is 5, at most 4");
    uint64_t neg[1] = { (uint64_t)1 << 63 };
    tensor_file(&w, 0, 0, "t", 1, neg, 0, 0, 0);
    EXPECT(&w, LD_ERR_SYNTAX, 37, "dimension at byte 37 is negative");
    uint64_t big[2] = { (uint64_t)1 << 40, (uint64_t)1 << 30 };
    tensor_file(&w, 0, 0, "t", 2, big, 0, 0, 0);
    EXPECT(&w, LD_ERR_SYNTAX, 45, "2 dimensions overflow 64 bits");
    uint64_t d1[1] = { 32 };
    tensor_file(&w, 0, 0, "t", 1, d1, 4, 0, 0); /* Q4_2, removed from ggml */
    EXPECT(&w, LD_ERR_UNSUPPORTED, 45, "unknown ggml type 4 at byte 45");
    tensor_file(&w, 0, 0, "t", 1, d1, 1000, 0, 0);
    EXPECT(&w, LD_ERR_UNSUPPORTED, 45, "unknown ggml type 1000");
    uint64_t d33[1] = { 33 };
    tensor_file(&w, 0, 0, "t", 1, d33, 8, 0, 64);
    EXPECT(&w, LD_ERR_SYNTAX, 45, "first dimension 33 is not a multiple of Q8_0's block of 32");
    tensor_file(&w, 0, 0, "t", 1, d1, 8, 0, 34); /* one Q8_0 block */
    EXPECT(&w, LD_OK, 0, "");
    tensor_file(&w, 0, 0, "t", 1, d1, 0, 16, 200);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "data offset 16 is not a multiple of the alignment 32");
    /* names: at most 64 bytes, no NUL */
    char name[80];
    memset(name, 'n', sizeof name);
    name[65] = 0;
    tensor_file(&w, 0, 0, name, 1, d1, 0, 0, 128);
    EXPECT(&w, LD_ERR_LIMIT, 24, "tensor name at byte 24 is 65 bytes long, at most 64");
    name[64] = 0;
    tensor_file(&w, 0, 0, name, 1, d1, 0, 0, 128);
    EXPECT(&w, LD_OK, 0, "");
    /* alignment: a uint32 power of two */
    tensor_file(&w, LD_GGUF_UINT32, 64, "t", 1, d1, 0, 64, 256);
    EXPECT(&w, LD_OK, 0, "");
    tensor_file(&w, LD_GGUF_UINT32, 64, "t", 1, d1, 0, 32, 256);
    EXPECT(&w, LD_ERR_SYNTAX, 57, "not a multiple of the alignment 64");
    tensor_file(&w, LD_GGUF_UINT32, 48, "t", 1, d1, 0, 0, 256);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "'general.alignment' at byte 24 is 48, expected a power of two");
    tensor_file(&w, LD_GGUF_UINT32, 0, "t", 1, d1, 0, 0, 256);
    EXPECT(&w, LD_OK, 0, ""); /* align 0 here means: no key */
    header(&w, 0, 1);
    str(&w, "general.alignment");
    u32(&w, LD_GGUF_UINT32);
    u32(&w, 0);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "is 0, expected a power of two");
    tensor_file(&w, LD_GGUF_UINT64, 64, "t", 1, d1, 0, 0, 256);
    EXPECT(&w, LD_ERR_SYNTAX, 24, "is a uint64, expected uint32");
    /* duplicate tensor names */
    header(&w, 2, 0);
    for (int k = 0; k < 2; k++) {
        str(&w, "same");
        u32(&w, 1);
        u64(&w, 4);
        u32(&w, 0);
        u64(&w, 0);
    }
    pad_to(&w, 32);
    for (int k = 0; k < 16; k++) u8(&w, 0);
    EXPECT(&w, LD_ERR_MISMATCH, 60, "tensor 'same' at byte 60 is already described at byte 24");
    return 0;
}

/* A file of n F32 vectors: names[k] of lens[k] floats at data offset
 * offs[k], then `data_bytes` bytes of data. */
static void vectors_file(wb *w, int n, const char *const *names, const uint64_t *lens, const uint64_t *offs,
                         size_t data_bytes)
{
    header(w, (uint64_t)n, 0);
    for (int k = 0; k < n; k++) {
        str(w, names[k]);
        u32(w, 1);
        u64(w, lens[k]);
        u32(w, 0);
        u64(w, offs[k]);
    }
    pad_to(w, 32);
    for (size_t k = 0; k < data_bytes; k++) u8(w, (uint8_t)k);
}

/* Tensors whose data overlap are refused, as the safetensors reader
 * refuses them, whatever their order in the file; adjacent ranges and
 * empty tensors are not overlaps. */
static int test_gguf_overlapping_tensors(void)
{
    static const char *const ab[] = { "a", "b" }, *const abc[] = { "a", "b", "c" };
    wb w;
    /* two tensors on the same 32 bytes: infos at 24 and 57, data from 96 */
    vectors_file(&w, 2, ab, (const uint64_t[]){ 8, 8 }, (const uint64_t[]){ 0, 0 }, 32);
    EXPECT(&w, LD_ERR_MISMATCH, 57, "gguf tensor 'b' (info at byte 57): data at 96 + 32 bytes overlaps tensor 'a' "
                                    "(info at byte 24): data at 96 + 32 bytes");
    /* b inside a */
    vectors_file(&w, 2, ab, (const uint64_t[]){ 16, 8 }, (const uint64_t[]){ 0, 32 }, 64);
    EXPECT(&w, LD_ERR_MISMATCH, 57, "tensor 'b' (info at byte 57): data at 128 + 32 bytes overlaps tensor 'a' "
                                    "(info at byte 24): data at 96 + 64 bytes");
    /* the file's order is not the data's (infos at 24, 57, 90, data from
     * 128): c, a, b back to back are fine; a (0..64) over c (32..64) is
     * found though b lies between them in the file */
    vectors_file(&w, 3, abc, (const uint64_t[]){ 8, 8, 8 }, (const uint64_t[]){ 32, 64, 0 }, 96);
    EXPECT(&w, LD_OK, 0, "");
    vectors_file(&w, 3, abc, (const uint64_t[]){ 16, 8, 8 }, (const uint64_t[]){ 0, 64, 32 }, 96);
    EXPECT(&w, LD_ERR_MISMATCH, 90, "tensor 'c' (info at byte 90): data at 160 + 32 bytes overlaps tensor 'a' "
                                    "(info at byte 24): data at 128 + 64 bytes");
    /* a range one float too long: a's last float is b's first */
    vectors_file(&w, 2, ab, (const uint64_t[]){ 9, 8 }, (const uint64_t[]){ 0, 32 }, 64);
    EXPECT(&w, LD_ERR_MISMATCH, 57, "tensor 'b' (info at byte 57): data at 128 + 32 bytes overlaps tensor 'a' "
                                    "(info at byte 24): data at 96 + 36 bytes");
    /* an empty tensor at another's offset holds no bytes */
    vectors_file(&w, 2, ab, (const uint64_t[]){ 8, 0 }, (const uint64_t[]){ 0, 0 }, 32);
    EXPECT(&w, LD_OK, 0, "");
    return 0;
}

/* A file without tensors may end right after its key/values (the vocab-only
 * files do): the data section "starts" past the end. */
static int test_gguf_no_tensors_no_padding(void)
{
    wb w;
    header(&w, 0, 1);
    str(&w, "k");
    u32(&w, LD_GGUF_UINT8);
    u8(&w, 7);
    ld_gguf *g = NULL;
    ld_error err;
    CHECK(ld_gguf_parse(w.b, w.n, &g, &err) == LD_OK);
    CHECK_EQ_INT(g->data_offset, 64);
    CHECK(w.n == 38);
    ld_gguf_close(g);
    return 0;
}

/* ------------------------------------------------------------ ../shared */

static int test_gguf_shared_vocab_files(void)
{
    cJSON *facts = load_json(GDIR "shared.json");
    CHECK(facts);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(facts, "files");
    int checked = 0, n_files = cJSON_GetArraySize(files);
    for (int i = 0; i < n_files; i++) {
        const cJSON *f = cJSON_GetArrayItem(files, i);
        char path[1024];
        snprintf(path, sizeof path, "%s/tokenizers/%s", LD_SHARED_DIR, jstr(f, "file"));
        FILE *probe = fopen(path, "rb");
        if (!probe) {
            fprintf(stderr, "  skipped %s: not in %s/tokenizers\n", jstr(f, "file"), LD_SHARED_DIR);
            continue;
        }
        fseek(probe, 0, SEEK_END);
        long size = ftell(probe);
        fclose(probe);
        if (size != jint(f, "size")) {
            fprintf(stderr, "  skipped %s: %ld bytes, the facts are for %lld\n", path, size,
                    (long long)jint(f, "size"));
            continue;
        }
        ld_gguf *g = NULL;
        ld_error err;
        ld_error_clear(&err);
        CHECK_MSG(ld_gguf_open(path, &g, &err) == LD_OK, "%s: %s", path, err.msg);
        CHECK_EQ_INT(g->version, jint(f, "version"));
        CHECK_EQ_INT(g->n_kv, jint(f, "kv_count"));
        CHECK_EQ_INT(g->n_tensors, jint(f, "tensor_count"));
        CHECK_EQ_INT(g->alignment, jint(f, "alignment"));
        CHECK_EQ_INT(g->data_offset, jint(f, "data_offset"));
        ld_gguf_str s;
        CHECK(ld_gguf_get_str(g, "general.name", &s, &err) == LD_OK);
        CHECK_MSG(ld_gguf_str_eq(s, jstr(f, "name")), "%s: name", path);
        const ld_gguf_str *toks;
        uint64_t nt;
        CHECK(ld_gguf_get_str_array(g, "tokenizer.ggml.tokens", &toks, &nt, &err) == LD_OK);
        CHECK_EQ_INT(nt, jint(f, "n_tokens"));
        static const char *const which[] = { "bos", "eos" };
        for (int k = 0; k < 2; k++) {
            char key[64];
            snprintf(key, sizeof key, "%s_id", which[k]);
            if (!cJSON_GetObjectItemCaseSensitive(f, key)) continue;
            int64_t id;
            char gkey[64];
            snprintf(gkey, sizeof gkey, "tokenizer.ggml.%s_token_id", which[k]);
            CHECK(ld_gguf_get_int(g, gkey, &id, &err) == LD_OK);
            CHECK_EQ_INT(id, jint(f, key));
            CHECK(id >= 0 && (uint64_t)id < nt);
            snprintf(key, sizeof key, "%s_token", which[k]);
            CHECK_MSG(ld_gguf_str_eq(toks[id], jstr(f, key)), "%s: %s", path, key);
        }
        /* every field: offset, types, scalar value or array count + hash */
        const cJSON *fields = cJSON_GetObjectItemCaseSensitive(f, "fields");
        char why[700];
        for (uint64_t k = 0; k < g->n_kv; k++) {
            const ld_gguf_kv *kv = &g->kv[k];
            const cJSON *w = cJSON_GetArrayItem(fields, (int)k);
            CHECK_MSG(ld_gguf_str_eq(kv->key, jstr(w, "key")), "%s: key %" PRIu64, path, k);
            CHECK_EQ_INT(kv->offset, jint(w, "offset"));
            int types[8];
            int ntypes = types_of(&kv->value, types, 8);
            const cJSON *wt = cJSON_GetObjectItemCaseSensitive(w, "types");
            CHECK_EQ_INT(ntypes, cJSON_GetArraySize(wt));
            for (int t = 0; t < ntypes; t++) CHECK_EQ_INT(types[t], cJSON_GetArrayItem(wt, t)->valueint);
            if (kv->value.type != LD_GGUF_ARRAY) {
                CHECK_MSG(!value_leaf_eq(&kv->value, cJSON_GetObjectItemCaseSensitive(w, "value"),
                                         why, sizeof why), "%s: %s", jstr(w, "key"), why);
                continue;
            }
            const ld_gguf_array *a = &kv->value.v.a;
            CHECK_EQ_INT(a->n, jint(w, "count"));
            uint64_t h = FNV0;
            for (uint64_t j = 0; j < a->n; j++) {
                uint8_t le[8];
                if (a->type == LD_GGUF_STRING) {
                    for (int b = 0; b < 8; b++) le[b] = (uint8_t)(a->strs[j].len >> (8 * b));
                    h = fnv(h, le, 8);
                    h = fnv(h, a->strs[j].ptr, (size_t)a->strs[j].len);
                } else {
                    int64_t v = 0;
                    CHECK(ld_gguf_array_int(g, a, j, &v));
                    for (int b = 0; b < 8; b++) le[b] = (uint8_t)((uint64_t)v >> (8 * b));
                    h = fnv(h, le, 8);
                }
            }
            char hs[17];
            snprintf(hs, sizeof hs, "%016" PRIx64, h);
            CHECK_MSG(!strcmp(hs, jstr(w, "fnv1a64")), "%s: '%s' hash %s", path, jstr(w, "key"), hs);
            CHECK(!array_item_eq(g, a, 0, cJSON_GetObjectItemCaseSensitive(w, "first"), why, sizeof why));
            CHECK(!array_item_eq(g, a, a->n - 1, cJSON_GetObjectItemCaseSensitive(w, "last"), why,
                                 sizeof why));
        }
        ld_gguf_close(g);
        checked++;
    }
    cJSON_Delete(facts);
    if (!checked) SKIP("none of the %d vocab files of shared.json under %s/tokenizers", n_files,
                       LD_SHARED_DIR);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_gguf_matches_gguf_py),
    LD_CASE(test_gguf_typed_lookups),
    LD_CASE(test_gguf_every_prefix_truncated),
    LD_CASE(test_gguf_header_errors),
    LD_CASE(test_gguf_kv_errors),
    LD_CASE(test_gguf_nesting_limit),
    LD_CASE(test_gguf_tensor_errors),
    LD_CASE(test_gguf_overlapping_tensors),
    LD_CASE(test_gguf_no_tensors_no_padding),
    LD_CASE(test_gguf_shared_vocab_files),
};

LD_TEST_MAIN(cases)
