/* journal_follow.c - see journal_follow.h. */
#include "journal_follow.h"

#include "capture_internal.h"
#include "journal_entry.h"

#include <stdlib.h>
#include <string.h>

#define UNIT_MAX 256 /* systemd's own limit on a unit name */

/* "sglang" -> "sglang.service": journalctl -u's rule for a name without a
 * type; 0, or -1 when empty or too long */
static int unit_name(const char *unit, char *out, size_t cap)
{
    size_t n = strlen(unit);
    const char *suffix = strchr(unit, '.') ? "" : ".service";
    if (!n || n + strlen(suffix) >= cap || n + strlen(suffix) > UNIT_MAX) return -1;
    memcpy(out, unit, n);
    strcpy(out + n, suffix);
    return 0;
}

#ifdef LD_HAVE_LIBSYSTEMD

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "journal_lib.h"

struct ld_journal_follow {
    sd_journal *j;
    int fd;                  /* the journal's inotify descriptor; -1: none */
    int has_entry;           /* an entry was read: the read pointer is on it */
    ld_journal_from from;    /* the last seek */
    char *cursor;            /* a cursor seek's, until its first entry is read */
    char *dir;               /* owned; NULL: the system journal */
    char unit[UNIT_MAX + 16];
    char source[LD_CAPTURE_SOURCE_NAME];
};

int ld_journal_follow_available(void)
{
    return 1;
}

static ld_status open_journal(ld_journal_follow *f, const char *dir, ld_error *err)
{
    int r = dir ? ld_sdj.sd_journal_open_directory(&f->j, dir, 0) : ld_sdj.sd_journal_open(&f->j, SD_JOURNAL_LOCAL_ONLY);
    if (r < 0)
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot open the journal%s%s: %s", dir ? " in " : "", dir ? dir : "",
                       strerror(-r));
    char match[sizeof f->unit + 16];
    snprintf(match, sizeof match, "_SYSTEMD_UNIT=%s", f->unit);
    ld_sdj.sd_journal_set_data_threshold(f->j, 0); /* whole fields: the default keeps 64 KiB of each */
    if ((r = ld_sdj.sd_journal_add_match(f->j, match, 0)) < 0 || (r = ld_sdj.sd_journal_seek_head(f->j)) < 0)
        return LD_FAIL(err, LD_ERR_IO, 0, "the journal: '%s': %s", f->unit, strerror(-r));
    f->fd = ld_sdj.sd_journal_get_fd(f->j); /* < 0 (no inotify left): the caller polls */
    if (f->fd < 0) f->fd = -1;
    return LD_OK;
}

ld_status ld_journal_follow_open(const char *unit, const char *dir, ld_journal_follow **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_journal_lib_need(err));
    ld_journal_follow *f = calloc(1, sizeof *f);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a journal");
    if (unit_name(unit, f->unit, sizeof f->unit) != 0) {
        free(f);
        return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s' is not a unit name", unit);
    }
    if (dir && !(f->dir = strdup(dir))) {
        free(f);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a journal");
    }
    ld_status st = open_journal(f, dir, err);
    if (st != LD_OK) {
        ld_journal_follow_close(f);
        return st;
    }
    *out = f;
    return LD_OK;
}

const char *ld_journal_follow_unit(const ld_journal_follow *j)
{
    return j->unit;
}

/* 1 when dir holds a journal file (*.journal, *.journal~) this user may read */
static int dir_has_journal(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d))) {
        const char *dot = strstr(e->d_name, ".journal");
        if (!dot || (strcmp(dot, ".journal") && strcmp(dot, ".journal~"))) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        found = access(path, R_OK) == 0;
    }
    if (d) closedir(d);
    return found;
}

int ld_journal_follow_has_files(const ld_journal_follow *j)
{
    if (j->dir) return dir_has_journal(j->dir);
    return ld_sdj.sd_journal_has_runtime_files(j->j) > 0 || ld_sdj.sd_journal_has_persistent_files(j->j) > 0;
}

/* the tail: after the last entry there is (sd_journal_next after
 * sd_journal_seek_tail alone gives the last entry again) */
static int seek_tail(ld_journal_follow *f)
{
    int r = ld_sdj.sd_journal_seek_tail(f->j);
    if (r >= 0 && (r = ld_sdj.sd_journal_previous(f->j)) > 0) f->has_entry = 1;
    return r < 0 ? r : 0;
}

