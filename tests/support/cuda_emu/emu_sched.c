/* emu_sched.c - the CUDA emulator's scheduler: a launch's blocks in turn,
 * a block's threads as fibers switched at barriers (a stack switch of our
 * own on x86-64, ucontext elsewhere).  See emu_sched.h for the contract.
 *
 * Everything lives in thread-local state, so host threads (the TP ranks)
 * may launch at the same time.  Stacks, fibers and exchange areas are
 * mmap'd once per host thread and grown, never freed: the leak checker
 * does not track mmap, and a test process is short.  Under AddressSanitizer
 * every switch is announced (__sanitizer_start/finish_switch_fiber) and the
 * poison a fiber leaves on its stack is cleared before the stack is reused,
 * so that device memory (malloc'd by emu_runtime.c) is bounds-checked for
 * every kernel access. */
#define _GNU_SOURCE /* ucontext, MAP_ANONYMOUS */
#include "emu_sched.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__) || defined(LD_EMU_ASAN) /* the latter: this file built uninstrumented */
#define EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define STACK_BYTES ((size_t)512 << 10) /* the sanitizer's redzones */
#else
#define STACK_BYTES ((size_t)128 << 10)
#endif
#define GUARD_BYTES ((size_t)4096) /* PROT_NONE below each stack: an overflow faults */

#define MAX_THREADS 1024

enum { F_RUN, F_BLOCK, F_WARP, F_DONE };

typedef struct fiber {
    ucontext_t uc; /* where ld_emu_switch is not (not x86-64) */
    void *sp;      /* where it is: the saved stack pointer */
    unsigned char *stack; /* STACK_BYTES above a guard page */
    int state;
    unsigned mask; /* the lanes a F_WARP fiber waits for */
    ld_emu_dim tid;
    int lane, warp;
    void *fake; /* the sanitizer's fake stack while switched out */
    unsigned bank; /* the exchange area of its next warp collective (0, 1) */
} fiber;

static _Thread_local struct {
    fiber *f; /* MAX_THREADS, stacks made on first use */
    int n_stacks;
    int n;    /* threads in the running block */
    fiber *cur;
    ucontext_t sched;
    void *sched_sp;
    const void *sched_bottom; /* the scheduler's stack, for the sanitizer */
    size_t sched_size;
    int from_sched; /* the switch in progress started in the scheduler */
    ld_emu_dim bid, bdim, gdim;
    void (*body)(void *);
    void *ctx;
    unsigned char *smem; /* dynamic shared memory, LD_EMU_DYN_SMEM_MAX */
    unsigned char *slots; /* 32 warps x 2 banks x 32 lanes x LD_EMU_SLOT */
    const char *name;
    size_t smem_bytes; /* the launch's dynamic shared memory */
    /* LD_CUDA_EMU_ORDER=reverse (read at each launch): threads between
     * barriers, and blocks, run last first.  A correct kernel gives the
     * same bits in either order; one that reads what another thread writes
     * without a barrier in between, or what another block writes, works in
     * at most one of them by luck. */
    int reverse;
    int err;    /* pending (cudaGetLastError) */
    /* the static __shared__ variables the running block has poisoned
     * (ld_emu_shared_poison): reset at each block */
    void *shared_seen[LD_EMU_MAX_SHARED_VARS];
    int n_shared_seen;
} E;

/* the fiber at position p of the running order */
static fiber *in_order(int p)
{
    return &E.f[E.reverse ? E.n - 1 - p : p];
}

