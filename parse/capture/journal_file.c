/* journal_file.c - see journal_file.h. */
#include "journal_file.h"

#include "capture_internal.h"
#include "journal_entry.h"

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

#include "journal_lib.h"

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
    LD_TRY(ld_journal_lib_need(err));
    ld_journal_file *f = calloc(1, sizeof *f);
    if (!f) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a journal file");
    const char *paths[] = {path, NULL};
    int r = ld_sdj.sd_journal_open_files(&f->j, paths, 0);
    if (r < 0) {
        free(f);
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot read it as a journal file: %s", strerror(-r));
    }
    ld_sdj.sd_journal_set_data_threshold(f->j, 0); /* whole fields: the default keeps 64 KiB of each */
    *out = f;
    return LD_OK;
}

ld_status ld_journal_file_next(ld_journal_file *f, ld_capture_record *rec, uint64_t *entry, int *has,
                               ld_error *err)
{
    memset(rec, 0, sizeof *rec);
    *has = 0;
    int r = ld_sdj.sd_journal_next(f->j);
    if (r == 0) return LD_OK;
    *entry = ++f->entry;
    *has = 1;
    if (r < 0) return LD_FAIL(err, LD_ERR_IO, 0, "entry %llu cannot be read: %s", (unsigned long long)*entry,
                              strerror(-r));
    ld_journal_entry_record(f->j, f->source, sizeof f->source, rec);
    return LD_OK;
}

void ld_journal_file_close(ld_journal_file *f)
{
    if (!f) return;
    ld_sdj.sd_journal_close(f->j);
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
