/* replay_dump.c - --dump-layers (replay.h): the position lists, and the
 * .npy files and manifest.json of the hidden states a replay collected
 * (replay.c gathers the rows while it runs the sequence). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npy.h"
#include "replay_internal.h"

void ld_replay_positions_free(ld_replay_positions *p)
{
    if (!p) return;
    free(p->v);
    p->v = NULL;
    p->n = 0;
}

static size_t skip_blanks(const char *s, size_t i)
{
    while (s[i] == ' ' || s[i] == '\t') i++;
    return i;
}

/* An optionally negative decimal number at s[*i]. */
static ld_status parse_number(const char *s, size_t *i, int64_t *out, ld_error *err)
{
    size_t j = *i, start = *i;
    int neg = s[j] == '-';
    if (neg) j++;
    int64_t v = 0;
    size_t digits = 0;
    for (; s[j] >= '0' && s[j] <= '9'; j++, digits++) {
        if (digits == 18)
            return LD_FAIL(err, LD_ERR_SYNTAX, start, "position list '%.60s': number at byte %zu too long", s,
                           start);
        v = v * 10 + (s[j] - '0');
    }
    if (!digits)
        return LD_FAIL(err, LD_ERR_SYNTAX, j, "position list '%.60s': expected a number at byte %zu%s", s, j,
                       s[j] ? "" : " (the end)");
    *out = neg ? -v : v;
    *i = j;
    return LD_OK;
}

ld_status ld_replay_positions_parse(const char *list, ld_replay_positions *out, ld_error *err)
{
    out->v = NULL;
    out->n = 0;
    size_t cap = 1;
    for (const char *c = list; *c; c++) cap += *c == ',';
    ld_replay_range *v = malloc(cap * sizeof *v);
    if (!v) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    size_t n = 0, i = 0;
    for (;;) {
        ld_replay_range r;
        i = skip_blanks(list, i);
        ld_status st = parse_number(list, &i, &r.first, err);
        r.last = r.first;
        i = skip_blanks(list, i);
        if (st == LD_OK && list[i] == '-') {
            i = skip_blanks(list, i + 1);
            st = parse_number(list, &i, &r.last, err);
            i = skip_blanks(list, i);
        }
        if (st == LD_OK && list[i] && list[i] != ',')
            st = LD_FAIL(err, LD_ERR_SYNTAX, i, "position list '%.60s': unexpected '%c' at byte %zu: expected "
                         "',' or a range A-B", list, list[i], i);
        if (st != LD_OK) {
            free(v);
            return st;
        }
        v[n++] = r;
        if (!list[i]) break;
        i++;
    }
    out->v = v;
    out->n = n;
    return LD_OK;
}

/* Number v of the list (negative: from the end) as a position of [0, L). */
static ld_status resolve_one(int64_t v, size_t L, size_t *out, ld_error *err)
{
    int64_t p = v < 0 ? v + (int64_t)L : v;
    if (p < 0 || (uint64_t)p >= L)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "position %lld is outside the replayed sequence of %zu positions "
                       "(0 to %zu, or -%zu to -1 from the end)", (long long)v, L, L ? L - 1 : 0, L);
    *out = (size_t)p;
    return LD_OK;
}

