/* journal_file.c - see journal_file.h. */
#include "journal_file.h"

#include "capture_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOURNAL_MAGIC "LPKSHHRH"

int ld_journal_file_is(const char *path)
{
    char head[8];
    FILE *fp = strcmp(path, "-") ? fopen(path, "rb") : NULL;
    if (!fp) return 0;
    size_t n = fread(head, 1, sizeof head, fp);
    fclose(fp);
    return n == sizeof head && !memcmp(head, JOURNAL_MAGIC, sizeof head);
}

#ifdef LD_HAVE_LIBSYSTEMD

#include <systemd/sd-journal.h>

struct ld_journal_file {
    sd_journal *j;
    uint64_t entry;
    char source[LD_CAPTURE_SOURCE_NAME];
};

int ld_journal_file_available(void)
{
    return 1;
}

ld_status ld_journal_file_open(const char *path, ld_journal_file **out, ld_error *err)
{
    *out = NULL;
    ld_journal_file *f = calloc(1, sizeof *f);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a journal file");
    const char *paths[] = {path, NULL};
    int r = sd_journal_open_files(&f->j, paths, 0);
    if (r < 0) {
        free(f);
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot read it as a journal file: %s", strerror(-r));
    }
    sd_journal_set_data_threshold(f->j, 0); /* whole fields: the default keeps 64 KiB of each */
    *out = f;
    return LD_OK;
}

/* field `name`'s value in the current entry (borrowed), or NULL */
static const char *field(sd_journal *j, const char *name, size_t *len)
{
    const void *d;
    size_t n, k = strlen(name);
    if (sd_journal_get_data(j, name, &d, &n) < 0 || n < k + 1) return NULL;
    *len = n - k - 1; /* the data is "NAME=value" */
    return (const char *)d + k + 1;
}

/* the entry's writer, named as the JSON and export readers name it */
static void entry_source(ld_journal_file *f, ld_capture_record *rec)
{
    ld_journal_span who[5] = {{0}};
    for (int p = 0; p < 5; p++) {
        who[p].at = field(f->j, ld_journal_field_names[LD_JF_STREAM_ID + p], &who[p].len);
        who[p].type = who[p].at ? 's' : 0;
    }
    rec->source_len = ld_capture_journal_source(f->source, sizeof f->source, who);
    rec->source = f->source;
}

ld_status ld_journal_file_next(ld_journal_file *f, ld_capture_record *rec, uint64_t *entry, int *has,
                               ld_error *err)
{
    memset(rec, 0, sizeof *rec);
    *has = 0;
    int r = sd_journal_next(f->j);
    if (r == 0) return LD_OK;
    *entry = ++f->entry;
    *has = 1;
    if (r < 0) return LD_FAIL(err, LD_ERR_IO, 0, "entry %llu cannot be read: %s", (unsigned long long)*entry,
                              strerror(-r));
    size_t n = 0;
    rec->text = field(f->j, ld_journal_field_names[LD_JF_MESSAGE], &n);
    rec->len = n;
    rec->skip = !rec->text;
    const char *lb = field(f->j, ld_journal_field_names[LD_JF_LINE_BREAK], &n);
    rec->last = !(lb && n == 8 && !memcmp(lb, "line-max", 8));
    entry_source(f, rec);
    return LD_OK;
}

void ld_journal_file_close(ld_journal_file *f)
{
    if (!f) return;
    sd_journal_close(f->j);
    free(f);
}

#else /* built without libsystemd */

struct ld_journal_file {
    int unused;
};

int ld_journal_file_available(void)
{
    return 0;
}

ld_status ld_journal_file_open(const char *path, ld_journal_file **out, ld_error *err)
{
    (void)path;
    *out = NULL;
    return LD_FAIL(err, LD_ERR_UNSUPPORTED, 0,
                   "a journal file: this logdiff was built without libsystemd (Debian libsystemd-dev; "
                   "tools/setup.sh installs it); meanwhile read `journalctl --file FILE -o export` instead");
}

ld_status ld_journal_file_next(ld_journal_file *f, ld_capture_record *rec, uint64_t *entry, int *has,
                               ld_error *err)
{
    (void)f, (void)rec, (void)entry, (void)err;
    *has = 0;
    return LD_OK;
}

void ld_journal_file_close(ld_journal_file *f)
{
    (void)f;
}

#endif
