/* fuzz_watchstate.c - libFuzzer target for logdiff watch's --state file
 * (cmd/watch/watch_state_io.c): any bytes read as a state document.  A
 * document that is refused leaves the state empty; one that is read is
 * written back (ld_watch_state_text) and read again, and must give the same
 * files, journal marks and judged requests.  Errors are fine; crashes,
 * leaks, sanitizer reports and a round trip that differs are not. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/watch/watch_state.h"
#include "cmd/watch/watch_state_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_files(const ld_watch_state *a, const ld_watch_state *b)
{
    if (a->n_files != b->n_files) return 0;
    for (size_t i = 0; i < a->n_files; i++) {
        const saved_file *x = &a->files[i], *y = &b->files[i];
        if (strcmp(x->source, y->source) || strcmp(x->path, y->path) || x->dev != y->dev || x->ino != y->ino ||
            x->offset != y->offset || x->line != y->line || x->warmup != y->warmup ||
            x->warmup_line != y->warmup_line)
            return 0;
    }
    return 1;
}

static int same_journals(const ld_watch_state *a, const ld_watch_state *b)
{
    if (a->n_journals != b->n_journals) return 0;
    for (size_t i = 0; i < a->n_journals; i++) {
        const saved_journal *x = &a->journals[i], *y = &b->journals[i];
        if (strcmp(x->source, y->source) || strcmp(x->mark.cursor, y->mark.cursor) ||
            x->mark.entry != y->mark.entry || x->mark.after != y->mark.after ||
            ld_watch_state_journal(b, x->source) != &y->mark || !ld_watch_journal_is(x->source))
            return 0;
    }
    return 1;
}

static int same_judged(const judged_list *a, const judged_list *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->v[i].path, b->v[i].path) || strcmp(a->v[i].rid, b->v[i].rid) || a->v[i].offset != b->v[i].offset)
            return 0;
    return 1;
}

/* st as read, written back and read again */
static void round_trip(ld_watch_state *st)
{
    st->now = st->before; /* what a save writes as judged */
    memset(&st->before, 0, sizeof st->before);
    char *text = ld_watch_state_text(st, st->files, st->n_files, st->journals, st->n_journals);
    if (!text) abort();
    ld_watch_state again;
    char why[64];
    memset(&again, 0, sizeof again);
    if (ld_watch_state_parse(&again, text, strlen(text), why, sizeof why) || !same_files(st, &again) ||
        !same_journals(st, &again) || !same_judged(&st->now, &again.before))
        abort();
    ld_watch_state_clear(&again);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ld_watch_state st;
    char why[64];
    memset(&st, 0, sizeof st);
    const char *bad = ld_watch_state_parse(&st, (const char *)data, size, why, sizeof why);
    if (bad && (st.n_files || st.n_journals || st.before.n || !*bad)) abort(); /* refused: nothing kept, said */
    if (!bad) round_trip(&st);
    ld_watch_state_clear(&st);
    ld_watch_judged_clear(&st.now);
    return 0;
}
