/* journal_entry.c - see journal_entry.h. */
#include "journal_entry.h"

#include "capture_internal.h"

#ifdef LD_HAVE_LIBSYSTEMD

#include "journal_lib.h"

/* field `name`'s value in the current entry (borrowed), or NULL */
static const char *field(sd_journal *j, const char *name, size_t *len)
{
    const void *d;
    size_t n, k = strlen(name);
    if (ld_sdj.sd_journal_get_data(j, name, &d, &n) < 0 || n < k + 1) return NULL;
    *len = n - k - 1; /* the data is "NAME=value" */
    return (const char *)d + k + 1;
}

/* the entry's writer, named as the JSON and export readers name it; each
 * field copied (cut to the name's size, which cuts the name the same way)
 * before the next is asked for */
static size_t entry_source(sd_journal *j, char *source, size_t cap)
{
    char val[5][LD_CAPTURE_SOURCE_NAME];
    ld_journal_span who[5] = {{0}};
    for (int p = 0; p < 5; p++) {
        size_t n = 0;
        const char *v = field(j, ld_journal_field_names[LD_JF_STREAM_ID + p], &n);
        if (!v) continue;
        who[p].len = n < sizeof val[p] ? n : sizeof val[p];
        memcpy(val[p], v, who[p].len);
        who[p].at = val[p];
        who[p].type = 's';
    }
    return ld_capture_journal_source(source, cap, who);
}

/* MESSAGE is asked for last: what sd_journal_get_data returns is valid only
 * until its next call (sd_journal_get_data(3)) */
void ld_journal_entry_record(sd_journal *j, char *source, size_t cap, ld_capture_record *rec)
{
    memset(rec, 0, sizeof *rec);
    size_t n = 0;
    const char *lb = field(j, ld_journal_field_names[LD_JF_LINE_BREAK], &n);
    rec->last = !(lb && n == 8 && !memcmp(lb, "line-max", 8));
    rec->source_len = entry_source(j, source, cap);
    rec->source = source;
    rec->text = field(j, ld_journal_field_names[LD_JF_MESSAGE], &n);
    rec->len = rec->text ? n : 0;
    rec->skip = !rec->text;
}

#else

typedef int ld_journal_entry_unused; /* an empty unit is not ISO C */

#endif
