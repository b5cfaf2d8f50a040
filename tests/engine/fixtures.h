/* fixtures.h - what the engine tests share to read the tiny models'
 * reference tensors (testdata/models/<name>/ref-*.f32, written by the
 * tools/gen_tiny_*.py generators) and compare with them. */
#ifndef LD_TEST_ENGINE_FIXTURES_H
#define LD_TEST_ENGINE_FIXTURES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* n little-endian floats of dir/file, malloc'd; NULL when unreadable or short */
/* the tests' reproducible random numbers (xorshift64, one stream per test
 * program) */
static inline uint32_t next_u32(void)
{
    static uint64_t rng = 0x9E3779B97F4A7C15ull;
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

static inline float *load_f32(const char *dir, const char *file, size_t n)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = malloc(n * sizeof *p);
    if (p && fread(p, sizeof *p, n, f) != n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    return p;
}

/* sqrt(sum (a-b)^2 / sum b^2), and the largest |a-b| */
static inline double nerr(const float *a, const float *b, size_t n, double *maxabs)
{
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
        if (fabs(d) > mx) mx = fabs(d);
    }
    if (maxabs) *maxabs = mx;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#endif
