/* regress_journal.c - a share's conversation journal (see
 * regress_journal.h): its op lines written and digested as the tracker
 * makes them, read back op by op. */
#include <stdlib.h>
#include <string.h>

#include "parse/pylit/pylit_json.h"
#include "parse/request/request_json.h"
#include "regress_journal.h"
#include "regress_lines.h"

/* FNV-1a over the op lines' bytes, each with its newline. */
static uint64_t digest_bytes(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return (h ^ '\n') * 0x100000001b3ull;
}

static void hex64(char out[17], uint64_t v)
{
    snprintf(out, 17, "%016llx", (unsigned long long)v);
}

/* Adds v as o[name]; 0, or -1 when v is NULL (out of memory). */
static int add(cJSON *o, const char *name, cJSON *v)
{
    if (v && cJSON_AddItemToObject(o, name, v)) return 0;
    cJSON_Delete(v);
    return -1;
}

static int add_text(cJSON *o, const char *name, const char *s, size_t n)
{
    return add(o, name, ld_json_bytes(s, n));
}

static cJSON *op_json(const ld_conv_op *op)
{
    char conv[17], key[17];
    hex64(conv, op->conv_key);
    hex64(key, op->key);
    cJSON *o = cJSON_CreateObject();
    int bad = !o || add(o, "conv", cJSON_CreateString(conv)) || add(o, "key", cJSON_CreateString(key)) ||
              add_text(o, "rid", op->rid, strlen(op->rid));
    if (!bad && op->out_head) {
        bad = add_text(o, "head", op->out_head, op->head_len) ||
              (op->tail_len && add_text(o, "tail", op->out_tail, op->tail_len)) ||
              (op->out_cut && add(o, "cut", cJSON_CreateTrue()));
    }
    bad = bad || add(o, "finish", ld_json_int(op->finish)) ||
          (op->finish_type && add_text(o, "type", op->finish_type, strlen(op->finish_type))) ||
          (op->stop_str && add_text(o, "stop", op->stop_str, strlen(op->stop_str))) ||
          add(o, "tokens", ld_json_int(op->completion_tokens));
    cJSON *line = bad ? NULL : cJSON_CreateObject();
    if (!line || add(line, "op", o)) {
        cJSON_Delete(line);
        if (!line) cJSON_Delete(o);
        return NULL;
    }
    return line;
}

int ld_cli_journal_on_op(void *ctx, const ld_conv_op *op)
{
    ld_cli_journal *j = ctx;
    cJSON *line = op_json(op);
    char *text = line ? cJSON_PrintUnformatted(line) : NULL;
    cJSON_Delete(line);
    if (!text) return -1;
    size_t n = strlen(text);
    j->digest = digest_bytes(j->digest, text, n);
    j->n_ops++;
    int rc = j->ops && (fwrite(text, 1, n, j->ops) != n || fputc('\n', j->ops) == EOF) ? -1 : 0;
    free(text);
    return rc;
}

int ld_cli_journal_write(const ld_cli_journal *j, const ld_cli_partial_head *h, FILE *f)
{
    ld_cli_partial_head head = *h;
    head.journal = 1;
    if (ld_cli_partial_write_head(&head, f) != 0 || fflush(j->ops) != 0 || fseek(j->ops, 0, SEEK_SET) != 0)
        return -1;
    char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, j->ops)) > 0;)
        if (fwrite(buf, 1, n, f) != n) return -1;
    if (ferror(j->ops)) return -1;
    char digest[17];
    hex64(digest, j->digest);
    return fprintf(f, "{\"end\":{\"ops\":%llu,\"digest\":\"%s\"}}\n", (unsigned long long)j->n_ops, digest) < 0
               ? -1 : 0;
}

/* ---------------------------------------------------------------- reading */

static ld_status syntax(ld_error *e, const char *what, const char *name)
{
    return LD_FAIL(e, LD_ERR_SYNTAX, 0, "%s: %s", name, what);
}

static ld_status get_hex(const cJSON *v, const char *name, uint64_t *out, ld_error *e)
{
    char *end = NULL;
    if (!cJSON_IsString(v) || strlen(v->valuestring) != 16 || v->valuestring[0] == '-' ||
        v->valuestring[0] == '+')
        return syntax(e, "not 16 hex digits", name);
    *out = strtoull(v->valuestring, &end, 16);
    return *end ? syntax(e, "not 16 hex digits", name) : LD_OK;
}

/* A text (NULL when absent and `optional`) into arena a; a name (`cstr`)
 * holds no NUL byte. */
static ld_status get_text(const cJSON *o, const char *name, int optional, int cstr, ld_arena *a, const char **s,
                          size_t *n, ld_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    *s = NULL, *n = 0;
    if (!v && optional) return LD_OK;
    if (!v || ld_json_bytes_get(v, a, s, n) != 0 || !*s) return syntax(e, "not a text", name);
    return cstr && strlen(*s) != *n ? syntax(e, "a NUL byte in it", name) : LD_OK;
}

