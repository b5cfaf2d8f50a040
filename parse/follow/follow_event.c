/* follow_event.c - the follower's hooks out: events, problems, lines.
 *
 * Messages are formatted into a buffer on the stack and lent to the hook for
 * the call only.  A leaf of the follower's files.
 */
#include "follow_internal.h"

#include <stdio.h>

void fl_event(ld_follow *f, ld_follow_event ev, fl_file *file, const char *fmt, ...)
{
    if (!f->hooks.on_event) return;
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    f->hooks.on_event(f->hooks.ctx, ev, file ? &file->pub : NULL, msg, NULL);
}

void fl_problem_at(ld_follow *f, fl_file *file, const char *where, int where_line, ld_status code,
                   const char *path, uint64_t line, uint64_t off, const char *fmt, ...)
{
    if (!f->hooks.on_event) return;
    ld_error e;
    ld_error_clear(&e);
    char msg[sizeof e.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ld_fail_at(&e, where, where_line, code, off, "%s", msg);
    e.path = path;
    e.line = line;
    f->hooks.on_event(f->hooks.ctx, LD_FOLLOW_PROBLEM, file ? &file->pub : NULL, e.msg, &e);
}

ld_status fl_deliver(ld_follow *f, fl_file *file, const ld_line *line, ld_error *err)
{
    if (!f->hooks.on_line) return LD_OK;
    ld_status st = f->hooks.on_line(f->hooks.ctx, &file->pub, line);
    if (st == LD_OK) return LD_OK;
    LD_FAIL(err, st, line->offset, "'%s' line %llu: refused by the line handler", file->pub.path,
            (unsigned long long)line->lineno);
    if (err) {
        err->path = file->pub.path;
        err->line = line->lineno;
    }
    return st;
}
