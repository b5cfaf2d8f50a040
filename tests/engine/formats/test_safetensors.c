/* test_safetensors.c - the safetensors reader (engine/formats/safetensors.h): the
 * tiny models of testdata/models/, the seed corpus of the fuzz target (each
 * damaged file refused with the error it deserves, naming the tensor), and
 * a sharded checkpoint with its index written to a temporary directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/ld_test.h"
#include "engine/formats/safetensors.h"

#define CORPUS LD_SOURCE_DIR "/tests/fuzz/corpus/safetensors/"

static int test_safetensors_valid(void)
{
    size_t n;
    uint8_t *b = ld_test_read_bytes(CORPUS "valid.safetensors", &n);
    CHECK(b);
    ld_safetensors *st = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_st_parse(b, n, &st, &err) == LD_OK, "%s", err.msg);
    CHECK_EQ_INT(st->n_tensors, 4);
    const ld_st_tensor *w = ld_st_find(st, "w"), *bt = ld_st_find(st, "b"), *s = ld_st_find(st, "s");
    const ld_st_tensor *z = ld_st_find(st, "z");
    CHECK(w && bt && s && z && !ld_st_find(st, "__metadata__") && !ld_st_find(st, "x"));
    CHECK(w->dtype == LD_DT_F32 && w->n_dims == 2 && w->shape[0] == 2 && w->shape[1] == 3 && w->n_bytes == 24);
    float f;
    memcpy(&f, w->data + 20, 4);
    CHECK(f == 6.0f);
    CHECK(bt->dtype == LD_DT_BF16 && bt->n_elems == 4 && bt->data[1] == 0x3f);
    CHECK(s->dtype == LD_DT_F16 && s->n_dims == 0 && s->n_elems == 1);
    CHECK(z->dtype == LD_DT_I32 && z->n_elems == 0 && z->n_bytes == 0);
    CHECK_EQ_STR(ld_dtype_name(LD_DT_BF16), "BF16");
    ld_st_close(st);
    free(b);
    return 0;
}

static int test_safetensors_refuses_damage(void)
{
    static const struct {
        const char *file;
        ld_status code;
        const char *msg;
    } cases[] = {
        {"truncated_0", LD_ERR_TRUNCATED, "8-byte"},
        {"truncated_4", LD_ERR_TRUNCATED, "8-byte"},
        {"truncated_8", LD_ERR_TRUNCATED, "runs past the end"},
        {"truncated_40", LD_ERR_TRUNCATED, "runs past the end"},
        {"header_len_huge", LD_ERR_LIMIT, "exceeds"},
        {"header_len_past_end", LD_ERR_TRUNCATED, "runs past the end"},
        {"offsets_past_end", LD_ERR_TRUNCATED, "tensor 'w': data_offsets [0, 240] run past"},
        {"shape_mismatch", LD_ERR_MISMATCH, "tensor 'w': shape x F32 size"},
        {"overlap", LD_ERR_MISMATCH, "overlaps"},
        {"begin_after_end", LD_ERR_SYNTAX, "tensor 'b': data_offsets"},
        {"unknown_dtype", LD_ERR_UNSUPPORTED, "tensor 'w': dtype 'F4'"},
        {"negative_dim", LD_ERR_SYNTAX, "tensor 'w': shape"},
        {"fractional_dim", LD_ERR_SYNTAX, "tensor 'w': shape"},
        {"huge_dims", LD_ERR_LIMIT, "tensor 'w': element count overflows"},
        {"nine_dims", LD_ERR_LIMIT, "tensor 'w': 9 dimensions"},
        {"metadata_not_object", LD_ERR_SYNTAX, "'__metadata__'"},
        {"entry_not_object", LD_ERR_SYNTAX, "tensor 'w'"},
        {"no_offsets", LD_ERR_SYNTAX, "tensor 'w': needs"},
        {"duplicate_name", LD_ERR_MISMATCH, "tensor 'w' appears twice"},
        {"not_json", LD_ERR_SYNTAX, "not a JSON object"},
        {"array_header", LD_ERR_SYNTAX, "not a JSON object"},
        {"deep_json", LD_ERR_SYNTAX, "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, CORPUS "%s.safetensors", cases[i].file);
        size_t n;
        uint8_t *b = ld_test_read_bytes(path, &n);
        CHECK_MSG(b, "%s", path);
        ld_safetensors *st = NULL;
        ld_error err;
        ld_error_clear(&err);
        ld_status s = ld_st_parse(b, n, &st, &err);
        CHECK_MSG(s == cases[i].code && !st && strstr(err.msg, cases[i].msg), "%s: %s (%s)", cases[i].file,
                  ld_strerror(s), err.msg);
        free(b);
    }
    return 0;
}

static int test_safetensors_open_model_dir(void)
{
    ld_safetensors *st = NULL;
    ld_error err;
    ld_error_clear(&err);
    CHECK_MSG(ld_st_open(LD_TESTDATA_DIR "/models/qwen2", &st, &err) == LD_OK, "%s", err.msg);
    const ld_st_tensor *t = ld_st_find(st, "model.layers.1.self_attn.k_proj.bias");
    CHECK(t && t->dtype == LD_DT_F32 && t->n_dims == 1 && t->shape[0] == 32);
    CHECK(!ld_st_find(st, "lm_head.weight")); /* tied */
    ld_st_close(st);
    CHECK_MSG(ld_st_open(LD_TESTDATA_DIR "/models/llama3-bf16/model.safetensors", &st, &err) == LD_OK, "%s",
              err.msg);
    t = ld_st_find(st, "lm_head.weight");
    CHECK(t && t->dtype == LD_DT_BF16 && t->shape[0] == 300 && t->shape[1] == 64);
    ld_st_close(st);
    CHECK(ld_st_open(LD_TESTDATA_DIR "/models", &st, &err) == LD_ERR_IO && !st);
    return 0;
}

