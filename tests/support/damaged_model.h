/* damaged_model.h - a copy of a test model with one weight changed (a NaN,
 * an infinity), made at test time in /tmp, for the checks of non-finite
 * values (tests/engine/models/test_nonfinite.c, tests/replay/run/
 * test_replay.c).  Header-only, as the other tests/support helpers. */
#ifndef LD_TEST_DAMAGED_MODEL_H
#define LD_TEST_DAMAGED_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/formats/safetensors.h"
#include "tests/support/ld_test.h"

static inline int ld_test_write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(p, 1, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* dir/config.json and dir/model.safetensors removed, then dir */
static inline void ld_test_remove_model_copy(const char *dir)
{
    char path[256];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}

/* A copy of the model in directory `model` (config.json, one F32
 * model.safetensors) in a new directory `dir` [64] under /tmp, element
 * `elem` of `tensor` set to v; 0 on success (nothing left behind else). */
static inline int ld_test_damaged_model(const char *model, const char *tensor, size_t elem, float v, char *dir)
{
    char src[4096 + 32], dst[64 + 32];
    if (strlen(model) > 4096) return -1;
    snprintf(dir, 64, "/tmp/ld_test_damaged.XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(src, sizeof src, "%s/config.json", model);
    snprintf(dst, sizeof dst, "%s/config.json", dir);
    char *cfg = ld_test_slurp(src);
    int rc = cfg ? ld_test_write_file(dst, cfg, strlen(cfg)) : -1;
    free(cfg);
    size_t n = 0;
    snprintf(src, sizeof src, "%s/model.safetensors", model);
    unsigned char *b = rc == 0 ? ld_test_read_bytes(src, &n) : NULL;
    ld_safetensors *st = NULL;
    ld_error err;
    const ld_st_tensor *t = b && ld_st_parse(b, n, &st, &err) == LD_OK ? ld_st_find(st, tensor) : NULL;
    rc = t && t->dtype == LD_DT_F32 && elem < t->n_elems ? 0 : -1;
    if (rc == 0) memcpy(b + ((const unsigned char *)t->data - b) + elem * sizeof v, &v, sizeof v);
    ld_st_close(st);
    snprintf(dst, sizeof dst, "%s/model.safetensors", dir);
    if (rc == 0) rc = ld_test_write_file(dst, b, n);
    free(b);
    if (rc) ld_test_remove_model_copy(dir);
    return rc;
}

#endif
