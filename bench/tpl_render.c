/* tpl_render.c - the C side of bench/template.sh: loads a chat template once
 * (ld_tpl_source_load), then renders one OpenAI request through it N times
 * with ld_chat_render, as `logdiff` does for every request of a log.
 *
 *   bench_tpl_render TEMPLATE REQUEST.json N [--bos TOK] [--eos TOK] [--out FILE]
 *
 * Prints `render_s <seconds per render, best of the N>  mean_s <mean>  bytes
 * <prompt bytes>  n <N>  context_s <best of N renders of the same request
 * through an empty template: the cost of building the context alone>` and,
 * with --out, writes the prompt to FILE so that it can be compared with the
 * Python baseline's byte for byte.  Each render
 * includes building the template context from the parsed request (what
 * ld_chat_render does per request); the JSON parse of the request is done
 * once, as jinja2's side gets its dicts once.  Exit 0, or 2 on any error. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_render.h"
#include "tpl_source.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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
    double best = 1e30, total = 0;
    for (long i = 0; i < n; i++) {
        double t0 = now();
        ld_status st = ld_chat_render(src, req, &opts, &out, &out_len, &err);
        double dt = now() - t0;
        if (st != LD_OK) return fail("render", &err);
        free(out);
        total += dt;
        if (dt < best) best = dt;
    }
    /* the part of a render that is not the template: building the context
     * from the request, timed through an empty template */
    ld_tpl_source empty_src;
    memset(&empty_src, 0, sizeof empty_src);
    empty_src.kind = LD_TPL_JINJA;
    double ctx_best = -1;
    if (ld_tpl_compile("", 0, &empty_src.tpl, &err) == LD_OK) {
        ctx_best = 1e30;
        for (long i = 0; i < n; i++) {
            double t0 = now();
            ld_status st = ld_chat_render(&empty_src, req, &opts, &out, &out_len, &err);
            double dt = now() - t0;
            if (st != LD_OK) return fail("render (empty template)", &err);
            free(out);
            if (dt < ctx_best) ctx_best = dt;
        }
        ld_tpl_free(empty_src.tpl);
    }
    printf("render_s %.9f  mean_s %.9f  bytes %zu  n %ld  context_s %.9f\n", best,
           total / (double)n, bytes, n, ctx_best);
    cJSON_Delete(req);
    ld_tpl_source_free(src);
    return 0;
}