ld_status ld_journal_follow_seek(ld_journal_follow *j, ld_journal_from from, const char *cursor, ld_error *err)
{
    int cur = from == LD_JOURNAL_AT_CURSOR || from == LD_JOURNAL_AFTER_CURSOR;
    if (cur != (cursor != NULL)) return LD_FAIL(err, LD_ERR_USAGE, 0, "a cursor with a cursor position only");
    free(j->cursor);
    j->cursor = NULL;
    j->has_entry = 0;
    j->from = from;
    int r = from == LD_JOURNAL_HEAD ? ld_sdj.sd_journal_seek_head(j->j)
            : from == LD_JOURNAL_TAIL ? seek_tail(j)
                                      : ld_sdj.sd_journal_seek_cursor(j->j, cursor);
    if (r == -EINVAL) return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s' is not a journal cursor", cursor);
    if (r < 0) return LD_FAIL(err, LD_ERR_IO, 0, "the journal of '%s': cannot seek: %s", j->unit, strerror(-r));
    if (cur && !(j->cursor = strdup(cursor))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a cursor");
    return LD_OK;
}

/* The first entry after a cursor seek: the cursor's own is skipped when
 * reading after it; *found: it was there. */
static int first_after_seek(ld_journal_follow *f, int *found)
{
    *found = ld_sdj.sd_journal_test_cursor(f->j, f->cursor) > 0;
    int r = 1;
    if (*found && f->from == LD_JOURNAL_AFTER_CURSOR) r = ld_sdj.sd_journal_next(f->j);
    free(f->cursor);
    f->cursor = NULL;
    return r;
}

ld_status ld_journal_follow_next(ld_journal_follow *j, ld_capture_record *rec, int *has, ld_error *err)
{
    memset(rec, 0, sizeof *rec);
    *has = 0;
    int found = 1, r = ld_sdj.sd_journal_next(j->j);
    if (r > 0 && j->cursor) r = first_after_seek(j, &found);
    if (r == 0) return LD_OK;
    *has = 1;
    if (r < 0) {
        rec->skip = 1;
        return LD_FAIL(err, LD_ERR_IO, 0, "the journal of '%s': an entry cannot be read: %s", j->unit, strerror(-r));
    }
    j->has_entry = 1;
    ld_journal_entry_record(j->j, j->source, sizeof j->source, rec);
    if (!found)
        return LD_FAIL(err, LD_ERR_TRUNCATED, 0,
                       "the entry of the saved cursor is no longer in the journal of '%s' (rotated away or "
                       "vacuumed): read from the first entry after it; entries removed with it were not read",
                       j->unit);
    return LD_OK;
}

ld_status ld_journal_follow_cursor(ld_journal_follow *j, char **out, ld_error *err)
{
    *out = NULL;
    if (!j->has_entry) return LD_FAIL(err, LD_ERR_USAGE, 0, "no entry read yet");
    int r = ld_sdj.sd_journal_get_cursor(j->j, out);
    if (r == -ENOMEM) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a journal cursor");
    if (r < 0) return LD_FAIL(err, LD_ERR_IO, 0, "the journal of '%s': no cursor: %s", j->unit, strerror(-r));
    return LD_OK;
}

int ld_journal_follow_fd(const ld_journal_follow *j)
{
    return j->fd;
}

ld_status ld_journal_follow_process(ld_journal_follow *j, ld_error *err)
{
    int r = ld_sdj.sd_journal_process(j->j);
    if (r < 0) return LD_FAIL(err, LD_ERR_IO, 0, "the journal of '%s': %s", j->unit, strerror(-r));
    return LD_OK;
}

void ld_journal_follow_close(ld_journal_follow *j)
{
    if (!j) return;
    ld_sdj.sd_journal_close(j->j);
    free(j->cursor);
    free(j->dir);
    free(j);
}

#else /* built without libsystemd */

struct ld_journal_follow {
    char unit[UNIT_MAX + 16];
};

int ld_journal_follow_available(void)
{
    return 0;
}

ld_status ld_journal_follow_open(const char *unit, const char *dir, ld_journal_follow **out, ld_error *err)
{
    char name[UNIT_MAX + 16];
    (void)dir;
    *out = NULL;
    if (unit_name(unit, name, sizeof name) != 0) return LD_FAIL(err, LD_ERR_USAGE, 0, "'%s' is not a unit name", unit);
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "following journald unit '%s': this logdiff was built without libsystemd (Debian "
                   "libsystemd-dev; tools/setup.sh installs it; `logdiff --version` says); meanwhile: "
                   "journalctl -f -o json -u %s | logdiff watch -", name, name);
}

const char *ld_journal_follow_unit(const ld_journal_follow *j)
{
    return j->unit;
}

int ld_journal_follow_has_files(const ld_journal_follow *j)
{
    (void)j;
    return 0;
}

ld_status ld_journal_follow_seek(ld_journal_follow *j, ld_journal_from from, const char *cursor, ld_error *err)
{
    (void)j, (void)from, (void)cursor;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "built without libsystemd");
}

ld_status ld_journal_follow_next(ld_journal_follow *j, ld_capture_record *rec, int *has, ld_error *err)
{
    (void)j, (void)err;
    memset(rec, 0, sizeof *rec);
    *has = 0;
    return LD_OK;
}

ld_status ld_journal_follow_cursor(ld_journal_follow *j, char **out, ld_error *err)
{
    (void)j;
    *out = NULL;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0, "built without libsystemd");
}

int ld_journal_follow_fd(const ld_journal_follow *j)
{
    (void)j;
    return -1;
}

ld_status ld_journal_follow_process(ld_journal_follow *j, ld_error *err)
{
    (void)j, (void)err;
    return LD_OK;
}

void ld_journal_follow_close(ld_journal_follow *j)
{
    (void)j;
}

#endif