static void *pages(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* the per-thread areas, once */
static int ensure_areas(void)
{
    if (E.f) return 0;
    E.f = pages(MAX_THREADS * sizeof *E.f);
    E.smem = pages(LD_EMU_DYN_SMEM_MAX);
    E.slots = pages((size_t)MAX_THREADS * 2 * LD_EMU_SLOT);
    return E.f && E.smem && E.slots ? 0 : -1;
}

/* stacks for n fibers */
static int ensure_stacks(int n)
{
    for (; E.n_stacks < n; E.n_stacks++) {
        unsigned char *p = pages(GUARD_BYTES + STACK_BYTES);
        if (!p) return -1;
        mprotect(p, GUARD_BYTES, PROT_NONE);
        E.f[E.n_stacks].stack = p + GUARD_BYTES;
    }
    return 0;
}

/* ---------------------------------------------------------------- switching */

#if defined(__x86_64__)
/* Our own switch on x86-64: glibc's swapcontext makes a system call (the
 * signal mask) at every switch, and a kernel test switches millions of
 * times.  ld_emu_switch saves the callee-saved registers, MXCSR and the x87
 * control word on the current stack, stores the stack pointer in *save and
 * resumes the stack at `load` (made by a previous switch, or by new_stack). */
void ld_emu_switch(void **save, void *load);
__asm__(".text\n"
        ".globl ld_emu_switch\n"
        ".type ld_emu_switch, @function\n"
        "ld_emu_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n"
        "    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    subq $8, %rsp\n    stmxcsr (%rsp)\n    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n    fldcw 4(%rsp)\n    addq $8, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n"
        "    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size ld_emu_switch, .-ld_emu_switch\n");

/* a stack that ld_emu_switch resumes into entry() (which never returns):
 * the frame it pops, the return address at a 16-byte boundary as the ABI
 * has it at a call */
static void *new_stack(unsigned char *stack, size_t bytes, void (*entry)(void))
{
    uintptr_t top = ((uintptr_t)(stack + bytes) & ~(uintptr_t)15) - 16;
    void **sp = (void **)top;
    sp[1] = NULL; /* entry's own return address: none */
    sp[0] = (void *)entry;
    uint32_t ctl[2];
    __asm__ volatile("stmxcsr %0\n\tfnstcw %1" : "=m"(ctl[0]), "=m"(ctl[1]));
    sp -= 7; /* rbp rbx r12 r13 r14 r15, then MXCSR and the control word */
    for (int i = 1; i < 7; i++) sp[i] = NULL;
    memcpy(sp, ctl, sizeof ctl);
    return sp;
}
#define SWITCH(save_ctx, save_sp, load_ctx, load_sp) ld_emu_switch(&(save_sp), load_sp)
#else
#define SWITCH(save_ctx, save_sp, load_ctx, load_sp) swapcontext(&(save_ctx), &(load_ctx))
#endif

/* Switches go scheduler -> fiber, fiber -> the next runnable fiber in
 * thread order (a direct handoff: half the switches of going through the
 * scheduler), and the last one -> scheduler; the order threads run in is
 * the scheduler's scan either way. */
static void to_fiber(fiber *f)
{
    E.cur = f;
#ifdef EMU_ASAN
    void *fake = NULL;
    E.from_sched = 1;
    __sanitizer_start_switch_fiber(&fake, f->stack, STACK_BYTES);
    SWITCH(E.sched, E.sched_sp, f->uc, f->sp);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    SWITCH(E.sched, E.sched_sp, f->uc, f->sp);
#endif
    E.cur = NULL;
}

#ifdef EMU_ASAN
/* on a fiber's stack after a switch to it: where the scheduler's stack is,
 * when the switch came from there */
static void arrived(void *fake)
{
    const void *bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(fake, &bottom, &size);
    if (E.from_sched) E.sched_bottom = bottom, E.sched_size = size;
}
#endif

/* from the running fiber, now `state`, to the next runnable one after it
 * in the running order, or back to the scheduler */
static void to_sched(int state)
{
    fiber *f = E.cur, *next = NULL;
    f->state = state;
    int step = E.reverse ? -1 : 1;
    for (fiber *g = f + step; g >= E.f && g < E.f + E.n; g += step)
        if (g->state == F_RUN) {
            next = g;
            break;
        }
#ifdef EMU_ASAN
    void **fake = state == F_DONE ? NULL : &f->fake;
    E.from_sched = 0;
    if (next) {
        E.cur = next;
        __sanitizer_start_switch_fiber(fake, next->stack, STACK_BYTES);
        SWITCH(f->uc, f->sp, next->uc, next->sp);
    } else {
        __sanitizer_start_switch_fiber(fake, E.sched_bottom, E.sched_size);
        SWITCH(f->uc, f->sp, E.sched, E.sched_sp);
    }
    arrived(f->fake);
#else
    if (next) {
        E.cur = next;
        SWITCH(f->uc, f->sp, next->uc, next->sp);
    } else {
        SWITCH(f->uc, f->sp, E.sched, E.sched_sp);
    }
#endif
}

static void fiber_main(void)
{
#ifdef EMU_ASAN
    arrived(NULL);
#endif
    E.body(E.ctx);
    to_sched(F_DONE); /* never resumed */
    abort();
}

/* ---------------------------------------------------------------- a block */

static int fail(int code, const char *fmt, int a, int b)
{
    if (E.n) fprintf(stderr, "cuda emu: %s block (%u,%u,%u): ", E.name, E.bid.x, E.bid.y, E.bid.z);
    else fprintf(stderr, "cuda emu: %s: ", E.name); /* the launch's shape */
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return code;
}

static void start_fiber(fiber *f, int i)
{
    unsigned bx = E.bdim.x, by = E.bdim.y;
    f->state = F_RUN;
    f->mask = 0;
    f->bank = 0;
#ifdef EMU_ASAN
    /* the frames of fiber_main and to_sched from the stack's last fiber,
     * which switched away for good */
    __asan_unpoison_memory_region(f->stack + STACK_BYTES - 4096, 4096);
#endif
    f->tid = (ld_emu_dim){(unsigned)i % bx, (unsigned)i / bx % by, (unsigned)i / (bx * by)};
    f->lane = i & 31;
    f->warp = i >> 5;
#if defined(__x86_64__)
    f->sp = new_stack(f->stack, STACK_BYTES, fiber_main);
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK_BYTES;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, fiber_main, 0);
#endif
}

