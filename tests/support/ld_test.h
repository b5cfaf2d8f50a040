/* ld_test.h - a small test framework for logdiff's C tests.
 *
 * A test file defines `static int test_<concept>_<behaviour>(void)` cases
 * (return 0 = pass, 77 = skip, anything else = fail), lists them in
 *   static const ld_test_case cases[] = { LD_CASE(test_x_y), ... };
 * and ends with `LD_TEST_MAIN(cases)`.  Running the executable with a name
 * runs only the cases whose name contains it.  The closing line is
 * "N passed, N failed, N skipped".  The process exits 0 when nothing failed,
 * 77 when everything was skipped, 1 otherwise.
 */
#ifndef LD_TEST_H
#define LD_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ld_test_case {
    const char *name;
    int (*fn)(void);
} ld_test_case;

#define LD_CASE(fn) { #fn, fn }
#define LD_SKIP 77

/* Check a condition; on failure print where and return 1 from the case. */
#define CHECK(cond)                                                        \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__,       \
                    __LINE__, #cond);                                      \
            return 1;                                                      \
        }                                                                  \
    } while (0)

#define CHECK_MSG(cond, ...)                                               \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "  %s:%d: check failed: %s: ", __FILE__,       \
                    __LINE__, #cond);                                      \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            return 1;                                                      \
        }                                                                  \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                 \
    CHECK_MSG((long long)(a) == (long long)(b), "%lld != %lld",            \
              (long long)(a), (long long)(b))

#define CHECK_EQ_STR(a, b)                                                 \
    CHECK_MSG(strcmp((a), (b)) == 0, "\"%s\" != \"%s\"", (a), (b))

/* Skip the case with a visible reason. */
#define SKIP(...)                                                          \
    do {                                                                   \
        fprintf(stderr, "  skipped: ");                                    \
        fprintf(stderr, __VA_ARGS__);                                      \
        fputc('\n', stderr);                                               \
        return LD_SKIP;                                                    \
    } while (0)

/* The whole file at `path`, NUL-terminated, malloc'd (caller frees); NULL
 * when it cannot be read. */
static inline char *ld_test_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* The file as an exact-size malloc'd buffer (no NUL added, so ASan sees any
 * read past the end); *n its size.  NULL when it cannot be read. */
static inline unsigned char *ld_test_read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = len >= 0 ? malloc(len > 0 ? (size_t)len : 1) : NULL;
    if (b && len > 0 && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = len > 0 ? (size_t)len : 0;
    return b;
}

static inline int ld_test_run(const ld_test_case *cases, size_t n, int argc,
                              char **argv)
{
    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
        int rc = cases[i].fn();
        const char *what = rc == 0 ? "ok" : rc == LD_SKIP ? "skip" : "FAIL";
        printf("%-4s %s\n", what, cases[i].name);
        fflush(stdout);
        if (rc == 0) passed++;
        else if (rc == LD_SKIP) skipped++;
        else failed++;
    }
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    if (failed) return 1;
    return passed == 0 && skipped > 0 ? LD_SKIP : 0;
}

#define LD_TEST_MAIN(cases)                                                \
    int main(int argc, char **argv)                                        \
    {                                                                      \
        return ld_test_run(cases, sizeof(cases) / sizeof(cases[0]), argc,  \
                           argv);                                          \
    }

#endif /* LD_TEST_H */
