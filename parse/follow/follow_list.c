/* follow_list.c - directory listings and path names for the follower.
 *
 * A leaf: no hooks, no files opened but the directory.  Entries are stat'ed
 * through symbolic links (a link to a log is followed as the log; its
 * identity is the target's, so it is never read twice in one directory).
 */
#include "follow_internal.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

char *fl_path_join(const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    int slash = d > 0 && dir[d - 1] != '/';
    char *p = malloc(d + (size_t)slash + n + 1);
    if (!p) return NULL;
    memcpy(p, dir, d);
    if (slash) p[d] = '/';
    memcpy(p + d + (size_t)slash, name, n + 1);
    return p;
}

char *fl_path_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) + 1 : 0;
    char *p = malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, path, n);
    p[n] = 0;
    return p;
}

int fl_name_compressed(const char *name)
{
    static const char *const ext[] = {".gz", ".zst", ".xz", ".bz2"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n > e && strcmp(name + n - e, ext[i]) == 0) return 1;
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const fl_entry *)a)->name, ((const fl_entry *)b)->name);
}

void fl_list_free(fl_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) free(e[i].path);
    free(e);
}

/* Appends `name` of `dir` to the list (stat'ed); 0 or ENOMEM. */
static int add_entry(const char *dir, const char *name, fl_entry **e, size_t *n, size_t *cap)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        fl_entry *ne = realloc(*e, c * sizeof *ne);
        if (!ne) return ENOMEM;
        *e = ne;
        *cap = c;
    }
    char *p = fl_path_join(dir, name);
    if (!p) return ENOMEM;
    struct stat st;
    if (stat(p, &st) != 0) { /* gone since readdir, or a dangling link */
        free(p);
        return 0;
    }
    fl_entry *x = &(*e)[(*n)++];
    x->path = p;
    x->name = p + strlen(p) - strlen(name);
    x->dev = (uint64_t)st.st_dev;
    x->ino = (uint64_t)st.st_ino;
    x->size = st.st_size > 0 ? (uint64_t)st.st_size : 0;
    x->regular = S_ISREG(st.st_mode);
    return 0;
}

int fl_list_dir(const char *dir, fl_entry **out, size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    DIR *d = opendir(*dir ? dir : ".");
    if (!d) return errno;
    fl_entry *e = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    struct dirent *de;
    errno = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        rc = add_entry(dir, de->d_name, &e, &n, &cap);
        errno = 0;
    }
    if (rc == 0 && errno) rc = errno;
    closedir(d);
    if (rc) {
        fl_list_free(e, n);
        return rc;
    }
    if (n > 1) qsort(e, n, sizeof *e, by_name);
    *out = e;
    *out_n = n;
    return 0;
}
