/* watch_state.c - logdiff watch's --state FILE (watch_state.h): loaded at
 * the start, saved every second and at the end. */
#include <stdlib.h>
#include <string.h>

#include "cmd/common/logread.h"
#include "cmd/watch/watch_internal.h"
#include "cmd/watch/watch_state.h"
#include "cmd/watch/watch_state_internal.h"

/* where r's first line is: its lines from there on are read again after a
 * restart (NULL: a record with no line, an error record) */
static const ld_source *first_part(const ld_request *r)
{
    const ld_source *s = ld_cli_request_first_part(r);
    return s && s->member ? s : NULL;
}

/* a line's position in its source: a file's byte offset, a journal's entry */
static uint64_t position(const ld_source *s)
{
    return ld_watch_journal_is(s->member) ? s->line : s->offset;
}

int ld_watch_state_was_judged(ld_watch_state *st, const ld_request *r)
{
    const ld_source *s = st && r->rid ? first_part(r) : NULL;
    if (!s) return 0;
    for (size_t i = 0; i < st->before.n; i++) {
        judged *j = &st->before.v[i];
        if (j->offset != position(s) || strcmp(j->rid, r->rid) || strcmp(j->path, s->member)) continue;
        /* each comes again once: the list shrinks as the restart's lines are read */
        free(j->path);
        free(j->rid);
        *j = st->before.v[--st->before.n];
        return 1;
    }
    return 0;
}

void ld_watch_state_note_judged(ld_watch_state *st, const ld_request *r)
{
    const ld_source *s = st && r->rid ? first_part(r) : NULL;
    if (s) ld_watch_judged_add(&st->now, s->member, position(s), r->rid); /* out of memory: it may be judged again */
}

void ld_watch_state_set_warmup(ld_watch_state *st, uint64_t bytes)
{
    if (st) st->warmup = bytes;
}

int ld_watch_state_save_due(const ld_watch_state *st, double now)
{
    return now - st->saved_at >= 1.0;
}

/* Every file saved for `source` (a directory's files, a file and its rotated
 * sibling still being read) resumes where it was; a source with none saved
 * starts afresh. */
ld_status ld_watch_state_add_source(ld_watch_state *st, ld_follow *f, const char *source, ld_error *err)
{
    int resumed = 0;
    for (size_t i = 0; st && i < st->n_files; i++) {
        const saved_file *s = &st->files[i];
        if (strcmp(s->source, source)) continue;
        int warm = st->warmup && s->warmup < s->offset; /* read again in silence from there (watch_warmup.h) */
        LD_TRY(ld_follow_add_at(f, source, s->dev, s->ino, warm ? s->warmup : s->offset,
                                warm ? s->warmup_line : s->line, err));
        resumed = 1;
    }
    return resumed ? LD_OK : ld_follow_add(f, source, err);
}

/* ------------------------------------------------------------ saving */

typedef struct positions {
    saved_file *v;
    size_t n, cap;
    int nomem;
} positions;

/* a journal source being saved: the first entry a restart reads */
typedef struct journal_pos {
    ld_watch_journal *j;
    uint64_t from;    /* the first entry needed */
    uint64_t start;   /* the first entry the mark reads (at most `from`) */
    saved_journal out; /* the mark (its cursor malloc'd, its source borrowed) */
} journal_pos;

typedef struct saving {
    const ld_watch_state *st;
    positions files;
    journal_pos *journals;
    size_t n_journals;
} saving;

static void add_position(void *ctx, const ld_follow_file *file, const char *source)
{
    positions *p = ctx;
    if (p->nomem || !file->ino) return; /* standard input: nothing to resume */
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        saved_file *v = realloc(p->v, cap * sizeof *v);
        if (!v) {
            p->nomem = 1;
            return;
        }
        p->v = v;
        p->cap = cap;
    }
    const ld_watch_file *wf = file->user;
    saved_file s = { strdup(source), strdup(file->path), file->dev, file->ino, file->offset, file->lineno,
                     0, 0, wf ? (ld_watch_marks *)&wf->marks : NULL };
    if (!s.source || !s.path) {
        free(s.source);
        free(s.path);
        p->nomem = 1;
        return;
    }
    p->v[p->n++] = s;
}

static journal_pos *journal_of(const saving *sv, const char *name)
{
    for (size_t i = 0; i < sv->n_journals; i++)
        if (!strcmp(ld_watch_journal_name(sv->journals[i].j), name)) return &sv->journals[i];
    return NULL;
}

