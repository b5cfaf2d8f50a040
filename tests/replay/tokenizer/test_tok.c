/* test_tok.c - the byte-level BPE tokenizer against HF `tokenizers`:
 * - llama.cpp's test vectors (../shared/tokenizers/ggml-vocab-*.gguf.inp/.out): gpt-2 through
 *   ../shared/tokenizers/gpt2-tokenizer.json and through its GGUF vocabulary, deepseek-llm and
 *   deepseek-coder through theirs, every case id for id;
 * - a >1 MB corpus of our own (tools/gen_tok_cases.py -> testdata/replay/tok/cases.json.zst):
 *   ids from HF tokenizers 0.23.3 for gpt2-tokenizer.json and variants of it (Qwen2-,
 *   Llama-3-, DeepSeek-V3-style pre-tokenizers, every Split behaviour, Digits, NFC/NFD/NFKC,
 *   added tokens with lstrip/rstrip/single_word/normalized, post-processors), each with
 *   add-special and parse-special on and off;
 * - decode(encode(x)) == x, invalid UTF-8 included; decoding HF's ids gives the text;
 * - load errors.
 * The shared gpt2-tokenizer.json has a merge whose product is not in its vocabulary (HF refuses
 * to load it as is); the cases file lists it and both sides drop it first. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "tests/support/ld_test.h"
#include "replay/tokenizer/tok.h"

#define SHARED_TOK LD_SHARED_DIR "/tokenizers/"

static cJSON *g_cases; /* the decompressed cases file */
static char *g_base;   /* gpt2-tokenizer.json text */

static cJSON *load_cases(void)
{
    if (g_cases) return g_cases;
    FILE *f = fopen(LD_TESTDATA_DIR "/replay/tok/cases.json.zst", "rb");
    if (!f) return NULL;
    size_t cap = 1 << 22, n = 0;
    char *in = malloc(cap), *out = NULL;
    for (size_t got; in && (got = fread(in + n, 1, cap - n, f)) > 0;)
        if ((n += got) == cap) in = realloc(in, cap *= 2);
    fclose(f);
    ZSTD_DStream *ds = ZSTD_createDStream();
    ZSTD_inBuffer ib = { in, n, 0 };
    size_t ocap = 1 << 24;
    ZSTD_outBuffer ob = { out = malloc(ocap), ocap, 0 };
    while (ib.pos < ib.size) {
        if (ZSTD_isError(ZSTD_decompressStream(ds, &ob, &ib))) break;
        if (ob.pos == ob.size) {
            out = realloc(out, ocap *= 2);
            ob.dst = out;
            ob.size = ocap;
        }
    }
    ZSTD_freeDStream(ds);
    g_cases = cJSON_ParseWithLength(out, ob.pos);
    free(in);
    free(out);
    return g_cases;
}

/* A tokenizer: gpt2-tokenizer.json less the removed merges, with a config's patch. */
static ld_tok *make_tok(const char *config)
{
    if (!g_base && !(g_base = ld_test_slurp(SHARED_TOK "gpt2-tokenizer.json"))) return NULL;
    cJSON *root = cJSON_Parse(g_base), *cases = load_cases();
    if (!root || !cases) return NULL;
    cJSON *model = cJSON_GetObjectItem(root, "model"), *merges = cJSON_GetObjectItem(model, "merges");
    const cJSON *rm;
    cJSON_ArrayForEach(rm, cJSON_GetObjectItem(cases, "removed_merges")) {
        for (cJSON *m = merges->child; m; m = m->next)
            if (!strcmp(m->valuestring, rm->valuestring)) {
                cJSON_Delete(cJSON_DetachItemViaPointer(merges, m));
                break;
            }
    }
    const cJSON *patch = cJSON_GetObjectItem(cJSON_GetObjectItem(cases, "configs"), config), *p;
    cJSON_ArrayForEach(p, patch) { /* replace or add */
        int im = !strcmp(p->string, "model_ignore_merges");
        cJSON *obj = im ? model : root;
        const char *key = im ? "ignore_merges" : p->string;
        cJSON *v = im ? cJSON_CreateBool(cJSON_IsTrue(p)) : cJSON_Duplicate(p, 1);
        if (cJSON_GetObjectItem(obj, key)) cJSON_ReplaceItemInObject(obj, key, v);
        else cJSON_AddItemToObject(obj, key, v);
    }
    char *js = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    ld_tok *t = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_load_json(js, strlen(js), &t, &err) != LD_OK) fprintf(stderr, "  %s: %s\n", config, err.msg);
    free(js);
    return t;
}

