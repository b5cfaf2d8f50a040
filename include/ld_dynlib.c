/* ld_dynlib.c - see ld_dynlib.h. */
#include "ld_dynlib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* One lock for every library: opening happens a few times per process. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;

/* 1 when lib is open and bound, else -1 with lib->why filled. */
static int open_and_bind(ld_dynlib *lib)
{
    void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib->why, sizeof lib->why, "%s", e ? e : "dlopen failed");
        return -1;
    }
    const char *missing = lib->bind(h);
    if (missing) {
        snprintf(lib->why, sizeof lib->why, "%s has no symbol %s", lib->soname, missing);
        dlclose(h);
        return -1;
    }
    return 1; /* the handle stays open for the process's life */
}

ld_status ld_dynlib_need(ld_dynlib *lib, ld_error *err)
{
    int state = __atomic_load_n(&lib->state, __ATOMIC_ACQUIRE);
    if (state == 0) {
        pthread_mutex_lock(&open_lock);
        state = __atomic_load_n(&lib->state, __ATOMIC_RELAXED); /* another thread's answer */
        if (state == 0) {
            state = open_and_bind(lib); /* table and why written before the release */
            __atomic_store_n(&lib->state, state, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&open_lock);
    }
    if (state == 1) return LD_OK;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "%s needs %s, which could not be loaded: %s",
                   lib->purpose, lib->soname, lib->why);
}

int ld_dynlib_sym(void *handle, const char *name, void *fn_slot, size_t slot_size)
{
    void *p = dlsym(handle, name);
    if (!p || slot_size != sizeof p) return 0;
    memcpy(fn_slot, &p, sizeof p); /* POSIX: a function's address fits a void * */
    return 1;
}
