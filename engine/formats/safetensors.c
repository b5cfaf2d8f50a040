/* safetensors.c - see safetensors.h. */
#include "safetensors.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[LD_DT_COUNT] = {
    [LD_DT_F32] = {"F32", 4},     [LD_DT_F16] = {"F16", 2},
    [LD_DT_BF16] = {"BF16", 2},   [LD_DT_F64] = {"F64", 8},
    [LD_DT_I64] = {"I64", 8},     [LD_DT_I32] = {"I32", 4},
    [LD_DT_I16] = {"I16", 2},     [LD_DT_I8] = {"I8", 1},
    [LD_DT_U64] = {"U64", 8},     [LD_DT_U32] = {"U32", 4},
    [LD_DT_U16] = {"U16", 2},     [LD_DT_U8] = {"U8", 1},
    [LD_DT_BOOL] = {"BOOL", 1},   [LD_DT_F8_E4M3] = {"F8_E4M3", 1},
    [LD_DT_F8_E5M2] = {"F8_E5M2", 1}, [LD_DT_F8_E8M0] = {"F8_E8M0", 1},
};

const char *ld_dtype_name(ld_dtype t)
{
    return (unsigned)t < LD_DT_COUNT ? dtypes[t].name : "?";
}

size_t ld_dtype_size(ld_dtype t)
{
    return (unsigned)t < LD_DT_COUNT ? dtypes[t].size : 0;
}

static void free_tensors(ld_st_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++) free(t[i].name);
    free(t);
}

void ld_st_close(ld_safetensors *st)
{
    if (!st) return;
    free_tensors(st->tensors, st->n_tensors);
    for (size_t i = 0; i < st->n_shards; i++) {
        if (st->maps_ && st->maps_[i]) munmap(st->maps_[i], st->map_sizes_[i]);
        if (st->shard_paths) free(st->shard_paths[i]);
    }
    free(st->maps_);
    free(st->map_sizes_);
    free(st->shard_paths);
    free(st);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const ld_st_tensor *)a)->name,
                  ((const ld_st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const ld_st_tensor *x = *(const ld_st_tensor *const *)a;
    const ld_st_tensor *y = *(const ld_st_tensor *const *)b;
    if (x->data != y->data) return x->data < y->data ? -1 : 1;
    return x->n_bytes < y->n_bytes ? -1 : x->n_bytes > y->n_bytes;
}

const ld_st_tensor *ld_st_find(const ld_safetensors *st, const char *name)
{
    if (!st || !name) return NULL;
    size_t lo = 0, hi = st->n_tensors;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, st->tensors[mid].name);
        if (c == 0) return &st->tensors[mid];
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

/* A JSON number that is an exact integer in [0, 2^53]. */
static int json_u64(const cJSON *j, uint64_t *out)
{
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || floor(d) != d) return 0;
    *out = (uint64_t)d;
    return 1;
}

/* The header of a file: its JSON object parsed (the caller's:
 * cJSON_Delete), *n its length; the data buffer follows it. */
static ld_status read_header(const uint8_t *base, size_t len, cJSON **root, uint64_t *n, ld_error *err)
{
    *root = NULL;
    if (len < 8) return LD_FAIL(err, LD_ERR_TRUNCATED, 0, "file shorter than the 8-byte header length");
    *n = 0;
    for (int i = 7; i >= 0; i--) *n = (*n << 8) | base[i];
    if (*n > LD_ST_MAX_HEADER)
        return LD_FAIL(err, LD_ERR_LIMIT, 0, "header length %llu exceeds %u bytes",
                       (unsigned long long)*n, LD_ST_MAX_HEADER);
    if (*n > len - 8)
        return LD_FAIL(err, LD_ERR_TRUNCATED, 0, "header length %llu runs past the end of the file (%zu bytes)",
                       (unsigned long long)*n, len);
    if (*n < 2 || base[8] != '{') return LD_FAIL(err, LD_ERR_SYNTAX, 8, "header is not a JSON object");
    *root = cJSON_ParseWithLength((const char *)base + 8, (size_t)*n);
    if (!*root || !cJSON_IsObject(*root)) {
        cJSON_Delete(*root);
        *root = NULL;
        return LD_FAIL(err, LD_ERR_SYNTAX, 8, "header is not a JSON object");
    }
    return LD_OK;
}