static void print_ids(const char *what, const int32_t *v, size_t n)
{
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", (int)v[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Encodes and compares with `want`; prints the first difference. */
static int same_ids(const ld_tok *t, const char *text, size_t len, unsigned flags, const int32_t *want, size_t n_want,
                    const char *label, int quiet)
{
    int32_t *ids = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_encode(t, text, len, flags, &ids, &n, &err) != LD_OK) {
        fprintf(stderr, "  %s: encode failed: %s\n", label, err.msg);
        return 0;
    }
    int ok = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!ok && !quiet) {
        fprintf(stderr, "  %s (flags %u): text \"%.80s\"\n", label, flags, text);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    free(ids);
    return ok;
}

static int round_trips(const ld_tok *t, const char *text, size_t len, unsigned flags)
{
    int32_t *ids = NULL;
    size_t n = 0, m = 0;
    char *back = NULL;
    int ok = ld_tok_encode(t, text, len, flags, &ids, &n, NULL) == LD_OK &&
             ld_tok_decode(t, ids, n, &back, &m, NULL) == LD_OK && m == len && memcmp(back, text, len) == 0;
    if (!ok) fprintf(stderr, "  round trip failed (flags %u): \"%.80s\"\n", flags, text);
    free(ids);
    free(back);
    return ok;
}

/* llama.cpp's test vectors ggml-vocab-<model>.gguf.inp/.out through `t`
 * (owned; freed here): every case id for id, and decode(encode(x)) == x. */
static int run_vectors(const char *model, ld_tok *t)
{
    char inp_path[512], out_path[512];
    snprintf(inp_path, sizeof inp_path, SHARED_TOK "ggml-vocab-%s.gguf.inp", model);
    snprintf(out_path, sizeof out_path, SHARED_TOK "ggml-vocab-%s.gguf.out", model);
    char *inp = ld_test_slurp(inp_path), *out = ld_test_slurp(out_path);
    if (!inp || !out || !t) {
        free(inp);
        free(out);
        ld_tok_free(t);
        SKIP("%s or its tokenizer absent", inp_path);
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    int cases = 0, matched = 0, trips = 0;
    char *p = inp, *line = out;
    for (char *end; (end = strstr(p, sep)); p = end + strlen(sep), cases++) {
        char *nl = strchr(line, '\n');
        CHECK(nl);
        *nl = 0;
        int32_t want[512];
        size_t n = 0;
        for (char *q = line; *q && n < 512;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            want[n++] = (int32_t)v;
            q = e;
        }
        char label[64];
        snprintf(label, sizeof label, "%s case %d", model, cases);
        matched += same_ids(t, p, (size_t)(end - p), 0, want, n, label, 0);
        trips += round_trips(t, p, (size_t)(end - p), 0);
        line = nl + 1;
    }
    fprintf(stderr, "  llama.cpp %s vectors: %d/%d cases match, %d round trips\n", model, matched, cases,
            trips);
    ld_tok_free(t);
    free(inp);
    free(out);
    CHECK_EQ_INT(cases, 46);
    CHECK_EQ_INT(matched, cases);
    CHECK_EQ_INT(trips, cases);
    return 0;
}

/* The vocabulary of a shared vocab-only GGUF, NULL (message printed) if it
 * does not load. */
static ld_tok *gguf_tok(const char *model)
{
    char path[512];
    snprintf(path, sizeof path, SHARED_TOK "ggml-vocab-%s.gguf", model);
    ld_tok *t = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_load(path, &t, &err) != LD_OK) fprintf(stderr, "  %s: %s\n", path, err.msg);
    return t;
}