ld_status ld_replay_positions_resolve(const ld_replay_positions *p, size_t seq_len, int64_t **out_pos,
                                      size_t *out_n, ld_error *err)
{
    *out_pos = NULL;
    *out_n = 0;
    unsigned char *mark = calloc(seq_len ? seq_len : 1, 1);
    if (!mark) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    size_t n = 0;
    if (!p || !p->n) {
        memset(mark, 1, seq_len);
        n = seq_len;
    }
    for (size_t r = 0; p && r < p->n; r++) {
        size_t a = 0, b = 0;
        ld_status st = resolve_one(p->v[r].first, seq_len, &a, err);
        if (st == LD_OK) st = resolve_one(p->v[r].last, seq_len, &b, err);
        if (st == LD_OK && a > b)
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "range %lld-%lld runs backwards (positions %zu to %zu)",
                         (long long)p->v[r].first, (long long)p->v[r].last, a, b);
        if (st != LD_OK) {
            free(mark);
            return st;
        }
        for (size_t k = a; k <= b; k++) {
            n += !mark[k];
            mark[k] = 1;
        }
    }
    int64_t *pos = malloc((n ? n : 1) * sizeof *pos);
    if (!pos) {
        free(mark);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    size_t k = 0;
    for (size_t i = 0; i < seq_len; i++)
        if (mark[i]) pos[k++] = (int64_t)i;
    free(mark);
    *out_pos = pos;
    *out_n = n;
    return LD_OK;
}

void ld_replay_dump_free(ld_replay_dump *d)
{
    if (!d) return;
    free(d->pos);
    free(d->tokens);
    free(d->rows);
    free(d->state);
    ld_replay_dump_reset(d);
}

void ld_replay_dump_reset(ld_replay_dump *d)
{
    *d = (ld_replay_dump){ .want = d->want, .some_planes = d->some_planes, .plane_lo = d->plane_lo,
                           .plane_hi = d->plane_hi, .want_state = d->want_state, .state_layer = d->state_layer };
}

ld_status ld_replay_dump_mkdir(const char *dir, ld_error *err)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot create directory '%.180s': %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot use directory '%.180s': %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return LD_FAIL(err, LD_ERR_IO, 0, "'%.180s' exists and is not a directory", dir);
    return LD_OK;
}

const char *ld_replay_dump_file(int k, int n_layers, char *buf, size_t cap)
{
    /* zero-padded to the width of the last layer's number, two digits at least */
    char num[16], last[16];
    snprintf(num, sizeof num, "%d", k - 1);
    snprintf(last, sizeof last, "%d", n_layers - 1);
    size_t width = strlen(last) < 2 ? 2 : strlen(last), pad = strlen(num) < width ? width - strlen(num) : 0;
    if (k == 0) snprintf(buf, cap, "embed.npy");
    else if (k == n_layers + 1) snprintf(buf, cap, "final_norm.npy");
    else snprintf(buf, cap, "layer_%.*s%s.npy", (int)pad, "0000000000", num);
    return buf;
}

static cJSON *int64s_json(const int64_t *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

static void add_file(cJSON *files, const char *name, int plane, size_t n, int cols, const char *dtype,
                     const char *meaning)
{
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "file", name);
    if (plane >= 0) cJSON_AddNumberToObject(f, "plane", plane);
    cJSON *shape = cJSON_CreateArray();
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)n));
    if (cols > 0) cJSON_AddItemToArray(shape, cJSON_CreateNumber(cols));
    cJSON_AddItemToObject(f, "shape", shape);
    cJSON_AddStringToObject(f, "dtype", dtype);
    cJSON_AddStringToObject(f, "meaning", meaning);
    cJSON_AddItemToArray(files, f);
}

