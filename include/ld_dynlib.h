/* ld_dynlib.h - a shared library opened the first time it is needed.
 *
 * Why: logdiff uses libarchive (compressed and archived inputs), libsystemd
 * (journald files) and libmicrohttpd (watch --metrics-listen), which most
 * runs never touch.  Linked at build time they are mapped and relocated at
 * every start, with what they bring (libxml2 and ICU, gnutls, gcrypt...):
 * 33 libraries and ~3.5 ms of a 4.8 ms start on a Xeon, most of a
 * `logdiff show` on a small file.  Opened with dlopen on first use, a run
 * that needs none of them starts in ~1.3 ms, and a machine that lacks one
 * of them still runs everything else (the error names the library and what
 * needed it).
 *
 * Each library's user keeps a table of function pointers (typed from the
 * library's own header) and a `bind` callback that fills it from the
 * handle with ld_dynlib_sym; ld_dynlib_need opens the library once per
 * process (thread-safe) and returns the same answer every later call.
 */
#ifndef LD_DYNLIB_H
#define LD_DYNLIB_H

#include <stddef.h>

#include "ld_error.h"

typedef struct ld_dynlib {
    const char *soname;  /* what dlopen is given, e.g. "libarchive.so.13" (from the build) */
    const char *purpose; /* what needs it, for the error: "compressed and archived inputs" */
    /* Fills the caller's table from handle; returns NULL, or the name of
     * the first symbol the library lacks. */
    const char *(*bind)(void *handle);
    int state;     /* 0 not tried, 1 open and bound, -1 failed (why holds the reason) */
    char why[256];
} ld_dynlib;

#define LD_DYNLIB_INIT(soname, purpose, bind) {(soname), (purpose), (bind), 0, {0}}

/* Opens and binds lib the first time; LD_OK once it is, else LD_ERR_UNSUPPORTED
 * naming the library, what needed it and dlopen's reason (the same error
 * every call: a missing library is not retried). */
ld_status ld_dynlib_need(ld_dynlib *lib, ld_error *err);

/* The address of symbol name in handle, stored into *fn_slot, which must be
 * a function-pointer variable (object-to-function pointer conversion done
 * the way POSIX specifies for dlsym).  Returns 0 when the symbol is missing. */
int ld_dynlib_sym(void *handle, const char *name, void *fn_slot, size_t slot_size);

/* A library's table from one list.  LIST(X, t) names each function f as
 * X(t, f); then
 *   typedef struct { LIST(LD_DYNLIB_SLOT, _) } my_fns;   members typed from the header
 *   LD_DYNLIB_BINDER(bind_fn, my_table, LIST)             the bind callback that fills it */
#define LD_DYNLIB_SLOT(t, f) __typeof__(&f) f;
#define LD_DYNLIB_BIND_ONE(t, f) \
    if (!ld_dynlib_sym(handle_, #f, &(t).f, sizeof(t).f)) return #f;
#define LD_DYNLIB_BINDER(fn, table, LIST) \
    static const char *fn(void *handle_)  \
    {                                     \
        LIST(LD_DYNLIB_BIND_ONE, table)   \
        return NULL;                      \
    }

#endif