/* A whole number in [lo, hi], or null (LD_UNSET_INT) when `nullable`. */
static ld_status get_int(const cJSON *o, const char *name, double lo, double hi, int nullable, int64_t *out,
                         ld_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (nullable && cJSON_IsNull(v)) { *out = INT64_MIN; return LD_OK; }
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) ||
        v->valuedouble != (double)(int64_t)v->valuedouble)
        return syntax(e, "not a whole number in range", name);
    *out = (int64_t)v->valuedouble;
    return LD_OK;
}

static ld_status read_op(const cJSON *o, ld_arena *a, ld_conv_op *op, ld_error *e)
{
    memset(op, 0, sizeof *op);
    size_t n = 0;
    int64_t finish = 0;
    const cJSON *cut = cJSON_GetObjectItemCaseSensitive(o, "cut");
    LD_TRY(get_hex(cJSON_GetObjectItemCaseSensitive(o, "conv"), "conv", &op->conv_key, e));
    LD_TRY(get_hex(cJSON_GetObjectItemCaseSensitive(o, "key"), "key", &op->key, e));
    LD_TRY(get_text(o, "rid", 0, 1, a, &op->rid, &n, e));
    LD_TRY(get_text(o, "head", 1, 0, a, &op->out_head, &op->head_len, e));
    LD_TRY(get_text(o, "tail", 1, 0, a, &op->out_tail, &op->tail_len, e));
    if (!op->out_head && (op->out_tail || cut)) return syntax(e, "a tail or cut without a head", "tail");
    if (cut && !cJSON_IsTrue(cut)) return syntax(e, "not true", "cut");
    op->out_cut = cut != NULL;
    if (op->out_head && !op->out_tail) op->out_tail = op->out_head + op->head_len;
    LD_TRY(get_int(o, "finish", 0, LD_FINISH_OTHER, 0, &finish, e));
    op->finish = (ld_finish_kind)finish;
    LD_TRY(get_text(o, "type", 1, 1, a, &op->finish_type, &n, e));
    LD_TRY(get_text(o, "stop", 1, 1, a, &op->stop_str, &n, e));
    return get_int(o, "tokens", -9e15, 9e15, 1, &op->completion_tokens, e);
}

static ld_status read_end(const cJSON *o, uint64_t n_ops, uint64_t digest, ld_error *e)
{
    int64_t ops = 0;
    uint64_t want = 0;
    LD_TRY(get_int(o, "ops", 0, 9e15, 0, &ops, e));
    LD_TRY(get_hex(cJSON_GetObjectItemCaseSensitive(o, "digest"), "digest", &want, e));
    if ((uint64_t)ops != n_ops || want != digest)
        return LD_FAIL(e, LD_ERR_MISMATCH, 0, "the file holds %llu ops; its end line says %lld%s",
                       (unsigned long long)n_ops, (long long)ops,
                       (uint64_t)ops == n_ops ? " and another digest: an op was changed" : "");
    return LD_OK;
}

/* One line after the head; *ended set by the end line. */
static ld_status read_line(const cJSON *line, const ld_cli_lines *lr, ld_arena *a, int *ended, ld_cli_journal *j,
                           ld_status (*apply)(void *, const ld_conv_op *, ld_error *), void *ctx, ld_error *e)
{
    const cJSON *o = cJSON_IsObject(line) && line->child && !line->child->next ? line->child : NULL;
    if (!o || !cJSON_IsObject(o)) return LD_FAIL(e, LD_ERR_SYNTAX, 0, "not an object of one member");
    if (*ended) return LD_FAIL(e, LD_ERR_SYNTAX, 0, "a line after the end line");
    if (!strcmp(o->string, "end")) {
        *ended = 1;
        return read_end(o, j->n_ops, j->digest, e);
    }
    if (strcmp(o->string, "op")) return LD_FAIL(e, LD_ERR_SYNTAX, 0, "an unknown line: %s", o->string);
    ld_conv_op op;
    ld_arena_reset(a);
    LD_TRY(read_op(o, a, &op, e));
    j->digest = digest_bytes(j->digest, lr->raw, lr->raw_len);
    j->n_ops++;
    return apply(ctx, &op, e);
}

ld_status ld_cli_journal_read_ops(const char *text, size_t len,
                                  ld_status (*apply)(void *ctx, const ld_conv_op *op, ld_error *e),
                                  void *ctx, uint64_t *digest, ld_error *e)
{
    ld_cli_lines lr = { text, len, 0, 0, 0, NULL, 0 };
    ld_cli_journal j = { NULL, LD_JOURNAL_DIGEST_INIT, 0 };
    ld_arena a;
    ld_arena_init(&a, 0);
    cJSON *line = NULL;
    int ended = 0;
    ld_status st = ld_cli_lines_next(&lr, &line, e); /* the head, read before */
    while (st == LD_OK && line) {
        cJSON_Delete(line);
        st = ld_cli_lines_next(&lr, &line, e);
        if (st == LD_OK && line) st = read_line(line, &lr, &a, &ended, &j, apply, ctx, e);
    }
    cJSON_Delete(line);
    ld_arena_release(&a);
    if (st == LD_OK && !ended) st = LD_FAIL(e, LD_ERR_TRUNCATED, 0, "the file ends before its end line: it was cut");
    if (st != LD_OK && lr.line) e->line = lr.line, e->offset = lr.line_offset;
    *digest = j.digest;
    return st;
}