/* a request still waiting: its source must be read again from its first line */
static void pull_back(void *ctx, const ld_request *r)
{
    saving *sv = ctx;
    const ld_source *s = first_part(r);
    if (!s || ld_watch_warmup_kind(sv->st, r) != LD_WARM_NO) return; /* a warm-up's: dropped when it goes */
    journal_pos *jp = ld_watch_journal_is(s->member) ? journal_of(sv, s->member) : NULL;
    if (jp) {
        ld_watch_journal_keep(jp->j, s->line);
        if (s->line < jp->from) jp->from = s->line;
        return;
    }
    for (size_t i = 0; i < sv->files.n; i++) {
        saved_file *f = &sv->files.v[i];
        if (strcmp(f->path, s->member) || s->offset >= f->offset) continue;
        f->offset = s->offset;
        f->line = s->line ? s->line - 1 : 0;
    }
}

/* each file's position, not before the end of its warm-up window (a save
 * while it is read), and where the next restart's warm-up starts */
static void place_files(saving *sv, uint64_t window)
{
    for (size_t i = 0; i < sv->files.n; i++) {
        saved_file *f = &sv->files.v[i];
        uint64_t end, end_line;
        if (ld_watch_warmup_end(sv->st, f->path, f->dev, f->ino, &end, &end_line) && f->offset < end) {
            f->offset = end;
            f->line = end_line;
        }
        f->warmup = f->offset;
        f->warmup_line = f->line;
        if (f->marks && ld_watch_marks_start(f->marks, window, f->offset, &f->warmup, &f->warmup_line) &&
            f->warmup_line > f->line)
            f->warmup = f->offset, f->warmup_line = f->line; /* not a line start we know */
    }
}

/* 1 when the lines of the request judged j will be read again */
static int read_again(const judged *j, const saving *sv)
{
    const journal_pos *jp = ld_watch_journal_is(j->path) ? journal_of(sv, j->path) : NULL;
    if (jp) return jp->out.mark.cursor && j->offset >= jp->start;
    for (size_t k = 0; k < sv->files.n; k++)
        if (!strcmp(sv->files.v[k].path, j->path) && j->offset >= sv->files.v[k].offset) return 1;
    return 0;
}

/* keeps the judged requests whose lines will be read again */
static void prune_judged(judged_list *l, const saving *sv)
{
    size_t kept = 0;
    for (size_t i = 0; i < l->n; i++) {
        judged *j = &l->v[i];
        if (read_again(j, sv)) l->v[kept++] = *j;
        else {
            free(j->path);
            free(j->rid);
        }
    }
    l->n = kept;
}

/* each journal's mark: at the first entry a restart must read */
static int mark_journals(saving *sv)
{
    int rc = 0;
    for (size_t i = 0; i < sv->n_journals; i++) {
        journal_pos *jp = &sv->journals[i];
        jp->out.source = (char *)ld_watch_journal_name(jp->j);
        if (ld_watch_journal_mark_at(jp->j, jp->from, &jp->out.mark, &jp->start) != 0) rc = -1;
    }
    return rc;
}

static void saving_free(saving *sv)
{
    for (size_t i = 0; i < sv->files.n; i++) {
        free(sv->files.v[i].source);
        free(sv->files.v[i].path);
    }
    free(sv->files.v);
    for (size_t i = 0; i < sv->n_journals; i++) free(sv->journals[i].out.mark.cursor);
    free(sv->journals);
}

/* the positions of every source, pulled back to what the pairer and the
 * captures still wait for */
static int gather(saving *sv, ld_follow *f, ld_watch_journal **journals, size_t n, const ld_pairer *pairer)
{
    sv->journals = n ? calloc(n, sizeof *sv->journals) : NULL;
    if (n && !sv->journals) return -1;
    sv->n_journals = n;
    for (size_t i = 0; i < n; i++) {
        sv->journals[i].j = journals[i];
        sv->journals[i].from = ld_watch_journal_first_needed(journals[i]);
    }
    ld_follow_each(f, add_position, &sv->files);
    ld_pairer_each_waiting(pairer, pull_back, sv);
    place_files(sv, sv->st->warmup);
    return sv->files.nomem || mark_journals(sv) != 0 ? -1 : 0;
}

int ld_watch_state_save(ld_watch_state *st, ld_follow *f, ld_watch_journal **journals, size_t n_journals,
                        const ld_pairer *pairer, double now, FILE *err)
{
    saving sv = { st, { 0 }, NULL, 0 };
    int rc = -1;
    if (gather(&sv, f, journals, n_journals, pairer) != 0) fprintf(err, "logdiff watch: out of memory for the state\n");
    else {
        prune_judged(&st->now, &sv);
        prune_judged(&st->before, &sv); /* those read past without coming again */
        saved_journal *sj = sv.n_journals ? malloc(sv.n_journals * sizeof *sj) : NULL;
        for (size_t i = 0; sj && i < sv.n_journals; i++) sj[i] = sv.journals[i].out;
        if (sv.n_journals && !sj) fprintf(err, "logdiff watch: out of memory for the state\n");
        else rc = ld_watch_state_write(st, sv.files.v, sv.files.n, sj, sv.n_journals, err);
        free(sj);
    }
    saving_free(&sv);
    st->saved_at = now;
    return rc;
}