/* manifest.json: what the files are. */
static char *manifest(const ld_replay_dump *d, const ld_replay_engine *e, const char *rid)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "format", "logdiff-layer-dump");
    cJSON_AddNumberToObject(o, "version", 1);
    if (rid) cJSON_AddStringToObject(o, "rid", rid);
    else cJSON_AddNullToObject(o, "rid");
    cJSON *m = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(m, "arch", ld_lm_info_of(e->lm)->arch);
    cJSON_AddNumberToObject(m, "n_layers", d->n_layers);
    cJSON_AddNumberToObject(m, "hidden", d->hidden);
    cJSON_AddNumberToObject(m, "vocab", ld_lm_info_of(e->lm)->vocab);
    cJSON_AddStringToObject(o, "backend", ld_backend_name(e->be));
    cJSON_AddStringToObject(o, "sequence", "prompt ++ output: position p holds token seq[p]; its hidden states are "
                                           "computed from seq[0..p] (causal)");
    cJSON_AddNumberToObject(o, "sequence_length", (double)d->seq_len);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)d->n_prompt);
    cJSON_AddItemToObject(o, "positions", int64s_json(d->pos, d->n_pos));
    cJSON_AddItemToObject(o, "tokens", int64s_json(d->tokens, d->n_pos));
    cJSON *files = cJSON_AddArrayToObject(o, "files");
    char name[48], meaning[160];
    for (int k = 0; k < d->n_layers + 2; k++) {
        if (k == 0) snprintf(meaning, sizeof meaning, "token embeddings (the input of decoder layer 0)");
        else if (k == d->n_layers + 1)
            snprintf(meaning, sizeof meaning, "output of the final RMSNorm (model.norm), the input of lm_head");
        else snprintf(meaning, sizeof meaning, "residual stream after decoder layer %d (output of model.layers[%d])",
                      k - 1, k - 1);
        add_file(files, ld_replay_dump_file(k, d->n_layers, name, sizeof name), k, d->n_pos, d->hidden, "<f4",
                 meaning);
    }
    add_file(files, "positions.npy", -1, d->n_pos, 0, "<i8", "the position of each row (row i of every plane)");
    add_file(files, "tokens.npy", -1, d->n_pos, 0, "<i8", "the token id at each position");
    cJSON_AddStringToObject(o, "transformers",
                            "output_hidden_states=True: hidden_states[0] is embed.npy, hidden_states[l + 1] is "
                            "layer_l.npy for l < n_layers - 1, and hidden_states[n_layers] is final_norm.npy (the "
                            "last layer's output before the norm is only in layer_<n_layers - 1>.npy)");
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    return text;
}

static ld_status write_text(const char *path, const char *text, ld_error *err)
{
    FILE *f = fopen(path, "wb");
    if (!f) return LD_FAIL(err, LD_ERR_IO, 0, "cannot write '%.180s': %s", path, strerror(errno));
    size_t len = strlen(text);
    int ok = fwrite(text, 1, len, f) == len && fwrite("\n", 1, 1, f) == 1;
    int saved = errno;
    if (fclose(f) != 0 && ok) {
        ok = 0;
        saved = errno;
    }
    return ok ? LD_OK : LD_FAIL(err, LD_ERR_IO, 0, "cannot write '%.180s': %s", path, strerror(saved));
}

ld_status ld_replay_dump_write(const char *dir, const ld_replay_dump *d, const ld_replay_engine *e,
                               const char *rid, ld_error *err)
{
    size_t dlen = strlen(dir), planes = (size_t)d->n_layers + 2, plane = d->n_pos * (size_t)d->hidden;
    if (d->plane_lo != 0 || d->plane_hi != d->n_layers + 1)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "a dump of planes %d-%d only: the files hold every plane", d->plane_lo,
                       d->plane_hi);
    char *path = malloc(dlen + 64);
    if (!path) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    memcpy(path, dir, dlen);
    path[dlen] = '/';
    char *name = path + dlen + 1;
    ld_status st = LD_OK;
    for (size_t k = 0; st == LD_OK && k < planes; k++) {
        ld_replay_dump_file((int)k, d->n_layers, name, 63);
        st = ld_npy_write_f32(path, d->rows + k * plane, d->n_pos, (size_t)d->hidden, err);
    }
    if (st == LD_OK) {
        snprintf(name, 63, "positions.npy");
        st = ld_npy_write_i64(path, d->pos, d->n_pos, err);
    }
    if (st == LD_OK) {
        snprintf(name, 63, "tokens.npy");
        st = ld_npy_write_i64(path, d->tokens, d->n_pos, err);
    }
    if (st == LD_OK) {
        char *text = manifest(d, e, rid);
        snprintf(name, 63, "manifest.json");
        st = text ? write_text(path, text, err) : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        free(text);
    }
    free(path);
    return st;
}