/* release warp w's lanes if every lane its waiters name waits too: 1
 * released, 0 not ready, or an error code */
static int release_warp(int w)
{
    int lo = w * 32, hi = lo + 32 < E.n ? lo + 32 : E.n;
    unsigned waiting = 0, named = 0, done = 0, at_block = 0;
    for (int i = lo; i < hi; i++) {
        unsigned bit = 1u << (i - lo);
        switch (E.f[i].state) {
        case F_WARP: waiting |= bit, named |= E.f[i].mask; break;
        case F_DONE: done |= bit; break;
        case F_BLOCK: at_block |= bit; break;
        }
    }
    if (!waiting) return 0;
    if (named & done)
        return fail(LD_EMU_ERR_LAUNCH, "warp %d: a warp collective names lane %d, which has exited", w,
                    __builtin_ctz(named & done));
    if (named & at_block)
        return fail(LD_EMU_ERR_LAUNCH, "warp %d: lane %d waits at __syncthreads during a warp collective", w,
                    __builtin_ctz(named & at_block));
    for (int i = lo; i < hi; i++)
        if (E.f[i].state == F_WARP) E.f[i].state = F_RUN;
    return 1;
}

/* run the block's fibers from barrier to barrier until all have returned */
static int run_block(void)
{
    for (int i = 0; i < E.n; i++) start_fiber(&E.f[i], i);
    memset(E.smem, 0xff, E.smem_bytes); /* uninitialised: NaN as floats, -1 as integers */
    E.n_shared_seen = 0;                /* static __shared__ poisoned again at first sight */
    for (;;) {
        for (int p = 0; p < E.n; p++)
            if (in_order(p)->state == F_RUN) to_fiber(in_order(p));
        int released = 0, live = 0, at_block = 0;
        for (int w = 0; w * 32 < E.n; w++) {
            int r = release_warp(w);
            if (r > 1) return r;
            released |= r;
        }
        if (released) continue;
        for (int i = 0; i < E.n; i++) {
            live += E.f[i].state != F_DONE;
            at_block += E.f[i].state == F_BLOCK;
        }
        if (!live) return 0;
        if (at_block != live) return fail(LD_EMU_ERR_LAUNCH, "deadlock: %d of %d live threads wait", at_block, live);
        for (int i = 0; i < E.n; i++)
            if (E.f[i].state == F_BLOCK) E.f[i].state = F_RUN;
    }
}

/* ---------------------------------------------------------------- a launch */

/* after a failed block: its waiting fibers are never resumed, and the
 * sanitizer's poison of their frames must not outlive them (a completed
 * fiber leaves only its two outermost frames, which start_fiber clears) */
static void abandon(void)
{
#ifdef EMU_ASAN
    for (int i = 0; i < E.n_stacks; i++) __asan_unpoison_memory_region(E.f[i].stack, STACK_BYTES);
#endif
}

