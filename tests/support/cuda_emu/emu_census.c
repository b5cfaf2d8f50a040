/* emu_census.c - how many times each kernel was launched, and each kind
 * of copy and memset made (emu_runtime.c counts those), process-wide: the
 * TP ranks launch from several host threads (emu_sched.h's
 * ld_emu_launches, ld_emu_census).  What it is for: every such operation
 * costs a GPU a few microseconds whatever it moves or computes, so a
 * decode token's count of them bounds its time from below, and no unit
 * test of a kernel shows it; tests/engine/backend/test_cuda_launches.c asserts it
 * for a V4 decode token, and LD_CUDA_EMU_CENSUS=1 prints the table at
 * exit of any program built over the emulator; LD_CUDA_EMU_TRACE=1 prints
 * each operation's name as it is queued, to see a token's order. */
#include "emu_sched.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KERNELS 256

static struct {
    pthread_mutex_t lock;
    const char *name[MAX_KERNELS]; /* the launch sites' string literals */
    long count[MAX_KERNELS];
    int n;
    long total, lost; /* lost: kernels past MAX_KERNELS (counted in total) */
    int ever;         /* a launch was counted: the exit hook is decided */
    int trace;        /* LD_CUDA_EMU_TRACE: each operation's name on stderr, in order */
} C = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, 0, 0, 0, 0, 0};

static void print_at_exit(void)
{
    ld_emu_census(stderr);
}

static int find(const char *name)
{
    for (int i = 0; i < C.n; i++)
        if (C.name[i] == name || strcmp(C.name[i], name) == 0) return i;
    return -1;
}

static int env_on(const char *var)
{
    const char *e = getenv(var);
    return e && *e && strcmp(e, "0") != 0;
}

void ld_emu_census_count(const char *name)
{
    pthread_mutex_lock(&C.lock);
    if (!C.ever) {
        if (env_on("LD_CUDA_EMU_CENSUS")) atexit(print_at_exit);
        C.trace = env_on("LD_CUDA_EMU_TRACE");
    }
    if (C.trace) fprintf(stderr, "cuda emu: %s\n", name);
    C.total++;
    C.ever = 1;
    int i = find(name);
    if (i < 0 && C.n < MAX_KERNELS) {
        i = C.n++;
        C.name[i] = name;
    }
    if (i >= 0)
        C.count[i]++;
    else
        C.lost++;
    pthread_mutex_unlock(&C.lock);
}

long ld_emu_launches(const char *name)
{
    pthread_mutex_lock(&C.lock);
    long n = C.total;
    if (name) {
        int i = find(name);
        n = i < 0 ? 0 : C.count[i];
    }
    pthread_mutex_unlock(&C.lock);
    return n;
}

void ld_emu_census_reset(void)
{
    pthread_mutex_lock(&C.lock);
    memset(C.count, 0, sizeof C.count);
    C.total = C.lost = 0;
    C.n = 0;
    pthread_mutex_unlock(&C.lock);
}

void ld_emu_census(FILE *f)
{
    pthread_mutex_lock(&C.lock);
    int order[MAX_KERNELS];
    for (int i = 0; i < C.n; i++) order[i] = i;
    for (int i = 1; i < C.n; i++) /* most launched first; insertion sort, stable */
        for (int j = i; j > 0 && C.count[order[j]] > C.count[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    fprintf(f, "cuda emu census: %ld GPU operations (kernel launches, copies, memsets) of %d kinds\n", C.total, C.n);
    for (int i = 0; i < C.n; i++) fprintf(f, "  %8ld  %s\n", C.count[order[i]], C.name[order[i]]);
    if (C.lost) fprintf(f, "  %8ld  (kernels past the table's %d)\n", C.lost, MAX_KERNELS);
    pthread_mutex_unlock(&C.lock);
}

/* ---------------------------------------------------------------- journal */

static struct {
    pthread_mutex_t lock;
    int on;
    ld_emu_op *ops;
    size_t n, cap;
    int lost; /* no memory for an entry: the journal is unusable */
} J = {PTHREAD_MUTEX_INITIALIZER, 0, NULL, 0, 0, 0};

int ld_emu_journal_on(void)
{
    return __atomic_load_n(&J.on, __ATOMIC_ACQUIRE);
}

void ld_emu_journal_start(void)
{
    pthread_mutex_lock(&J.lock);
    J.n = 0;
    J.lost = 0;
    __atomic_store_n(&J.on, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&J.lock);
}

void ld_emu_journal_add(const ld_emu_op *op)
{
    pthread_mutex_lock(&J.lock);
    if (J.on && J.n == J.cap) {
        size_t cap = J.cap ? 2 * J.cap : 256;
        ld_emu_op *p = realloc(J.ops, cap * sizeof *p);
        if (p) {
            J.ops = p;
            J.cap = cap;
        }
    }
    if (J.on && J.n < J.cap)
        J.ops[J.n++] = *op;
    else if (J.on)
        J.lost = 1;
    pthread_mutex_unlock(&J.lock);
}

size_t ld_emu_journal_stop(ld_emu_op **ops)
{
    pthread_mutex_lock(&J.lock);
    __atomic_store_n(&J.on, 0, __ATOMIC_RELEASE);
    size_t n = J.lost ? 0 : J.n;
    *ops = n ? malloc(n * sizeof **ops) : NULL;
    if (*ops)
        memcpy(*ops, J.ops, n * sizeof **ops);
    else
        n = 0;
    J.n = 0;
    pthread_mutex_unlock(&J.lock);
    return n;
}

void ld_emu_journal_copy(const char *name, const void *dst, const void *src, size_t bytes)
{
    if (!ld_emu_journal_on()) return;
    ld_emu_op op;
    memset(&op, 0, sizeof op);
    op.name = name;
    op.n_args = 3;
    op.arg[0] = (unsigned long long)(uintptr_t)dst;
    op.arg[1] = (unsigned long long)(uintptr_t)src;
    op.arg[2] = bytes;
    ld_emu_journal_add(&op);
}