/* x's dtype and shape from entry e; *elems their element count */
static ld_status entry_shape(const cJSON *e, const char *name, ld_st_tensor *x, uint64_t *elems, ld_error *err)
{
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(of))
        return LD_FAIL(err, LD_ERR_SYNTAX, 8, "tensor '%.120s': needs \"dtype\", \"shape\" and \"data_offsets\"", name);
    int d;
    for (d = 0; d < LD_DT_COUNT; d++)
        if (strcmp(dt->valuestring, dtypes[d].name) == 0) break;
    if (d == LD_DT_COUNT)
        return LD_FAIL(err, LD_ERR_UNSUPPORTED, 8, "tensor '%.120s': dtype '%.20s' not supported", name, dt->valuestring);
    x->dtype = (ld_dtype)d;
    int nd = cJSON_GetArraySize(sh);
    if (nd > LD_ST_MAX_DIMS)
        return LD_FAIL(err, LD_ERR_LIMIT, 8, "tensor '%.120s': %d dimensions (at most %d)", name, nd, LD_ST_MAX_DIMS);
    x->n_dims = nd;
    *elems = 1;
    int k = 0;
    for (const cJSON *s = sh->child; s; s = s->next, k++) {
        if (!json_u64(s, &x->shape[k]))
            return LD_FAIL(err, LD_ERR_SYNTAX, 8, "tensor '%.120s': shape is not a list of non-negative integers", name);
        if (x->shape[k] && *elems > UINT64_MAX / x->shape[k])
            return LD_FAIL(err, LD_ERR_LIMIT, 8, "tensor '%.120s': element count overflows", name);
        *elems *= x->shape[k];
    }
    return LD_OK;
}

/* x's data: data_offsets within the buffer buf [buf_len] (at byte
 * buf_off of the file), as many bytes as the shape and dtype say */
static ld_status entry_data(const cJSON *e, const char *name, const uint8_t *buf, uint64_t buf_len, uint64_t buf_off,
                            uint64_t elems, ld_st_tensor *x, ld_error *err)
{
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t b = 0, en = 0;
    if (cJSON_GetArraySize(of) != 2 || !json_u64(of->child, &b) || !json_u64(of->child->next, &en) || b > en)
        return LD_FAIL(err, LD_ERR_SYNTAX, 8, "tensor '%.120s': data_offsets is not [begin, end] with begin <= end", name);
    if (en > buf_len)
        return LD_FAIL(err, LD_ERR_TRUNCATED, buf_off, "tensor '%.120s': data_offsets [%llu, %llu] run past the end of the buffer (%llu bytes)",
                       name, (unsigned long long)b, (unsigned long long)en, (unsigned long long)buf_len);
    size_t es = dtypes[x->dtype].size;
    if (elems > UINT64_MAX / es || elems * es != en - b)
        return LD_FAIL(err, LD_ERR_MISMATCH, buf_off + b, "tensor '%.120s': shape x %s size is not the %llu bytes of data_offsets",
                       name, dtypes[x->dtype].name, (unsigned long long)(en - b));
    x->n_elems = elems;
    x->data = buf + b;
    x->n_bytes = en - b;
    x->name = strdup(name);
    return x->name ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
}

/* No two of the tensors t[0..m) overlap (zero-size ones never do). */
static ld_status check_overlap(const uint8_t *base, const ld_st_tensor *t, size_t m, ld_error *err)
{
    const ld_st_tensor **by = malloc((m ? m : 1) * sizeof *by);
    if (!by) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (size_t i = 0; i < m; i++) by[i] = &t[i];
    qsort(by, m, sizeof *by, cmp_offset);
    const ld_st_tensor *prev = NULL;
    ld_status st = LD_OK;
    for (size_t i = 0; i < m && st == LD_OK; i++) {
        if (!by[i]->n_bytes) continue;
        if (prev && by[i]->data < prev->data + prev->n_bytes)
            st = LD_FAIL(err, LD_ERR_MISMATCH, (uint64_t)(by[i]->data - base),
                         "tensor '%.100s' overlaps tensor '%.100s'", by[i]->name, prev->name);
        prev = by[i];
    }
    free(by);
    return st;
}