static int test_tok_llama_cpp_gpt2_vectors(void) { return run_vectors("gpt-2", make_tok("gpt2")); }
static int test_tok_gguf_gpt2_vectors(void) { return run_vectors("gpt-2", gguf_tok("gpt-2")); }
static int test_tok_gguf_deepseek_llm_vectors(void) { return run_vectors("deepseek-llm", gguf_tok("deepseek-llm")); }
static int test_tok_gguf_deepseek_coder_vectors(void)
{
    return run_vectors("deepseek-coder", gguf_tok("deepseek-coder"));
}

static int run_config(const char *config, int check_round_trip)
{
    if (!load_cases()) SKIP("testdata/replay/tok/cases.json.zst unreadable");
    ld_tok *t = make_tok(config);
    if (!t && !g_base) SKIP("%s absent", SHARED_TOK "gpt2-tokenizer.json");
    CHECK(t);
    const cJSON *texts = cJSON_GetObjectItem(g_cases, "texts"), *c;
    int n = 0, matched = 0, trips = 0, failed_trips = 0;
    size_t bytes = 0;
    int32_t *want = NULL;
    size_t cap = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_cases, "cases")) {
        if (strcmp(c->child->valuestring, config)) continue;
        unsigned hf = (unsigned)c->child->next->valueint;
        unsigned flags = (hf & 1 ? LD_TOK_ADD_SPECIAL : 0) | (hf & 2 ? LD_TOK_PARSE_SPECIAL : 0);
        const char *text = cJSON_GetArrayItem(texts, c->child->next->next->valueint)->valuestring;
        const cJSON *ids = c->child->next->next->next;
        size_t k = (size_t)cJSON_GetArraySize(ids), i = 0;
        if (k > cap) want = realloc(want, (cap = k * 2) * sizeof *want);
        for (const cJSON *e = ids->child; e; e = e->next) want[i++] = (int32_t)e->valueint;
        matched += same_ids(t, text, strlen(text), flags, want, k, config, n - matched >= 5);
        n++;
        bytes += strlen(text);
        if (check_round_trip && !(hf & 1)) {
            trips++;
            failed_trips += !round_trips(t, text, strlen(text), flags);
        }
    }
    fprintf(stderr, "  %s: %d/%d cases match (%zu bytes of text); %d/%d round trips\n", config, matched, n, bytes,
            trips - failed_trips, trips);
    free(want);
    ld_tok_free(t);
    CHECK(n > 0);
    CHECK_EQ_INT(matched, n);
    CHECK_EQ_INT(failed_trips, 0);
    return 0;
}

static int test_tok_corpus_gpt2(void) { return run_config("gpt2", 1); }
static int test_tok_corpus_qwen2(void) { return run_config("qwen2", 0); }
static int test_tok_corpus_llama3(void) { return run_config("llama3", 0); }
static int test_tok_corpus_dsv3(void) { return run_config("dsv3", 1); }
static int test_tok_corpus_split_prev(void) { return run_config("split_prev", 0); }
static int test_tok_corpus_split_next(void) { return run_config("split_next", 0); }
static int test_tok_corpus_split_contig(void) { return run_config("split_contig", 1); }
static int test_tok_corpus_split_invert(void) { return run_config("split_invert", 0); }

/* HF's own ids decode to the text (gpt2: no normalizer, nothing removed). */
static int test_tok_decode_hf_ids(void)
{
    if (!load_cases()) SKIP("cases absent");
    ld_tok *t = make_tok("gpt2");
    if (!t && !g_base) SKIP("gpt2-tokenizer.json absent");
    CHECK(t);
    const cJSON *texts = cJSON_GetObjectItem(g_cases, "texts"), *c;
    int n = 0, bad = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(g_cases, "cases")) {
        if (strcmp(c->child->valuestring, "gpt2") || c->child->next->valueint & 1) continue;
        const char *text = cJSON_GetArrayItem(texts, c->child->next->next->valueint)->valuestring;
        const cJSON *ids = c->child->next->next->next;
        size_t k = (size_t)cJSON_GetArraySize(ids), i = 0, len = 0;
        int32_t *v = malloc((k + 1) * sizeof *v);
        for (const cJSON *e = ids->child; e; e = e->next) v[i++] = (int32_t)e->valueint;
        char *out = NULL;
        CHECK(ld_tok_decode(t, v, k, &out, &len, NULL) == LD_OK);
        bad += len != strlen(text) || memcmp(out, text, len) != 0;
        n++;
        free(out);
        free(v);
    }
    fprintf(stderr, "  decoded %d HF id lists, %d differ from their text\n", n, bad);
    ld_tok_free(t);
    CHECK_EQ_INT(bad, 0);
    return 0;
}

