/* tpl_render.c - the C side of bench/template.sh: loads a chat template once
 * (ld_tpl_source_load), then renders one OpenAI request through it N times.
 *
 *   bench_tpl_render TEMPLATE REQUEST.json N [--bos TOK] [--eos TOK] [--out FILE]
 *
 * Prints `render_s <s>  mean_s <s>  bytes <prompt bytes>  n <N>  context_s <s>
 * chat_s <s>`:
 *   render_s  best of N template renders of a context built once
 *             (ld_chat_context, then ld_tpl_render_in): what jinja2's side
 *             times, whose template gets its Python dicts once;
 *   mean_s    the mean of those;
 *   context_s best of N builds of the context from the parsed request;
 *   chat_s    best of N whole ld_chat_render calls (context + render), what
 *             `logdiff diff --template` pays per request.
 * Times are the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), best of N.
 * Every render reuses one scratch arena, as `logdiff diff` does.  With
 * --out, writes the prompt to FILE so that it can be compared with the
 * Python baseline's byte for byte.  Exit 0, or 2 on any error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "replay/template/chat_render.h"
#include "replay/template/tpl_source.h"

/* The thread's CPU time, not the wall clock: on a machine shared with
 * other work a render preempted half-way would count the other work's
 * time too (the Python baselines time the same way, time.thread_time). */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *nb = realloc(buf, 2 * cap + 1);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static int fail(const char *what, const ld_error *err)
{
    fprintf(stderr, "bench_tpl_render: %s: %s (%s)\n", what, err->msg, ld_strerror(err->code));
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_tpl_render TEMPLATE REQUEST.json N [--bos TOK] "
                        "[--eos TOK] [--out FILE]\n");
        return 2;
    }
    const char *tpl_path = argv[1], *req_path = argv[2], *out_path = NULL;
    long n = strtol(argv[3], NULL, 10);
    ld_chat_opts opts;
    memset(&opts, 0, sizeof opts);
    ld_arena scratch; /* reused by every render, as `logdiff diff --template` does */
    ld_arena_init(&scratch, 0);
    opts.scratch = &scratch;
    for (int i = 4; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--bos")) opts.bos_token = argv[i + 1];
        else if (!strcmp(argv[i], "--eos")) opts.eos_token = argv[i + 1];
        else if (!strcmp(argv[i], "--out")) out_path = argv[i + 1];
        else {
            fprintf(stderr, "bench_tpl_render: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    if (n < 1) n = 1;
    ld_error err;
    ld_error_clear(&err);
    ld_tpl_source *src = NULL;
    if (ld_tpl_source_load(tpl_path, NULL, &src, &err) != LD_OK) return fail(tpl_path, &err);
    size_t len = 0;
    char *text = slurp(req_path, &len);
    cJSON *req = text ? cJSON_ParseWithLength(text, len) : NULL;
    free(text);
    if (!req) {
        fprintf(stderr, "bench_tpl_render: cannot read JSON from '%s'\n", req_path);
        ld_tpl_source_free(src);
        return 2;
    }
    char *out = NULL;
    size_t out_len = 0;
    /* one untimed render: the output to compare, and warm caches */
    if (ld_chat_render(src, req, &opts, &out, &out_len, &err) != LD_OK) {
        cJSON_Delete(req);
        ld_tpl_source_free(src);
        return fail("render", &err);
    }
    if (out_path) {
        FILE *f = fopen(out_path, "wb");
        if (!f || fwrite(out, 1, out_len, f) != out_len || fclose(f) != 0) {
            fprintf(stderr, "bench_tpl_render: cannot write '%s'\n", out_path);
            return 2;
        }
    }
    size_t bytes = out_len;
    free(out);
    /* the template alone, over a context built once */
    ld_arena ctx_arena;
    ld_arena_init(&ctx_arena, 0);
    ld_tpl_value *ctx = NULL;
    if (ld_chat_context(src, req, &opts, &ctx_arena, &ctx, &err) != LD_OK) return fail("context", &err);
    double best = 1e30, total = 0;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        ld_status st = ld_tpl_render_in(src->tpl, ctx, NULL, &scratch, &out, &out_len, &err);
        double dt = now() - t0;
        ld_arena_reset(&scratch);
        if (st != LD_OK) return fail("render", &err);
        free(out);
        total += dt;
        if (dt < best) best = dt;
    }
    /* building the context alone */
    double ctx_best = 1e30;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        ld_status st = ld_chat_context(src, req, &opts, &scratch, &ctx, &err);
        double dt = now() - t0;
        ld_arena_reset(&scratch);
        if (st != LD_OK) return fail("context", &err);
        if (dt < ctx_best) ctx_best = dt;
    }
    /* the whole per-request call */
    double chat_best = 1e30;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        ld_status st = ld_chat_render(src, req, &opts, &out, &out_len, &err);
        double dt = now() - t0;
        if (st != LD_OK) return fail("render", &err);
        free(out);
        if (dt < chat_best) chat_best = dt;
    }
    ld_arena_release(&ctx_arena);
    printf("render_s %.9f  mean_s %.9f  bytes %zu  n %ld  context_s %.9f  chat_s %.9f\n", best,
           total / (double)n, bytes, n, ctx_best, chat_best);
    cJSON_Delete(req);
    ld_tpl_source_free(src);
    ld_arena_release(&scratch);
    return 0;
}