static int write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    int bad = fwrite(p, 1, n, f) != n;
    return fclose(f) != 0 || bad;
}

static size_t mk(uint8_t *out, const char *header, size_t data)
{
    size_t h = strlen(header);
    for (int i = 0; i < 8; i++) out[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(out + 8, header, h);
    memset(out + 8 + h, 0, data);
    return 8 + h + data;
}

static void rm_dir(const char *dir, const char *const *names, size_t n)
{
    char path[512];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static int test_safetensors_sharded(void)
{
    char dir[] = "/tmp/ld_st_XXXXXX";
    CHECK(mkdtemp(dir));
    uint8_t a[256], b[256];
    size_t na = mk(a, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8);
    size_t nb = mk(b, "{\"y\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                      "\"z\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[6,8]}}", 8);
    const char *idx = "{\"metadata\":{\"total_size\":16},\"weight_map\":{\"x\":\"m-1.safetensors\","
                      "\"y\":\"m-2.safetensors\",\"z\":\"m-2.safetensors\"}}";
    const char *names[] = {"m-1.safetensors", "m-2.safetensors", "model.safetensors.index.json"};
    int bad = write_file(dir, names[0], a, na) || write_file(dir, names[1], b, nb) ||
              write_file(dir, names[2], idx, strlen(idx));
    ld_safetensors *st = NULL;
    ld_error err;
    ld_error_clear(&err);
    ld_status s = bad ? LD_ERR_IO : ld_st_open(dir, &st, &err);
    int ok = s == LD_OK && st->n_tensors == 3 && st->n_shards == 2 && ld_st_find(st, "y")->shard == 1 &&
             ld_st_find(st, "x")->shard == 0;
    ld_st_close(st);
    /* the map names the wrong shard for z */
    const char *wrong = "{\"weight_map\":{\"x\":\"m-1.safetensors\",\"y\":\"m-2.safetensors\","
                        "\"z\":\"m-1.safetensors\"}}";
    bad |= write_file(dir, names[2], wrong, strlen(wrong));
    ld_status s2 = ld_st_open(dir, &st, &err);
    int ok2 = s2 == LD_ERR_MISMATCH && !st && strstr(err.msg, "tensor 'z' is not in 'm-1.safetensors'");
    /* a damaged shard: the message names the shard and the tensor */
    b[8 + 40] = '9';
    bad |= write_file(dir, names[1], b, nb);
    ld_status s3 = ld_st_open(dir, &st, &err);
    int ok3 = s3 != LD_OK && strstr(err.msg, "m-2.safetensors: tensor 'y'");
    /* a shard outside the directory */
    const char *escape = "{\"weight_map\":{\"x\":\"../m-1.safetensors\"}}";
    bad |= write_file(dir, names[2], escape, strlen(escape));
    ld_status s4 = ld_st_open(dir, &st, &err);
    rm_dir(dir, names, 3);
    CHECK(!bad);
    CHECK_MSG(ok, "%s", err.msg);
    CHECK_MSG(ok2, "%s", err.msg);
    CHECK_MSG(ok3, "%s", err.msg);
    CHECK(s4 == LD_ERR_SYNTAX);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_safetensors_valid),
    LD_CASE(test_safetensors_refuses_damage),
    LD_CASE(test_safetensors_open_model_dir),
    LD_CASE(test_safetensors_sharded),
};

LD_TEST_MAIN(cases)