/* Parse the tensors of one file into `*out` (appending to the n entries
 * already there).  `base` is the file's first byte. */
static ld_status parse_file(const uint8_t *base, size_t len, int shard,
                            ld_st_tensor **tens, size_t *n_tens, ld_error *err)
{
    cJSON *root;
    uint64_t n;
    LD_TRY(read_header(base, len, &root, &n, err));
    size_t count = 0;
    for (cJSON *e = root->child; e; e = e->next) count++;
    ld_st_tensor *t = realloc(*tens, (*n_tens + count + 1) * sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for %zu tensors", count);
    }
    *tens = t;
    ld_status st = LD_OK;
    size_t first = *n_tens;
    for (cJSON *e = root->child; e && st == LD_OK; e = e->next) {
        const char *name = e->string ? e->string : "";
        int meta = strcmp(name, "__metadata__") == 0;
        if (!cJSON_IsObject(e)) {
            st = meta ? LD_FAIL(err, LD_ERR_SYNTAX, 8, "'__metadata__' is not an object")
                      : LD_FAIL(err, LD_ERR_SYNTAX, 8, "tensor '%.120s': entry is not an object", name);
            break;
        }
        if (meta) continue;
        ld_st_tensor *x = &t[*n_tens];
        memset(x, 0, sizeof *x);
        x->shard = shard;
        uint64_t elems = 0;
        st = entry_shape(e, name, x, &elems, err);
        if (st == LD_OK) st = entry_data(e, name, base + 8 + n, len - 8 - n, 8 + n, elems, x, err);
        if (st == LD_OK) (*n_tens)++;
    }
    cJSON_Delete(root);
    return st == LD_OK ? check_overlap(base, t + first, *n_tens - first, err) : st;
}

static ld_status finish(ld_safetensors *s, ld_error *err)
{
    if (s->n_tensors) qsort(s->tensors, s->n_tensors, sizeof *s->tensors, cmp_name);
    for (size_t i = 1; i < s->n_tensors; i++)
        if (strcmp(s->tensors[i].name, s->tensors[i - 1].name) == 0)
            return LD_FAIL(err, LD_ERR_MISMATCH, 0, "tensor '%.120s' appears twice", s->tensors[i].name);
    return LD_OK;
}