static int check_shape(ld_emu_dim g, ld_emu_dim b, size_t smem)
{
    unsigned long long threads = (unsigned long long)b.x * b.y * b.z;
    if (!g.x || !g.y || !g.z || g.x > 0x7fffffffu || g.y > 65535u || g.z > 65535u)
        return fail(LD_EMU_ERR_CONFIG, "grid out of range (%d x %d x ...)", (int)g.x, (int)g.y);
    if (!threads || threads > MAX_THREADS || b.x > 1024u || b.y > 1024u || b.z > 64u)
        return fail(LD_EMU_ERR_CONFIG, "block of %d threads (%d in x) out of range", (int)threads, (int)b.x);
    if (smem > LD_EMU_DYN_SMEM_MAX)
        return fail(1 /* cudaErrorInvalidValue */, "%d bytes of dynamic shared memory (at most %d)", (int)smem,
                    (int)LD_EMU_DYN_SMEM_MAX);
    return 0;
}

int ld_emu_run(ld_emu_dim grid, ld_emu_dim block, size_t smem, void (*body)(void *), void *ctx, const char *name)
{
    E.name = name;
    E.n = 0; /* no block yet */
    ld_emu_census_count(name);
    if (E.cur) { /* a launch from device code: not a feature of this emulator */
        fprintf(stderr, "cuda emu: %s launched from a kernel\n", name);
        abort();
    }
    int e = check_shape(grid, block, smem);
    int n = (int)(block.x * block.y * block.z);
    if (!e && (ensure_areas() || ensure_stacks(n))) e = fail(2 /* cudaErrorMemoryAllocation */, "no memory for %d fibers", n, 0);
    if (e) return E.err = e;
    E.bdim = block;
    E.gdim = grid;
    E.body = body;
    E.ctx = ctx;
    E.n = n;
    E.smem_bytes = smem;
    const char *order = getenv("LD_CUDA_EMU_ORDER");
    E.reverse = order && strcmp(order, "reverse") == 0;
    unsigned long long blocks = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long k = 0; k < blocks; k++) {
        unsigned long long b = E.reverse ? blocks - 1 - k : k;
        E.bid = (ld_emu_dim){(unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y),
                             (unsigned)(b / ((unsigned long long)grid.x * grid.y))};
        e = run_block();
        if (e) {
            abandon();
            return E.err = e;
        }
    }
    return 0;
}

int ld_emu_take_error(void)
{
    int e = E.err;
    E.err = 0;
    return e;
}

/* ---------------------------------------------------------------- device side */

static fiber *running(const char *what)
{
    if (!E.cur) {
        fprintf(stderr, "cuda emu: %s outside a kernel\n", what);
        abort();
    }
    return E.cur;
}

const ld_emu_dim *ld_emu_thread_idx(void)
{
    return &running("threadIdx")->tid;
}

const ld_emu_dim *ld_emu_block_idx(void)
{
    running("blockIdx");
    return &E.bid;
}

const ld_emu_dim *ld_emu_block_dim(void)
{
    return &E.bdim;
}

const ld_emu_dim *ld_emu_grid_dim(void)
{
    return &E.gdim;
}

int ld_emu_lane(void)
{
    return running("a lane")->lane;
}

void ld_emu_block_sync(void)
{
    running("__syncthreads");
    to_sched(F_BLOCK);
}

void ld_emu_warp_sync(unsigned mask)
{
    running("a warp collective")->mask = mask;
    to_sched(F_WARP);
}

unsigned char *ld_emu_warp_slots(void)
{
    fiber *f = running("a warp collective");
    unsigned char *s = E.slots + ((size_t)f->warp * 2u + f->bank) * 32u * LD_EMU_SLOT;
    f->bank ^= 1u;
    return s;
}

unsigned ld_emu_warp_lanes(void)
{
    int left = E.n - running("a warp collective")->warp * 32;
    return left >= 32 ? 0xffffffffu : (1u << left) - 1u;
}

void ld_emu_shared_poison(void *p, size_t bytes)
{
    running("__shared__");
    for (int i = 0; i < E.n_shared_seen; i++)
        if (E.shared_seen[i] == p) return;
    if (E.n_shared_seen == LD_EMU_MAX_SHARED_VARS) {
        fprintf(stderr, "cuda emu: %s declares more than %d __shared__ variables\n", E.name, LD_EMU_MAX_SHARED_VARS);
        abort();
    }
    E.shared_seen[E.n_shared_seen++] = p;
    memset(p, 0xff, bytes);
}

void *ld_emu_dyn_smem(void)
{
    running("dynamic shared memory");
    return E.smem;
}
