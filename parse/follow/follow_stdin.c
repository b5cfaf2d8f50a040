/* follow_stdin.c - standard input followed ("-"): read when poll() says it
 * is readable (a quiet pipe never blocks the other sources), ENDED and
 * CLOSED at its end.  The descriptor (0, or the one the options name) is
 * not the follower's: never closed, its flags never changed.
 */
#include "follow_internal.h"

ld_status fl_stdin_poll(ld_follow *f, fl_source *s, uint64_t *out_bytes, ld_error *err)
{
    *out_bytes = 0;
    if (s->ended) return LD_OK;
    if (!s->started) {
        fl_file *file;
        LD_TRY(fl_source_reserve(s, err));
        LD_TRY(fl_file_stdin(f->stdin_fd, &file, err));
        s->files[s->nfiles++] = file;
        s->started = 1;
        fl_event(f, LD_FOLLOW_OPENED, file, "standard input opened");
    }
    fl_file *file = s->files[0];
    int eof;
    LD_TRY(fl_file_read(f, file, out_bytes, &eof, err));
    if (!eof && !file->failed) return LD_OK;
    ld_status st = fl_file_flush(f, file, err);
    s->ended = 1;
    if (eof) fl_event(f, LD_FOLLOW_ENDED, file, "standard input ended after %llu lines",
                      (unsigned long long)file->pub.lineno);
    fl_source_close_file(f, s, 0);
    return st;
}