ld_status ld_st_parse(const void *buf, size_t len, ld_safetensors **out, ld_error *err)
{
    *out = NULL;
    ld_safetensors *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = parse_file(buf, len, 0, &s->tensors, &s->n_tensors, err);
    if (st == LD_OK) st = finish(s, err);
    if (st != LD_OK) {
        ld_st_close(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

/* Map `path` read-only; an empty file maps to a NULL pointer of size 0. */
static ld_status map_file(const char *path, void **map, size_t *size, ld_error *err)
{
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%.200s'", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return LD_FAIL(err, LD_ERR_IO, 0, "'%.200s' is not a regular file", path);
    }
    if (sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return LD_FAIL(err, LD_ERR_IO, 0, "cannot map '%.200s'", path);
        }
        *map = m;
        *size = (size_t)sb.st_size;
    }
    close(fd);
    return LD_OK;
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static char *join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static int is_file(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

static ld_status add_shard(ld_safetensors *s, char *path, ld_error *err)
{
    size_t i = s->n_shards;
    void **m = realloc(s->maps_, (i + 1) * sizeof *m);
    if (m) s->maps_ = m;
    size_t *z = realloc(s->map_sizes_, (i + 1) * sizeof *z);
    if (z) s->map_sizes_ = z;
    char **pp = realloc(s->shard_paths, (i + 1) * sizeof *pp);
    if (pp) s->shard_paths = pp;
    if (!m || !z || !pp) {
        free(path);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    s->shard_paths[i] = path;
    s->maps_[i] = NULL;
    s->map_sizes_[i] = 0;
    s->n_shards++;
    LD_TRY(map_file(path, &s->maps_[i], &s->map_sizes_[i], err));
    ld_status st = parse_file(s->maps_[i], s->map_sizes_[i], (int)i, &s->tensors, &s->n_tensors, err);
    if (st != LD_OK && err) {
        char msg[sizeof err->msg];
        const char *base = strrchr(path, '/');
        snprintf(msg, sizeof msg, "%.80s: %.160s", base ? base + 1 : path, err->msg);
        memcpy(err->msg, msg, sizeof msg);
    }
    return st;
}

static ld_status open_index(ld_safetensors *s, const char *index_path, ld_error *err)
{
    void *map;
    size_t size;
    LD_TRY(map_file(index_path, &map, &size, err));
    cJSON *root = map ? cJSON_ParseWithLength(map, size) : NULL;
    if (map) munmap(map, size);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        cJSON_Delete(root);
        return LD_FAIL(err, LD_ERR_SYNTAX, 0, "'%.200s' has no \"weight_map\" object", index_path);
    }
    /* the directory of the index */
    char *dir = strdup(index_path);
    if (!dir) {
        cJSON_Delete(root);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else strcpy(dir, ".");
    ld_status st = LD_OK;
    /* shards in order of first mention */
    for (const cJSON *e = wm->child; e && st == LD_OK; e = e->next) {
        if (!cJSON_IsString(e) || strchr(e->valuestring, '/') || !ends_with(e->valuestring, ".safetensors")) {
            st = LD_FAIL(err, LD_ERR_SYNTAX, 0, "weight_map entry '%.120s' does not name a .safetensors file in the same directory",
                         e->string ? e->string : "");
            break;
        }
        size_t k;
        for (k = 0; k < s->n_shards; k++) {
            const char *b = strrchr(s->shard_paths[k], '/');
            if (strcmp(b ? b + 1 : s->shard_paths[k], e->valuestring) == 0) break;
        }
        if (k < s->n_shards) continue;
        if (s->n_shards >= LD_ST_MAX_SHARDS) {
            st = LD_FAIL(err, LD_ERR_LIMIT, 0, "more than %d shards", LD_ST_MAX_SHARDS);
            break;
        }
        char *p = join(dir, e->valuestring);
        if (!p) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        else st = add_shard(s, p, err);
    }
    if (st == LD_OK) st = finish(s, err);
    /* every tensor of the map is in the file the map names */
    for (const cJSON *e = wm->child; e && st == LD_OK; e = e->next) {
        const ld_st_tensor *t = ld_st_find(s, e->string);
        const char *b = t ? strrchr(s->shard_paths[t->shard], '/') : NULL;
        if (!t) st = LD_FAIL(err, LD_ERR_MISMATCH, 0, "tensor '%.120s' of the weight_map is in no shard", e->string);
        else if (strcmp(b ? b + 1 : s->shard_paths[t->shard], e->valuestring) != 0)
            st = LD_FAIL(err, LD_ERR_MISMATCH, 0, "tensor '%.120s' is not in '%.100s' as the weight_map says", e->string, e->valuestring);
    }
    free(dir);
    cJSON_Delete(root);
    return st;
}

ld_status ld_st_open(const char *path, ld_safetensors **out, ld_error *err)
{
    *out = NULL;
    ld_safetensors *s = calloc(1, sizeof *s);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    struct stat sb;
    ld_status st;
    if (stat(path, &sb) != 0) {
        st = LD_FAIL(err, LD_ERR_IO, 0, "cannot open '%.200s'", path);
    } else if (S_ISDIR(sb.st_mode)) {
        char *idx = join(path, "model.safetensors.index.json");
        char *one = join(path, "model.safetensors");
        if (!idx || !one) st = LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        else if (is_file(idx)) st = open_index(s, idx, err);
        else if (is_file(one)) {
            st = add_shard(s, one, err);
            one = NULL;
            if (st == LD_OK) st = finish(s, err);
        } else st = LD_FAIL(err, LD_ERR_IO, 0, "no model.safetensors or model.safetensors.index.json in '%.200s'", path);
        free(idx);
        free(one);
    } else if (ends_with(path, ".json")) {
        st = open_index(s, path, err);
    } else {
        char *p = strdup(path);
        st = p ? add_shard(s, p, err) : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
        if (st == LD_OK) st = finish(s, err);
    }
    if (st != LD_OK) {
        if (err) err->path = path;
        ld_st_close(s);
        return st;
    }
    *out = s;
    return LD_OK;
}