/* Invalid UTF-8 (which HF cannot be given) round-trips, and lone bytes decode exactly. */
static int test_tok_invalid_utf8(void)
{
    if (!load_cases()) SKIP("cases absent");
    static const char *const configs[] = { "gpt2", "dsv3", "split_contig", "llama3" };
    static const char *const junk[] = { "\xff", "\xc3", "\xe4\xb8", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf", "\x80\x80" };
    const cJSON *texts = cJSON_GetObjectItem(g_cases, "texts");
    for (size_t c = 0; c < sizeof configs / sizeof *configs; c++) {
        ld_tok *t = make_tok(configs[c]);
        if (!t && !g_base) SKIP("gpt2-tokenizer.json absent");
        CHECK(t);
        unsigned seed = 12345;
        int n = 0, ok = 0;
        for (int i = 0; i < 600; i++) {
            const char *text = cJSON_GetArrayItem(texts, i)->valuestring;
            size_t len = strlen(text);
            char *buf = malloc(len + 64), *o = buf;
            for (size_t j = 0; j <= len; j++) { /* a junk sequence at ~3 random places */
                seed = seed * 1103515245u + 12345u;
                if ((seed >> 16) % (len + 1) < 3) {
                    const char *jk = junk[(seed >> 8) % (sizeof junk / sizeof *junk)];
                    if (o - buf + strlen(jk) < len + 60) o += strlen(strcpy(o, jk));
                }
                if (j < len) *o++ = text[j];
            }
            /* llama3's lstrip/rstrip added tokens take spaces: texts without them */
            if (c < 3 || !strchr(text, '<')) {
                n++;
                ok += round_trips(t, buf, (size_t)(o - buf), c == 0 ? LD_TOK_PARSE_SPECIAL : 0);
            }
            free(buf);
        }
        fprintf(stderr, "  %s: %d/%d texts with invalid UTF-8 round-trip\n", configs[c], ok, n);
        CHECK_EQ_INT(ok, n);
        /* every single byte decodes to itself */
        for (int b = 0; b < 256; b++) {
            char ch = (char)b, *out = NULL;
            int32_t id = ld_tok_find(t, &ch, 1);
            size_t len = 0;
            CHECK(id >= 0);
            CHECK(ld_tok_decode(t, &id, 1, &out, &len, NULL) == LD_OK && len == 1 && out[0] == ch);
            free(out);
        }
        ld_tok_free(t);
    }
    return 0;
}

static int test_tok_special_flags(void)
{
    ld_tok *t = make_tok("llama3");
    if (!t && !g_base) SKIP("gpt2-tokenizer.json absent");
    CHECK(t);
    int32_t *ids = NULL;
    size_t n = 0;
    const char *s = "<|begin_of_text|>hi";
    CHECK(ld_tok_encode(t, s, strlen(s), LD_TOK_PARSE_SPECIAL, &ids, &n, NULL) == LD_OK);
    CHECK(n == 2 && ids[0] == 50257);
    free(ids);
    CHECK(ld_tok_encode(t, s, strlen(s), 0, &ids, &n, NULL) == LD_OK);
    CHECK(n > 2 && ids[0] != 50257);
    free(ids);
    CHECK(ld_tok_encode(t, "", 0, LD_TOK_ADD_SPECIAL, &ids, &n, NULL) == LD_OK);
    CHECK(n == 1 && ids[0] == 50257);
    free(ids);
    CHECK(ld_tok_encode(t, "", 0, 0, &ids, &n, NULL) == LD_OK);
    CHECK(n == 0 && ids != NULL);
    free(ids);
    ld_tok_free(t);
    return 0;
}

static ld_status load_str(const char *js, ld_error *err)
{
    ld_tok *t = NULL;
    ld_status s = ld_tok_load_json(js, strlen(js), &t, err);
    ld_tok_free(t);
    return s;
}

static int test_tok_load_errors(void)
{
    ld_error err;
    ld_error_clear(&err);
    CHECK(load_str("{", &err) == LD_ERR_SYNTAX);
    const char *bl = "\"pre_tokenizer\":{\"type\":\"ByteLevel\"}";
    char js[1024];
    snprintf(js, sizeof js, "{%s,\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", bl);
    CHECK(load_str(js, &err) == LD_ERR_UNSUPPORTED && strstr(err.msg, "'WordPiece'"));
    snprintf(js, sizeof js, "{\"pre_tokenizer\":{\"type\":\"Metaspace\"},\"model\":{\"vocab\":{\"a\":0}}}");
    CHECK(load_str(js, &err) == LD_ERR_UNSUPPORTED && strstr(err.msg, "'Metaspace'"));
    snprintf(js, sizeof js, "{%s,\"model\":{\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", bl);
    CHECK(load_str(js, &err) == LD_ERR_MISMATCH && strstr(err.msg, "'a b'"));
    snprintf(js, sizeof js, "{%s,\"model\":{\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[[\"a\",\"b\"]]}}", bl);
    CHECK(load_str(js, &err) == LD_OK);
    snprintf(js, sizeof js, "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
                            "\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"},{\"type\":\"ByteLevel\"}]},"
                            "\"model\":{\"vocab\":{}}}");
    CHECK(load_str(js, &err) == LD_ERR_SYNTAX && strstr(err.msg, "regex"));
    ld_tok *t = NULL;
    CHECK(ld_tok_load(LD_TESTDATA_DIR "/no/such/tokenizer.json", &t, &err) == LD_ERR_IO && t == NULL);
    /* the shared file as it is: refused, like HF, naming the merge */
    if (ld_tok_load(SHARED_TOK "gpt2-tokenizer.json", &t, &err) != LD_ERR_IO) {
        CHECK(err.code == LD_ERR_MISMATCH && strstr(err.msg, "Cla ude"));
    }
    snprintf(js, sizeof js, "{%s,\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"vocab\":{\"a\":0}}}", bl);
    CHECK(ld_tok_load_json(js, strlen(js), &t, &err) == LD_OK);
    int32_t bad[2] = { 0, 7 };
    char *out = NULL;
    size_t len;
    CHECK(ld_tok_decode(t, bad, 2, &out, &len, &err) == LD_ERR_USAGE && err.offset == 1 && !out);
    ld_tok_free(t);
    return 0;
}

static int test_tok_cleanup(void)
{
    cJSON_Delete(g_cases);
    free(g_base);
    g_cases = NULL;
    g_base = NULL;
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_tok_llama_cpp_gpt2_vectors),
    LD_CASE(test_tok_gguf_gpt2_vectors),
    LD_CASE(test_tok_gguf_deepseek_llm_vectors),
    LD_CASE(test_tok_gguf_deepseek_coder_vectors),
    LD_CASE(test_tok_corpus_gpt2),
    LD_CASE(test_tok_corpus_qwen2),
    LD_CASE(test_tok_corpus_llama3),
    LD_CASE(test_tok_corpus_dsv3),
    LD_CASE(test_tok_corpus_split_prev),
    LD_CASE(test_tok_corpus_split_next),
    LD_CASE(test_tok_corpus_split_contig),
    LD_CASE(test_tok_corpus_split_invert),
    LD_CASE(test_tok_decode_hf_ids),
    LD_CASE(test_tok_invalid_utf8),
    LD_CASE(test_tok_special_flags),
    LD_CASE(test_tok_load_errors),
    LD_CASE(test_tok_cleanup),
};

LD_TEST_MAIN(cases)
