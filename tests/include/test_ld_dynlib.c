/* test_ld_dynlib.c - include/ld_dynlib.c: a library opened on first use.
 *
 * The libraries: glibc's libm (always there: its `cos` is checked against
 * the one this test links, an independent path to the same function) and a
 * SONAME that no machine has.  Also checks that logdiff itself does not
 * link the libraries it opens on first use (objdump -p of the binary).
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "ld_dynlib.h"
#include "tests/support/ld_test.h"

static double (*cos_fn)(double);
static int binds;

static const char *bind_libm(void *h)
{
    __atomic_add_fetch(&binds, 1, __ATOMIC_RELAXED);
    return ld_dynlib_sym(h, "cos", &cos_fn, sizeof cos_fn) ? NULL : "cos";
}

static const char *bind_missing_symbol(void *h)
{
    void (*fn)(void);
    return ld_dynlib_sym(h, "ld_no_such_function", &fn, sizeof fn) ? NULL : "ld_no_such_function";
}

static int test_dynlib_binds_a_real_library(void)
{
    ld_dynlib lib = LD_DYNLIB_INIT("libm.so.6", "a test", bind_libm);
    ld_error e = {0};
    binds = 0;
    CHECK(ld_dynlib_need(&lib, &e) == LD_OK);
    CHECK(cos_fn != NULL && cos_fn(0.5) == cos(0.5));
    CHECK(ld_dynlib_need(&lib, &e) == LD_OK); /* once only */
    CHECK_EQ_INT(binds, 1);
    return 0;
}

static int test_dynlib_missing_library_is_named(void)
{
    ld_dynlib lib = LD_DYNLIB_INIT("libld-no-such-library.so.7", "journald's journals", bind_libm);
    for (int round = 0; round < 2; round++) { /* the same answer, not retried */
        ld_error e = {0};
        CHECK(ld_dynlib_need(&lib, &e) == LD_ERR_UNSUPPORTED);
        CHECK_MSG(strstr(e.msg, "journald's journals needs libld-no-such-library.so.7") != NULL, "%s", e.msg);
        CHECK_MSG(strstr(e.msg, "could not be loaded") != NULL, "%s", e.msg);
    }
    return 0;
}

static int test_dynlib_missing_symbol_is_named(void)
{
    ld_dynlib lib = LD_DYNLIB_INIT("libm.so.6", "a test", bind_missing_symbol);
    ld_error e = {0};
    CHECK(ld_dynlib_need(&lib, &e) == LD_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(e.msg, "has no symbol ld_no_such_function") != NULL, "%s", e.msg);
    return 0;
}

static ld_dynlib shared_lib = LD_DYNLIB_INIT("libm.so.6", "a test", bind_libm);

static void *need_from_thread(void *arg)
{
    ld_error e = {0};
    *(ld_status *)arg = ld_dynlib_need(&shared_lib, &e);
    return NULL;
}

static int test_dynlib_threads_bind_once(void)
{
    enum { N = 8 };
    pthread_t t[N];
    ld_status st[N];
    binds = 0;
    for (int i = 0; i < N; i++) CHECK(pthread_create(&t[i], NULL, need_from_thread, &st[i]) == 0);
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) CHECK(st[i] == LD_OK);
    CHECK_EQ_INT(binds, 1);
    return 0;
}

/* logdiff's NEEDED entries: none of the libraries it opens on first use */
static int test_logdiff_does_not_link_them(void)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "objdump -p '%s/logdiff' 2>/dev/null | grep NEEDED", LD_BUILD_DIR);
    FILE *p = popen(cmd, "r");
    if (!p) SKIP("cannot run objdump");
    char line[512];
    int needed = 0, bad = 0;
    while (fgets(line, sizeof line, p)) {
        needed++;
        if (strstr(line, "libarchive") || strstr(line, "libsystemd") || strstr(line, "libmicrohttpd")) {
            fprintf(stderr, "linked: %s", line);
            bad++;
        }
    }
    pclose(p);
    if (!needed) SKIP("no logdiff binary in %s or no objdump", LD_BUILD_DIR);
    CHECK_EQ_INT(bad, 0);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_dynlib_binds_a_real_library),
    LD_CASE(test_dynlib_missing_library_is_named),
    LD_CASE(test_dynlib_missing_symbol_is_named),
    LD_CASE(test_dynlib_threads_bind_once),
    LD_CASE(test_logdiff_does_not_link_them),
};

LD_TEST_MAIN(cases)
